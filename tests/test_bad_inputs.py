"""Every bad input of docs/bad_inputs.md gets the message the table shows: one line and exit status 1 from the
scripts, a ValueError from the library.

The table is the expectation: each row names a case of `SCRIPT_CASES` or `LIBRARY_CASES` and the message, with
`<placeholders>` for what changes from run to run (temporary paths). A test checks that the table and the case lists
name the same cases. To add a bad input: one entry here, one row there.
"""

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import huggingface_hub
import pytest
import torch

import run_classification
import run_mlm
from roformer_hf import (
    RoFormerConfig,
    RoFormerForMaskedLM,
    RoFormerForMultipleChoice,
    RoFormerForSequenceClassification,
    RoFormerJiebaTokenizer,
    RoFormerModel,
    script_utils,
)
from roformer_hf.configuration import POSITIVE_FIELDS
from roformer_hf.script_utils import DEBUG_VARIABLE, ScriptError, find_utf8_error, run_script

REPO_ROOT = Path(__file__).resolve().parents[1]
TABLE_FILE = REPO_ROOT / "docs" / "bad_inputs.md"
DEMO_VOCAB = REPO_ROOT / "data" / "demo_vocab.txt"
TINY_MODEL = "hidden_size=32,num_hidden_layers=1,num_attention_heads=2,intermediate_size=64"
SCRIPTS = {"run_mlm.py": run_mlm, "run_classification.py": run_classification}
BOTH = "both scripts"
TEXTS = ["原告请求判令被告支付货款。", "被告人盗窃财物，数额较大。", "双方签订租赁合同。", "被告人持刀抢劫。"] * 3
ROWS = [{"text": text, "label": "criminal" if "被告人" in text else "civil"} for text in TEXTS]


# ----------------------------------------------------------------------------------------------------------------
# Bad files and the arguments of a tiny run that reads them
# ----------------------------------------------------------------------------------------------------------------


def write_jsonl(path: Path, rows: list, encoding: str = "utf-8") -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding=encoding)
    return path


def write_csv(path: Path, rows: list[dict], encoding: str = "utf-8") -> Path:
    path.write_text("text,label\n" + "".join(f"{row['text']},{row['label']}\n" for row in rows), encoding=encoding)
    return path


def tiny_run(script: str, tmp: Path, train_file: Path, *extra: str) -> list[str]:
    """Arguments of a run of `script` on a tiny model that would take seconds with good data."""
    common = [
        *("--train_file", str(train_file), "--tokenizer_name", str(DEMO_VOCAB), "--config_overrides", TINY_MODEL),
        *("--max_steps", "1", "--per_device_train_batch_size", "2", "--max_seq_length", "16"),
        *("--output_dir", str(tmp / "out"), "--save_strategy", "no"),
    ]
    if script == "run_mlm.py":
        return [*common, "--cache_dir", str(tmp / "cache"), *extra]
    return [*common, "--do_train", "--do_eval", "--validation_split_percentage", "20", *extra]


def with_value(arguments: list[str], option: str, value: str) -> list[str]:
    arguments = list(arguments)
    arguments[arguments.index(option) + 1] = value
    return arguments


def good_run(*extra: str) -> Callable[[str, Path], list[str]]:
    return lambda script, tmp: tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS), *extra)


def overrides_run(overrides: str) -> Callable[[str, Path], list[str]]:
    return lambda script, tmp: with_value(good_run()(script, tmp), "--config_overrides", overrides)


def gbk_file(suffix: str) -> Callable[[str, Path], list[str]]:
    def arguments(script: str, tmp: Path) -> list[str]:
        path = tmp / f"train{suffix}"
        if suffix == ".txt":
            path.write_text("".join(row["text"] + "\n" for row in ROWS), encoding="gbk")
        else:
            (write_jsonl if suffix == ".jsonl" else write_csv)(path, ROWS, encoding="gbk")
        return tiny_run(script, tmp, path)

    return arguments


def malformed_json_line(script: str, tmp: Path) -> list[str]:
    path = write_jsonl(tmp / "train.jsonl", ROWS)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = lines[2].replace('", "label"', '" "label"')  # a comma lost in line 3
    path.write_text("".join(lines), encoding="utf-8")
    return tiny_run(script, tmp, path)


def file_with_text(name: str, text: str) -> Callable[[str, Path], list[str]]:
    def arguments(script: str, tmp: Path) -> list[str]:
        (tmp / name).write_text(text, encoding="utf-8")
        return tiny_run(script, tmp, tmp / name)

    return arguments


