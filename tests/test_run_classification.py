"""Tests of run_classification.py: short end-to-end runs on tiny models (single-label, multi-label, regression,
chunking, head_tail truncation, pairs) and the bad inputs. The functions it uses from roformer_hf/training are tested
in test_long_documents.py, test_labels.py and test_classification_scores.py."""

import csv
import json
import logging
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

import run_classification
from roformer_hf.text_classification_pipeline import split_into_windows
from roformer_hf.training.classification.labels import MULTI_LABEL, REGRESSION, SINGLE_LABEL
from roformer_hf.training.errors import ScriptError

REPO_ROOT = Path(__file__).resolve().parents[1]
TINY_MODEL = "hidden_size=32,num_hidden_layers=2,num_attention_heads=2,intermediate_size=64"
# Large initial weights make the logits of different documents differ clearly, so that checks of order and pooling
# cannot pass by accident.
DISTINCT_TINY_MODEL = TINY_MODEL + ",initializer_range=0.5"


# ----------------------------------------------------------------------------------------------------------------
# The real tokenizer, and court documents of two classes
# ----------------------------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------------------------
# End-to-end runs on tiny models
# ----------------------------------------------------------------------------------------------------------------


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def tiny_run(roformer_vocab, output_dir: Path, *arguments: str) -> dict:
    """A run in float32 on every machine: its predictions are compared with a float32 forward pass to 1e-4."""
    return run_classification.main(
        [
            *("--tokenizer_name", str(roformer_vocab), "--config_overrides", TINY_MODEL),
            *("--output_dir", str(output_dir), "--max_steps", "3", "--max_seq_length", "64"),
            *("--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "8", "--learning_rate", "1e-3"),
            *("--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true", "--use_cpu", "true"),
            *("--bf16", "false"),
            *arguments,
        ]
    )


def log_odds(prediction: dict) -> float:
    """log p(criminal) - log p(civil): the difference of the two logits behind a prediction's scores."""
    return float(np.log(prediction["scores"]["criminal"]) - np.log(prediction["scores"]["civil"]))


def read_predictions(output_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (output_dir / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]


def direct_logits(output_dir: Path, encoded: list[dict]) -> np.ndarray:
    """Logits of the saved model, one forward per input: the reference for order and pooling."""
    from roformer_hf import RoFormerForSequenceClassification

    model = RoFormerForSequenceClassification.from_pretrained(output_dir).eval()
    with torch.no_grad():
        return np.stack([model(**{k: torch.tensor([v]) for k, v in e.items()}).logits[0].numpy() for e in encoded])


@pytest.fixture(scope="module")
def single_label_run(tmp_path_factory, roformer_vocab, cail_rows):
    """Train 3 steps on 40 CAIL documents, evaluate on 10, predict 10 (grouped by length while training)."""
    folder = tmp_path_factory.mktemp("single_label")
    rows = [{"text": row["text"], "label": row["label"], "id": row["id"]} for row in cail_rows]
    train = write_jsonl(folder / "train.jsonl", rows[5:25] + rows[35:55])
    validation = write_jsonl(folder / "validation.jsonl", rows[:5] + rows[30:35])
    test_rows = sorted(rows[25:30] + rows[55:60], key=lambda row: row["id"])
    test = write_jsonl(folder / "test.jsonl", test_rows)
    output_dir = folder / "output"
    metrics = tiny_run(
        roformer_vocab,
        output_dir,
        *("--train_file", str(train), "--validation_file", str(validation), "--test_file", str(test)),
        *("--do_train", "--do_eval", "--do_predict", "--train_sampling_strategy", "group_by_length"),
        *("--config_overrides", DISTINCT_TINY_MODEL),
    )
    return metrics, output_dir, test, test_rows


def test_single_label_metrics_and_outputs(single_label_run):
    metrics, output_dir, _, _ = single_label_run
    for name in ("eval_accuracy", "eval_f1_macro", "test_accuracy", "test_f1_macro"):
        assert 0 <= metrics[name] <= 1
    assert metrics["eval_samples"] == 10 and metrics["test_samples"] == 10
    assert (output_dir / "confusion_matrix_eval.png").stat().st_size > 0
    assert (output_dir / "confusion_matrix_test.png").stat().st_size > 0
    card = (output_dir / "README.md").read_text(encoding="utf-8")
    assert "run_classification.py" in card
    assert "| trained length | 64 tokens" in card and "3 optimizer steps on inputs of 64 tokens" in card
    assert "| max_steps | 3 |" in card and "num_train_epochs" not in card and "1536" not in card
    assert "- train.jsonl" in card and str(output_dir.parent) not in card
    assert json.loads((output_dir / "config.json").read_text())["id2label"] == {"0": "civil", "1": "criminal"}


def test_predictions_follow_the_test_file(single_label_run, tokenizer):
    _, output_dir, _, test_rows = single_label_run
    predictions = read_predictions(output_dir)
    assert len(predictions) == len(test_rows)
    encoded = [tokenizer(row["text"], truncation=True, max_length=64) for row in test_rows]
    encoded = [{key: e[key] for key in ("input_ids", "token_type_ids", "attention_mask")} for e in encoded]
    logits = direct_logits(output_dir, encoded)
    expected = logits[:, 1] - logits[:, 0]
    assert np.ptp(expected) > 1e-2  # documents are told apart far beyond the tolerance below
    np.testing.assert_allclose([log_odds(prediction) for prediction in predictions], expected, atol=1e-4)
    predicted = [["civil", "criminal"][i] for i in logits.argmax(-1)]
    assert [prediction["prediction"] for prediction in predictions] == predicted
    assert [(p["id"], p["label"]) for p in predictions] == [(row["id"], row["label"]) for row in test_rows]


def test_predict_with_the_fine_tuned_checkpoint(single_label_run, tmp_path):
    _, output_dir, test, _ = single_label_run
    metrics = run_classification.main(
        [
            *("--model_name_or_path", str(output_dir), "--test_file", str(test), "--do_predict"),
            *("--max_seq_length", "64", "--output_dir", str(tmp_path), "--report_to", "none", "--use_cpu", "true"),
            *("--bf16", "false"),  # as the run that made the checkpoint
        ]
    )
    again, first = read_predictions(tmp_path), read_predictions(output_dir)
    assert [record["prediction"] for record in again] == [record["prediction"] for record in first]
    for record_again, record_first in zip(again, first, strict=True):
        assert record_again["scores"] == pytest.approx(record_first["scores"], abs=1e-6)
    assert metrics["test_accuracy"] == pytest.approx(single_label_run[0]["test_accuracy"])


def test_predict_run_says_where_predictions_went_and_numbers_rows(single_label_run, tmp_path, capsys):
    """A test file without `id` and without labels: rows numbered from 1, no `label`, and the path printed last."""
    _, output_dir, _, test_rows = single_label_run
    unlabelled = write_jsonl(tmp_path / "new.jsonl", [{"text": row["text"]} for row in test_rows[:3]])
    run_classification.main(
        [
            *("--model_name_or_path", str(output_dir), "--test_file", str(unlabelled), "--do_predict"),
            *("--output_dir", str(tmp_path / "predicted"), "--report_to", "none", "--use_cpu", "true"),
        ]
    )
    predictions = read_predictions(tmp_path / "predicted")
    assert [(record["id"], sorted(record)) for record in predictions] == [
        (row, ["id", "prediction", "scores"]) for row in (1, 2, 3)
    ]
    last_line = capsys.readouterr().out.strip().splitlines()[-1]
    assert last_line.startswith(f"predictions written to {tmp_path / 'predicted' / 'predictions.jsonl'}")


def test_refine_a_classifier_on_another_number_of_labels(single_label_run, tmp_path, cail_rows):
    """A fine-tuned 2-label classifier as the start of a 3-label task: a clear error, then a new head with the flag."""
    _, output_dir, _, _ = single_label_run
    rows = [{"text": row["text"], "label": "abc"[index % 3]} for index, row in enumerate(cail_rows[:12])]
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    arguments = [
        *("--model_name_or_path", str(output_dir), "--train_file", str(train), "--do_train", "--max_steps", "2"),
        *("--max_seq_length", "64", "--output_dir", str(tmp_path / "output"), "--report_to", "none"),
        *("--use_cpu", "true", "--save_strategy", "no", "--disable_tqdm", "true"),
    ]
    with pytest.raises(ScriptError, match="add --ignore_mismatched_sizes"):
        run_classification.main(arguments)
    run_classification.main([*arguments, "--ignore_mismatched_sizes"])
    config = json.loads((tmp_path / "output" / "config.json").read_text())
    assert config["id2label"] == {"0": "a", "1": "b", "2": "c"}


def test_chunk_strategy_pools_window_logits(tmp_path, roformer_vocab, tokenizer, cail_rows):
    rows = [{"text": row["text"], "label": row["label"]} for row in cail_rows]
    train = write_jsonl(tmp_path / "train.jsonl", rows[:8] + rows[30:38])
    test_rows = [rows[40], rows[10], rows[41]]
    test = write_jsonl(tmp_path / "test.jsonl", test_rows)
    output_dir = tmp_path / "output"
    arguments = ("--long_doc_strategy", "chunk", "--chunk_stride", "8", "--chunk_pooling", "mean")
    metrics = tiny_run(
        roformer_vocab,
        output_dir,
        *("--train_file", str(train), "--test_file", str(test), "--do_train", "--do_predict"),
        *("--validation_file", str(test), "--eval_strategy", "steps", "--eval_steps", "3"),  # metrics while training
        *("--max_seq_length", "34", "--config_overrides", DISTINCT_TINY_MODEL, *arguments),
    )
    assert metrics["test_samples"] == 3 and metrics["eval_samples"] == 3
    assert metrics["eval_accuracy"] == pytest.approx(metrics["test_accuracy"])
    state = json.loads((output_dir / "trainer_state.json").read_text())
    assert [entry["eval_accuracy"] for entry in state["log_history"] if "eval_accuracy" in entry] == [
        pytest.approx(metrics["eval_accuracy"])
    ]
    for row, prediction in zip(test_rows, read_predictions(output_dir), strict=True):
        windows = split_into_windows(tokenizer(row["text"], add_special_tokens=False)["input_ids"], 32, 8)
        assert len(windows) > 1
        encoded = [
            {
                "input_ids": [tokenizer.cls_token_id, *window, tokenizer.sep_token_id],
                "token_type_ids": [0] * (len(window) + 2),
                "attention_mask": [1] * (len(window) + 2),
            }
            for window in windows
        ]
        window_logits = direct_logits(output_dir, encoded)
        mean_pooled = window_logits.mean(axis=0)  # the hand-computed pooling
        max_pooled = window_logits.max(axis=0)
        assert abs(log_odds(prediction) - (mean_pooled[1] - mean_pooled[0])) < 1e-4
        assert abs(log_odds(prediction) - (max_pooled[1] - max_pooled[0])) > 1e-3  # so pooling is really tested


def test_multi_label(tmp_path, roformer_vocab, cail_rows):
    rows = [
        {"text": row["text"], "labels": [row["label"], *(["long"] if len(row["text"]) > 600 else [])]}
        for row in cail_rows
    ]
    train = write_jsonl(tmp_path / "train.jsonl", rows[:20] + rows[30:50])
    output_dir = tmp_path / "output"
    metrics = tiny_run(
        roformer_vocab,
        output_dir,
        *("--train_file", str(train), "--validation_split_percentage", "25", "--test_file", str(train)),
        *("--label_column_name", "labels", "--do_train", "--do_eval", "--do_predict", "--max_predict_samples", "5"),
    )
    assert {"eval_accuracy", "eval_f1_micro", "eval_f1_macro", "test_f1_micro"} <= set(metrics)
    config = json.loads((output_dir / "config.json").read_text())
    assert config["problem_type"] == MULTI_LABEL and set(config["label2id"]) == {"civil", "criminal", "long"}
    predictions = read_predictions(output_dir)
    assert len(predictions) == 5
    for prediction in predictions:
        assert set(prediction["prediction"]) <= {"civil", "criminal", "long"} and isinstance(prediction["label"], list)
        assert set(prediction["prediction"]) == {name for name, score in prediction["scores"].items() if score > 0.5}


def test_regression(tmp_path, roformer_vocab, cail_rows):
    rows = [{"text": row["text"][:200], "score": float(row["label"] == "criminal")} for row in cail_rows[10:50]]
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    output_dir = tmp_path / "output"
    metrics = tiny_run(
        roformer_vocab,
        output_dir,
        *("--train_file", str(train), "--label_column_name", "score", "--do_train", "--do_eval"),
        *("--problem_type", "regression"),  # the scores are 0.0 and 1.0, which could be class ids too
        *("--eval_strategy", "steps", "--eval_steps", "1", "--early_stopping_patience", "10"),
        *(
            "--validation_split_percentage",
            "25",
            "--do_predict",
            "--test_file",
            str(train),
            "--max_predict_samples",
            "4",
        ),
    )
    assert metrics["eval_mse"] >= 0 and metrics["eval_mae"] >= 0 and "eval_pearson" in metrics
    assert json.loads((output_dir / "config.json").read_text())["problem_type"] == REGRESSION
    predictions = read_predictions(output_dir)
    assert len(predictions) == 4 and all(isinstance(prediction["prediction"], float) for prediction in predictions)
    assert [prediction["label"] for prediction in predictions] == [row["score"] for row in rows[:4]]


def test_csv_classes_named_like_missing_values_are_classes(tmp_path, roformer_vocab, cail_rows):
    """pandas reads the cells NA, null, None as missing values: here they are the names of classes."""
    names = ["NA", "null", "None"]
    rows = [f"{row['text'][:60].replace(',', '，')},{names[number % 3]}" for number, row in enumerate(cail_rows[:24])]
    (tmp_path / "train.csv").write_text("text,label\n" + "\n".join(rows) + "\n", encoding="utf-8")
    tiny_run(roformer_vocab, tmp_path / "output", "--train_file", str(tmp_path / "train.csv"), "--do_train")
    config = json.loads((tmp_path / "output" / "config.json").read_text())
    assert config["problem_type"] == SINGLE_LABEL and sorted(config["label2id"]) == sorted(names)


def test_whole_number_float_labels_train_as_classes_when_asked(tmp_path, roformer_vocab, cail_rows):
    rows = [{"text": row["text"], "label": float(number % 2)} for number, row in enumerate(cail_rows[:16])]
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    arguments = ("--train_file", str(train), "--do_train", "--problem_type", SINGLE_LABEL)
    tiny_run(roformer_vocab, tmp_path / "output", *arguments)
    config = json.loads((tmp_path / "output" / "config.json").read_text())
    assert config["problem_type"] == SINGLE_LABEL and sorted(config["label2id"]) == ["0.0", "1.0"]


def test_sentence_pairs_from_csv(tmp_path, roformer_vocab, cail_rows):
    train = tmp_path / "train.csv"
    with train.open("w", encoding="utf-8", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=["fact", "casename", "label"])
        writer.writeheader()
        writer.writerows(
            {"fact": row["text"], "casename": row["casename"], "label": row["label"]} for row in cail_rows
        )
    output_dir = tmp_path / "output"
    metrics = tiny_run(
        roformer_vocab,
        output_dir,
        *("--train_file", str(train), "--text_column_name", "fact", "--text_pair_column_name", "casename"),
        *("--do_train", "--do_eval", "--validation_split_percentage", "20", "--truncation_side", "tail"),
        *("--activation_checkpointing", "true"),
    )
    assert 0 <= metrics["eval_accuracy"] <= 1 and metrics["eval_samples"] == 12


# ----------------------------------------------------------------------------------------------------------------
# Bad input: one clear line, non-zero exit
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture
def bad_data(tmp_path, cail_rows):
    rows = [{"text": row["text"][:100], "label": row["label"]} for row in cail_rows[25:35]]
    return tmp_path, rows


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing_label", "has no column 'label'"),
        ("unseen_test_label", "never seen in training: 'theft'"),
        ("empty_text", "have an empty 'text' .*data row 3 of the file"),
        ("text_not_text", "holds int64 values, not text"),
    ],
)
def test_bad_input_raises_a_clear_error(bad_data, roformer_vocab, case, message):
    folder, rows = bad_data
    test_rows = rows
    if case == "missing_label":
        rows = [{"text": row["text"], "category": row["label"]} for row in rows]
    elif case == "unseen_test_label":
        test_rows = [*rows, {"text": "被告人盗窃财物。", "label": "theft"}]
    elif case == "empty_text":
        rows = [*rows[:2], {"text": "  ", "label": "civil"}, *rows[2:]]
    elif case == "text_not_text":
        rows = [{"text": index, "label": row["label"]} for index, row in enumerate(rows)]
    train, test = write_jsonl(folder / "train.jsonl", rows), write_jsonl(folder / "test.jsonl", test_rows)
    with pytest.raises(ScriptError, match=message):
        tiny_run(
            roformer_vocab,
            folder / "out",
            "--train_file",
            str(train),
            "--test_file",
            str(test),
            "--do_train",
            "--do_predict",
        )


