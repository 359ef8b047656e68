"""Every bad input of docs/bad_inputs.md gets the message the table shows: one line and exit status 1 from the
scripts, a ValueError from the library.

The table is the expectation: each row names a case of `SCRIPT_CASES` or `LIBRARY_CASES` and the message, with
`<placeholders>` for what changes from run to run (temporary paths). A test checks that the table and the case lists
name the same cases. To add a bad input: one entry here, one row there.
"""

import errno
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import datasets
import huggingface_hub
import pytest
import torch
from conftest import HANG_GUARD_S, fail_final_saves_on_a_full_disk
from distributed_worker import trainer_builder
from safetensors.torch import load_file
from transformers import TrainerCallback

import run_classification
import run_mlm
from roformer_hf import (
    RoFormerConfig,
    RoFormerForMaskedLM,
    RoFormerForMultipleChoice,
    RoFormerForSequenceClassification,
    RoFormerJiebaTokenizer,
    RoFormerModel,
)
from roformer_hf.configuration import POSITIVE_FIELDS
from roformer_hf.training.data import files as data_files
from roformer_hf.training.data.files import find_utf8_error
from roformer_hf.training.errors import ScriptError
from roformer_hf.training.first_answers import DEBUG_VARIABLE
from roformer_hf.training.machine import cpu_precision
from roformer_hf.training.machine.cpu_arithmetic import CpuBf16, cpu_bf16
from roformer_hf.training.machine.launch import trains_on_cpu
from roformer_hf.training.outputs.checkpoints import MANIFEST_NAME, write_manifest
from roformer_hf.training.outputs.locks import LOCK_FILE_NAME, FolderLock
from roformer_hf.training.outputs.resume import RUN_SETTINGS_FILE
from roformer_hf.training.script_runner import run_script

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


def folder_without_vocab(tmp: Path) -> str:
    """A folder of other files, beside the output folder (not holding it: a run never writes into an input's folder)."""
    (tmp / "not-a-tokenizer").mkdir()
    (tmp / "not-a-tokenizer" / "notes.txt").write_text("no vocabulary here")
    return str(tmp / "not-a-tokenizer")


def earlier_run(script: str, tmp: Path) -> list[str]:
    """What a finished run of `--save_strategy no` leaves: its files, which its closed record proves a run's."""
    from roformer_hf.training.outputs.output_record import close_record, open_record

    (tmp / "out").mkdir()
    open_record(tmp / "out")
    (tmp / "out" / "config.json").write_text('{"model_type": "roformer_hf"}')
    (tmp / "out" / "model.safetensors").write_bytes(b"")
    (tmp / "out" / "training_args.bin").write_bytes(b"")
    close_record(tmp / "out")
    return good_run()(script, tmp)


def output_dir_under_a_file(script: str, tmp: Path) -> list[str]:
    (tmp / "a_file").write_text("not a folder")
    return with_value(good_run()(script, tmp), "--output_dir", str(tmp / "a_file" / "out"))


def incomplete_checkpoint(script: str, tmp: Path) -> list[str]:
    from roformer_hf.training.outputs.output_record import open_record

    (tmp / "out").mkdir()
    open_record(tmp / "out")  # the record a killed run leaves open, which makes what appeared since the run's
    checkpoint = tmp / "out" / "checkpoint-4"
    checkpoint.mkdir()
    (checkpoint / "model.safetensors").write_bytes(b"")  # killed before trainer_state.json was written
    return good_run("--resume_from_checkpoint", str(checkpoint))(script, tmp)


def scores_file(suffix: str, bad_score: str) -> Callable[[Path], Path]:
    """A .jsonl or .csv file of scores whose data row 3 holds `bad_score`."""

    def write(path: Path) -> Path:
        rows = [{"text": text, "label": 0.5 + number} for number, text in enumerate(TEXTS)]
        if suffix == ".csv":
            lines = [f"{row['text']},{bad_score if number == 2 else row['label']}" for number, row in enumerate(rows)]
            path.write_text("text,label\n" + "\n".join(lines) + "\n", encoding="utf-8")
        else:
            lines = [json.dumps(row, ensure_ascii=False) for row in rows]
            lines[2] = lines[2].replace(str(rows[2]["label"]), bad_score)
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    return write


