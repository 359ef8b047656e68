"""
The labels of run_classification.py: the checks of a label column, the problem type inferred from it, the label
maps taken from the training data or from a fine-tuned checkpoint, and the training target of one label.
"""

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import datasets

from ...configuration import RoFormerConfig
from ..building import build_config, parse_config_overrides
from ..cli import ModelArguments
from ..errors import ScriptError

logger = logging.getLogger(__name__)

SINGLE_LABEL, MULTI_LABEL, REGRESSION = "single_label_classification", "multi_label_classification", "regression"
# --problem_type: one of transformers' problem types, or INFERRED, taken from the training labels (`label_info_from_data`)
INFERRED = "auto"
PROBLEM_TYPES = (INFERRED, SINGLE_LABEL, MULTI_LABEL, REGRESSION)


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

    @classmethod
    def of_config(cls, config: Any) -> "LabelInfo":
        """The task a classifier's config holds (its problem type, and its label names but for regression)."""
        if config.problem_type == REGRESSION:
            return cls(REGRESSION, [])
        return cls(config.problem_type, [str(config.id2label[index]) for index in range(config.num_labels)])

    def described(self) -> str:
        """The labels in words, for messages (`describe_labels`)."""
        return describe_labels(self.problem_type, self.label_names)

    def config_fields(self) -> dict[str, Any]:
        """What the classifier's config says of the task: the number of labels, the problem type, the label maps."""
        fields: dict[str, Any] = {"num_labels": self.num_labels, "problem_type": self.problem_type}
        if self.label_names:
            fields.update(id2label=dict(enumerate(self.label_names)), label2id=self.label2id)
        return fields


# --- Reading and checking a label column ---


def parse_number(text: str | None) -> int | float | None:
    """The number a CSV cell holds (an int when written without a point), or `None` for a name or an empty cell."""
    for kind in (int, float):
        try:
            return kind(text)
        except (TypeError, ValueError):
            continue
    return None


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


def check_label_column(dataset: datasets.Dataset, column: str, split: str, source: str) -> None:
    """
    Every row of a split has a label, all labels are of one kind, and no number is NaN or infinite; `source` names
    the split's file for error messages (`--train_file data/train.jsonl`).
    """
    missing = [row for row, label in enumerate(dataset[column]) if label is None]
    if missing:
        raise ScriptError(
            f"{len(missing)} rows of the {split} data have no {column!r} (the first is data row {missing[0] + 1} of "
            "the file): label them or remove them."
        )
    check_label_kinds(dataset[column], column, split)
    check_finite_labels(dataset[column], column, source)
    check_label_values(dataset[column], column, source)


def check_finite_labels(labels: Sequence[Any], column: str, source: str) -> None:
    """Refuse a NaN or infinite label (JSON reads NaN and Infinity): a regression on it trains a model of NaNs."""
    for row, label in enumerate(labels):
        for value in label if isinstance(label, list) else [label]:
            if isinstance(value, float) and not math.isfinite(value):
                raise ScriptError(
                    f"{source}: data row {row + 1} has the label {value} in column {column!r}, which is not a finite "
                    "number: give every row a finite number, or remove the row."
                )


# A 0/1 vector per row (multi-hot, as scikit-learn's MultiLabelBinarizer writes it) would be read as label names.
MULTI_HOT_HINT = (
    "a 0/1 vector per row, such as [1, 0, 1], is not read: list the ids of the labels that apply, e.g. [0, 2]"
)


def label_value_problem(label: Any) -> str | None:
    """What makes one row's label unusable, with the fix, in words; `None` for a name, an id, a number, or a flat
    list of distinct names or ids."""
    if isinstance(label, dict):
        return "an object: a label is a name, an id, a list of them (multi-label) or a number (regression)"
    if isinstance(label, str) and not label.strip():
        return "an empty label: label the row or remove it"
    if not isinstance(label, list):
        return None
    if any(isinstance(item, (list, dict)) for item in label):
        return 'a list inside the list: a multi-label row is one flat list of label names or ids, e.g. ["a", "b"]'
    if any(item is None or (isinstance(item, str) and not item.strip()) for item in label):
        return "an empty label in the list: list only the labels of the row (an empty list for none)"
    if any(isinstance(item, float) for item in label):
        return f"numbers with a point in the list: a multi-label row lists label names or ids ({MULTI_HOT_HINT})"
    if len({str(item) for item in label}) < len(label):
        return f"a label twice in the list: list each label of the row once ({MULTI_HOT_HINT})"
    return None