def test_bad_input_exits_with_one_line(bad_data, roformer_vocab):
    folder, rows = bad_data
    train = write_jsonl(folder / "train.jsonl", [{"content": row["text"], "label": row["label"]} for row in rows])
    arguments = ["--train_file", str(train), "--tokenizer_name", str(roformer_vocab), "--do_train"]
    completed = subprocess.run(
        [sys.executable, "run_classification.py", *arguments],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode != 0
    assert "Traceback" not in completed.stderr
    assert completed.stderr.strip().splitlines()[-1].startswith("error: the train data has no column 'text'")


def test_no_arguments_runs_the_shipped_sample():
    _, data_args, training_args = run_classification.parse_classification_arguments([])
    assert Path(data_args.train_file) == REPO_ROOT / "data" / "cail_sample.jsonl"
    assert Path(data_args.train_file).stat().st_size < 1_000_000
    assert training_args.do_train and training_args.do_eval and data_args.validation_split_percentage > 0


def test_early_stopping_needs_evaluations():
    with pytest.raises(ScriptError, match="--eval_strategy"):
        run_classification.parse_classification_arguments(
            ["--train_file", "x.jsonl", "--do_train", "--early_stopping_patience", "2"]
        )


# --- A fine-tuned classifier remembers how it read its documents ---


@pytest.fixture(scope="module")
def head_tail_run(tmp_path_factory, roformer_vocab, cail_rows):
    """A classifier fine-tuned on head_tail truncation at 48 tokens, and a test file of long documents."""
    folder = tmp_path_factory.mktemp("head_tail")
    rows = [{"text": row["text"], "label": row["label"]} for row in cail_rows]
    train = write_jsonl(folder / "train.jsonl", rows[:12] + rows[30:42])
    test = write_jsonl(folder / "test.jsonl", rows[20:25] + rows[50:55])
    output_dir = folder / "model"
    tiny_run(
        roformer_vocab,
        output_dir,
        *("--train_file", str(train), "--do_train", "--max_steps", "2"),
        *("--max_seq_length", "48", "--truncation_side", "head_tail", "--config_overrides", DISTINCT_TINY_MODEL),
    )
    return output_dir, test


def predict_with(checkpoint: Path, test: Path, output_dir: Path, *options: str) -> list[dict]:
    run_classification.main(
        [
            *("--model_name_or_path", str(checkpoint), "--test_file", str(test), "--do_predict"),
            *("--output_dir", str(output_dir), "--report_to", "none", "--use_cpu", "true", *options),
        ]
    )
    return read_predictions(output_dir)


def test_classifier_saves_its_input_settings(head_tail_run):
    output_dir, _ = head_tail_run
    saved = json.loads((output_dir / "config.json").read_text())["classification_inputs"]
    expected = {"max_seq_length": 48, "truncation_side": "head_tail", "long_doc_strategy": "truncate"}
    assert saved == {**expected, "chunk_stride": 128, "chunk_pooling": "mean"}
    # AutoConfig (the loader of trust_remote_code and pipelines) reads it back
    assert transformers.AutoConfig.from_pretrained(output_dir).classification_inputs == saved


def test_prediction_reuses_the_trained_input_settings(head_tail_run, tmp_path, caplog):
    """Predicting without the options reads documents as in training: the same scores as naming them."""
    checkpoint, test = head_tail_run
    caplog.set_level(logging.WARNING)
    remembered = predict_with(checkpoint, test, tmp_path / "remembered")
    named = ("--max_seq_length", "48", "--truncation_side", "head_tail")
    explicit = predict_with(checkpoint, test, tmp_path / "explicit", *named)
    assert [record["scores"] for record in remembered] == [record["scores"] for record in explicit]
    assert "differs from" not in caplog.text and "does not record" not in caplog.text
    head = predict_with(checkpoint, test, tmp_path / "head", "--truncation_side", "head")
    assert "--truncation_side head differs from the head_tail" in caplog.text
    assert [record["scores"] for record in head] != [record["scores"] for record in remembered]  # the override won


def test_saved_tokenizer_truncates_to_the_fine_tuned_length(single_label_run, cail_rows):
    _, output_dir, _, _ = single_label_run
    tokenizer = transformers.AutoTokenizer.from_pretrained(output_dir)
    assert tokenizer.model_max_length == 64  # the run's --max_seq_length, not "no limit"
    assert len(tokenizer(cail_rows[0]["text"], truncation=True)["input_ids"]) == 64


# --- The model card's command re-runs as written ---


def card_command(output_dir: Path) -> str:
    card = (output_dir / "README.md").read_text(encoding="utf-8")
    return re.search(r"^Command.*:\n\n```bash\n(.+)\n```", card, re.M)[1]


@pytest.mark.slow
def test_model_card_command_reruns_as_written(tmp_path, monkeypatch):
    """Train with relative paths, take the command from the card, and run it in a shell's way in the same folder."""
    for name in ("data", "run_classification.py"):
        (tmp_path / name).symlink_to(REPO_ROOT / name)
    arguments = [
        *("--train_file", "data/cail_sample.jsonl", "--tokenizer_name", "data/demo_vocab.txt"),
        *("--config_overrides", TINY_MODEL, "--max_train_samples", "32", "--max_eval_samples", "16"),
        *("--do_train", "--do_eval", "--max_steps", "2", "--max_seq_length", "64", "--output_dir", "outputs/first"),
        *("--report_to", "none", "--use_cpu", "true", "--save_strategy", "no", "--seed", "5"),
    ]
    monkeypatch.chdir(tmp_path)
    first = run_classification.main(arguments)
    command = card_command(tmp_path / "outputs" / "first")
    assert command == shlex.join(["python", "run_classification.py", *arguments])
    (tmp_path / "outputs" / "first").rename(tmp_path / "outputs" / "earlier")
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    words = shlex.split(command)
    again = subprocess.run([sys.executable, *words[1:]], cwd=tmp_path, env=environment, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-3000:]
    results = json.loads((tmp_path / "outputs" / "first" / "eval_results.json").read_text())
    assert results["eval_loss"] == pytest.approx(first["eval_loss"], abs=1e-6)


# --- The script's shape: a short sequence of phases whose code lives in roformer_hf/training/classification ---