def labels_run(labels: list) -> Callable[[str, Path], list[str]]:
    rows = [{"text": text, "label": label} for text, label in zip(TEXTS, labels, strict=False)]
    return lambda script, tmp: tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", rows))


def arguments_file(name: str, text: str) -> Callable[[str, Path], list[str]]:
    def arguments(script: str, tmp: Path) -> list[str]:
        (tmp / name).write_text(text, encoding="utf-8")
        return [str(tmp / name)]

    return arguments


def truncated_checkpoint(script: str, tmp: Path) -> list[str]:
    tokenizer = RoFormerJiebaTokenizer(vocab_file=str(DEMO_VOCAB))
    config = RoFormerConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2)
    RoFormerForMaskedLM(config).save_pretrained(tmp / "model")
    weights = tmp / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])  # a download cut short
    return good_run("--model_name_or_path", str(tmp / "model"))(script, tmp)


def tokenizer_run(source: Callable[[Path], str]) -> Callable[[str, Path], list[str]]:
    return lambda script, tmp: with_value(good_run()(script, tmp), "--tokenizer_name", source(tmp))


def earlier_run(script: str, tmp: Path) -> list[str]:
    (tmp / "out").mkdir()
    (tmp / "out" / "config.json").write_text("{}")
    (tmp / "out" / "model.safetensors").write_bytes(b"")  # what a finished run leaves
    return good_run()(script, tmp)


def output_dir_under_a_file(script: str, tmp: Path) -> list[str]:
    (tmp / "a_file").write_text("not a folder")
    return with_value(good_run()(script, tmp), "--output_dir", str(tmp / "a_file" / "out"))


def incomplete_checkpoint(script: str, tmp: Path) -> list[str]:
    checkpoint = tmp / "out" / "checkpoint-4"
    checkpoint.mkdir(parents=True)
    (checkpoint / "model.safetensors").write_bytes(b"")  # killed before trainer_state.json was written
    return good_run("--resume_from_checkpoint", str(checkpoint))(script, tmp)


# id -> (where, as in the table's second column; the arguments of the run, given the script and a temporary folder)
SCRIPT_CASES: dict[str, tuple[str, Callable[[str, Path], list[str]]]] = {
    "gbk_txt": ("run_mlm.py", gbk_file(".txt")),
    "gbk_jsonl": (BOTH, gbk_file(".jsonl")),
    "gbk_csv": (BOTH, gbk_file(".csv")),
    "malformed_json_line": (BOTH, malformed_json_line),
    "empty_jsonl": (BOTH, file_with_text("train.jsonl", "")),
    "blank_lines_jsonl": (BOTH, file_with_text("train.jsonl", "\n  \n\n")),
    "one_text_train_file": ("run_mlm.py", file_with_text("train.txt", TEXTS[0] + "\n")),
    "one_row_train_file": ("run_classification.py", labels_run(["civil"])),
    "validation_split_percentage_100": ("run_mlm.py", good_run("--validation_split_percentage", "100")),
    "stages_non_ascii_digit": ("run_mlm.py", good_run("--stages", "²:8:10")),
    "train_batch_size_0": (BOTH, good_run("--per_device_train_batch_size", "0")),
    "eval_batch_size_0": (BOTH, good_run("--per_device_eval_batch_size", "0")),
    "gradient_accumulation_0": (BOTH, good_run("--gradient_accumulation_steps", "0")),
    "max_train_samples_0": (BOTH, good_run("--max_train_samples", "0")),
    "num_train_epochs_0": (
        BOTH,
        lambda script, tmp: with_value(good_run("--num_train_epochs", "0")(script, tmp), "--max_steps", "-1"),
    ),
    "bad_yaml_arguments": (BOTH, arguments_file("args.yaml", "train_file: [a.txt\nmax_steps: 3\n")),
    "bad_json_arguments": (BOTH, arguments_file("args.json", '{"train_file": "a.txt",}\n')),
    "labels_names_and_lists": ("run_classification.py", labels_run(["civil", "criminal", ["civil", "criminal"]] * 4)),
    "labels_ids_and_names": ("run_classification.py", labels_run(["civil", "criminal", 1] * 4)),
    "one_class": ("run_classification.py", labels_run(["civil"] * 12)),
    "truncated_safetensors": (BOTH, truncated_checkpoint),
    "uncached_hub_tokenizer": (BOTH, tokenizer_run(lambda tmp: "someone/roformer-not-cached")),
    "missing_tokenizer_folder": (BOTH, tokenizer_run(lambda tmp: str(tmp / "no-such-tokenizer"))),
    "tokenizer_folder_without_vocab": (BOTH, tokenizer_run(lambda tmp: str(tmp))),
    "missing_model_folder": (BOTH, good_run("--model_name_or_path", "./no-such-model")),
    "num_hidden_layers_-1": (BOTH, overrides_run(TINY_MODEL.replace("num_hidden_layers=1", "num_hidden_layers=-1"))),
    "num_attention_heads_0": (
        BOTH,
        overrides_run(TINY_MODEL.replace("num_attention_heads=2", "num_attention_heads=0")),
    ),
    "hidden_size_0": (BOTH, overrides_run(TINY_MODEL.replace("hidden_size=32", "hidden_size=0"))),
    "output_dir_with_earlier_run": (BOTH, earlier_run),
    "output_dir_not_writable": (BOTH, output_dir_under_a_file),
    "incomplete_checkpoint_given": (BOTH, incomplete_checkpoint),
    "unknown_option_in_arguments_file": (
        BOTH,
        arguments_file("args.yaml", "train_file: a.txt\nlearning_rat: 0.001\n"),
    ),
}