def check_label_values(labels: Sequence[Any], column: str, source: str) -> None:
    """
    Refuse a label that is no label: an object, an empty name, or a multi-label list that holds lists, empty labels,
    floats or a label twice (a 0/1 vector would silently become the two classes "0" and "1"); and lists mixing names
    and ids (1 and "civil" would become two classes).
    """
    for row, label in enumerate(labels):
        problem = label_value_problem(label)
        if problem is not None:
            raise ScriptError(
                f"{source}: data row {row + 1} holds the label {label!r} in column {column!r}, {problem}."
            )
    items = [(row, item) for row, label in enumerate(labels) if isinstance(label, list) for item in label]
    mixed = first_of_two_kinds([item for _, item in items])
    if mixed is not None:
        rows, labels_of_rows = [items[position][0] for position in mixed], [items[position][1] for position in mixed]
        raise mixed_kinds_error(labels_of_rows, rows, column, f"{source} (inside the lists)")


# --- The kinds of labels, and the message for each pair of kinds that cannot meet ---

# What a ClassLabel declares (`label_kind` of a feature): class names, stored as their ids.
CLASS_NAMES = "class names"


def label_kind(labels: Any) -> str:
    """
    What kind of labels something holds, in words: of a value, a list, an object, a true/false value, a number or a
    name; of a `datasets` feature (a column's schema), class names (a `ClassLabel`), lists, integers, numbers or
    names.
    """
    if isinstance(labels, (datasets.List, datasets.Sequence)):
        return "lists"
    if isinstance(labels, datasets.ClassLabel):
        return CLASS_NAMES
    if isinstance(labels, datasets.Value):
        if labels.dtype.startswith(("int", "uint")):
            return "integers"
        return "numbers" if labels.dtype.startswith("float") else "names"
    if isinstance(labels, list):
        return "lists"
    if isinstance(labels, dict):
        return "objects"
    if isinstance(labels, bool):
        return "true/false values"
    return "numbers" if isinstance(labels, (int, float)) else "names"


# (what the task or the training data's schema expects, the kind found) -> the message; a pair not listed can meet.
# Placeholders: where (the rows, with their file), column, value (the first label of that kind), split, names.
MULTI_LABEL_GOT_ONE = (
    "{where} holds the label {value!r} in column {column!r}, but the task is multi-label: write every label as a list "
    "of labels (e.g. [{value!r}])."
)
REGRESSION_GOT_OTHER = (
    "{where} holds {value!r} in column {column!r}, but the task is regression: give a number in every row."
)
KIND_CONFLICTS = {
    **{(MULTI_LABEL, kind): MULTI_LABEL_GOT_ONE for kind in ("names", "numbers", "true/false values", "objects")},
    (SINGLE_LABEL, "lists"): (
        "{where} holds the list of labels {value!r} in column {column!r}, but the task is single-label: give one "
        "label a row (or train a multi-label classifier on lists of labels)."
    ),
    **{(REGRESSION, kind): REGRESSION_GOT_OTHER for kind in ("names", "lists", "objects")},
    (CLASS_NAMES, "integers"): (
        "{where} holds integer labels in column {column!r}, but the training data's ClassLabel names its classes "
        "({names}): write the {split} labels as those names, or save the split with the training data's ClassLabel "
        "(cast_column)."
    ),
}


def refuse_kind_conflict(expected: str, labels: Sequence[Any], **words: Any) -> None:
    """Refuse the first of `labels` (values, or a column's feature) whose kind cannot meet `expected` (a problem type,
    or `CLASS_NAMES`), in the words of its `KIND_CONFLICTS` row; `words` fill the row's placeholders."""
    for value in labels:
        message = KIND_CONFLICTS.get((expected, label_kind(value)))
        if message is not None:
            raise ScriptError(message.format(value=value, **words))


