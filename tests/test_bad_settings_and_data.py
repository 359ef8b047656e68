"""The bad inputs of the second table of docs/bad_inputs.md (training settings, a run that diverges, input files a run
would overwrite, labels, encodings and caches): each gets the one line the table shows, exit status 1, and leaves every
file the user had byte-identical.

That table has a fifth column, what the case got before these checks (on main 0fd2922); `tests/test_bad_inputs.py`
reads the four-column table only. To add a case: one entry in `CASES`, one row in that table.
"""

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import evaluate
import huggingface_hub
import pytest
from conftest import bad_input_rows, check_table_names_the_cases
from test_bad_inputs import (
    BOTH,
    DEMO_VOCAB,
    ROWS,
    TEXTS,
    run_in_process,
    script_parameters,
    template_pattern,
    tiny_run,
    training_run,
    with_value,
    write_jsonl,
)

from roformer_hf import RoFormerConfig, RoFormerForSequenceClassification, RoFormerJiebaTokenizer

MISSING_TRAIN_FILE = "never-read.jsonl"  # settings are refused before any data is read: this file does not exist


def settings_run(*extra: str) -> Callable:
    """A tiny run given `extra`, whose training file does not exist (the setting must be refused before it is read)."""
    return lambda script, tmp, monkeypatch: tiny_run(script, tmp, tmp / MISSING_TRAIN_FILE, *extra)


def with_environment(variables: dict[str, str], run: Callable) -> Callable:
    """`run` with the environment `variables` set (for the process of the test only)."""

    def arguments(script: str, tmp: Path, monkeypatch) -> list[str]:
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        return run(script, tmp, monkeypatch)

    return arguments


def labels_run(labels: list, *extra: str, name: str = "train.jsonl") -> Callable:
    rows = [{"text": text, "label": labels[row % len(labels)]} for row, text in enumerate(TEXTS)]
    return lambda script, tmp, monkeypatch: tiny_run(script, tmp, write_jsonl(tmp / name, rows), *extra)


def predicting_run(test_rows: list[dict], train_labels: list) -> Callable:
    """Training on `train_labels`, predicting on a test file of `test_rows`."""

    def arguments(script: str, tmp: Path, monkeypatch) -> list[str]:
        test_file = write_jsonl(tmp / "test.jsonl", test_rows)
        return labels_run(train_labels, "--do_predict", "--test_file", str(test_file))(script, tmp, monkeypatch)

    return arguments


def saved_classifier(folder: Path, label_names: list[str]) -> Path:
    """A tiny single-label classifier over the demo vocabulary, with its tokenizer, saved into `folder`."""
    tokenizer = RoFormerJiebaTokenizer(vocab_file=str(DEMO_VOCAB))
    labels = {"id2label": dict(enumerate(label_names)), "label2id": {name: i for i, name in enumerate(label_names)}}
    sizes = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
    config = RoFormerConfig(vocab_size=len(tokenizer), problem_type="single_label_classification", **sizes, **labels)
    RoFormerForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def predict_only(test_file: Path, output_dir: Path, model: Path) -> list[str]:
    return [
        *("--model_name_or_path", str(model), "--do_predict", "--test_file", str(test_file)),
        *("--output_dir", str(output_dir), "--max_seq_length", "16"),
    ]


def unseen_label_of_a_checkpoint(script: str, tmp: Path, monkeypatch) -> list[str]:
    model = saved_classifier(tmp / "classifier", ["civil", "criminal"])
    test_file = write_jsonl(tmp / "test.jsonl", [*ROWS[:2], {"text": TEXTS[2], "label": "administrative"}])
    return predict_only(test_file, tmp / "out", model)


def classifier_of_many_labels(script: str, tmp: Path, monkeypatch) -> list[str]:
    model = saved_classifier(tmp / "classifier", [f"L{number}" for number in range(12)])
    return tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS), "--model_name_or_path", str(model))


def predictions_over_the_test_file(link: str | None = None) -> Callable:
    """A predict-only run whose test file is the predictions.jsonl it writes: as given, through a symlink to it, a
    hard link to it, or an --output_dir that is a symlink to its folder."""

    def arguments(script: str, tmp: Path, monkeypatch) -> list[str]:
        model = saved_classifier(tmp / "classifier", ["civil", "criminal"])
        (tmp / "out").mkdir()
        predictions = write_jsonl(tmp / "out" / "predictions.jsonl", ROWS[:3])
        test_file, output_dir = predictions, tmp / "out"
        if link == "symlink":
            test_file = tmp / "test.jsonl"
            test_file.symlink_to(predictions)
        elif link == "hard link":
            test_file = tmp / "test.jsonl"
            os.link(predictions, test_file)
        elif link == "output_dir symlink":
            output_dir = tmp / "out-link"
            output_dir.symlink_to(tmp / "out")
        return predict_only(test_file, output_dir, model)

    return arguments


