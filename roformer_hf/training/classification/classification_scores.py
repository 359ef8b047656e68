"""
What run_classification.py makes of a classifier's logits: the document logits and metrics of a split (computed
offline by `roformer_hf.metrics`), probabilities, the records of predictions.jsonl, a confusion matrix and the
accuracy set beside chance.

What is written per label scales with the number of labels: up to `MAX_PICTURED_LABELS` the confusion matrix is a
picture, beyond it a table of its non-zero cells (a picture of 10,000 labels took minutes and more than 19 GB before
it ran out of memory); a record of predictions.jsonl holds the probability of every label up to `MAX_SCORED_LABELS`,
beyond it of the most probable ones. The picture draws label names in a font that has their characters, or numbers
the labels and names them in a file beside it (`picture_fonts`).
"""

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import datasets
import evaluate
import numpy as np
from transformers import EvalPrediction, Trainer

from ...metrics import load as load_metric
from ..machine.cpu_precision import evaluation_precision
from ..outputs.run_outputs import atomic_path, save_metrics
from . import picture_fonts
from .labels import MULTI_LABEL, REGRESSION, SINGLE_LABEL, LabelInfo
from .long_documents import DocumentReading, pool_documents

SPLIT_NAMES = {"eval": "validation", "test": "test"}

# The most labels a confusion-matrix picture shows readably (half an inch a cell, 29 inches wide; 4 s to draw where
# 100 labels took 13 s).
MAX_PICTURED_LABELS = 50

# The most label probabilities a record of predictions.jsonl holds (with more labels: those of the most probable).
MAX_SCORED_LABELS = 100


def run_inference(
    trainer: Trainer, dataset: datasets.Dataset, label_info: LabelInfo, data_args: DocumentReading, prefix: str
) -> tuple[np.ndarray, np.ndarray | None, dict[str, float]]:
    """
    Document logits of one split (window logits pooled under the chunk strategy), the document labels (None when
    the split has none) and the split's metrics, named `{prefix}_...`, with `{prefix}_precision`, the precision the
    logits were computed in (`cpu_precision.evaluation_precision`).
    """
    metrics_of_eval_split, trainer.compute_metrics = trainer.compute_metrics, None  # its windows differ from these
    try:
        output = trainer.predict(dataset, metric_key_prefix=prefix)
    finally:
        trainer.compute_metrics = metrics_of_eval_split
    logits, labels = output.predictions, output.label_ids
    recipe = data_args.recipe()
    if recipe.reads_in_windows:
        logits, labels = pool_documents(logits, labels, list(dataset["document_index"]), recipe.chunk_pooling)
    # said beside the scores: served in another precision, they differ (docs/scripts.md, "Precision of the scores")
    precision = evaluation_precision(trainer.args, trainer.model)
    metrics = {**output.metrics, f"{prefix}_samples": len(logits), f"{prefix}_precision": precision}
    if labels is not None:
        task_metrics = compute_task_metrics(logits, labels, label_info.problem_type)
        metrics.update({f"{prefix}_{name}": value for name, value in task_metrics.items()})
    return logits, labels, metrics


def report_split(
    trainer: Trainer, logits: np.ndarray, labels: np.ndarray | None, metrics: dict, label_info: LabelInfo, split: str
) -> None:
    """Log and save a split's metrics; draw its confusion matrix (single-label with labels)."""
    trainer.log_metrics(split, metrics)
    save_metrics(trainer, split, metrics)
    if labels is not None and label_info.problem_type == SINGLE_LABEL and trainer.is_world_process_zero():
        predictions = np.argmax(logits, axis=-1)
        path = Path(trainer.args.output_dir) / f"confusion_matrix_{split}"
        if len(label_info.label_names) <= MAX_PICTURED_LABELS:
            picture = path.with_suffix(".png")
            legend = save_confusion_matrix(labels, predictions, label_info.label_names, picture)
            if legend is not None:
                print(
                    f"{picture} numbers the labels, named in {legend}: no installed font has every character of "
                    "their names (install one that has, e.g. Noto Sans CJK for Chinese, to see the names drawn)"
                )
        else:
            save_confusion_table(labels, predictions, label_info.label_names, path.with_suffix(".csv"))
        print(accuracy_against_chance(labels, predictions, split))