def check_label_kinds(labels: Sequence[Any], column: str, split: str) -> None:
    """
    Refuse a label column that mixes kinds: names with lists (single- and multi-label) cannot be one task, and ids
    with names (`1` and `"civil"`) would silently become classes named "1" and "civil".
    """
    mixed = first_of_two_kinds(labels)
    if mixed is not None:
        raise mixed_kinds_error([labels[position] for position in mixed], mixed, column, f"the {split} data")


def first_of_two_kinds(labels: Sequence[Any]) -> tuple[int, int] | None:
    """The positions of the first label of the first two kinds (`label_kind`) in `labels`; `None` for one kind."""
    first_of_kind: dict[str, int] = {}
    for position, label in enumerate(labels):
        first_of_kind.setdefault(label_kind(label), position)
        if len(first_of_kind) > 1:
            return tuple(first_of_kind.values())
    return None


def mixed_kinds_error(labels: Sequence[Any], rows: Sequence[int], column: str, where: str) -> ScriptError:
    """The error for two `labels` of different kinds, of data rows `rows` (0-based) of `where` (`"the train data"`)."""
    (label_a, label_b), (row_a, row_b) = labels, rows
    if row_a == row_b:
        example = f"data row {row_a + 1} holds both {label_a!r} and {label_b!r}"
    else:
        example = f"data row {row_a + 1} holds {label_a!r}, data row {row_b + 1} holds {label_b!r}"
    return ScriptError(
        f"the labels in column {column!r} of {where} mix {label_kind(label_a)} and {label_kind(label_b)} ({example}): "
        "write every label the same way: all names, all ids, or all lists of them (multi-label)."
    )


# --- Labels a dataset's schema names (ClassLabel) ---


def class_label_names(feature: datasets.features.features.FeatureType | None) -> list[str] | None:
    """The class names a `ClassLabel` feature (or a list of them: multi-label) declares, in id order; `None` for a
    feature of another kind (names, ids or numbers written as they are)."""
    inner = feature.feature if isinstance(feature, (datasets.List, datasets.Sequence)) else feature
    return list(inner.names) if isinstance(inner, datasets.ClassLabel) else None


def check_ids_without_schema(
    raw_datasets: datasets.DatasetDict, column: str, declared_names: list[str] | None, sources: dict[str, str]
) -> None:
    """
    Refuse a split whose labels are plain integers beside a training split whose `ClassLabel` declares the names:
    those integers are ids of no declared schema, and read as names they would silently be other classes (with names
    "1", "0", the id 0 is the class "1").
    """
    if not declared_names:
        return
    for split, dataset in raw_datasets.items():
        feature = dataset.features.get(column) if split != "train" and dataset.features else None
        inner = feature.feature if isinstance(feature, (datasets.List, datasets.Sequence)) else feature
        where = f"the {split} data ({sources.get(split, split)})"
        words = {"where": where, "column": column, "split": split, "names": shortened(declared_names)}
        refuse_kind_conflict(CLASS_NAMES, [inner] if inner is not None else [], **words)


def labels_as_names(dataset: datasets.Dataset, column: str) -> datasets.Dataset:
    """
    A `ClassLabel` column (multi-label: a list of them) as the names it declares, so that the config's `id2label`,
    the predictions and the card all say the names the dataset gives, not the ids `datasets` stores. `-1`, the
    `ClassLabel`'s "no label", becomes a missing label (refused where labels are needed); a split without any label
    (the test split of many Hub datasets) loses the column. A column of another kind is returned as it is.
    """
    feature = dataset.features.get(column) if dataset.features else None
    if class_label_names(feature) is None:
        return dataset
    inner = feature.feature if isinstance(feature, (datasets.List, datasets.Sequence)) else feature

    def name(label_id: int | None) -> str | None:
        return None if label_id is None or label_id < 0 else inner.int2str(label_id)

    values = dataset[column]
    if all(value is None or (not isinstance(value, list) and value < 0) for value in values):
        return dataset.remove_columns(column)
    names = [[name(item) for item in value] if isinstance(value, list) else name(value) for value in values]
    return dataset.remove_columns(column).add_column(column, names)


# --- The task and its label maps ---


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