def non_finite_label(suffix: str, bad_score: str, split: str = "train") -> Callable[[str, Path], list[str]]:
    def arguments(script: str, tmp: Path) -> list[str]:
        bad = scores_file(suffix, bad_score)(tmp / f"{split}{suffix}")
        if split == "train":
            return tiny_run(script, tmp, bad)
        good = scores_file(".jsonl", "1.5")(tmp / "train.jsonl")
        options = (f"--{split}_file", str(bad), "--problem_type", "regression", "--do_predict")
        return tiny_run(script, tmp, good, *options)

    return arguments


def vocab_file(change: Callable[[list[str]], list[str]], encoding: str = "utf-8") -> Callable[[Path], str]:
    """The demo vocabulary, its lines changed by `change`, written into the temporary folder."""

    def write(tmp: Path) -> str:
        lines = DEMO_VOCAB.read_text(encoding="utf-8").split("\n")[:-1]
        (tmp / "vocab.txt").write_text("\n".join(change(lines)) + "\n", encoding=encoding)
        return str(tmp / "vocab.txt")

    return write


def repeated_line(lines: list[str]) -> list[str]:
    return [*lines[:3000], lines[2767], *lines[3000:]]  # "发扬" of line 2768 again on line 3001


def jsonl_not_utf8_after(size: int) -> Callable[[str, Path], list[str]]:
    """A .jsonl whose first `size` bytes are UTF-8, then a GBK line."""

    def arguments(script: str, tmp: Path) -> list[str]:
        line = (json.dumps(ROWS[0], ensure_ascii=False) + "\n").encode("utf-8")
        good = b"".join(json.dumps(row, ensure_ascii=False).encode() + b"\n" for row in ROWS[1:4])
        good += line * (size // len(line) + 1)
        (tmp / "train.jsonl").write_bytes(good + json.dumps(ROWS[1], ensure_ascii=False).encode("gbk") + b"\n")
        return tiny_run(script, tmp, tmp / "train.jsonl")

    return arguments


def utf16_file(script: str, tmp: Path) -> list[str]:
    return tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS, encoding="utf-16"))


def parquet_file(script: str, tmp: Path) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(ROWS), tmp / "train.csv")  # Parquet data behind a .csv name
    return tiny_run(script, tmp, tmp / "train.csv")


def dataset_run(make_dataset: Callable[[Path], str], *extra: str) -> Callable[[str, Path], list[str]]:
    """A tiny run on `--dataset_name` (made by `make_dataset` in the temporary folder) instead of a training file."""

    def arguments(script: str, tmp: Path) -> list[str]:
        given = good_run()(script, tmp)
        position = given.index("--train_file")
        return [*given[:position], *given[position + 2 :], "--dataset_name", make_dataset(tmp), *extra]

    return arguments


def dataset_of_split(split: str) -> Callable[[Path], str]:
    """A DatasetDict of the rows as its one split `split`, saved with save_to_disk."""

    def save(tmp: Path) -> str:
        datasets.DatasetDict({split: datasets.Dataset.from_list(ROWS)}).save_to_disk(tmp / "saved")
        return str(tmp / "saved")

    return save


def rows_under_two_keys(script: str, tmp: Path) -> list[str]:
    (tmp / "train.json").write_text(json.dumps({"data": ROWS, "extra": ROWS}, ensure_ascii=False), encoding="utf-8")
    return tiny_run(script, tmp, tmp / "train.json")


def misspelt_nested_label(script: str, tmp: Path) -> list[str]:
    rows = [{"text": row["text"], "meta": {"label": row["label"]}} for row in ROWS]
    return tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", rows), "--label_column_name", "meta.lable")


def cache_dir_under_a_file(script: str, tmp: Path) -> list[str]:
    (tmp / "a_file").write_text("not a folder")
    return with_value(good_run()(script, tmp), "--cache_dir", str(tmp / "a_file" / "cache"))


def text_column_with_a_number(script: str, tmp: Path) -> list[str]:
    rows = [{"text": text} for text in TEXTS]
    rows[4] = {"text": 2024}
    return tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", rows))


