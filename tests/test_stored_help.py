"""`--help` answers before torch loads (issue 52.1): each script prints its stored text (`training/stored_help.py`),
which must be what its own parser prints, and only where it is (the stamp's transformers installed, `--help` without
`--help-all` or a file of arguments, the script's own name); otherwise its parser answers, as before."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HANG_GUARD_S

from roformer_hf.training import stored_help
from roformer_hf.training.cli import COMMON_TRAINING_OPTIONS
from roformer_hf.training.machine import launch

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ("run_mlm.py", "run_classification.py")
WRITE_COMMAND = f"python -m roformer_hf.training.stored_help {' '.join(SCRIPTS)}"
HEAVY_MODULES = {"torch", "transformers", "datasets"}


def stored(script: str) -> tuple[str, str]:
    """The stamp and the text stored for a script."""
    stamp, text = (stored_help.STORED_HELP_DIR / f"{script}.txt").read_text(encoding="utf-8").split("\n", 1)
    return stamp, text


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_stored_help_is_what_the_parser_prints(script):
    """Changing an option, a help text or a default changes the parser's help: the stored text must follow."""
    assert stored(script)[1] == stored_help.live_help(REPO_ROOT / script), (
        f"the stored --help is stale: {WRITE_COMMAND}"
    )


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_answers_without_torch_transformers_or_datasets(script):
    """`python <script> --help` prints the parser's help; it imports none of torch, transformers, datasets where the
    stored text's stamp is the installed transformers (and imports them, to ask the parser, where it is not)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", str(REPO_ROOT / script), "--help"],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    imported = set(re.findall(r"^import time:.*\|\s*([\w.]+)$", result.stderr, flags=re.MULTILINE))
    assert imported, "no -X importtime lines to read"
    assert result.stdout == stored_help.live_help(REPO_ROOT / script)
    assert bool(HEAVY_MODULES & imported) == (stored(script)[0] != stored_help.help_stamp())


@pytest.mark.parametrize(
    "argv",
    [
        ["run_mlm.py", "--help-all"],  # its defaults follow the machine: the parser answers
        ["run_mlm.py", "--help", "--help-all"],
        ["run_mlm.py", "args.yaml", "--help"],  # the help shows the file's values
        ["my_run_mlm.py", "--help"],  # a renamed copy: its usage line names it
        ["run_mlm.py", "--output_dir", "out"],
    ],
)
def test_the_parser_answers_where_the_stored_help_is_not_its_answer(argv, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", argv)
    stored_help.answer_help()
    assert capsys.readouterr().out == ""


def test_a_text_stored_with_another_transformers_is_not_shown(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["run_mlm.py", "--help"])
    monkeypatch.setattr(stored_help, "help_stamp", lambda: "transformers 0.0.1")
    stored_help.answer_help()
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("option", ["-h", "--help"])
def test_the_stored_help_is_printed_where_it_is_the_parsers(option, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["run_classification.py", "--do_train", option])
    monkeypatch.setattr(stored_help, "help_stamp", lambda: stored("run_classification.py")[0])
    with pytest.raises(SystemExit) as stop:
        stored_help.answer_help()
    assert stop.value.code == 0
    assert capsys.readouterr().out == stored("run_classification.py")[1]


def test_the_short_help_shows_no_default_that_follows_the_machine(monkeypatch):
    """A stored text holds for every machine only while --help shows none of the defaults `launch_defaults` sets from
    the machine and the launch (as --help-all does, which the parser therefore answers)."""
    monkeypatch.setenv("WORLD_SIZE", "2")  # a multi-process launch: the most defaults it sets (none with a GPU)
    assert not launch.launch_defaults().keys() & COMMON_TRAINING_OPTIONS.keys()