def labels_of(dataset: datasets.Dataset, column: str, problem_type: str, where: str = "the data") -> set:
    """Every label that occurs in `column` (for multi-label: in any of its lists); a row of the other task's kind (a
    list for single-label, a name for multi-label) is refused, naming `where` the rows come from."""
    values = dataset[column]
    refuse_kind_conflict(problem_type, values, where=where, column=column)
    return {label for value in values for label in value} if problem_type == MULTI_LABEL else set(values)


def build_label_maps(
    raw_datasets: datasets.DatasetDict,
    column: str,
    problem_type: str,
    model_args: ModelArguments,
    sources: dict[str, str] | None = None,
    declared_names: list[str] | None = None,
) -> LabelInfo:
    """
    The task and its labels: from the training data when training, else from the fine-tuned checkpoint. The labels
    of the other splits must all be known.

    Args:
        raw_datasets (`datasets.DatasetDict`): the splits of the run, as read from their files.
        column (`str`): the label column (`--label_column_name`).
        problem_type (`str`): `--problem_type`, `"auto"` to infer it from the training labels.
        model_args (`ModelArguments`): where the fine-tuned checkpoint is, when there is no training data.
        sources (`dict`, *optional*): where each split's rows come from, for messages
            (`{"test": "--test_file test.jsonl"}`).
        declared_names (`list[str]`, *optional*): the class names the training data's schema declares (a
            `ClassLabel`: `class_label_names`), in their order, every one kept, even a class no training row has.
    """
    if "train" in raw_datasets:
        train_labels = label_info_from_data(raw_datasets["train"], column, problem_type, declared_names)
        label_info, known_from = in_checkpoint_order(train_labels, model_args), None
    else:
        label_info, known_from = label_info_from_checkpoint(model_args), model_args.model_name_or_path
    for split, dataset in raw_datasets.items():
        if column in dataset.column_names:
            where = f"the {split} data" + (f" ({sources[split]})" if sources and split in sources else "")
            check_known_labels(dataset, column, where, label_info, known_from)
    return label_info


def in_checkpoint_order(label_info: LabelInfo, model_args: ModelArguments | None) -> LabelInfo:
    """
    The data's labels in the order of the classifier fine-tuned further (`--model_name_or_path`) where it knows the
    same names in another order: each row of its head stays the class it learned (by name), where the data's order
    (a ClassLabel's, or sorted) would silently swap them. Other labels are the data's as they are.
    """
    if model_args is None or model_args.model_name_or_path is None or label_info.problem_type == REGRESSION:
        return label_info
    saved = build_config(model_args)
    if saved.problem_type != label_info.problem_type or saved.num_labels != label_info.num_labels:
        return label_info
    saved_names = LabelInfo.of_config(saved).label_names
    if saved_names == label_info.label_names or sorted(saved_names) != sorted(label_info.label_names):
        return label_info
    logger.info(
        f"the labels keep the order of {model_args.model_name_or_path}'s head ({', '.join(saved_names)}), not the "
        f"data's ({', '.join(label_info.label_names)}): each head row stays the class it was fine-tuned on."
    )
    return LabelInfo(label_info.problem_type, saved_names)


def check_known_labels(
    dataset: datasets.Dataset, column: str, where: str, label_info: LabelInfo, checkpoint: str | None = None
) -> None:
    """
    A number in every row for regression; else only labels of `label_info`, of the task's kind. `where` names the
    rows in messages (`"the test data (--test_file test.jsonl)"`); `checkpoint` the fine-tuned model the labels are
    those of, `None` when they are those of the training data.
    """
    if label_info.problem_type == REGRESSION:
        refuse_kind_conflict(REGRESSION, dataset[column], where=where, column=column)
        return
    labels = labels_of(dataset, column, label_info.problem_type, where)
    unseen = sorted({str(label) for label in labels} - set(label_info.label_names))
    quoted = ", ".join(map(repr, unseen[:10]))  # a trailing space or an invisible character shows
    if unseen and checkpoint is None:
        raise ScriptError(
            f"{where} has labels never seen in training: {quoted}. Add examples of them to the training data or "
            "remove those rows."
        )
    if unseen:
        raise ScriptError(
            f"{where} has labels that {checkpoint} was not fine-tuned on: {quoted} (it knows "
            f"{shortened(label_info.label_names)}): remove those rows, or fine-tune on data with them (--do_train "
            "--train_file ...)."
        )


