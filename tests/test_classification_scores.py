"""Tests of roformer_hf/training/classification/classification_scores.py: probabilities, metrics, prediction records
and the accuracy set beside chance."""

import numpy as np
import pytest

from roformer_hf.training.classification.classification_scores import (
    accuracy_against_chance,
    compute_task_metrics,
    logits_to_scores,
    prediction_records,
)
from roformer_hf.training.classification.labels import MULTI_LABEL, REGRESSION, SINGLE_LABEL, LabelInfo


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
    line = accuracy_against_chance(np.array([0, 1, 1, 1]), np.array([0, 1, 1, 0]), "eval")
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
