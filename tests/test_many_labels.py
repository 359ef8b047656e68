"""What run_classification.py writes per label scales with the number of labels
(roformer_hf/training/classification/classification_scores.py): a confusion-matrix picture up to `MAX_PICTURED_LABELS`,
a table of its non-zero cells beyond; a prediction's scores of every label up to `MAX_SCORED_LABELS`, of the most
probable beyond. Structure is asserted, not time: 10,000 labels took minutes and more than 10 GB in the picture
alone."""

import csv
import json
from types import SimpleNamespace

import numpy as np
from test_bad_inputs import TEXTS, tiny_run, write_jsonl

import run_classification
from roformer_hf.training.classification import classification_scores
from roformer_hf.training.classification.classification_scores import (
    MAX_PICTURED_LABELS,
    MAX_SCORED_LABELS,
    logits_to_scores,
    prediction_records,
    report_split,
)
from roformer_hf.training.classification.labels import SINGLE_LABEL, LabelInfo


def stub_trainer(output_dir) -> SimpleNamespace:
    """What `report_split` uses of a Trainer."""
    return SimpleNamespace(
        args=SimpleNamespace(output_dir=str(output_dir)),
        is_world_process_zero=lambda: True,
        log_metrics=lambda split, metrics: None,
    )


def labels_and_logits(label_count: int, documents: int) -> tuple[np.ndarray, np.ndarray, LabelInfo]:
    generator = np.random.default_rng(0)
    labels = generator.integers(0, label_count, documents)
    logits = generator.normal(size=(documents, label_count))
    logits[np.arange(documents), labels] += 3.0 * (np.arange(documents) % 2)  # every other document right
    return labels, logits, LabelInfo(SINGLE_LABEL, [f"L{number}" for number in range(label_count)])


def test_few_labels_get_a_picture(tmp_path):
    labels, logits, label_info = labels_and_logits(MAX_PICTURED_LABELS, 40)
    report_split(stub_trainer(tmp_path), logits, labels, {}, label_info, "eval")
    assert (tmp_path / "confusion_matrix_eval.png").stat().st_size > 0
    assert not (tmp_path / "confusion_matrix_eval.csv").exists()


def test_many_labels_get_a_table_of_the_confusions(tmp_path, monkeypatch):
    def no_picture(*args):
        raise AssertionError("a picture of more labels than MAX_PICTURED_LABELS was drawn")

    monkeypatch.setattr(classification_scores, "save_confusion_matrix", no_picture)
    labels, logits, label_info = labels_and_logits(10_000, 300)
    report_split(stub_trainer(tmp_path), logits, labels, {}, label_info, "test")
    assert not (tmp_path / "confusion_matrix_test.png").exists()
    with open(tmp_path / "confusion_matrix_test.csv", encoding="utf-8", newline="") as file:
        rows = list(csv.reader(file))
    assert rows[0] == ["label", "predicted", "documents"]
    predictions = np.argmax(logits, axis=-1)
    expected = {(f"L{label}", f"L{predicted}") for label, predicted in zip(labels, predictions, strict=True)}
    assert {(label, predicted) for label, predicted, _ in rows[1:]} == expected  # the non-zero cells, each once
    counts = [int(count) for _, _, count in rows[1:]]
    assert sum(counts) == 300 and counts == sorted(counts, reverse=True)


def test_many_labels_get_the_scores_of_the_most_probable():
    _, logits, label_info = labels_and_logits(MAX_SCORED_LABELS + 50, 5)
    records = prediction_records(logits, label_info)
    probabilities = logits_to_scores(logits, SINGLE_LABEL)
    for record, document in zip(records, probabilities, strict=True):
        scores = list(record["scores"].items())
        assert len(scores) == MAX_SCORED_LABELS
        assert scores[0][0] == record["prediction"]
        assert [score for _, score in scores] == sorted(np.sort(document)[::-1][:MAX_SCORED_LABELS])[::-1]
    few = prediction_records(logits[:, :3], LabelInfo(SINGLE_LABEL, ["a", "b", "c"]))
    assert list(few[0]["scores"]) == ["a", "b", "c"]  # every label, in label order


def test_a_run_of_many_labels_reports_in_tables(tmp_path):
    label_count = MAX_SCORED_LABELS + 20  # one document each; validation and test data the same
    rows = [{"text": f"{TEXTS[number % len(TEXTS)]}{number}", "label": f"L{number}"} for number in range(label_count)]
    data = write_jsonl(tmp_path / "labels.jsonl", rows)
    options = ["--validation_file", str(data), "--do_predict", "--test_file", str(data)]
    arguments = tiny_run("run_classification.py", tmp_path, data, *options)
    arguments.remove("--validation_split_percentage")
    arguments.remove("20")
    run_classification.main(arguments)
    output_dir = tmp_path / "out"
    assert not list(output_dir.glob("*.png"))
    assert {path.name for path in output_dir.glob("confusion_matrix_*")} == {
        "confusion_matrix_eval.csv",
        "confusion_matrix_test.csv",
    }
    predictions = [json.loads(line) for line in (output_dir / "predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == label_count
    assert all(len(record["scores"]) == MAX_SCORED_LABELS for record in predictions)
