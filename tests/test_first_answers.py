"""What the scripts answer before torch loads (issue 52.1, `roformer_hf/training/first_answers.py`): `--help` and
`--help-all` as the script's own parser prints them, and one line for each mistake seen without a model, the same line
the run gives after the imports (the same function says it), with none of torch, transformers or datasets imported.
Where the stored parser may not be the script's (another transformers, a file of arguments, a line argparse would
refuse), nothing is answered early: the parser answers after the imports, as before."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HANG_GUARD_S
from test_bad_inputs import DEMO_VOCAB, ROWS, run_in_process, tiny_run, with_value, write_jsonl
from test_checkpoints import write_checkpoint

from roformer_hf.training import cli, first_answers
from roformer_hf.training.cli import COMMON_TRAINING_OPTIONS
from roformer_hf.training.machine import launch
from roformer_hf.training.outputs.output_record import close_record, open_record

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ("run_mlm.py", "run_classification.py")
WRITE_COMMAND = f"python -m roformer_hf.training.cli {' '.join(SCRIPTS)}"
HEAVY_MODULES = {"torch", "transformers", "datasets"}


def run_script(script: str, *arguments: str, cwd: Path = REPO_ROOT) -> tuple[subprocess.CompletedProcess, set[str]]:
    """`python -X importtime <script> <arguments>`, and the top-level modules it imported."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", str(REPO_ROOT / script), *arguments],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        cwd=cwd,
    )
    imported = set(re.findall(r"^import time:.*\|\s*([\w.]+)$", result.stderr, flags=re.MULTILINE))
    assert imported, "no -X importtime lines to read"
    return result, {name.split(".")[0] for name in imported}


def stored_is_current(script: str) -> bool:
    return first_answers.stored_parser(script) is not None


# --- the stored parser is the script's ---


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_stored_parser_is_the_scripts(script):
    """Changing an option, a help text or a default changes the parser: the stored one must follow. One written with
    another transformers than the installed one is not used (the parser answers)."""
    stored = json.loads((first_answers.STORED_PARSERS_DIR / f"{script}.json").read_text(encoding="utf-8"))
    live = cli.live_table(REPO_ROOT / script)
    if stored["stamp"] != live["stamp"]:
        assert first_answers.stored_parser(script) is None
        return
    assert stored == live, f"the stored parser is stale: {WRITE_COMMAND}"


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("option", ["--help", "--help-all"])
def test_help_answers_without_torch_transformers_or_datasets(script, option):
    """`--help` and `--help-all` print what the script's parser prints, byte for byte; without importing torch,
    transformers or datasets where the stored parser's stamp is the installed transformers (with them where not)."""
    result, imported = run_script(script, option)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == cli.live_help(REPO_ROOT / script, option)
    assert bool(HEAVY_MODULES & imported) == (not stored_is_current(script))


def test_help_all_names_the_defaults_that_follow_the_machine(monkeypatch):
    """What --help-all prints holds on every machine: the defaults `launch_defaults` sets are named, not printed."""
    monkeypatch.setenv("WORLD_SIZE", "2")  # a multi-process launch: the most defaults it sets
    text = first_answers.help_all(cli.live_table(REPO_ROOT / "run_mlm.py"))
    assert " ".join(launch.LAUNCH_DEFAULTS_NOTE.split()) in " ".join(text.split())
    assert not launch.launch_defaults().keys() & COMMON_TRAINING_OPTIONS.keys()  # --help shows none of them


# --- the mistakes seen without a model ---


def missing_train_file(script, tmp):
    return tiny_run(script, tmp, tmp / "missing.jsonl")


def empty_train_file(script, tmp):
    (tmp / "empty.jsonl").write_bytes(b"")
    return tiny_run(script, tmp, tmp / "empty.jsonl")


def gbk_train_file(script, tmp):
    (tmp / "gbk.txt").write_bytes("民事判决书\n".encode("gbk"))
    return tiny_run(script, tmp, tmp / "gbk.txt")


def unknown_kind(script, tmp):
    (tmp / "train.docx").write_bytes(b"PK\x03\x04")
    return tiny_run(script, tmp, tmp / "train.docx")


def misspelled_option(script, tmp):
    return [*tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS)), "--lerning_rate", "1e-4"]


def output_dir_a_file(script, tmp):
    (tmp / "out").write_text("mine")
    return tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS))


def output_dir_read_only(script, tmp):
    (tmp / "locked").mkdir()
    (tmp / "locked").chmod(0o555)
    arguments = tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS))
    return [*arguments, "--output_dir", str(tmp / "locked" / "out")]


def no_tokenizer(script, tmp):
    arguments = tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS))
    index = arguments.index("--tokenizer_name")
    return arguments[:index] + arguments[index + 2 :]


def columns_of_a_json_file(script, tmp):
    return [*tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS)), "--columns", "label,text"]


def nothing_to_do(script, tmp):
    arguments = tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS))
    return [argument for argument in arguments if argument not in ("--do_train", "--do_eval")]