# id -> (where, a call that must raise ValueError)
IDS = torch.tensor([[5, 6, 7], [8, 9, 10]])  # (batch_size 2, seq_len 3)


def tiny(head: type, **settings) -> torch.nn.Module:
    """A 1-layer model of the given head, vocabulary 99, in eval mode."""
    config = RoFormerConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, **settings
    )
    return head(config).eval()


LIBRARY_CASES: dict[str, tuple[str, Callable[[], object]]] = {
    "config_num_hidden_layers_-1": ("RoFormerConfig", lambda: RoFormerConfig(num_hidden_layers=-1)),
    "config_num_attention_heads_0": ("RoFormerConfig", lambda: RoFormerConfig(num_attention_heads=0)),
    "config_hidden_size_0": ("RoFormerConfig", lambda: RoFormerConfig(hidden_size=0)),
    "position_ids_batch": ("RoFormerModel", lambda: tiny(RoFormerModel)(IDS, position_ids=torch.zeros(3, 3).long())),
    "mask_4d_wrong": ("RoFormerModel", lambda: tiny(RoFormerModel)(IDS, attention_mask=torch.ones(2, 1, 3, 4))),
    "input_ids_list": ("RoFormerModel", lambda: tiny(RoFormerModel)(IDS.tolist())),
    "input_ids_float": ("RoFormerModel", lambda: tiny(RoFormerModel)(IDS.float())),
    "attention_mask_list": ("RoFormerModel", lambda: tiny(RoFormerModel)(IDS, attention_mask=[[1] * 3] * 2)),
    "empty_sequence": ("RoFormerModel", lambda: tiny(RoFormerModel)(torch.zeros(2, 0).long())),
    "mlm_label_out_of_range": ("RoFormerForMaskedLM", lambda: tiny(RoFormerForMaskedLM)(IDS, labels=IDS * 0 + 99)),
    "class_label_out_of_range": (
        "RoFormerForSequenceClassification",
        lambda: tiny(RoFormerForSequenceClassification, num_labels=3)(IDS, labels=torch.tensor([0, 3])),
    ),
    "choice_label_out_of_range": (
        "RoFormerForMultipleChoice",
        lambda: tiny(RoFormerForMultipleChoice)(IDS[None].expand(2, 2, 3), labels=torch.tensor([0, 2])),
    ),
    "pair_max_length_2": (
        "RoFormerJiebaTokenizer",
        lambda: RoFormerJiebaTokenizer(DEMO_VOCAB)("今天", "天气", truncation="longest_first", max_length=2),
    ),
}


# ----------------------------------------------------------------------------------------------------------------
# The table
# ----------------------------------------------------------------------------------------------------------------


def read_table() -> dict[str, tuple[str, str]]:
    """The rows of docs/bad_inputs.md: case id -> (where, message template)."""
    rows = {}
    for line in TABLE_FILE.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if len(cells) != 4 or cells[0] in ("Case", "") or set(cells[0]) <= set("-: "):
            continue
        case, where, _, message = (cell.strip("`") for cell in cells)
        assert case not in rows, f"{case} has two rows in {TABLE_FILE.name}"
        rows[case] = (where, message)
    return rows


def template_pattern(template: str) -> re.Pattern:
    """The message template as a pattern: `<anything in angle brackets>` stands for any text."""
    parts = re.split(r"<[a-z][a-z ]*>", template)
    return re.compile(".+".join(re.escape(part) for part in parts))


def expected_message(case: str) -> re.Pattern:
    return template_pattern(read_table()[case][1])


