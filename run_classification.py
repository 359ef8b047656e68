#!/usr/bin/env python
"""Fine-tune a RoFormer for text classification or regression on long Chinese documents.

RoFormer has no position table, so `--max_seq_length` may go past the length the model was pretrained on (the
default is 1,024 tokens). For documents longer than memory allows, `--long_doc_strategy chunk` cuts every document
into overlapping windows, classifies each window and pools the window logits per document.

Examples:

```bash
python run_classification.py    # fine-tunes a small model on the shipped CAIL court-text sample, prints accuracy
python run_classification.py --model_name_or_path path/to/roformer --train_file train.jsonl \
    --validation_file dev.jsonl --test_file test.jsonl --do_train --do_eval --do_predict --output_dir outputs/cls
python run_classification.py args.yaml    # every argument from a file
```

A fine-tuned classifier remembers how it read its documents (`--max_seq_length`, `--truncation_side`,
`--long_doc_strategy`, `--chunk_stride`, `--chunk_pooling`, in its config's `classification_inputs`): evaluating or
predicting with it reads them the same way, unless the command line says otherwise (with a warning).

The data files are CSV or JSON lines with a text column and a label column. A label is a name or an id
(single-label), a list of them (multi-label) or a float (regression). Metrics are computed offline by the
`evaluate` modules of `roformer_hf.metrics` (scikit-learn underneath).
"""

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import datasets
import evaluate
import numpy as np
import torch
from torch.utils.data import SequentialSampler
from transformers import (
    DataCollatorWithPadding,
    EarlyStoppingCallback,
    EvalPrediction,
    PreTrainedTokenizerBase,
    Trainer,
    TrainingArguments,
    set_seed,
)

from roformer_hf import RoFormerForSequenceClassification
from roformer_hf.metrics import load as load_metric
from roformer_hf.training.building import build_config, build_model, build_tokenizer
from roformer_hf.training.cli import (
    ModelArguments,
    ScriptTrainingArguments,
    command_line,
    demo_or_given_arguments,
    parse_arguments,
)
from roformer_hf.training.console import loading_instructions, setup_logging
from roformer_hf.training.data_files import CSV_ONLY_EMPTY_CELLS_MISSING, check_data_file, data_file_error
from roformer_hf.training.errors import ScriptError
from roformer_hf.training.interrupts import StopAtStepBoundary, raise_if_stopped
from roformer_hf.training.launch import check_distributed_launch
from roformer_hf.training.resume import (
    absolute_path,
    check_resume,
    find_resume_checkpoint,
    record_run_settings,
    run_settings,
)
from roformer_hf.training.run_outputs import (
    atomic_path,
    check_output_dir,
    prepare_output_dir,
    save_metrics,
    save_model_atomically,
    save_state,
)
from roformer_hf.training.script_runner import guard_run, run_script

logger = logging.getLogger(__name__)

SINGLE_LABEL, MULTI_LABEL, REGRESSION = "single_label_classification", "multi_label_classification", "regression"
# How documents become model inputs: saved in a fine-tuned classifier's config (`classification_inputs`) and read
# again when it evaluates or predicts, unless the command line gives them.
INPUT_SETTINGS = ("max_seq_length", "truncation_side", "long_doc_strategy", "chunk_stride", "chunk_pooling")
DATA_FORMATS = {".csv": "csv", ".json": "json", ".jsonl": "json"}
SAMPLE_FILE = Path(__file__).resolve().parent / "data" / "cail_sample.jsonl"

# `python run_classification.py` with no arguments: a few minutes on a CPU, civil vs criminal court texts.
DEFAULT_ARGV = [
    "--train_file", str(SAMPLE_FILE),
    "--validation_split_percentage", "20",
    "--tokenizer_name", str(SAMPLE_FILE.parent / "demo_vocab.txt"),
    "--config_overrides", "hidden_size=128,num_hidden_layers=2,num_attention_heads=4,intermediate_size=256",
    "--max_seq_length", "128",
    "--do_train", "--do_eval",
    "--max_steps", "80",
    "--learning_rate", "1e-3",
    "--per_device_train_batch_size", "16",
    "--output_dir", "outputs/run_classification",
    "--save_strategy", "no",
]  # fmt: skip


@dataclass
class DataArguments:
    """What data to train, evaluate and predict on, and how to turn documents into model inputs."""

    train_file: str | None = field(default=None, metadata={"help": "Training data: a .csv, .json or .jsonl file."})
    validation_file: str | None = field(default=None, metadata={"help": "Validation data (same format)."})
    test_file: str | None = field(
        default=None, metadata={"help": "Data for --do_predict; its label column is optional (metrics if present)."}
    )
    validation_split_percentage: int = field(
        default=10,
        metadata={
            "help": "Percentage of the training data held out for validation when there is no --validation_file."
        },
    )
    text_column_name: str = field(default="text", metadata={"help": "Column holding the document text."})
    text_pair_column_name: str | None = field(
        default=None, metadata={"help": "Column holding a second text, for sentence-pair tasks."}
    )
    label_column_name: str = field(default="label", metadata={"help": "Column holding the label(s) or the score."})
    problem_type: str = field(
        default="auto",
        metadata={
            "help": "'auto' infers it from the labels: a list of labels is multi-label, a float is regression, "
            "anything else single-label.",
            "choices": ["auto", SINGLE_LABEL, MULTI_LABEL, REGRESSION],
        },
    )
    max_seq_length: int = field(
        default=1024,
        metadata={
            "help": "Tokens per model input, special tokens included. May exceed the model's max_position_embeddings "
            "(RoPE has no length cap). With --long_doc_strategy chunk: the window length."
        },
    )
    truncation_side: str = field(
        default="head",
        metadata={
            "help": "Which part of a long document to keep: 'head' (the start), 'tail' (the end) or 'head_tail' "
            "(the first quarter of the budget from the start, the rest from the end).",
            "choices": ["head", "tail", "head_tail"],
        },
    )
    long_doc_strategy: str = field(
        default="truncate",
        metadata={
            "help": "'truncate' keeps max_seq_length tokens of each document; 'chunk' classifies overlapping windows "
            "of the whole document and pools their logits.",
            "choices": ["truncate", "chunk"],
        },
    )
    chunk_stride: int = field(default=128, metadata={"help": "Tokens shared by consecutive windows (chunk strategy)."})
    chunk_pooling: str = field(
        default="mean",
        metadata={"help": "How window logits become document logits.", "choices": ["mean", "max"]},
    )
    early_stopping_patience: int | None = field(
        default=None,
        metadata={"help": "Stop after this many evaluations without improvement (needs --eval_strategy steps|epoch)."},
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only this many training documents."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep only this many validation documents."})
    max_predict_samples: int | None = field(default=None, metadata={"help": "Keep only this many test documents."})
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "Processes for tokenization."})

    def __post_init__(self):
        # parse_args leaves the input settings None when the command line does not give them (see INPUT_SETTINGS)
        if not 0 <= self.validation_split_percentage < 100:
            raise ValueError(
                f"--validation_split_percentage must be in [0, 100), got {self.validation_split_percentage}."
            )
        if self.max_seq_length is not None and self.max_seq_length < 8:
            raise ValueError(f"--max_seq_length must be at least 8, got {self.max_seq_length}.")
        if None in (self.long_doc_strategy, self.chunk_stride, self.max_seq_length):
            return
        if self.long_doc_strategy == "chunk" and not 0 <= self.chunk_stride < self.max_seq_length // 2:
            raise ValueError(
                f"--chunk_stride ({self.chunk_stride}) must be at least 0 and less than half of --max_seq_length "
                f"({self.max_seq_length}), so that windows move forward."
            )
        if self.long_doc_strategy == "chunk" and self.text_pair_column_name is not None:
            raise ValueError("--long_doc_strategy chunk works on single texts: leave out --text_pair_column_name.")


