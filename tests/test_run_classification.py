"""Tests of run_classification.py: the pure long-document functions, then short end-to-end runs on tiny models
(single-label, multi-label, regression, chunking, head_tail truncation, pairs) and the bad inputs."""

import csv
import itertools
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
from conftest import TINY

import run_classification
from roformer_hf.training.errors import ScriptError
from run_classification import (
    MULTI_LABEL,
    REGRESSION,
    SINGLE_LABEL,
    DataArguments,
    LabelInfo,
    add_special_tokens,
    compute_task_metrics,
    encode_batch,
    first_per_document,
    logits_to_scores,
    pool_chunk_logits,
    prediction_records,
    split_into_windows,
    truncate_pair,
    truncate_token_ids,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
TINY_MODEL = "hidden_size=32,num_hidden_layers=2,num_attention_heads=2,intermediate_size=64"
# Large initial weights make the logits of different documents differ clearly, so that checks of order and pooling
# cannot pass by accident.
DISTINCT_TINY_MODEL = TINY_MODEL + ",initializer_range=0.5"

# ----------------------------------------------------------------------------------------------------------------
# Truncation, windows, special tokens
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("side", "expected"),
    [("head", [0, 1, 2, 3, 4, 5, 6, 7]), ("tail", [2, 3, 4, 5, 6, 7, 8, 9]), ("head_tail", [0, 1, 4, 5, 6, 7, 8, 9])],
)
def test_truncate_token_ids(side, expected):
    assert truncate_token_ids(range(10), 8, side) == expected
    assert truncate_token_ids(range(5), 8, side) == [0, 1, 2, 3, 4]


def test_truncate_token_ids_rejects_unknown_side():
    with pytest.raises(ValueError, match="head_tail"):
        truncate_token_ids(range(10), 4, "middle")


@pytest.mark.parametrize(
    ("first_length", "second_length", "expected_lengths"),
    [(3, 4, (3, 4)), (3, 20, (3, 7)), (20, 3, (7, 3)), (20, 20, (5, 5)), (9, 9, (5, 5))],
)
def test_truncate_pair_budget(first_length, second_length, expected_lengths):
    first, second = truncate_pair(list(range(first_length)), list(range(100, 100 + second_length)), 10)
    assert (len(first), len(second)) == expected_lengths
    assert first == list(range(len(first))) and second == list(range(100, 100 + len(second)))


def test_truncate_pair_applies_the_side_to_both_texts():
    first, second = truncate_pair(list(range(20)), list(range(100, 120)), 8, "tail")
    assert first == [16, 17, 18, 19] and second == [116, 117, 118, 119]


def test_split_into_windows_golden():
    assert split_into_windows(range(10), 4, 1) == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
    # The last window moves back to end on the last token: [6..9] instead of [8, 9].
    assert split_into_windows(range(10), 4, 0) == [[0, 1, 2, 3], [4, 5, 6, 7], [6, 7, 8, 9]]
    assert split_into_windows(range(3), 4, 2) == [[0, 1, 2]]
    assert split_into_windows([], 4, 2) == [[]]


@pytest.mark.parametrize("length", [1, 7, 8, 9, 50, 101])
@pytest.mark.parametrize(("window_length", "stride"), [(8, 0), (8, 3), (8, 7), (16, 4)])
def test_split_into_windows_covers_the_document(length, window_length, stride):
    windows = split_into_windows(list(range(length)), window_length, stride)
    assert sorted({token for window in windows for token in window}) == list(range(length))
    assert all(len(window) == min(window_length, length) for window in windows)
    for previous, current in itertools.pairwise(windows[:-1]):  # all but the last window overlap by `stride`
        assert current[0] == previous[0] + window_length - stride


def test_add_special_tokens():
    assert add_special_tokens([5, 6], None, 101, 102) == {"input_ids": [101, 5, 6, 102], "token_type_ids": [0] * 4}
    assert add_special_tokens([5], [7, 8], 101, 102) == {
        "input_ids": [101, 5, 102, 7, 8, 102],
        "token_type_ids": [0, 0, 0, 1, 1, 1],
    }


# ----------------------------------------------------------------------------------------------------------------
# Pooling, scores, metrics, prediction records
# ----------------------------------------------------------------------------------------------------------------

WINDOW_LOGITS = np.array([[1.0, 0.0], [3.0, -2.0], [0.0, 5.0], [2.0, 2.0], [-1.0, 4.0]])
WINDOW_DOCUMENTS = [0, 0, 1, 2, 2]


def test_pool_chunk_logits_mean_and_max_by_hand():
    mean = pool_chunk_logits(WINDOW_LOGITS, WINDOW_DOCUMENTS, "mean")
    np.testing.assert_allclose(mean, [[2.0, -1.0], [0.0, 5.0], [0.5, 3.0]])
    maximum = pool_chunk_logits(WINDOW_LOGITS, WINDOW_DOCUMENTS, "max")
    np.testing.assert_allclose(maximum, [[3.0, 0.0], [0.0, 5.0], [2.0, 4.0]])