def resumed_run(
    change: Callable[[list[str], Path], list[str]], *first_options: str
) -> Callable[[str, Path], list[str]]:
    """
    A tiny run trained for 2 steps, a checkpoint after each; the arguments of its resume to 3 steps, changed by
    `change` (given them and the temporary folder).
    """

    def arguments(script: str, tmp: Path) -> list[str]:
        first = training_run(
            script, tmp, "--save_strategy", "steps", "--save_steps", "1", "--logging_steps", "1", *first_options
        )
        first = with_value(first, "--max_steps", "2")
        SCRIPTS[script].main(first)
        return change([*with_value(first, "--max_steps", "3"), "--resume_from_checkpoint", "true"], tmp)

    return arguments


def without_run_settings(arguments: list[str], tmp: Path) -> list[str]:
    """The checkpoints as transformers' own Trainer writes them, without the run's settings or a manifest, the newest
    named by path (issue 50: `true` takes none without a manifest): the model is still compared."""
    for settings_file in (tmp / "out").rglob(RUN_SETTINGS_FILE):
        settings_file.unlink()
        (settings_file.parent / MANIFEST_NAME).unlink()
    newest = max((tmp / "out").glob("checkpoint-*"), key=lambda path: int(path.name.split("-")[1]))
    arguments = with_value(arguments, "--resume_from_checkpoint", str(newest))
    return with_value(
        arguments, "--config_overrides", TINY_MODEL.replace("num_hidden_layers=1", "num_hidden_layers=2")
    )


def swapped_vocabulary(arguments: list[str], tmp: Path) -> list[str]:
    swap = lambda lines: [*lines[:2000], lines[2001], lines[2000], *lines[2002:]]  # noqa: E731
    return with_value(arguments, "--tokenizer_name", vocab_file(swap)(tmp))


def other_train_file(arguments: list[str], tmp: Path) -> list[str]:
    return with_value(arguments, "--train_file", str(write_jsonl(tmp / "more.jsonl", ROWS[::-1])))


def two_class_classifier(script: str, tmp: Path) -> list[str]:
    """A classifier fine-tuned on the labels civil and criminal, given data of three labels."""
    tokenizer = RoFormerJiebaTokenizer(vocab_file=str(DEMO_VOCAB))
    labels = {"id2label": {0: "civil", 1: "criminal"}, "label2id": {"civil": 0, "criminal": 1}}
    sizes = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
    config = RoFormerConfig(vocab_size=len(tokenizer), problem_type="single_label_classification", **sizes, **labels)
    RoFormerForSequenceClassification(config).save_pretrained(tmp / "classifier")
    tokenizer.save_pretrained(tmp / "classifier")
    rows = [*ROWS, {"text": "行政机关作出处罚决定。", "label": "administrative"}] * 2
    return tiny_run(
        script, tmp, write_jsonl(tmp / "train.jsonl", rows), "--model_name_or_path", str(tmp / "classifier")
    )


