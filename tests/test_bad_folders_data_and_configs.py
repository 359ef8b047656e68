"""The bad inputs of the issue-44 table of docs/bad_inputs.md (output folders shared with the user's files, data
folders read as they are, resumes checked by content, configs checked where they are read): each gets the one line
the table shows, exit status 1, and leaves every file the user had byte-identical.

To add a case: one entry in `CASES`, one row in that table.
"""

import json
from collections.abc import Callable
from pathlib import Path

import huggingface_hub
import pytest
from conftest import BEFORE_CLASSES, bad_input_rows
from test_bad_inputs import (
    BOTH,
    ROWS,
    SCRIPTS,
    run_in_process,
    script_parameters,
    template_pattern,
    tiny_run,
    training_run,
    with_value,
    write_jsonl,
)
from test_bad_settings_and_data import file_digests

TABLE_HEADER = "## Output folders shared with the user"


def user_file_in_output_dir(name: str, content: str, *extra: str) -> Callable:
    """A run into an --output_dir where the user keeps `name` (a file no run wrote there)."""

    def arguments(script: str, tmp: Path, monkeypatch) -> list[str]:
        (tmp / "out").mkdir()
        (tmp / "out" / name).write_text(content, encoding="utf-8")
        (tmp / "out" / "notes.txt").write_text("my notes\n", encoding="utf-8")
        return tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS), *extra)

    return arguments


def mixed_dataset_folder(script: str, tmp: Path, monkeypatch) -> list[str]:
    """--dataset_name a folder of a vocabulary .txt (the most common format) beside the documents' .jsonl."""
    (tmp / "mixed").mkdir()
    (tmp / "mixed" / "vocab.txt").write_text("".join(f"token{index}\n" for index in range(60)), encoding="utf-8")
    (tmp / "mixed" / "vocab-extra.txt").write_text("token\n", encoding="utf-8")
    write_jsonl(tmp / "mixed" / "train.jsonl", ROWS)
    arguments = tiny_run(script, tmp, tmp / "mixed")
    arguments[arguments.index("--train_file")] = "--dataset_name"
    return arguments


def resumed_after(change: Callable[[Path, list[str]], list[str]]) -> Callable:
    """A resume of a finished 2-step run (a checkpoint a step) after `change` (given the folder and the first run's
    arguments, it edits what it edits and returns the resume's arguments)."""

    def arguments(script: str, tmp: Path, monkeypatch) -> list[str]:
        first = training_run(script, tmp, "--save_steps", "1", "--logging_steps", "1")
        first = with_value(first, "--save_strategy", "steps")
        first = with_value(first, "--max_steps", "2")
        SCRIPTS[script].main(first)
        return [*with_value(change(tmp, first), "--max_steps", "3"), "--resume_from_checkpoint", "true"]

    return arguments


def edit_train_file(tmp: Path, arguments: list[str]) -> list[str]:
    write_jsonl(tmp / "train.jsonl", [{**ROWS[0], "text": "被告人驾车撞人后逃逸。"}, *ROWS[1:]])
    return arguments


def other_max_train_samples(tmp: Path, arguments: list[str]) -> list[str]:
    return [*arguments, "--max_train_samples", "6"]


USER_CONFIG = json.dumps({"model_type": "bert", "hidden_size": 768})

# id -> (where, as in the table's second column; the arguments, given the script, a temporary folder and monkeypatch)
CASES: dict[str, tuple[str, Callable]] = {
    "user_readme_in_output_dir": (BOTH, user_file_in_output_dir("README.md", "# my dataset\n")),
    "user_readme_with_overwrite": (
        BOTH,
        user_file_in_output_dir("README.md", "# my dataset\n", "--overwrite_output_dir"),
    ),
    "user_modeling_py_in_output_dir": ("run_classification.py", user_file_in_output_dir("modeling.py", "x = 1\n")),
    "user_vocab_txt_with_overwrite": (
        "run_mlm.py",
        user_file_in_output_dir("vocab.txt", "[PAD]\n[UNK]\n", "--overwrite_output_dir"),
    ),
    "user_config_json_with_overwrite": (
        "run_classification.py",
        user_file_in_output_dir("config.json", USER_CONFIG, "--overwrite_output_dir"),
    ),
    "dataset_folder_of_mixed_formats": (BOTH, mixed_dataset_folder),
    "resume_on_an_edited_train_file": (BOTH, resumed_after(edit_train_file)),
    "resume_with_other_max_train_samples": (BOTH, resumed_after(other_max_train_samples)),
}


def test_the_table_and_the_cases_name_the_same_bad_inputs():
    table = bad_input_rows(TABLE_HEADER)
    assert {case: where for case, (where, _, _) in table.items()} == {
        case: where for case, (where, _) in CASES.items()
    }
    for case, (_, before, _) in table.items():
        assert before.startswith(BEFORE_CLASSES), f"{case}: the 'before' cell starts with none of {BEFORE_CLASSES}"


@pytest.fixture(autouse=True)
def hub_offline(monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


@pytest.mark.parametrize(("case", "script"), script_parameters(CASES))
def test_bad_input_gets_one_line_and_keeps_the_files(case, script, tmp_path, capsys, monkeypatch):
    arguments = CASES[case][1](script, tmp_path, monkeypatch)
    before = file_digests(tmp_path)
    message = run_in_process(script, arguments, capsys)
    pattern = template_pattern(bad_input_rows(TABLE_HEADER)[case][2])
    assert pattern.fullmatch(message), f"{script} {case}:\n  got      {message}\n  expected {pattern.pattern}"
    if case.startswith("user_"):  # the flag would replace the user's files too
        assert "--overwrite_output_dir" not in message
    after = file_digests(tmp_path)
    assert {name: after.get(name) for name in before} == before  # every file the user had, byte-identical