def test_pool_chunk_logits_ignores_window_order():
    order = [4, 2, 0, 3, 1]
    shuffled = pool_chunk_logits(WINDOW_LOGITS[order], np.array(WINDOW_DOCUMENTS)[order], "mean")
    np.testing.assert_allclose(shuffled, pool_chunk_logits(WINDOW_LOGITS, WINDOW_DOCUMENTS, "mean"))


def test_pool_chunk_logits_rejects_a_document_without_windows():
    with pytest.raises(ValueError, match="no window"):
        pool_chunk_logits(WINDOW_LOGITS, [0, 0, 2, 2, 2], "mean")
    with pytest.raises(ValueError, match="document ids"):
        pool_chunk_logits(WINDOW_LOGITS, [0, 1], "max")


def test_first_per_document():
    np.testing.assert_array_equal(first_per_document(np.array([7, 7, 3, 5, 5]), WINDOW_DOCUMENTS), [7, 3, 5])


def test_logits_to_scores():
    probabilities = logits_to_scores(np.array([[0.0, np.log(3.0)]]), SINGLE_LABEL)
    np.testing.assert_allclose(probabilities, [[0.25, 0.75]])
    np.testing.assert_allclose(logits_to_scores(np.array([[0.0, np.log(3.0)]]), MULTI_LABEL), [[0.5, 0.75]])
    np.testing.assert_allclose(logits_to_scores(np.array([[2.5], [-1.0]]), REGRESSION), [2.5, -1.0])


def test_compute_task_metrics_golden():
    single = compute_task_metrics(
        np.array([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0], [0.0, 2.0]]), [0, 1, 1, 1], SINGLE_LABEL
    )
    assert single["accuracy"] == pytest.approx(0.75)
    assert single["f1_macro"] == pytest.approx((2 / 3 + 0.8) / 2)
    multi = compute_task_metrics(np.array([[1.0, -1.0], [1.0, 1.0]]), np.array([[1, 0], [1, 0]]), MULTI_LABEL)
    assert multi["accuracy"] == pytest.approx(0.5) and multi["f1_micro"] == pytest.approx(0.8)
    regression = compute_task_metrics(np.array([[1.0], [2.0], [4.0]]), np.array([1.0, 3.0, 4.0]), REGRESSION)
    assert regression["mse"] == pytest.approx(1 / 3) and regression["mae"] == pytest.approx(1 / 3)


def test_prediction_records():
    info = LabelInfo(SINGLE_LABEL, ["civil", "criminal"])
    records = prediction_records(np.array([[0.0, np.log(3.0)], [1.0, 0.0]]), info)
    assert records[0]["prediction"] == "criminal" and records[1]["prediction"] == "civil"
    assert records[0]["scores"] == pytest.approx({"civil": 0.25, "criminal": 0.75})
    multi = prediction_records(np.array([[2.0, -2.0, 1.0]]), LabelInfo(MULTI_LABEL, ["a", "b", "c"]))
    assert multi[0]["prediction"] == ["a", "c"]
    assert prediction_records(np.array([[0.5]]), LabelInfo(REGRESSION, [])) == [{"id": 1, "prediction": 0.5}]


def test_accuracy_is_printed_beside_chance():
    line = run_classification.accuracy_against_chance(np.array([0, 1, 1, 1]), np.array([0, 1, 1, 0]), "eval")
    assert line == "validation accuracy: 0.750 on 4 documents (always answering their most frequent label: 0.750)"


def test_prediction_records_carry_the_id_and_the_gold_label():
    """The predicted label goes under `prediction`; `label` is the gold column's name, kept for the gold label."""
    info = LabelInfo(SINGLE_LABEL, ["civil", "criminal"])
    logits = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 0.0]])
    numbered = prediction_records(logits, info)
    assert [list(record) for record in numbered] == [["id", "prediction", "scores"]] * 3
    assert [record["id"] for record in numbered] == [1, 2, 3]  # rows of the file, from 1
    with_gold = prediction_records(logits, info, ids=["a7", "b2", "c9"], gold_labels=["criminal", "criminal", "civil"])
    assert [(r["id"], r["prediction"], r["label"]) for r in with_gold] == [
        ("a7", "criminal", "criminal"),
        ("b2", "civil", "criminal"),
        ("c9", "civil", "civil"),
    ]
    regression = prediction_records(np.array([[0.5]]), LabelInfo(REGRESSION, []), ids=[4], gold_labels=[0.7])
    assert regression == [{"id": 4, "prediction": 0.5, "label": 0.7}]


# ----------------------------------------------------------------------------------------------------------------
# Preprocessing with the real tokenizer
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cail_rows(data_dir) -> list[dict]:
    lines = (data_dir / "cls" / "cail2019_domain.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    return [row for row in rows if row["label"] == "civil"][:30] + [row for row in rows if row["label"] == "criminal"][
        :30
    ]


def encode_one(tokenizer, text, data_args, pair=None) -> dict:
    batch = {"text": [text], "label": ["civil"], **({"pair": [pair]} if pair is not None else {})}
    return encode_batch(batch, [0], tokenizer, LabelInfo(SINGLE_LABEL, ["civil", "criminal"]), data_args)