def logits_to_scores(logits: np.ndarray, problem_type: str) -> np.ndarray:
    """Softmax probabilities (single-label), sigmoid probabilities (multi-label) or the value (regression)."""
    logits = np.asarray(logits, dtype=np.float64)
    if problem_type == SINGLE_LABEL:
        shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return shifted / shifted.sum(axis=-1, keepdims=True)
    if problem_type == MULTI_LABEL:
        return 1.0 / (1.0 + np.exp(-logits))
    return logits[:, 0]


def compute_task_metrics(logits: np.ndarray, labels: np.ndarray, problem_type: str) -> dict[str, float]:
    """
    Metrics of one split, computed offline by roformer_hf's `evaluate` modules (`roformer_hf.metrics`, scikit-learn
    underneath).

    Single-label: accuracy and macro-F1. Multi-label (a label is on when its sigmoid is above 0.5): exact-match
    accuracy, micro- and macro-F1. Regression: mean squared and absolute error, Pearson correlation.
    """
    if problem_type == SINGLE_LABEL:
        accuracy_and_f1 = evaluate.combine([load_metric("accuracy"), load_metric("f1")])
        return accuracy_and_f1.compute(predictions=np.argmax(logits, axis=-1), references=labels)
    if problem_type == MULTI_LABEL:
        predicted, labels = (np.asarray(logits) > 0).astype(int), np.asarray(labels).astype(int)
        f1 = load_metric("f1", "multilabel")
        return {
            **load_metric("accuracy", "multilabel").compute(predictions=predicted, references=labels),
            **f1.compute(predictions=predicted, references=labels, average="micro", zero_division=0),
            **f1.compute(predictions=predicted, references=labels, average="macro", zero_division=0),
        }
    regression = load_metric("regression")
    return regression.compute(predictions=np.asarray(logits).reshape(-1), references=np.asarray(labels).reshape(-1))


def make_compute_metrics(label_info: LabelInfo, document_ids: Sequence[int] | None, pooling: str):
    """The Trainer's `compute_metrics` for one evaluation split: pools window logits per document first."""

    def compute_metrics(prediction: EvalPrediction) -> dict[str, float]:
        logits, labels = prediction.predictions, prediction.label_ids
        if document_ids is not None:
            logits, labels = pool_documents(logits, labels, document_ids, pooling)
        return compute_task_metrics(logits, labels, label_info.problem_type)

    return compute_metrics


def prediction_records(
    logits: np.ndarray,
    label_info: LabelInfo,
    ids: Sequence[Any] | None = None,
    gold_labels: Sequence[Any] | None = None,
) -> list[dict[str, Any]]:
    """
    One record per document: its `id`, the `prediction` (a label name; a list of names for multi-label; the value
    for regression), for classification the probability of every label in `scores` (of the `MAX_SCORED_LABELS` most
    probable, most probable first, when there are more labels), and the gold `label` when the data has one.

    Args:
        logits (`np.ndarray` of shape `(num_documents, num_labels)`): the document logits.
        label_info (`LabelInfo`): the task and its label names.
        ids (`Sequence`, *optional*): the documents' ids; `None` numbers them from 1, as the rows of their file.
        gold_labels (`Sequence`, *optional*): the documents' labels as the data gives them.
    """
    scores = logits_to_scores(logits, label_info.problem_type)
    ids = range(1, len(scores) + 1) if ids is None else ids
    records = []
    for row, (document_id, document_scores) in enumerate(zip(ids, scores, strict=True)):
        record: dict[str, Any] = {"id": document_id}
        if label_info.problem_type == REGRESSION:
            record["prediction"] = float(document_scores)
        else:
            record["prediction"] = predicted_labels(document_scores, label_info)
            record["scores"] = listed_scores(document_scores, label_info.label_names)
        if gold_labels is not None:
            record["label"] = gold_labels[row]
        records.append(record)
    return records


def listed_scores(scores: np.ndarray, label_names: list[str]) -> dict[str, float]:
    """The probability of every label by name, or with more than `MAX_SCORED_LABELS` labels of the most probable."""
    if len(label_names) <= MAX_SCORED_LABELS:
        return dict(zip(label_names, map(float, scores), strict=True))
    most_probable = np.argpartition(-scores, MAX_SCORED_LABELS)[:MAX_SCORED_LABELS]  # in linear time, unordered
    most_probable = most_probable[np.argsort(-scores[most_probable], kind="stable")]
    return {label_names[index]: float(scores[index]) for index in most_probable}