def corpus_named(name: str, *extra: str) -> Callable:
    """A run_mlm.py run whose training text is the file `name` of its own --output_dir."""

    def arguments(script: str, tmp: Path, monkeypatch) -> list[str]:
        (tmp / "out").mkdir()
        corpus = tmp / "out" / name
        if name.endswith(".json"):
            write_jsonl(corpus, [{"text": text} for text in TEXTS])
        else:
            corpus.write_text("".join(text + "\n" for text in TEXTS), encoding="utf-8")
        return tiny_run(script, tmp, corpus, *extra)

    return arguments


def file_of_bytes(name: str, lines: list[bytes]) -> Callable:
    def arguments(script: str, tmp: Path, monkeypatch) -> list[str]:
        (tmp / name).write_bytes(b"".join(line + b"\n" for line in lines))
        return tiny_run(script, tmp, tmp / name)

    return arguments


UTF8_ROWS = [json.dumps(row, ensure_ascii=False).encode("utf-8") for row in ROWS]
LATIN1_ROW = json.dumps({"text": "café crème", "label": "civil"}, ensure_ascii=False).encode("latin-1")
UTF8_LINES = [text.encode("utf-8") for text in TEXTS]


def tokenizer_folder(change: Callable[[dict], None]) -> Callable:
    """A run whose --tokenizer_name is the demo tokenizer saved with its tokenizer_config.json changed by `change`."""

    def arguments(script: str, tmp: Path, monkeypatch) -> list[str]:
        RoFormerJiebaTokenizer(vocab_file=str(DEMO_VOCAB)).save_pretrained(tmp / "tokenizer")
        config_file = tmp / "tokenizer" / "tokenizer_config.json"
        settings = json.loads(config_file.read_text(encoding="utf-8"))
        change(settings)
        config_file.write_text(json.dumps(settings), encoding="utf-8")
        arguments = tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS))
        return with_value(arguments, "--tokenizer_name", str(tmp / "tokenizer"))

    return arguments


def latin1_vocabulary(script: str, tmp: Path, monkeypatch) -> list[str]:
    lines = DEMO_VOCAB.read_bytes().split(b"\n")
    lines[500] = "café".encode("latin-1")
    (tmp / "vocab.txt").write_bytes(b"\n".join(lines))
    return with_value(
        tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS)), "--tokenizer_name", str(tmp / "vocab.txt")
    )


def unwritable_metrics_cache(script: str, tmp: Path, monkeypatch) -> list[str]:
    """HF_HOME's modules cache cannot be written (under a file here; read-only alike), --cache_dir can."""
    (tmp / "a_file").write_text("not a folder")
    monkeypatch.setattr(evaluate.config, "HF_MODULES_CACHE", str(tmp / "a_file" / "modules"))
    arguments = tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS))
    return [*arguments, "--cache_dir", str(tmp / "cache")] if script == "run_classification.py" else arguments


def diverging_run(script: str, tmp: Path, monkeypatch) -> list[str]:
    """A learning rate that makes the weights overflow in the second step (in float32: under bf16 autocast, the CPU
    default where it has bf16 instructions, the step differs); a checkpoint after every step."""
    options = ("--learning_rate", "1e6", "--save_strategy", "steps", "--save_steps", "1", "--disable_tqdm", "true")
    options += ("--bf16", "false")
    return with_value(training_run(script, tmp, *options), "--max_steps", "4")