class RunsCode:
    """Pickled, an object whose unpickling would run a shell command: one that leaves a file, to tell if it ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def poisoned(name: str) -> Callable[[list[str], Path], list[str]]:
    """Replace the file `name` of every checkpoint with a pickle that would run code (the arguments unchanged)."""

    def change(arguments: list[str], tmp: Path) -> list[str]:
        for path in (tmp / "out").glob(f"checkpoint-*/{name}"):
            torch.save({"state": RunsCode(tmp / "code-ran")}, path)
            write_manifest(path.parent, int(path.parent.name.split("-")[1]))  # crafted: its manifest matches
        return arguments

    return change


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
    "tokenizer_folder_without_vocab": (BOTH, tokenizer_run(folder_without_vocab)),
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
    "nan_label_jsonl": ("run_classification.py", non_finite_label(".jsonl", "NaN")),
    "infinite_label_csv": ("run_classification.py", non_finite_label(".csv", "inf")),
    "nan_label_validation_file": ("run_classification.py", non_finite_label(".jsonl", "NaN", split="validation")),
    "nan_label_test_file": ("run_classification.py", non_finite_label(".jsonl", "-Infinity", split="test")),
    "whole_number_float_labels": ("run_classification.py", labels_run([0.0, 1.0] * 6)),
    "csv_labels_names_and_numbers": (
        "run_classification.py",
        lambda script, tmp: tiny_run(script, tmp, write_csv(tmp / "train.csv", [*ROWS[:5], {**ROWS[5], "label": 2}])),
    ),
    "text_column_with_a_number": ("run_mlm.py", text_column_with_a_number),
    "vocab_repeated_line": (BOTH, tokenizer_run(vocab_file(repeated_line))),
    "vocab_lines_end_in_a_space": (BOTH, tokenizer_run(vocab_file(lambda lines: [f"{line} " for line in lines]))),
    "not_utf8_after_1_mib_jsonl": (BOTH, jsonl_not_utf8_after(1 << 20)),
    "utf16_jsonl": (BOTH, utf16_file),
    "parquet_named_csv": (BOTH, parquet_file),
    "dataset_name_not_cached": (BOTH, dataset_run(lambda tmp: "someone/roformer-data-not-cached")),
    "dataset_without_the_train_split": (BOTH, dataset_run(dataset_of_split("training"))),
    "json_rows_under_two_keys": (BOTH, rows_under_two_keys),
    "nested_label_misspelt": ("run_classification.py", misspelt_nested_label),
    "cache_dir_not_writable": ("run_mlm.py", cache_dir_under_a_file),
    "resume_other_model": (BOTH, resumed_run(without_run_settings)),
    "resume_other_vocabulary": (BOTH, resumed_run(swapped_vocabulary)),
    "resume_other_train_file": (BOTH, resumed_run(other_train_file)),
    "resume_other_learning_rate": (BOTH, resumed_run(lambda arguments, tmp: [*arguments, "--learning_rate", "1e-3"])),
    "resume_fewer_stages": (
        "run_mlm.py",
        resumed_run(lambda arguments, tmp: with_value(arguments, "--stages", "16:2:3"), "--stages", "16:2:2,16:2:2"),
    ),
    "resume_other_max_seq_length": (
        "run_classification.py",
        resumed_run(lambda arguments, tmp: with_value(arguments, "--max_seq_length", "32")),
    ),
    "classifier_of_other_labels": ("run_classification.py", two_class_classifier),
    # without the progress bar, which the refused load leaves open (the message would follow it on its line)
    "resume_refused_pickle": (BOTH, resumed_run(poisoned("rng_state.pth"), "--disable_tqdm", "true")),
    "unknown_option_in_arguments_file": (
        BOTH,
        arguments_file("args.yaml", "train_file: a.txt\nlearning_rat: 0.001\n"),
    ),
}


def transformers_checkpoint(tmp: Path) -> Path:
    """A tiny transformers RoFormer MLM over the demo vocabulary, saved as the original checkpoints are."""
    from transformers import RoFormerConfig as TransformersRoFormerConfig
    from transformers import RoFormerForMaskedLM as TransformersRoFormerForMaskedLM

    vocab_size = len(DEMO_VOCAB.read_text(encoding="utf-8").split("\n")) - 1
    config = TransformersRoFormerConfig(
        vocab_size=vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64
    )
    TransformersRoFormerForMaskedLM(config).save_pretrained(tmp / "source")
    (tmp / "source" / "vocab.txt").write_bytes(DEMO_VOCAB.read_bytes())
    return tmp / "source"


def convert_into_a_project(tmp: Path) -> list[str]:
    source = transformers_checkpoint(tmp)
    (tmp / "project" / "src").mkdir(parents=True)
    (tmp / "project" / "src" / "main.py").write_text("print('mine')\n")
    (tmp / "project" / "notes.md").write_text("# notes\n")
    return [str(source), str(tmp / "project"), "--overwrite"]


def convert_with_a_repeated_vocab_line(tmp: Path) -> list[str]:
    source = transformers_checkpoint(tmp)
    lines = (source / "vocab.txt").read_text(encoding="utf-8").split("\n")
    lines[3000] = lines[2767]  # the same size, but "发扬" twice: every later id would shift in the saved vocab
    (source / "vocab.txt").write_text("\n".join(lines), encoding="utf-8")
    return [str(source), str(tmp / "converted")]


def convert_a_pickle_that_runs_code(tmp: Path) -> list[str]:
    source = transformers_checkpoint(tmp)
    weights = load_file(source / "model.safetensors")
    (source / "model.safetensors").unlink()
    torch.save({**weights, "extra": RunsCode(tmp / "code-ran")}, source / "pytorch_model.bin")
    return [str(source), str(tmp / "converted")]


def convert_into_a_folder_in_use(tmp: Path) -> list[str]:
    source = transformers_checkpoint(tmp)
    lock_file = tmp / f".converted{LOCK_FILE_NAME}"  # beside the output, as another conversion into it holds it
    _HELD_LOCKS.append(FolderLock(tmp / "converted", "output folder", lock_file=lock_file).acquire())
    return [str(source), str(tmp / "converted")]


# id -> (where; the command-line arguments of `python -m roformer_hf.conversion.convert`, given a temporary folder)
CONVERT_CASES: dict[str, tuple[str, Callable[[Path], list[str]]]] = {
    "convert_overwrite_other_files": ("convert", convert_into_a_project),
    "convert_output_in_use": ("convert", convert_into_a_folder_in_use),
    "convert_vocab_repeated_line": ("convert", convert_with_a_repeated_vocab_line),
    "convert_refused_pickle": ("convert", convert_a_pickle_that_runs_code),
}


def training_run(script: str, tmp: Path, *extra: str) -> list[str]:
    """A tiny run that trains (run_mlm.py: without validation, as the tiny texts give no validation block)."""
    no_validation = ["--validation_split_percentage", "0"] if script == "run_mlm.py" else []
    return good_run(*no_validation, *extra)(script, tmp)


# Faults of the run rather than of its arguments: id -> (where; given the script, a temporary folder and pytest's
# monkeypatch, the arguments of the run once the fault is arranged, and the exit status it gets).


def sigint_during_training(script: str, tmp: Path, monkeypatch) -> tuple[list[str], int]:
    class CtrlC(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 1:
                os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C during step 2

    owner, builder_name = trainer_builder(script)
    build_trainer = getattr(owner, builder_name)
    monkeypatch.setattr(owner, builder_name, lambda *a, **k: _with_callback(build_trainer(*a, **k), CtrlC()))
    return with_value(training_run(script, tmp), "--max_steps", "3"), 130


def _with_callback(trainer, callback):
    trainer.add_callback(callback)
    return trainer


def output_dir_in_use(script: str, tmp: Path, monkeypatch) -> tuple[list[str], int]:
    lock = FolderLock(tmp / "out").acquire()  # held by this process, as another run would hold it
    _HELD_LOCKS.append(lock)
    return training_run(script, tmp), 1


_HELD_LOCKS: list = []


def full_disk_at_checkpoint(script: str, tmp: Path, monkeypatch) -> tuple[list[str], int]:
    save = torch.save

    def save_on_a_full_disk(content, path, *args, **kwargs):
        if "checkpoint-" in str(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return save(content, path, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save_on_a_full_disk)
    # without the progress bar, which the failed save leaves open (the message would follow it on its line)
    return training_run(script, tmp, "--save_strategy", "steps", "--save_steps", "1", "--disable_tqdm", "true"), 1


def full_disk_at_final_save(script: str, tmp: Path, monkeypatch) -> tuple[list[str], int]:
    fail_final_saves_on_a_full_disk(monkeypatch)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return training_run(script, tmp), 1


FAULT_CASES: dict[str, tuple[str, Callable[[str, Path, Any], tuple[list[str], int]]]] = {
    "output_dir_in_use": (BOTH, output_dir_in_use),
    "ctrl_c_during_training": (BOTH, sigint_during_training),
    "full_disk_at_checkpoint": (BOTH, full_disk_at_checkpoint),
    "full_disk_at_final_save": (BOTH, full_disk_at_final_save),
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
    "float_labels_of_another_shape": (
        "RoFormerForSequenceClassification",
        lambda: tiny(RoFormerForSequenceClassification, num_labels=3)(IDS, labels=torch.tensor([0.0, 2.0])),
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
    all_cases = {**SCRIPT_CASES, **FAULT_CASES, **LIBRARY_CASES, **CONVERT_CASES}
    cases = {case: where for case, (where, _) in all_cases.items()}
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


def script_parameters(cases: dict[str, tuple]) -> list:
    """The (case, script) parameters of `cases` (id -> (where, ...)): each case with each script it is tried on."""
    parameters = []
    for case, (where, *_) in cases.items():
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


@pytest.mark.parametrize(("case", "script"), script_parameters(SCRIPT_CASES))
def test_bad_input_gets_one_line(case, script, tmp_path, capsys):
    _, make_arguments = SCRIPT_CASES[case]
    message = run_in_process(script, make_arguments(script, tmp_path), capsys)
    assert not (tmp_path / "code-ran").exists()  # a refused pickle ran nothing
    pattern = expected_message(case)
    assert pattern.fullmatch(message), f"{script} {case}:\n  got      {message}\n  expected {pattern.pattern}"


def fault_parameters() -> list:
    return [
        pytest.param(case, script, id=f"{case}-{script.removesuffix('.py')}")
        for case in FAULT_CASES
        for script in SCRIPTS
    ]


@pytest.mark.parametrize(("case", "script"), fault_parameters())
def test_fault_gets_one_line(case, script, tmp_path, capsys, monkeypatch):
    arguments, status = FAULT_CASES[case][1](script, tmp_path, monkeypatch)
    capsys.readouterr()
    try:
        with pytest.raises(SystemExit) as exit_info:
            run_script(lambda: SCRIPTS[script].main(arguments))
    finally:
        while _HELD_LOCKS:
            _HELD_LOCKS.pop().release()
    assert exit_info.value.code == status
    # the training progress bar ends its lines with a carriage return
    error_lines = [line for line in re.split(r"[\r\n]", capsys.readouterr().err) if line.startswith("error: ")]
    assert len(error_lines) == 1
    pattern = expected_message(case)
    assert pattern.fullmatch(error_lines[0]), (
        f"{script} {case}:\n  got      {error_lines[0]}\n  expected {pattern.pattern}"
    )


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
        timeout=HANG_GUARD_S,
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
    monkeypatch.setattr(data_files, "UTF8_CHECK_BYTES", chunk_size)
    utf8_lines = ("人民日报\n" * 5).encode("utf-8")
    (tmp_path / "good.txt").write_bytes(utf8_lines)
    (tmp_path / "bad.txt").write_bytes(utf8_lines + "新华社\n".encode("gbk"))
    assert find_utf8_error(tmp_path / "good.txt") is None
    assert find_utf8_error(tmp_path / "bad.txt") == (6, "新".encode("gbk")[0])
    assert find_utf8_error(tmp_path / "bad.txt", limit=len(utf8_lines)) is None  # the GBK line is past the limit


# ----------------------------------------------------------------------------------------------------------------
# The converter: one line, exit status 1, nothing written or deleted
# ----------------------------------------------------------------------------------------------------------------


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.mark.parametrize("case", list(CONVERT_CASES))
def test_bad_conversion_gets_one_line(case, tmp_path, capsys):
    from roformer_hf.conversion import convert

    arguments = CONVERT_CASES[case][1](tmp_path)
    before = folder_bytes(tmp_path)
    capsys.readouterr()
    assert convert.main(arguments) == 1
    error_lines = capsys.readouterr().err.splitlines()
    assert len(error_lines) == 1 and expected_message(case).fullmatch(error_lines[0]), error_lines
    assert folder_bytes(tmp_path) == before  # the user's files byte-identical, nothing half converted left
    assert not (tmp_path / "code-ran").exists()  # a refused pickle ran nothing


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


def test_refused_float_labels_leave_the_problem_type_unset():
    """A first call with float labels that are not multi-hot raises, and does not make the classifier multi-label for
    good: a call with class ids then trains it single-label."""
    model = tiny(RoFormerForSequenceClassification, num_labels=3)
    with pytest.raises(ValueError, match="multi-label classification needs labels of shape"):
        model(IDS, labels=torch.tensor([0.0, 2.0]))
    assert model.config.problem_type is None
    assert torch.isfinite(model(IDS, labels=torch.tensor([0, 2])).loss)
    assert model.config.problem_type == "single_label_classification"


@pytest.mark.parametrize("name", POSITIVE_FIELDS)
@pytest.mark.parametrize("value", [0, -1])
def test_config_refuses_sizes_below_one(name, value):
    with pytest.raises(ValueError, match=f"{name} must be a whole number of at least 1, got {value}: set {name}"):
        RoFormerConfig(**{name: value})


def test_a_classifier_of_other_labels_gets_a_new_head_with_ignore_mismatched_sizes(tmp_path, caplog):
    """The documented way out of `classifier_of_other_labels`: the head is started afresh, with a warning."""
    arguments = two_class_classifier("run_classification.py", tmp_path)
    run_classification.main([*with_value(arguments, "--save_strategy", "no"), "--ignore_mismatched_sizes"])
    warnings = [record.getMessage() for record in caplog.records if "is started afresh for" in record.getMessage()]
    assert warnings == [
        f"the classification head of {tmp_path / 'classifier'} (2 labels ('civil', 'criminal')) is started afresh "
        "for 3 labels ('administrative', 'civil', 'criminal') (--ignore_mismatched_sizes); the encoder is kept."
    ]
    saved = json.loads((tmp_path / "out" / "config.json").read_text(encoding="utf-8"))
    assert list(saved["id2label"].values()) == ["administrative", "civil", "criminal"]


@pytest.mark.parametrize("script", list(SCRIPTS))
def test_a_resume_to_more_steps_is_applied_with_a_warning(script, tmp_path, caplog):
    """--max_steps is the one setting a resume applies (tested against resume.APPLIED_SETTINGS)."""
    arguments = resumed_run(lambda arguments, tmp: arguments)(script, tmp_path)  # trained 2 steps, resumed to 3
    SCRIPTS[script].main(arguments)
    checkpoint = tmp_path / "out" / "checkpoint-2"
    assert f"--max_steps 3 differs from the 2 of {checkpoint}: applied" in caplog.text
    assert json.loads((tmp_path / "out" / "trainer_state.json").read_text())["global_step"] == 3


def recorded_as_bf16(arguments: list[str], tmp: Path) -> list[str]:
    """The checkpoints as a run in bf16 mixed precision writes them, e.g. on a CPU with bf16 instructions (where it
    is the default): weights and optimizer state in float32, the precision in the run's settings."""
    for settings_file in (tmp / "out").rglob(RUN_SETTINGS_FILE):
        settings = json.loads(settings_file.read_text())
        assert settings["mixed_precision"] == "no"
        settings_file.write_text(json.dumps({**settings, "mixed_precision": "bf16"}))
        checkpoint = settings_file.parent
        if checkpoint.name.startswith("checkpoint-"):  # its manifest as the bf16 run wrote it, matching its files
            write_manifest(checkpoint, int(checkpoint.name.removeprefix("checkpoint-")))
    return arguments