def test_the_table_and_the_cases_name_the_same_bad_inputs():
    table = read_table()
    cases = {case: where for case, (where, _) in {**SCRIPT_CASES, **LIBRARY_CASES}.items()}
    assert sorted(set(table) - set(cases)) == [], "rows of the table without a case in this file"
    assert sorted(set(cases) - set(table)) == [], f"cases without a row in {TABLE_FILE.name}"
    assert {case: where for case, (where, _) in table.items()} == cases


def test_template_placeholders_stand_for_any_text():
    pattern = template_pattern("error: --train_file <file> is empty: give <what>.")
    assert pattern.fullmatch("error: --train_file /tmp/a b.jsonl is empty: give a file.")
    assert not pattern.fullmatch("error: --train_file /tmp/a.jsonl is not empty: give a file.")


# ----------------------------------------------------------------------------------------------------------------
# The scripts: one line, exit status 1
# ----------------------------------------------------------------------------------------------------------------


def script_parameters() -> list:
    parameters = []
    for case, (where, _) in SCRIPT_CASES.items():
        scripts = list(SCRIPTS) if where == BOTH else [where]
        parameters += [pytest.param(case, script, id=f"{case}-{script.removesuffix('.py')}") for script in scripts]
    return parameters


@pytest.fixture(autouse=True)
def hub_offline(monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def run_in_process(script: str, arguments: list[str], capsys) -> str:
    """Run the script's main() as its `__main__` does; return the error line after checking the exit status."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        run_script(lambda: SCRIPTS[script].main(arguments))
    assert exit_info.value.code == 1
    error_lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(error_lines) == 1
    return error_lines[0]


@pytest.mark.parametrize(("case", "script"), script_parameters())
def test_bad_input_gets_one_line(case, script, tmp_path, capsys):
    _, make_arguments = SCRIPT_CASES[case]
    message = run_in_process(script, make_arguments(script, tmp_path), capsys)
    pattern = expected_message(case)
    assert pattern.fullmatch(message), f"{script} {case}:\n  got      {message}\n  expected {pattern.pattern}"


@pytest.mark.parametrize(
    ("case", "script"), [("gbk_txt", "run_mlm.py"), ("labels_names_and_lists", "run_classification.py")]
)
def test_bad_input_exits_1_with_one_line_on_stderr(case, script, tmp_path):
    _, make_arguments = SCRIPT_CASES[case]
    completed = subprocess.run(
        [sys.executable, script, *make_arguments(script, tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 1
    assert "Traceback" not in completed.stderr
    assert expected_message(case).fullmatch(completed.stderr.strip().splitlines()[-1])


def test_debug_variable_keeps_the_traceback(tmp_path, monkeypatch):
    arguments = SCRIPT_CASES["stages_non_ascii_digit"][1]("run_mlm.py", tmp_path)
    monkeypatch.setenv(DEBUG_VARIABLE, "1")
    with pytest.raises(ScriptError, match="--stages"):
        run_script(lambda: run_mlm.main(arguments))


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7, 1 << 20])
def test_utf8_check_finds_the_line_whatever_the_chunks(tmp_path, monkeypatch, chunk_size):
    """Characters cut by a chunk boundary are not errors; the line of the first GBK byte is found in any chunk."""
    monkeypatch.setattr(script_utils, "UTF8_CHECK_BYTES", chunk_size)
    utf8_lines = ("人民日报\n" * 5).encode("utf-8")
    (tmp_path / "good.txt").write_bytes(utf8_lines)
    (tmp_path / "bad.txt").write_bytes(utf8_lines + "新华社\n".encode("gbk"))
    assert find_utf8_error(tmp_path / "good.txt") is None
    assert find_utf8_error(tmp_path / "bad.txt") == (6, "新".encode("gbk")[0])
    assert find_utf8_error(tmp_path / "bad.txt", limit=len(utf8_lines)) is None  # the GBK line is past the limit


# ----------------------------------------------------------------------------------------------------------------
# The library: ValueError
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(LIBRARY_CASES))
def test_bad_library_input_raises_value_error(case):
    _, call = LIBRARY_CASES[case]
    with pytest.raises(ValueError) as error_info:
        call()
    message = f"{type(error_info.value).__name__}: {error_info.value}"
    assert expected_message(case).fullmatch(message), message


@pytest.mark.parametrize("name", POSITIVE_FIELDS)
@pytest.mark.parametrize("value", [0, -1])
def test_config_refuses_sizes_below_one(name, value):
    with pytest.raises(ValueError, match=f"{name} must be a whole number of at least 1, got {value}: set {name}"):
        RoFormerConfig(**{name: value})