# id -> (where, as in the table's second column; the arguments, given the script, a temporary folder and monkeypatch)
CASES: dict[str, tuple[str, Callable[[str, Path, pytest.MonkeyPatch], list[str]]]] = {
    "weight_decay_nan": (BOTH, settings_run("--weight_decay", "nan")),
    "weight_decay_inf": (BOTH, settings_run("--weight_decay", "inf")),
    "weight_decay_-1": (BOTH, settings_run("--weight_decay", "-1")),
    "label_smoothing_factor_nan": (BOTH, settings_run("--label_smoothing_factor", "nan")),
    "label_smoothing_factor_1.5": (BOTH, settings_run("--label_smoothing_factor", "1.5")),
    "adam_epsilon_0": (BOTH, settings_run("--adam_epsilon", "0")),
    "adam_epsilon_-1": (BOTH, settings_run("--adam_epsilon", "-1")),
    "adam_epsilon_inf": (BOTH, settings_run("--adam_epsilon", "inf")),
    "learning_rate_nan": (BOTH, settings_run("--learning_rate", "nan")),
    "learning_rate_-1": (BOTH, settings_run("--learning_rate", "-1")),
    "learning_rate_0": (BOTH, settings_run("--learning_rate", "0")),
    "learning_rate_inf": (BOTH, settings_run("--learning_rate", "inf")),
    "adam_beta1_nan": (BOTH, settings_run("--adam_beta1", "nan")),
    "adam_beta1_1": (BOTH, settings_run("--adam_beta1", "1")),
    "adam_beta2_1": (BOTH, settings_run("--adam_beta2", "1")),
    "max_grad_norm_nan": (BOTH, settings_run("--max_grad_norm", "nan")),
    "max_grad_norm_-1": (BOTH, settings_run("--max_grad_norm", "-1")),
    "warmup_steps_nan": (BOTH, settings_run("--warmup_steps", "nan")),
    "warmup_steps_inf": (BOTH, settings_run("--warmup_steps", "inf")),
    "num_train_epochs_nan": (BOTH, settings_run("--num_train_epochs", "nan", "--max_steps", "-1")),
    "num_train_epochs_inf": (BOTH, settings_run("--num_train_epochs", "inf", "--max_steps", "-1")),
    "logging_steps_nan": (BOTH, settings_run("--logging_steps", "nan")),
    "logging_steps_-1": (BOTH, settings_run("--logging_steps", "-1")),
    "logging_steps_inf": (BOTH, settings_run("--logging_steps", "inf")),
    "save_steps_nan": (BOTH, settings_run("--save_strategy", "steps", "--save_steps", "nan")),
    "eval_steps_nan": (BOTH, settings_run("--eval_strategy", "steps", "--eval_steps", "nan")),
    "eval_steps_-2": (BOTH, settings_run("--eval_strategy", "steps", "--eval_steps", "-2")),
    "eval_delay_nan": (BOTH, settings_run("--eval_delay", "nan")),
    "neftune_noise_alpha_nan": (BOTH, settings_run("--neftune_noise_alpha", "nan")),
    "neftune_noise_alpha_-1": (BOTH, settings_run("--neftune_noise_alpha", "-1")),
    "seed_-1": (BOTH, settings_run("--seed", "-1")),
    "seed_2_to_the_32": (BOTH, settings_run("--seed", str(2**32))),
    "lr_scheduler_kwargs_unknown": (BOTH, settings_run("--lr_scheduler_kwargs", '{"min_lr": 0.1}')),
    "report_to_not_installed": (BOTH, settings_run("--report_to", "tensorboard")),
    "report_to_unknown": (BOTH, settings_run("--report_to", "nonsense")),
    "torch_compile_mode_bogus": (BOTH, settings_run("--torch_compile_mode", "bogus")),
    "torch_compile_backend_nonexistent": (BOTH, settings_run("--torch_compile_backend", "nonexistent")),
    "omp_num_threads_99999": (BOTH, with_environment({"OMP_NUM_THREADS": "99999"}, settings_run())),
    "option_misspelled": (BOTH, settings_run("--lerning_rate", "1e-4")),
    "streaming_classification": ("run_classification.py", settings_run("--streaming")),
    "diverging_loss": (BOTH, diverging_run),
    "test_file_is_the_predictions": ("run_classification.py", predictions_over_the_test_file()),
    "test_file_links_to_the_predictions": ("run_classification.py", predictions_over_the_test_file("symlink")),
    "test_file_hard_linked_to_the_predictions": ("run_classification.py", predictions_over_the_test_file("hard link")),
    "output_dir_links_to_the_test_folder": (
        "run_classification.py",
        predictions_over_the_test_file("output_dir symlink"),
    ),
    "train_file_is_eval_results": ("run_mlm.py", corpus_named("eval_results.json", "--overwrite_output_dir")),
    "train_file_is_vocab_txt": ("run_mlm.py", corpus_named("vocab.txt")),
    "nested_list_labels": ("run_classification.py", labels_run([[["civil"]], [["criminal"]]])),
    "object_labels": ("run_classification.py", labels_run([{"name": "civil"}, {"name": "criminal"}])),
    "list_of_object_labels": ("run_classification.py", labels_run([[{"name": "civil"}], [{"name": "criminal"}]])),
    "label_lists_mixing_names_and_ids": ("run_classification.py", labels_run([["civil", 1], ["criminal"]])),
    "null_in_a_label_list": ("run_classification.py", labels_run([["civil", None], ["criminal"]])),
    "floats_in_a_label_list": ("run_classification.py", labels_run([[0.5, 1.0], [1.0]])),
    "multi_hot_labels": ("run_classification.py", labels_run([[1, 0, 1], [0, 1, 0], [1, 1, 0]])),
    "empty_label_name": ("run_classification.py", labels_run(["", "civil", "criminal"])),
    "test_lists_for_a_single_label_task": (
        "run_classification.py",
        predicting_run([{"text": TEXTS[0], "label": ["civil"]}], ["civil", "criminal"]),
    ),
    "test_names_for_a_multi_label_task": (
        "run_classification.py",
        predicting_run([{"text": TEXTS[0], "label": "civil"}], [["civil"], ["criminal", "civil"]]),
    ),
    "test_names_for_regression": (
        "run_classification.py",
        predicting_run([{"text": TEXTS[0], "label": "civil"}], [0.5, 1.5, 2.5]),
    ),
    "test_label_unseen_by_a_checkpoint": ("run_classification.py", unseen_label_of_a_checkpoint),
    "classifier_of_many_other_labels": ("run_classification.py", classifier_of_many_labels),
    "latin1_line_in_utf8_jsonl": ("run_classification.py", file_of_bytes("train.jsonl", [*UTF8_ROWS, LATIN1_ROW])),
    "gbk_line_in_utf8_txt": ("run_mlm.py", file_of_bytes("train.txt", [*UTF8_LINES, TEXTS[1].encode("gbk")])),
    "latin1_line_in_ascii_txt": (
        "run_mlm.py",
        file_of_bytes("train.txt", [b"hello world"] * 11 + ["café".encode("latin-1")]),
    ),
    "vocab_not_utf8": (BOTH, latin1_vocabulary),
    "negative_model_max_length": (BOTH, tokenizer_folder(lambda settings: settings.update(model_max_length=-5))),
    "metrics_cache_not_writable": (BOTH, unwritable_metrics_cache),
}