DATA_DEFAULTS = {data_field.name: data_field.default for data_field in fields(DataArguments)}


@dataclass
class LabelInfo:
    """The task: its problem type and its label names in id order (empty for regression)."""

    problem_type: str
    label_names: list[str]

    @property
    def num_labels(self) -> int:
        return 1 if self.problem_type == REGRESSION else len(self.label_names)

    @property
    def label2id(self) -> dict[str, int]:
        return {name: index for index, name in enumerate(self.label_names)}


# ----------------------------------------------------------------------------------------------------------------
# Pure functions: truncation, windows, special tokens, pooling (unit-tested on their own)
# ----------------------------------------------------------------------------------------------------------------


def truncate_token_ids(token_ids: Sequence[int], max_length: int, side: str = "head") -> list[int]:
    """
    Shorten `token_ids` to at most `max_length` tokens.

    Args:
        token_ids (`Sequence[int]`): the tokens of one text, without special tokens.
        max_length (`int`): how many tokens to keep.
        side (`str`): `"head"` keeps the start, `"tail"` the end, `"head_tail"` the first quarter of `max_length`
            from the start and the rest from the end (head+tail truncation of Sun et al., 2019).
    """
    token_ids = list(token_ids)
    if len(token_ids) <= max_length:
        return token_ids
    if side == "head":
        return token_ids[:max_length]
    if side == "tail":
        return token_ids[len(token_ids) - max_length :]
    if side == "head_tail":
        head_length = max_length // 4
        return token_ids[:head_length] + token_ids[len(token_ids) - (max_length - head_length) :]
    raise ValueError(f"unknown truncation side {side!r}: use 'head', 'tail' or 'head_tail'.")