def predicted_labels(scores: np.ndarray, label_info: LabelInfo) -> str | list[str]:
    """The label of highest probability, or for multi-label every label whose probability is above 0.5."""
    if label_info.problem_type == MULTI_LABEL:
        return [name for name, score in zip(label_info.label_names, scores, strict=True) if score > 0.5]
    return label_info.label_names[int(np.argmax(scores))]


def save_confusion_matrix(
    labels: np.ndarray, predictions: np.ndarray, label_names: list[str], path: Path
) -> Path | None:
    """
    Draw the confusion matrix of single-label predictions (rows: true label, columns: predicted) into a PNG.

    The label names are drawn in a font that has their characters (`picture_fonts.font_covering`: Chinese names need
    a font such as Noto Sans CJK). Where no installed font has them, the axes number the labels 0..n-1 and a CSV file
    beside the picture (`<picture>_labels.csv`, rows `number,label`) names them: never empty boxes. Returns that
    file's path, or `None` when the picture shows the names.
    """
    from sklearn.metrics import confusion_matrix

    font_file = picture_fonts.font_covering(label_names)
    legend_path = None if font_file is not None else path.with_name(f"{path.stem}_labels.csv")
    matrix = confusion_matrix(labels, predictions, labels=list(range(len(label_names))))
    figure = confusion_matrix_figure(matrix, label_names, font_file, None if legend_path is None else legend_path.name)
    if legend_path is not None:
        save_label_legend(label_names, legend_path)
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=100)
    return legend_path


def confusion_matrix_figure(
    matrix: np.ndarray, label_names: list[str], font_file: str | None, legend_name: str | None
):
    """
    The figure of a confusion matrix: the label names on the axes drawn in `font_file`, or with `font_file=None` the
    label numbers, the axis titles pointing at `legend_name`, the file that names them.
    """
    import matplotlib

    matplotlib.use("Agg")  # before sklearn imports pyplot: never a window
    from matplotlib.figure import Figure
    from matplotlib.font_manager import FontProperties
    from sklearn.metrics import ConfusionMatrixDisplay

    size = min(4 + 0.5 * len(label_names), 40)
    figure = Figure(figsize=(size, size))  # not pyplot's: nothing to close
    axes = figure.subplots()
    display_labels = label_names if font_file is not None else [str(number) for number in range(len(label_names))]
    ConfusionMatrixDisplay(matrix, display_labels=display_labels).plot(
        ax=axes, colorbar=False, xticks_rotation="vertical"
    )
    if font_file is None:
        axes.set(xlabel=f"Predicted label (names: {legend_name})", ylabel=f"True label (names: {legend_name})")
    elif font_file != picture_fonts.default_font_file():
        for tick_label in [*axes.get_xticklabels(), *axes.get_yticklabels()]:
            tick_label.set_fontproperties(FontProperties(fname=font_file))
    figure.tight_layout()
    return figure


def save_label_legend(label_names: list[str], path: Path) -> None:
    """Write the number a picture gives each label beside its name, as CSV rows `number,label`."""
    with atomic_path(path) as temporary, temporary.open("w", encoding="utf-8", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["number", "label"])
        writer.writerows(enumerate(label_names))


def save_confusion_table(labels: np.ndarray, predictions: np.ndarray, label_names: list[str], path: Path) -> None:
    """
    Write the non-zero cells of the confusion matrix of single-label predictions as CSV rows `label,predicted,
    documents`, the most frequent first: as many rows as there are distinct (label, prediction) pairs, whatever the
    number of labels.
    """
    pairs, counts = np.unique(np.stack([labels, predictions], axis=1), axis=0, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    with atomic_path(path) as temporary, temporary.open("w", encoding="utf-8", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["label", "predicted", "documents"])
        for (label, predicted), count in zip(pairs[order], counts[order], strict=True):
            writer.writerow([label_names[label], label_names[predicted], int(count)])


def accuracy_against_chance(labels: np.ndarray, predictions: np.ndarray, split: str) -> str:
    """
    One line that sets the accuracy beside what always answering the split's most frequent label scores, so that a
    reader sees whether the classifier learned anything.
    """
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    accuracy = float((labels == predictions).mean())
    chance = np.bincount(labels).max() / len(labels)
    return (
        f"{SPLIT_NAMES.get(split, split)} accuracy: {accuracy:.3f} on {len(labels)} documents (always answering "
        f"their most frequent label: {chance:.3f})"
    )