def no_training_data(script, tmp):
    return ["--tokenizer_name", str(DEMO_VOCAB), "--output_dir", str(tmp / "out")]


def missing_test_file(script, tmp):
    arguments = tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS))
    return [*arguments, "--do_predict", "--test_file", str(tmp / "missing_test.jsonl")]


def missing_vocab(script, tmp):
    arguments = tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS))
    return with_value(arguments, "--tokenizer_name", str(tmp / "vocab.txt"))


def missing_checkpoint(script, tmp):
    return [*tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS)), "--model_name_or_path", "./checkpoint"]


def missing_config(script, tmp):
    return [*tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS)), "--config_name", str(tmp / "config")]


def offline_hub_model(script, tmp):
    return [*tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS)), "--config_name", "someone/not-cached"]


def earlier_run(script, tmp):
    write_earlier_run(tmp / "out")
    return tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS))


def users_file_in_the_way(script, tmp):
    (tmp / "out").mkdir()
    (tmp / "out" / "config.json").write_text("{}")  # the user's: no run's record lists it
    return tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS))


def write_earlier_run(folder: Path) -> None:
    """An output folder as a run of the scripts leaves it: a checkpoint and a config, listed by its record."""
    folder.mkdir(parents=True)
    open_record(folder)
    write_checkpoint(folder / "checkpoint-2", 2)
    (folder / "config.json").write_text("{}")
    close_record(folder)


# Each mistake, the scripts that see it before the imports, and the start of its line.
FIRST_MISTAKES = {
    "missing_train_file": (missing_train_file, SCRIPTS, "--train_file <tmp>/missing.jsonl: no such file."),
    "empty_train_file": (empty_train_file, SCRIPTS, "--train_file <tmp>/empty.jsonl is empty"),
    "gbk_train_file": (gbk_train_file, SCRIPTS, "--train_file <tmp>/gbk.txt is not UTF-8"),
    "unknown_kind": (unknown_kind, SCRIPTS, "--train_file <tmp>/train.docx: use a .csv, .tsv"),
    "misspelled_option": (misspelled_option, SCRIPTS, "unknown argument --lerning_rate 1e-4: did you mean"),
    "output_dir_a_file": (output_dir_a_file, SCRIPTS, "--output_dir <tmp>/out is a file, not a folder"),
    "no_tokenizer": (no_tokenizer, SCRIPTS, "no tokenizer: give --tokenizer_name"),
    "columns_of_a_json_file": (columns_of_a_json_file, ("run_classification.py",), "--train_file <tmp>/train.jsonl:"),
    "nothing_to_do": (nothing_to_do, ("run_classification.py",), "nothing to do: pass --do_train"),
    "no_training_data": (no_training_data, ("run_mlm.py",), "no training data: give --train_file"),
    "missing_test_file": (missing_test_file, ("run_classification.py",), "--test_file <tmp>/missing_test.jsonl:"),
    "missing_vocab": (missing_vocab, SCRIPTS, "--tokenizer_name <tmp>/vocab.txt: no such file."),
    "missing_checkpoint": (missing_checkpoint, SCRIPTS, "--model_name_or_path ./checkpoint: no such folder or file."),
    "missing_config": (missing_config, SCRIPTS, "--config_name <tmp>/config: no such folder or file."),
    "offline_hub_model": (offline_hub_model, SCRIPTS, "--config_name someone/not-cached: there is no such local"),
    "earlier_run": (earlier_run, SCRIPTS, "--output_dir <tmp>/out holds an earlier run (checkpoint-2, config.json):"),
    "users_file_in_the_way": (users_file_in_the_way, SCRIPTS, "--output_dir <tmp>/out holds config.json"),
}
if os.geteuid() != 0:  # root writes anywhere
    FIRST_MISTAKES["output_dir_read_only"] = (
        output_dir_read_only,
        SCRIPTS,
        "cannot write to --output_dir <tmp>/locked/out: Permission denied",
    )


def mistake_parameters() -> list:
    return [
        pytest.param(case, script, id=f"{case}-{script.removesuffix('.py')}")
        for case, (_, scripts, _) in FIRST_MISTAKES.items()
        for script in scripts
    ]


@pytest.mark.parametrize(("case", "script"), mistake_parameters())
def test_a_mistake_seen_without_a_model_is_answered_before_torch_loads(case, script, tmp_path, capsys):
    """The line before the imports is the line of the run after them (the same check), and nothing is written."""
    make_arguments, _, start = FIRST_MISTAKES[case]
    arguments = make_arguments(script, tmp_path)
    files_before = sorted(tmp_path.rglob("*"))
    result, imported = run_script(script, *arguments)
    assert result.returncode == 1, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and not [line for line in lines if not line.startswith(("error: ", "import time:"))]
    assert errors[0].startswith(f"error: {start.replace('<tmp>', str(tmp_path))}"), errors[0]
    assert not HEAVY_MODULES & imported
    assert sorted(tmp_path.rglob("*")) == files_before
    assert run_in_process(script, arguments, capsys) == errors[0]  # the run's own line, after the imports