def truncate_pair(
    first_ids: Sequence[int], second_ids: Sequence[int], max_length: int, side: str = "head"
) -> tuple[list[int], list[int]]:
    """
    Shorten two texts to at most `max_length` tokens together: the shorter keeps all its tokens if it fits in half,
    the longer gets the rest; each is cut with `truncate_token_ids(side=side)`.
    """
    if len(first_ids) + len(second_ids) <= max_length or len(first_ids) <= max_length // 2:
        budget_first = len(first_ids)
    else:  # the first text is long: it gets what the second leaves, but at least half
        budget_first = max(max_length - len(second_ids), max_length - max_length // 2)
    first = truncate_token_ids(first_ids, budget_first, side)
    second = truncate_token_ids(second_ids, max_length - len(first), side)
    return first, second


def split_into_windows(token_ids: Sequence[int], window_length: int, stride: int) -> list[list[int]]:
    """
    Cut a document into overlapping windows that cover all of it.

    Consecutive windows share `stride` tokens; the last window is moved back so that it ends on the document's last
    token and is as long as the others (unless the whole document is shorter than one window).

    Args:
        token_ids (`Sequence[int]`): the tokens of the document, without special tokens.
        window_length (`int`): tokens per window.
        stride (`int`): tokens shared by consecutive windows, `0 <= stride < window_length`.

    Returns:
        `list[list[int]]`: at least one window (an empty document gives one empty window).
    """
    if not 0 <= stride < window_length:
        raise ValueError(f"stride must be in [0, window_length={window_length}), got {stride}.")
    token_ids = list(token_ids)
    if len(token_ids) <= window_length:
        return [token_ids]
    step = window_length - stride
    num_windows = 1 + math.ceil((len(token_ids) - window_length) / step)
    starts = [min(index * step, len(token_ids) - window_length) for index in range(num_windows)]
    return [token_ids[start : start + window_length] for start in starts]


def add_special_tokens(
    first_ids: list[int], second_ids: list[int] | None, cls_token_id: int, sep_token_id: int
) -> dict[str, list[int]]:
    """`[CLS] first [SEP]` or `[CLS] first [SEP] second [SEP]`, with token type 0 for the first part, 1 for the second."""
    input_ids = [cls_token_id, *first_ids, sep_token_id]
    token_type_ids = [0] * len(input_ids)
    if second_ids is not None:
        input_ids += [*second_ids, sep_token_id]
        token_type_ids += [1] * (len(second_ids) + 1)
    return {"input_ids": input_ids, "token_type_ids": token_type_ids}


def pool_chunk_logits(logits: np.ndarray, document_ids: Sequence[int], pooling: str = "mean") -> np.ndarray:
    """
    Pool the logits of the windows of every document into one row per document.

    Args:
        logits (`np.ndarray` of shape `(num_windows, num_labels)`): the logits of every window.
        document_ids (`Sequence[int]` of length `num_windows`): the document of every window, numbered from 0
            (every number up to the largest must occur).
        pooling (`str`): `"mean"` or `"max"` (element-wise over the windows of a document).

    Returns:
        `np.ndarray` of shape `(num_documents, num_labels)`, row `d` for document `d`.
    """
    logits = np.asarray(logits, dtype=np.float64)
    document_ids = np.asarray(document_ids)
    if logits.shape[0] != document_ids.shape[0]:
        raise ValueError(f"{logits.shape[0]} windows of logits but {document_ids.shape[0]} document ids.")
    num_documents = int(document_ids.max()) + 1 if document_ids.size else 0
    if pooling == "mean":
        sums = np.zeros((num_documents, logits.shape[1]))
        np.add.at(sums, document_ids, logits)
        counts = np.bincount(document_ids, minlength=num_documents)
        if (counts == 0).any():
            raise ValueError(f"document {int(np.argmin(counts))} has no window.")
        return sums / counts[:, None]
    if pooling == "max":
        pooled = np.full((num_documents, logits.shape[1]), -np.inf)
        np.maximum.at(pooled, document_ids, logits)
        if np.isinf(pooled).all(axis=1).any():
            raise ValueError("a document has no window.")
        return pooled
    raise ValueError(f"unknown pooling {pooling!r}: use 'mean' or 'max'.")


def first_per_document(values: np.ndarray, document_ids: Sequence[int]) -> np.ndarray:
    """The value of the first window of every document (windows of a document carry the document's label)."""
    document_ids = np.asarray(document_ids)
    _, first_windows = np.unique(document_ids, return_index=True)
    return np.asarray(values)[first_windows]


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


def save_confusion_matrix(labels: np.ndarray, predictions: np.ndarray, label_names: list[str], path: Path) -> None:
    """Draw the confusion matrix of single-label predictions (rows: true label, columns: predicted) into a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import ConfusionMatrixDisplay, confusion_matrix

    matrix = confusion_matrix(labels, predictions, labels=list(range(len(label_names))))
    size = min(4 + 0.5 * len(label_names), 40)
    figure, axes = plt.subplots(figsize=(size, size))
    ConfusionMatrixDisplay(matrix, display_labels=label_names).plot(
        ax=axes, colorbar=False, xticks_rotation="vertical"
    )
    figure.tight_layout()
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=100)
    plt.close(figure)


# ----------------------------------------------------------------------------------------------------------------
# The steps of main()
# ----------------------------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> tuple[ModelArguments, DataArguments, TrainingArguments]:
    """Parse the command line (or one .json/.yaml file); no arguments at all runs the embedded CAIL demo."""
    model_args, data_args, training_args = parse_arguments(
        (ModelArguments, DataArguments, ScriptTrainingArguments),
        demo_or_given_arguments(argv, DEFAULT_ARGV),
        # None marks an input setting the user did not give: resolve_input_settings fills it in
        defaults={"output_dir": "outputs/run_classification", **dict.fromkeys(INPUT_SETTINGS)},
        description=__doc__,
    )
    if not (training_args.do_train or training_args.do_eval or training_args.do_predict):
        raise ScriptError("nothing to do: pass --do_train, --do_eval and/or --do_predict.")
    if data_args.early_stopping_patience is not None:
        if training_args.eval_strategy == "no":
            raise ScriptError(
                "--early_stopping_patience needs evaluations during training: add --eval_strategy epoch."
            )
        if training_args.metric_for_best_model is None:
            training_args.metric_for_best_model, training_args.greater_is_better = "loss", False
    return model_args, data_args, training_args


def read_data_file(path: str, option: str, label_column: str = "label") -> datasets.Dataset:
    """Read one CSV or JSON(-lines) file; `option` names the argument that gave it, for error messages."""
    data_format = DATA_FORMATS.get(Path(path).suffix.lower())
    if data_format is None:
        raise ScriptError(f"{option} {path}: use a .csv, .json or .jsonl file.")
    check_data_file(path, option)
    # a class named "NA" stays a class (numbers are then recognised by `read_csv_numbers`)
    csv_options = CSV_ONLY_EMPTY_CELLS_MISSING if data_format == "csv" else {}
    try:
        dataset = datasets.load_dataset(data_format, data_files=str(path), split="train", **csv_options)
    except (datasets.exceptions.DatasetGenerationError, ValueError, OSError) as error:
        raise data_file_error({option: path}, error) from error
    return read_csv_numbers(dataset, label_column, f"{option} {path}") if data_format == "csv" else dataset


def read_csv_numbers(dataset: datasets.Dataset, column: str, source: str) -> datasets.Dataset:
    """
    The CSV label `column` as numbers when every label is a number (ids, or scores where NaN and inf are numbers
    too, refused later), as names when none is; a column mixing them is refused, as in JSON data.
    """
    feature = dataset.features.get(column)
    if not (isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string")):
        return dataset  # read as numbers by pandas already, or absent
    labels = dataset[column]
    numbers = [parse_number(label) for label in labels]
    given = [row for row, label in enumerate(labels) if label is not None]
    numeric = [row for row in given if numbers[row] is not None]
    if not numeric:
        return dataset
    if len(numeric) < len(given):
        named = next(row for row in given if numbers[row] is None)
        raise ScriptError(
            f"the labels in column {column!r} of {source} mix names and numbers (data row {named + 1} holds "
            f"{labels[named]!r}, data row {numeric[0] + 1} holds {labels[numeric[0]]!r}): write every label the same "
            "way: all names or all numbers."
        )
    return dataset.remove_columns(column).add_column(column, numbers)


def parse_number(text: str | None) -> int | float | None:
    """The number a CSV cell holds (an int when written without a point), or `None` for a name or an empty cell."""
    for kind in (int, float):
        try:
            return kind(text)
        except (TypeError, ValueError):
            continue
    return None


def load_raw_datasets(data_args: DataArguments, training_args: TrainingArguments) -> datasets.DatasetDict:
    """The splits the run needs: train, validation (a file or a held-out fraction of train) and test."""
    raw_datasets = datasets.DatasetDict()
    wanted = [
        ("train", "--train_file", data_args.train_file, training_args.do_train),
        ("validation", "--validation_file", data_args.validation_file, training_args.do_eval),
        ("test", "--test_file", data_args.test_file, training_args.do_predict),
    ]
    for split, option, path, needed in wanted:
        if needed and path is not None:
            raw_datasets[split] = read_data_file(path, option, data_args.label_column_name)
    check_raw_datasets(raw_datasets, data_args)  # before any shuffling, so that row numbers are those of the files
    if training_args.do_eval and "validation" not in raw_datasets and "train" in raw_datasets:
        if data_args.validation_split_percentage == 0:
            raise ScriptError("--do_eval needs --validation_file or a --validation_split_percentage above 0.")
        check_split_possible(len(raw_datasets["train"]), data_args.validation_split_percentage)
        held_out = raw_datasets["train"].train_test_split(
            test_size=data_args.validation_split_percentage / 100, seed=training_args.seed
        )
        raw_datasets["train"], raw_datasets["validation"] = held_out["train"], held_out["test"]
    for split, option, _, needed in wanted:
        if needed and split not in raw_datasets:
            raise ScriptError(f"--do_{'eval' if split == 'validation' else split} needs {option}.")
    limits = {
        "train": data_args.max_train_samples,
        "validation": data_args.max_eval_samples,
        "test": data_args.max_predict_samples,
    }
    for split, limit in limits.items():
        if limit is not None and split in raw_datasets:
            raw_datasets[split] = raw_datasets[split].select(range(min(limit, len(raw_datasets[split]))))
    return raw_datasets


def check_raw_datasets(raw_datasets: datasets.DatasetDict, data_args: DataArguments) -> None:
    """Every split has non-empty text columns of text, and (but for test) a label column without gaps."""
    text_columns = [data_args.text_column_name, data_args.text_pair_column_name]
    for split, dataset in raw_datasets.items():
        if len(dataset) == 0:
            raise ScriptError(f"the {split} data is empty.")
        for column in filter(None, text_columns):
            option = "--text_column_name" if column == data_args.text_column_name else "--text_pair_column_name"
            require_column(dataset, column, split, option)
            check_text_column(dataset, column, split)
        if split != "test" or data_args.label_column_name in dataset.column_names:
            require_column(dataset, data_args.label_column_name, split, "--label_column_name")
            missing = [row for row, label in enumerate(dataset[data_args.label_column_name]) if label is None]
            if missing:
                raise ScriptError(
                    f"{len(missing)} rows of the {split} data have no {data_args.label_column_name!r} (the first is "
                    f"data row {missing[0] + 1} of the file): label them or remove them."
                )
            check_label_kinds(dataset[data_args.label_column_name], data_args.label_column_name, split)
            check_finite_labels(dataset[data_args.label_column_name], split, data_args)


def check_finite_labels(labels: Sequence[Any], split: str, data_args: DataArguments) -> None:
    """Refuse a NaN or infinite label (JSON reads NaN and Infinity): a regression on it trains a model of NaNs."""
    for row, label in enumerate(labels):
        for value in label if isinstance(label, list) else [label]:
            if isinstance(value, float) and not math.isfinite(value):
                option = f"--{split}_file"
                raise ScriptError(
                    f"{option} {getattr(data_args, split + '_file')}: data row {row + 1} has the label {value} in "
                    f"column {data_args.label_column_name!r}, which is not a finite number: give every row a finite "
                    "number, or remove the row."
                )


def label_kind(value: Any) -> str:
    """What kind of label a value is, in words: a list, an object, a true/false value, a number or a name."""
    if isinstance(value, list):
        return "lists"
    if isinstance(value, dict):
        return "objects"
    if isinstance(value, bool):
        return "true/false values"
    return "numbers" if isinstance(value, (int, float)) else "names"


def check_label_kinds(labels: Sequence[Any], column: str, split: str) -> None:
    """
    Refuse a label column that mixes kinds: names with lists (single- and multi-label) cannot be one task, and ids
    with names (`1` and `"civil"`) would silently become classes named "1" and "civil".
    """
    first_of_kind: dict[str, int] = {}
    for row, label in enumerate(labels):
        first_of_kind.setdefault(label_kind(label), row)
        if len(first_of_kind) > 1:
            (kind_a, row_a), (kind_b, row_b) = list(first_of_kind.items())[:2]
            raise ScriptError(
                f"the labels in column {column!r} of the {split} data mix {kind_a} and {kind_b} (data row "
                f"{row_a + 1} holds {labels[row_a]!r}, data row {row_b + 1} holds {labels[row_b]!r}): write every "
                "label the same way: all names, all ids, or all lists of them (multi-label)."
            )


def check_split_possible(num_rows: int, percentage: int) -> None:
    """Refuse a validation split that would leave no training row (the rule of scikit-learn's train_test_split)."""
    if num_rows - math.ceil(percentage / 100 * num_rows) < 1:
        raise ScriptError(
            f"the training data has {num_rows} row{'s' if num_rows > 1 else ''}, too few to hold out "
            f"{percentage}% for validation: give --validation_file, a lower --validation_split_percentage, or more "
            "training data."
        )


def require_column(dataset: datasets.Dataset, column: str, split: str, option: str) -> None:
    if column not in dataset.column_names:
        raise ScriptError(
            f"the {split} data has no column {column!r} (its columns: {', '.join(dataset.column_names)}): "
            f"name the right one with {option}."
        )


def check_text_column(dataset: datasets.Dataset, column: str, split: str) -> None:
    feature = dataset.features[column]
    if not (isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string")):
        kind = feature.dtype if isinstance(feature, datasets.Value) else type(feature).__name__
        raise ScriptError(
            f"column {column!r} of the {split} data holds {kind} values, not text: point --text_column_name (or "
            "--text_pair_column_name) at a column of text."
        )
    empty = [row for row, text in enumerate(dataset[column]) if text is None or not text.strip()]
    if empty:
        raise ScriptError(
            f"{len(empty)} rows of the {split} data have an empty {column!r} (the first is data row {empty[0] + 1} "
            "of the file): remove them or fill them in."
        )


def infer_problem_type(feature: datasets.features.features.FeatureType) -> str:
    """A list of labels is multi-label, a float is regression, anything else (names, ids) single-label."""
    if isinstance(feature, (datasets.List, datasets.Sequence)):
        return MULTI_LABEL
    if isinstance(feature, datasets.Value) and feature.dtype.startswith("float"):
        return REGRESSION
    return SINGLE_LABEL


def sorted_label_names(values: set) -> list[str]:
    """Label names in a stable order: numerically for ids, alphabetically for names."""
    if all(isinstance(value, int) for value in values):
        return [str(value) for value in sorted(values)]
    return sorted(str(value) for value in values)


def labels_of(dataset: datasets.Dataset, column: str, problem_type: str) -> set:
    values = dataset[column]
    if problem_type == MULTI_LABEL:
        if not all(isinstance(value, list) for value in values):
            raise ScriptError(f"multi-label data needs a list of labels in every row of {column!r}.")
        return {label for value in values for label in value}
    return set(values)


def build_label_maps(
    raw_datasets: datasets.DatasetDict, data_args: DataArguments, model_args: ModelArguments
) -> LabelInfo:
    """
    The task and its labels: from the training data when training, else from the fine-tuned checkpoint. The labels
    of the other splits must all be known.
    """
    if "train" in raw_datasets:
        label_info = label_info_from_data(raw_datasets["train"], data_args)
    else:
        label_info = label_info_from_checkpoint(model_args)
    column = data_args.label_column_name
    for split, dataset in raw_datasets.items():
        if column not in dataset.column_names:
            continue
        if label_info.problem_type == REGRESSION:
            if not all(isinstance(value, (int, float)) for value in dataset[column]):
                raise ScriptError(f"regression needs a number in every row of {column!r} ({split} data).")
            continue
        unseen = {str(label) for label in labels_of(dataset, column, label_info.problem_type)} - set(
            label_info.label_names
        )
        if unseen:
            raise ScriptError(
                f"the {split} data has labels never seen in training: {', '.join(sorted(unseen)[:10])}. "
                "Add examples of them to the training data or remove those rows."
            )
    return label_info


def label_info_from_data(train_dataset: datasets.Dataset, data_args: DataArguments) -> LabelInfo:
    """The problem type (`--problem_type` or inferred from the labels) and the sorted label names of training."""
    column = data_args.label_column_name
    problem_type = data_args.problem_type
    if problem_type == "auto":
        problem_type = infer_problem_type(train_dataset.features[column])
        check_not_whole_floats(train_dataset[column], column, problem_type)
    if problem_type == REGRESSION:
        return LabelInfo(REGRESSION, [])
    label_names = sorted_label_names(labels_of(train_dataset, column, problem_type))
    if problem_type == SINGLE_LABEL and len(label_names) < 2:
        raise ScriptError(
            f"the training data has one class only ({label_names[0]!r} is the label of every example): a classifier "
            "needs examples of at least two classes; add examples of another class."
        )
    if not label_names:
        raise ScriptError(f"no training example has a label in {column!r}: every list of labels is empty.")
    return LabelInfo(problem_type, label_names)


def check_not_whole_floats(labels: Sequence[Any], column: str, problem_type: str) -> None:
    """
    Refuse to guess the task from labels that are all whole numbers written as floats (0.0, 1.0): class ids saved
    by pandas or numpy look so as often as scores do, and regression on classes trains silently.
    """
    if problem_type == REGRESSION and all(float(label).is_integer() for label in labels):
        values = sorted(set(labels))
        examples = ", ".join(map(str, values[:3])) + (", ..." if len(values) > 3 else "")
        raise ScriptError(
            f"the labels in column {column!r} are whole numbers written as floats ({examples}), which may be "
            "class ids or scores: say which with --problem_type single_label_classification (classes) or "
            "--problem_type regression (scores)."
        )


def label_info_from_checkpoint(model_args: ModelArguments) -> LabelInfo:
    """The labels of a fine-tuned classifier, for --do_eval / --do_predict without --do_train."""
    if model_args.model_name_or_path is None:
        raise ScriptError("without --do_train, give the fine-tuned model to evaluate with --model_name_or_path.")
    config = build_config(model_args)
    if config.problem_type is None:
        raise ScriptError(
            f"{model_args.model_name_or_path} is not a classifier fine-tuned by this script (its config names no "
            "problem_type): add --do_train and a --train_file."
        )
    if config.problem_type == REGRESSION:
        return LabelInfo(REGRESSION, [])
    return LabelInfo(config.problem_type, [config.id2label[index] for index in range(config.num_labels)])


def build_tokenizer_and_model(
    model_args: ModelArguments, label_info: LabelInfo, data_args: DataArguments
) -> tuple[PreTrainedTokenizerBase, RoFormerForSequenceClassification]:
    """The tokenizer, and the classifier with its label maps (a new head on a pretrained encoder, or from scratch)."""
    tokenizer = build_tokenizer(model_args)
    label_config: dict[str, Any] = {"num_labels": label_info.num_labels, "problem_type": label_info.problem_type}
    if label_info.label_names:
        label_config["id2label"] = dict(enumerate(label_info.label_names))
        label_config["label2id"] = label_info.label2id
    if model_args.model_name_or_path is None:
        label_config.update(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    else:
        check_label_change(model_args, label_info)
    config = build_config(model_args, **label_config)
    if len(tokenizer) > config.vocab_size:
        raise ScriptError(
            f"the tokenizer has {len(tokenizer)} tokens but the model only {config.vocab_size} embeddings: use the "
            "checkpoint's own tokenizer (leave out --tokenizer_name) or a larger vocab_size."
        )
    return tokenizer, build_model(model_args, config, RoFormerForSequenceClassification)


def check_label_change(model_args: ModelArguments, label_info: LabelInfo) -> None:
    """
    A classifier fine-tuned on other labels than the data's: its head has another shape, so it is refused, or with
    `--ignore_mismatched_sizes` started afresh for the new labels, with a warning naming both label sets. (A head of
    as many labels is fine-tuned as it is: the label names are the data's.)
    """
    saved = build_config(model_args)
    if saved.problem_type is None or saved.num_labels == label_info.num_labels:
        return  # a pretrained encoder (no head yet), or a head of the right shape
    old = describe_labels(saved.problem_type, [saved.id2label[index] for index in range(saved.num_labels)])
    new = describe_labels(label_info.problem_type, label_info.label_names)
    if not model_args.ignore_mismatched_sizes:
        raise ScriptError(
            f"--model_name_or_path {model_args.model_name_or_path} is a classifier of {old}, but the data has {new}: "
            "add --ignore_mismatched_sizes to start a new classification head for these labels (the encoder is "
            "kept), or give data of the checkpoint's labels."
        )
    logger.warning(
        f"the classification head of {model_args.model_name_or_path} ({old}) is started afresh for {new} "
        "(--ignore_mismatched_sizes); the encoder is kept."
    )


def describe_labels(problem_type: str, label_names: list[str]) -> str:
    if problem_type == REGRESSION:
        return "scores (regression)"
    return f"{len(label_names)} labels ({', '.join(label_names)})"


def resolve_input_settings(
    data_args: DataArguments, model: RoFormerForSequenceClassification, model_name: str | None, training: bool
) -> DataArguments:
    """
    The input settings (`INPUT_SETTINGS`) of this run: those the command line gives, else those the checkpoint was
    fine-tuned with (its config's `classification_inputs`), else the defaults of `DataArguments`. They are written
    into `model.config.classification_inputs`, so the saved classifier remembers how it read its documents.
    """
    saved = model.config.classification_inputs or {}
    settings = {}
    for name in INPUT_SETTINGS:
        given, trained_with = getattr(data_args, name), saved.get(name)
        if given is not None and trained_with is not None and given != trained_with:
            logger.warning(
                f"--{name} {given} differs from the {trained_with} that {model_name} was fine-tuned with: documents "
                f"are read differently than in training, which can change the results (leave out --{name} to use "
                f"{trained_with})."
            )
        settings[name] = next(value for value in (given, trained_with, DATA_DEFAULTS[name]) if value is not None)
    if not training and not saved and any(getattr(data_args, name) is None for name in INPUT_SETTINGS):
        logger.warning(
            f"{model_name} does not record how it read documents when fine-tuned (max_seq_length, truncation_side, "
            "long_doc_strategy): using the options given and the defaults for the others."
        )
    try:
        data_args = replace(data_args, **settings)
    except ValueError as error:  # DataArguments' own checks, now that every setting is known
        raise ScriptError(f"invalid arguments: {error}") from error
    model.config.classification_inputs = settings
    if data_args.max_seq_length > model.config.max_position_embeddings:
        logger.info(
            f"max_seq_length {data_args.max_seq_length} exceeds max_position_embeddings "
            f"{model.config.max_position_embeddings}: fine for RoPE, which has no length cap."
        )
    return data_args


def encode_label(value: Any, label_info: LabelInfo) -> int | float | list[float]:
    """The training target of one example: a class id, a multi-hot vector or a float."""
    if label_info.problem_type == REGRESSION:
        return float(value)
    if label_info.problem_type == MULTI_LABEL:
        on = {str(label) for label in value}
        return [1.0 if name in on else 0.0 for name in label_info.label_names]
    return label_info.label2id[str(value)]


def tokenize_texts(tokenizer: PreTrainedTokenizerBase, texts: list[str]) -> list[list[int]]:
    """Token ids of whole texts, without special tokens and without truncation."""
    return tokenizer(
        texts, add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False, verbose=False
    )["input_ids"]


def encode_batch(
    batch: dict[str, list],
    indices: list[int],
    tokenizer: PreTrainedTokenizerBase,
    label_info: LabelInfo,
    data_args: DataArguments,
) -> dict[str, list]:
    """
    Turn documents into model inputs: one truncated input per document, or (chunk strategy) one input per window.
    Every input keeps the index of its document in `document_index`, and its length in `length` (group_by_length).
    """
    first_texts = tokenize_texts(tokenizer, batch[data_args.text_column_name])
    pair_column = data_args.text_pair_column_name
    second_texts = tokenize_texts(tokenizer, batch[pair_column]) if pair_column else [None] * len(first_texts)
    body_length = data_args.max_seq_length - (3 if pair_column else 2)
    labels = batch.get(data_args.label_column_name)
    features: dict[str, list] = {"input_ids": [], "token_type_ids": [], "attention_mask": [], "document_index": []}
    features.update({"length": [], **({"labels": []} if labels is not None else {})})
    for position, (first_ids, second_ids) in enumerate(zip(first_texts, second_texts, strict=True)):
        if data_args.long_doc_strategy == "chunk":
            parts = [(window, None) for window in split_into_windows(first_ids, body_length, data_args.chunk_stride)]
        elif second_ids is not None:
            parts = [truncate_pair(first_ids, second_ids, body_length, data_args.truncation_side)]
        else:
            parts = [(truncate_token_ids(first_ids, body_length, data_args.truncation_side), None)]
        for first_part, second_part in parts:
            encoded = add_special_tokens(first_part, second_part, tokenizer.cls_token_id, tokenizer.sep_token_id)
            features["input_ids"].append(encoded["input_ids"])
            features["token_type_ids"].append(encoded["token_type_ids"])
            features["attention_mask"].append([1] * len(encoded["input_ids"]))
            features["document_index"].append(indices[position])
            features["length"].append(len(encoded["input_ids"]))
            if labels is not None:
                features["labels"].append(encode_label(labels[position], label_info))
    return features


def preprocess(
    raw_datasets: datasets.DatasetDict,
    tokenizer: PreTrainedTokenizerBase,
    label_info: LabelInfo,
    data_args: DataArguments,
    training_args: TrainingArguments,
) -> datasets.DatasetDict:
    """Tokenize every split (see `encode_batch`); the raw columns are dropped."""
    tokenized = datasets.DatasetDict()
    for split, dataset in raw_datasets.items():
        with training_args.main_process_first(desc=f"tokenizing the {split} data"):
            tokenized[split] = dataset.map(
                encode_batch,
                batched=True,
                with_indices=True,
                remove_columns=dataset.column_names,
                num_proc=data_args.preprocessing_num_workers,
                fn_kwargs={"tokenizer": tokenizer, "label_info": label_info, "data_args": data_args},
                desc=f"tokenizing the {split} data",
            )
        logger.info(f"{split}: {len(dataset)} documents -> {len(tokenized[split])} model inputs")
    return tokenized


class InputOrderTrainer(Trainer):
    """
    A `Trainer` that evaluates and predicts in input order. Under `--train_sampling_strategy group_by_length`,
    transformers groups evaluation batches by length as well; window logits must stay in input order to be pooled
    per document, and predictions.jsonl must follow the test file.

    Its log names the validation split's pass "Evaluation on the validation data": `run_inference` runs it through
    `Trainer.predict`, which would call it "Prediction".
    """

    def evaluation_loop(self, dataloader, description: str, *args, metric_key_prefix: str = "eval", **kwargs):
        if description == "Prediction" and metric_key_prefix == "eval":
            description = "Evaluation on the validation data"
        return super().evaluation_loop(dataloader, description, *args, metric_key_prefix=metric_key_prefix, **kwargs)

    def _get_eval_sampler(self, eval_dataset: torch.utils.data.Dataset) -> torch.utils.data.Sampler | None:
        if eval_dataset is None or self.args.world_size > 1:
            return super()._get_eval_sampler(eval_dataset)
        return SequentialSampler(eval_dataset)


def make_compute_metrics(label_info: LabelInfo, document_ids: Sequence[int] | None, pooling: str):
    """The Trainer's `compute_metrics` for one evaluation split: pools window logits per document first."""

    def compute_metrics(prediction: EvalPrediction) -> dict[str, float]:
        logits, labels = prediction.predictions, prediction.label_ids
        if document_ids is not None:
            logits = pool_chunk_logits(logits, document_ids, pooling)
            labels = first_per_document(labels, document_ids)
        return compute_task_metrics(logits, labels, label_info.problem_type)

    return compute_metrics


def build_trainer(
    model: RoFormerForSequenceClassification,
    tokenizer: PreTrainedTokenizerBase,
    tokenized: datasets.DatasetDict,
    label_info: LabelInfo,
    data_args: DataArguments,
    training_args: TrainingArguments,
) -> Trainer:
    """A Trainer with dynamic padding, document-level metrics and, if asked, early stopping."""
    mixed_precision = training_args.fp16 or training_args.bf16
    eval_dataset = tokenized.get("validation")
    chunked = data_args.long_doc_strategy == "chunk"
    document_ids = list(eval_dataset["document_index"]) if chunked and eval_dataset is not None else None
    callbacks = []
    if data_args.early_stopping_patience is not None:
        callbacks.append(EarlyStoppingCallback(early_stopping_patience=data_args.early_stopping_patience))
    return InputOrderTrainer(
        model=model,
        args=training_args,
        train_dataset=tokenized.get("train"),
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8 if mixed_precision else None),
        compute_metrics=make_compute_metrics(label_info, document_ids, data_args.chunk_pooling),
        callbacks=[*callbacks, StopAtStepBoundary()],
    )


def run_inference(
    trainer: Trainer, dataset: datasets.Dataset, label_info: LabelInfo, data_args: DataArguments, prefix: str
) -> tuple[np.ndarray, np.ndarray | None, dict[str, float]]:
    """
    Document logits of one split (window logits pooled under the chunk strategy), the document labels (None when
    the split has none) and the split's metrics, named `{prefix}_...`.
    """
    metrics_of_eval_split, trainer.compute_metrics = trainer.compute_metrics, None  # its windows differ from these
    try:
        output = trainer.predict(dataset, metric_key_prefix=prefix)
    finally:
        trainer.compute_metrics = metrics_of_eval_split
    document_ids = list(dataset["document_index"])
    logits, labels = output.predictions, output.label_ids
    if data_args.long_doc_strategy == "chunk":
        logits = pool_chunk_logits(logits, document_ids, data_args.chunk_pooling)
        labels = first_per_document(labels, document_ids) if labels is not None else None
    metrics = {**output.metrics, f"{prefix}_samples": len(logits)}
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
        path = Path(trainer.args.output_dir) / f"confusion_matrix_{split}.png"
        save_confusion_matrix(labels, np.argmax(logits, axis=-1), label_info.label_names, path)
        print(accuracy_against_chance(labels, np.argmax(logits, axis=-1), split))


SPLIT_NAMES = {"eval": "validation", "test": "test"}


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


def train_and_evaluate(
    trainer: Trainer, tokenized: datasets.DatasetDict, label_info: LabelInfo, data_args: DataArguments
) -> dict[str, float]:
    """Train (resuming if asked), save the model, then evaluate on the validation data."""
    args, metrics = trainer.args, {}
    if args.do_train:
        checkpoint = find_resume_checkpoint(args)
        settings = classification_run_settings(data_args, args)
        if checkpoint is not None:
            check_resume(checkpoint, trainer.model, trainer.processing_class, settings)
        record_run_settings(trainer, settings)
        result = trainer.train(resume_from_checkpoint=checkpoint)
        raise_if_stopped(trainer)
        save_model_atomically(trainer)
        metrics.update({**result.metrics, "train_samples": len(set(tokenized["train"]["document_index"]))})
        trainer.log_metrics("train", result.metrics)
        save_metrics(trainer, "train", result.metrics)
        save_state(trainer)
    if args.do_eval:
        logits, labels, eval_metrics = run_inference(trainer, tokenized["validation"], label_info, data_args, "eval")
        report_split(trainer, logits, labels, eval_metrics, label_info, "eval")
        metrics.update(eval_metrics)
    return metrics


def classification_run_settings(data_args: DataArguments, training_args: TrainingArguments) -> dict[str, Any]:
    """The settings a checkpoint of this run records, and a resume must repeat (`training.resume`)."""
    inputs = {name: getattr(data_args, name) for name in INPUT_SETTINGS}
    return run_settings(training_args, train_file=absolute_path(data_args.train_file), **inputs)


def prediction_records(
    logits: np.ndarray,
    label_info: LabelInfo,
    ids: Sequence[Any] | None = None,
    gold_labels: Sequence[Any] | None = None,
) -> list[dict[str, Any]]:
    """
    One record per document: its `id`, the `prediction` (a label name; a list of names for multi-label; the value
    for regression), for classification the probability of every label in `scores`, and the gold `label` when the
    data has one.

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
            record["scores"] = dict(zip(label_info.label_names, map(float, document_scores), strict=True))
        if gold_labels is not None:
            record["label"] = gold_labels[row]
        records.append(record)
    return records


def predicted_labels(scores: np.ndarray, label_info: LabelInfo) -> str | list[str]:
    """The label of highest probability, or for multi-label every label whose probability is above 0.5."""
    if label_info.problem_type == MULTI_LABEL:
        return [name for name, score in zip(label_info.label_names, scores, strict=True) if score > 0.5]
    return label_info.label_names[int(np.argmax(scores))]


def predictions_path(training_args: TrainingArguments) -> Path:
    """Where `--do_predict` writes its predictions."""
    return Path(training_args.output_dir) / "predictions.jsonl"


def predict(
    trainer: Trainer,
    tokenized: datasets.DatasetDict,
    test_rows: datasets.Dataset,
    label_info: LabelInfo,
    data_args: DataArguments,
) -> dict[str, float]:
    """
    Write predictions.jsonl (one line per test document, in file order, with the document's `id` column or its row
    number); metrics when the test data has labels.
    """
    logits, labels, metrics = run_inference(trainer, tokenized["test"], label_info, data_args, "test")
    if trainer.is_world_process_zero():
        ids = test_rows["id"] if "id" in test_rows.column_names else None
        has_labels = data_args.label_column_name in test_rows.column_names
        gold_labels = test_rows[data_args.label_column_name] if has_labels else None
        path = predictions_path(trainer.args)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as temporary, temporary.open("w", encoding="utf-8") as file:
            for record in prediction_records(logits, label_info, ids, gold_labels):
                file.write(json.dumps(record, ensure_ascii=False) + "\n")
    report_split(trainer, logits, labels, metrics, label_info, "test")
    return metrics


def write_card_and_push(
    trainer: Trainer,
    model_args: ModelArguments,
    data_args: DataArguments,
    metrics: dict[str, float],
    argv: Sequence[str] | None = None,
) -> None:
    """Write the model card of the fine-tuned model and, with --push_to_hub, upload model, tokenizer and card."""
    from roformer_hf.model_card import TrainingSummary, write_model_card

    args = trainer.args
    summary = TrainingSummary.from_trainer(
        trainer,
        script="run_classification.py",
        task=f"text classification ({trainer.model.config.problem_type})",
        datasets=[data_args.train_file],
        results={name: value for name, value in metrics.items() if name.startswith("eval_")},
        trained_lengths=[data_args.max_seq_length],
        hyperparameters={
            "max_seq_length": data_args.max_seq_length,
            "truncation_side": data_args.truncation_side,
            "long_doc_strategy": data_args.long_doc_strategy,
        },
        command=command_line(__file__, argv),
    )
    if trainer.is_world_process_zero():
        write_model_card(args.output_dir, config=trainer.model.config, training_summary=summary)
    if args.push_to_hub:
        repo_id = args.hub_model_id or Path(args.output_dir).name
        trainer.model.push_to_hub(repo_id, training_summary=summary, base_model=model_args.model_name_or_path)
        trainer.processing_class.push_to_hub(repo_id)


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Run the script; returns the metrics (train, eval, test) it logged."""
    model_args, data_args, training_args = parse_args(argv)
    setup_logging(training_args)
    check_distributed_launch(training_args)
    with guard_run(
        training_args, "run_classification.py", demo_or_given_arguments(argv, DEFAULT_ARGV, announce=False)
    ):
        if training_args.do_train:
            check_output_dir(training_args)
        set_seed(training_args.seed)
        raw_datasets = load_raw_datasets(data_args, training_args)
        label_info = build_label_maps(raw_datasets, data_args, model_args)
        tokenizer, model = build_tokenizer_and_model(model_args, label_info, data_args)
        data_args = resolve_input_settings(data_args, model, model_args.model_name_or_path, training_args.do_train)
        if training_args.do_train:  # the saved tokenizer's truncation=True cuts to the length fine-tuned with
            tokenizer.model_max_length = data_args.max_seq_length
        tokenized = preprocess(raw_datasets, tokenizer, label_info, data_args, training_args)
        trainer = build_trainer(model, tokenizer, tokenized, label_info, data_args, training_args)
        if training_args.do_train:
            prepare_output_dir(training_args, model)
        metrics = train_and_evaluate(trainer, tokenized, label_info, data_args)
        if training_args.do_predict:
            metrics.update(predict(trainer, tokenized, raw_datasets["test"], label_info, data_args))
        if training_args.do_train:
            write_card_and_push(trainer, model_args, data_args, metrics, argv)
    if training_args.do_train and trainer.is_world_process_zero():
        print(loading_instructions(training_args.output_dir, RoFormerForSequenceClassification))
    if training_args.do_predict and trainer.is_world_process_zero():
        print(f"predictions written to {predictions_path(training_args)} (a JSON line per test document)")
    return metrics


if __name__ == "__main__":
    run_script(main)