@pytest.mark.parametrize("script", list(SCRIPTS))
def test_a_resume_in_another_precision_is_applied_with_a_warning(script, tmp_path, caplog):
    """The precision is the one recorded setting a resume may change without being told: an unset --bf16 follows
    the machine. A run resumed elsewhere goes on in this machine's precision, with one warning."""
    arguments = resumed_run(recorded_as_bf16, "--bf16", "false")(script, tmp_path)
    SCRIPTS[script].main(arguments)
    checkpoint = tmp_path / "out" / "checkpoint-2"
    assert f"{checkpoint} was trained with mixed precision bf16, this run uses no" in caplog.text
    assert json.loads((tmp_path / "out" / "trainer_state.json").read_text())["global_step"] == 3


@pytest.mark.parametrize("script", list(SCRIPTS))
def test_a_resume_with_the_default_precision_goes_on_silently(script, tmp_path, caplog, monkeypatch):
    """Trained and resumed with --bf16 unset: both resolve to this machine's precision, which nothing compares (the
    probe of the model's layer answers bf16 here, as it does for these shapes on a CPU with bf16 instructions)."""
    monkeypatch.setattr(cpu_precision, "step_bf16", lambda model, batch_size, seq_len: CpuBf16(True, "mocked"))
    arguments = resumed_run(lambda arguments, tmp: arguments)(script, tmp_path)
    recorded = json.loads((tmp_path / "out" / "checkpoint-2" / RUN_SETTINGS_FILE).read_text())
    on_a_bf16_cpu = trains_on_cpu(use_cpu=False) and cpu_bf16().pays
    assert recorded["mixed_precision"] == ("bf16" if on_a_bf16_cpu else "no")  # this machine's default
    SCRIPTS[script].main(arguments)
    assert "was trained with mixed precision" not in caplog.text