def label_info_from_data(
    train_dataset: datasets.Dataset, column: str, problem_type: str, declared_names: list[str] | None = None
) -> LabelInfo:
    """The problem type (`--problem_type` or inferred from the labels) and the label names: those the schema
    declares (`declared_names`, in their order), else those of the training rows, sorted."""
    if problem_type == INFERRED:
        problem_type = infer_problem_type(train_dataset.features[column])
        check_not_whole_floats(train_dataset[column], column, problem_type)
    if problem_type == REGRESSION:
        return LabelInfo(REGRESSION, [])
    label_names = sorted_label_names(labels_of(train_dataset, column, problem_type))
    if declared_names:
        label_names = [str(name) for name in declared_names]
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
    return LabelInfo.of_config(config)


# The config fields that say a classifier's task; the data says them (`LabelInfo.config_fields`).
LABEL_FIELDS = ("num_labels", "id2label", "label2id", "problem_type")


def check_overrides_keep_labels(model_args: ModelArguments, label_info: LabelInfo) -> None:
    """
    Refuse, before the config is built, `--config_overrides` of a label field (`num_labels=3`, `label2id.civil=1`,
    `problem_type=regression`) that says other labels than the data's: the labels come from the data, and the head
    would be trained and saved with labels no row has (LABEL_2), or without labels the data has. Keys of a label map
    are set in the data's maps; an override that repeats the data's labels is no contradiction.
    """
    data_fields = label_info.config_fields()
    overrides = parse_config_overrides(model_args.config_overrides, RoFormerConfig(**data_fields))
    changed = {
        key: overrides[key] for key in LABEL_FIELDS if key in overrides and overrides[key] != data_fields.get(key)
    }
    if not changed:
        return
    settings = ", ".join(f"{key} to {json.dumps(value, ensure_ascii=False)}" for key, value in changed.items())
    raise ScriptError(
        f"--config_overrides sets {settings}, but a classifier's labels come from the data, which has "
        f"{label_info.described()}: leave {', '.join(changed)} out of --config_overrides (--problem_type names the "
        "task; the label names are the values of the data's label column: rename them there to name them otherwise)."
    )


def check_label_change(model_args: ModelArguments, label_info: LabelInfo) -> None:
    """
    A classifier fine-tuned on other labels than the data's: its head has another shape, so it is refused, or with
    `--ignore_mismatched_sizes` started afresh for the new labels, with a warning naming both label sets. (A head of
    as many labels is fine-tuned as it is: the label names are the data's.)
    """
    saved = build_config(model_args)
    if saved.problem_type is None or saved.num_labels == label_info.num_labels:
        return  # a pretrained encoder (no head yet), or a head of the right shape
    old, new = LabelInfo.of_config(saved).described(), label_info.described()
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


def shortened(label_names: list[str], shown: int = 10) -> str:
    """Label names for a message: `2 labels ('civil', 'criminal')`, the first `shown` of more (`..., and 9,990
    more`), quoted so that a space or an invisible character in a name shows."""
    more = f", and {len(label_names) - shown:,} more" if len(label_names) > shown else ""
    return f"{len(label_names):,} labels ({', '.join(map(repr, label_names[:shown]))}{more})"


def describe_labels(problem_type: str, label_names: list[str]) -> str:
    """A task's labels in words, for messages: `2 labels ('civil', 'criminal')` (the first 10 of more) or `scores
    (regression)`."""
    if problem_type == REGRESSION:
        return "scores (regression)"
    return shortened(label_names)


def encode_label(value: Any, label_info: LabelInfo) -> int | float | list[float]:
    """The training target of one example: a class id, a multi-hot vector or a float."""
    if label_info.problem_type == REGRESSION:
        return float(value)
    if label_info.problem_type == MULTI_LABEL:
        on = {str(label) for label in value}
        return [1.0 if name in on else 0.0 for name in label_info.label_names]
    return label_info.label2id[str(value)]