def test_head_tail_truncation_keeps_the_start_and_the_end(tokenizer, cail_rows):
    text = cail_rows[0]["text"]
    token_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(token_ids) > 64
    encoded = encode_one(tokenizer, text, DataArguments(max_seq_length=66, truncation_side="head_tail"))
    # 64 tokens besides [CLS] and [SEP]: the first 16 and the last 48.
    expected = [tokenizer.cls_token_id, *token_ids[:16], *token_ids[-48:], tokenizer.sep_token_id]
    assert encoded["input_ids"] == [expected] and encoded["labels"] == [0]


def test_head_truncation_matches_the_tokenizer(tokenizer, cail_rows):
    text = cail_rows[1]["text"]
    encoded = encode_one(tokenizer, text, DataArguments(max_seq_length=40))
    reference = tokenizer(text, truncation=True, max_length=40)
    assert encoded["input_ids"][0] == reference["input_ids"]
    assert encoded["token_type_ids"][0] == reference["token_type_ids"]


def test_pair_encoding_matches_the_tokenizer(tokenizer, cail_rows):
    text, casename = cail_rows[2]["text"][:30], cail_rows[2]["casename"]
    encoded = encode_one(tokenizer, text, DataArguments(text_pair_column_name="pair"), pair=casename)
    reference = tokenizer(text, casename)
    assert encoded["input_ids"][0] == reference["input_ids"]
    assert encoded["token_type_ids"][0] == reference["token_type_ids"]


def test_chunk_encoding_covers_the_document(tokenizer, cail_rows):
    text = cail_rows[3]["text"]
    token_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    data_args = DataArguments(max_seq_length=34, long_doc_strategy="chunk", chunk_stride=8)
    encoded = encode_one(tokenizer, text, data_args)
    windows = split_into_windows(token_ids, 32, 8)
    assert len(windows) > 2
    assert encoded["input_ids"] == [[tokenizer.cls_token_id, *window, tokenizer.sep_token_id] for window in windows]
    assert encoded["document_index"] == [0] * len(windows) and encoded["labels"] == [0] * len(windows)


# ----------------------------------------------------------------------------------------------------------------
# End-to-end runs on tiny models
# ----------------------------------------------------------------------------------------------------------------


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def tiny_run(roformer_vocab, output_dir: Path, *arguments: str) -> dict:
    return run_classification.main(
        [
            *("--tokenizer_name", str(roformer_vocab), "--config_overrides", TINY_MODEL),
            *("--output_dir", str(output_dir), "--max_steps", "3", "--max_seq_length", "64"),
            *("--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "8", "--learning_rate", "1e-3"),
            *("--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true", "--use_cpu", "true"),
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


def test_regression(tmp_path, roformer_vocab, data_dir):
    lines = (data_dir / "cls" / "chnsenticorp_htl.jsonl").read_text(encoding="utf-8").splitlines()[:40]
    rows = [{"text": row["text"], "score": float(row["label"])} for row in map(json.loads, lines)]
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
        ("unseen_test_label", "never seen in training: theft"),
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
    completed = subprocess.run(
        [sys.executable, "run_classification.py", "--train_file", str(train), "--do_train"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode != 0
    assert "Traceback" not in completed.stderr
    assert completed.stderr.strip().splitlines()[-1].startswith("error: the train data has no column 'text'")


def test_no_arguments_runs_the_shipped_sample():
    _, data_args, training_args = run_classification.parse_args([])
    assert Path(data_args.train_file) == REPO_ROOT / "data" / "cail_sample.jsonl"
    assert Path(data_args.train_file).stat().st_size < 1_000_000
    assert training_args.do_train and training_args.do_eval and data_args.validation_split_percentage > 0


def test_early_stopping_needs_evaluations():
    with pytest.raises(ScriptError, match="--eval_strategy"):
        run_classification.parse_args(["--train_file", "x.jsonl", "--do_train", "--early_stopping_patience", "2"])


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


def test_resolve_input_settings_order():
    """Command line first, then the checkpoint's saved settings, then the defaults."""
    from roformer_hf import RoFormerConfig, RoFormerForSequenceClassification

    config = RoFormerConfig(**TINY, classification_inputs={"max_seq_length": 48, "truncation_side": "tail"})
    model = RoFormerForSequenceClassification(config)
    not_given = dict.fromkeys(run_classification.INPUT_SETTINGS)
    given = DataArguments(**{**not_given, "max_seq_length": 300, "long_doc_strategy": "chunk"})
    resolved = run_classification.resolve_input_settings(given, model, "fine-tuned", training=False)
    assert (resolved.max_seq_length, resolved.truncation_side, resolved.long_doc_strategy) == (300, "tail", "chunk")
    assert (resolved.chunk_stride, resolved.chunk_pooling) == (128, "mean")
    assert model.config.classification_inputs["max_seq_length"] == 300
    given.chunk_stride = 150  # not less than half of 300: DataArguments' own check, now that the length is known
    with pytest.raises(ScriptError, match="chunk_stride"):
        run_classification.resolve_input_settings(given, model, "fine-tuned", training=False)


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