# ----------------------------------------------------------------------------------------------------------------
# The table
# ----------------------------------------------------------------------------------------------------------------


TABLE_HEADER = "| Case | Where | Bad input | Before | What it gets |"


def test_the_table_and_the_cases_name_the_same_bad_inputs():
    check_table_names_the_cases(TABLE_HEADER, CASES)


@pytest.fixture(autouse=True)
def hub_offline(monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def file_digests(folder: Path) -> dict[str, str]:
    """The SHA-256 of every file under `folder` (through links, as a reader sees them)."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.mark.parametrize(("case", "script"), script_parameters(CASES))
def test_bad_input_gets_one_line_and_keeps_the_files(case, script, tmp_path, capsys, monkeypatch):
    check_one_line_and_files_kept(TABLE_HEADER, CASES, case, script, tmp_path, capsys, monkeypatch)


def check_one_line_and_files_kept(table_header, cases, case, script, tmp_path, capsys, monkeypatch) -> None:
    """The case's run ends in the one line of its row under `table_header`, and every file the user had is
    byte-identical afterwards."""
    arguments = cases[case][1](script, tmp_path, monkeypatch)
    before = file_digests(tmp_path)
    message = run_in_process(script, arguments, capsys)
    pattern = template_pattern(bad_input_rows(table_header)[case][2])
    assert pattern.fullmatch(message), f"{script} {case}:\n  got      {message}\n  expected {pattern.pattern}"
    after = file_digests(tmp_path)
    assert {name: after.get(name) for name in before} == before  # every file the user had, byte-identical


# ----------------------------------------------------------------------------------------------------------------
# Cases without a row: run as the user meant
# ----------------------------------------------------------------------------------------------------------------


def test_the_data_cache_follows_cache_dir(tmp_path, monkeypatch):
    """run_classification.py loads its data into --cache_dir: datasets' own cache under HF_HOME may be read-only."""
    import datasets

    import run_classification

    (tmp_path / "a_file").write_text("not a folder")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "a_file" / "datasets"))
    arguments = tiny_run("run_classification.py", tmp_path, write_jsonl(tmp_path / "train.jsonl", ROWS))
    metrics = run_classification.main([*arguments, "--cache_dir", str(tmp_path / "cache")])
    assert "eval_accuracy" in metrics
    assert any((tmp_path / "cache").iterdir())


def test_a_tokenizer_without_a_length_limit_loads(tmp_path):
    """`"model_max_length": null` is transformers' "no limit", not a bad length."""
    RoFormerJiebaTokenizer(vocab_file=str(DEMO_VOCAB)).save_pretrained(tmp_path)
    settings = json.loads((tmp_path / "tokenizer_config.json").read_text(encoding="utf-8"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**settings, "model_max_length": None}))
    assert RoFormerJiebaTokenizer.from_pretrained(tmp_path).model_max_length > 10**9