GOOD = ["--train_file", str(REPO_ROOT / "data" / "cail_sample.jsonl"), "--tokenizer_name", str(DEMO_VOCAB)]


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_demo_run_again_is_answered_before_torch_loads(script, tmp_path, capsys, monkeypatch):
    """`python run_mlm.py` a second time: the demo's own output folder holds the first run (its arguments are stored
    with the parser, its folder written `{script_dir}`)."""
    folder = tmp_path / "outputs" / script.removesuffix(".py")
    write_earlier_run(folder)
    result, imported = run_script(script, cwd=tmp_path)
    assert result.returncode == 1 and not HEAVY_MODULES & imported, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [line for line in result.stderr.splitlines() if not line.startswith("import time:")]
    assert errors[0].startswith(f"error: --output_dir outputs/{folder.name} holds an earlier run")
    monkeypatch.chdir(tmp_path)
    assert run_in_process(script, [], capsys) == errors[0]


@pytest.mark.parametrize(
    "arguments",
    [
        [*GOOD, "--do_train", "--max_steps", "many"],  # argparse refuses the value
        [*GOOD, "--do_train", "--output_dir"],  # no value
        [*GOOD, "--do_train", "--do_eval", "maybe"],  # not a boolean
        [*GOOD, "--do_train", "--eval_strategy", "sometimes"],  # not a choice
        [*GOOD, "--do_"],  # an abbreviation of several options
        ["args.yaml", "--train_file", "missing.jsonl"],  # a file of arguments: its values join in
        [*GOOD, "--do_train", "--test_file", "missing.jsonl"],  # a test file a run without --do_predict never reads
        ["--output_dir", "elsewhere"],  # the demo, into a new folder
        [*GOOD, "--do_train"],  # nothing wrong
    ],
)
def test_what_the_first_checks_leave_to_the_parser(arguments, tmp_path, monkeypatch, capsys):
    """Nothing is answered early where the script's parser may answer otherwise, or where the run reads nothing
    wrong: `answer_first` returns, having printed nothing and left no module of the package imported."""
    monkeypatch.chdir(tmp_path)  # the default --output_dir, outputs/run_classification, holds no earlier run here
    modules = set(sys.modules)
    monkeypatch.setattr(sys, "argv", [str(REPO_ROOT / "run_classification.py"), *arguments])  # its demo's data
    first_answers.answer_first()
    assert capsys.readouterr() == ("", "")
    assert set(sys.modules) - modules == set()


def test_the_first_checks_import_nothing_of_the_package_they_keep(tmp_path, monkeypatch):
    """The package imported without its __init__ for the checks is forgotten after them: the run imports it whole."""
    monkeypatch.chdir(tmp_path)  # the default --output_dir, outputs/run_mlm, holds no earlier run (the demo's) here
    for name in [name for name in sys.modules if name.split(".")[0] == "roformer_hf"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "argv", [str(REPO_ROOT / "run_mlm.py"), *GOOD])
    first_answers.answer_first()
    assert not [name for name in sys.modules if name.split(".")[0] == "roformer_hf"]


def test_a_parser_stored_with_another_transformers_is_not_used(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["run_mlm.py", "--help"])
    monkeypatch.setattr(first_answers, "parser_stamp", lambda: "transformers 0.0.1")
    first_answers.answer_first()
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("option", ["-h", "--help", "--help-all"])
def test_the_stored_answers_are_printed_where_they_are_the_parsers(option, monkeypatch, capsys):
    stored = json.loads((first_answers.STORED_PARSERS_DIR / "run_classification.py.json").read_text(encoding="utf-8"))
    monkeypatch.setattr(sys, "argv", ["run_classification.py", "--do_train", option])
    monkeypatch.setattr(first_answers, "parser_stamp", lambda: stored["stamp"])
    with pytest.raises(SystemExit) as stop:
        first_answers.answer_first()
    assert stop.value.code == 0
    expected = first_answers.help_all(stored) if option == "--help-all" else stored["help"]
    assert capsys.readouterr().out == expected


def test_a_renamed_script_is_answered_by_its_parser(monkeypatch, capsys):
    """A copy under another name has no stored parser (its usage line names it): its parser answers."""
    monkeypatch.setattr(sys, "argv", ["my_run_mlm.py", "--help"])
    first_answers.answer_first()
    assert capsys.readouterr().out == ""


def test_with_tracebacks_asked_for_the_run_makes_its_own_checks(monkeypatch, capsys):
    """`ROFORMER_HF_DEBUG=1` asks for the traceback of a user error: the checks wait for the run, which raises it."""
    monkeypatch.setenv(first_answers.DEBUG_VARIABLE, "1")
    monkeypatch.setattr(sys, "argv", ["run_mlm.py", "--train_file", "missing.txt", "--tokenizer_name", "vocab.txt"])
    first_answers.answer_first()
    assert capsys.readouterr() == ("", "")
