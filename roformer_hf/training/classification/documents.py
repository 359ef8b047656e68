"""The labelled documents of a run_classification.py run: the splits it needs, from their files or `--dataset_name`
(`data.sources.load_splits`), a validation split held out of train where none is given, the checks of their text and
label columns, and the task and its labels (`labels.build_label_maps`)."""

from pathlib import Path
from typing import Any

import datasets
from transformers import TrainingArguments

from ..cli import ModelArguments
from ..data.files import DataFormat, data_format, headerless_columns
from ..data.sources import hold_out_validation, limit_examples, load_splits
from ..errors import ScriptError
from ..first_answers import DATA_FILES_READ
from .labels import (
    LabelInfo,
    build_label_maps,
    check_ids_without_schema,
    check_label_column,
    class_label_names,
    labels_as_names,
    read_csv_numbers,
)

# The option that asks a run for each split.
DO_OPTIONS = {"train": "--do_train", "validation": "--do_eval", "test": "--do_predict"}
# How load_labelled_documents names a validation split held out of train, in `sources`.
HELD_OUT = "held out of"


def load_labelled_documents(
    model_args: ModelArguments, data_args: Any, training_args: TrainingArguments
) -> tuple[datasets.DatasetDict, LabelInfo, dict[str, str]]:
    """
    The splits the run needs: train, validation (a file or a held-out fraction of train) and test; the task and its
    labels (`build_label_maps`: from the training data, else from the fine-tuned checkpoint); and where each split
    came from (`load_splits`' words, `"held out of ..."` for a validation split held out of train).
    """
    wanted = wanted_splits(data_args, training_args)
    raw_datasets, sources = read_splits(model_args, data_args, wanted)
    column = data_args.label_column_name
    declared_names = class_label_names(raw_datasets["train"].features.get(column)) if "train" in raw_datasets else None
    check_ids_without_schema(raw_datasets, column, declared_names, sources)
    raw_datasets = datasets.DatasetDict({split: labels_as_names(rows, column) for split, rows in raw_datasets.items()})
    files = {split: path for split, _, path, _ in wanted if split in raw_datasets}
    check_raw_datasets(raw_datasets, data_args, sources, files)  # before any shuffling: row numbers are the files'
    if training_args.do_eval and "validation" not in raw_datasets and "train" in raw_datasets:
        if data_args.validation_split_percentage == 0:
            raise ScriptError("--do_eval needs --validation_file or a --validation_split_percentage above 0.")
        # a seeded random sample: labelled files are often sorted by label (see hold_out_validation)
        raw_datasets["train"], raw_datasets["validation"] = hold_out_validation(
            raw_datasets["train"], data_args.validation_split_percentage, seed=training_args.seed
        )
        sources["validation"] = f"{HELD_OUT} {sources['train']}"
    for split, option, _, needed in wanted:
        if needed and split not in raw_datasets:
            dataset_split = ""
            if split == "test":
                dataset_split = (
                    f", or a split {data_args.test_split_name!r} of --dataset_name (--test_split_name names another)"
                )
            raise ScriptError(f"{DO_OPTIONS[split]} needs {option}{dataset_split}.")
    limits = {
        "train": data_args.max_train_samples,
        "validation": data_args.max_eval_samples,
        "test": data_args.max_predict_samples,
    }
    raw_datasets = limit_examples(raw_datasets, limits, streaming=False)
    label_info = build_label_maps(raw_datasets, column, data_args.problem_type, model_args, sources, declared_names)
    return raw_datasets, label_info, sources


def read_splits(
    model_args: ModelArguments, data_args: Any, wanted: list[tuple[str, str, str | None, bool]]
) -> tuple[datasets.DatasetDict, dict[str, str]]:
    """The splits the run needs, from their files or `--dataset_name` (`data.sources.load_splits`), and where each
    came from; a CSV file's labels read as numbers when they all are (`read_csv_numbers`)."""
    files = {split: path for split, _, path, needed in wanted if needed}
    columns = [data_args.text_column_name, data_args.text_pair_column_name, data_args.label_column_name]
    raw_datasets, sources = load_splits(data_args, files, columns, model_args.cache_dir)
    read_by_pandas = {"csv", "tsv"} if headerless_columns(data_args.columns) is None else {"csv", "tsv", "text"}
    for split, path in files.items():
        found = data_format(path) if path is not None and not Path(path).is_dir() else None
        if found is not None and found.name in read_by_pandas:
            raw_datasets[split] = read_csv_numbers(raw_datasets[split], data_args.label_column_name, sources[split])
    return raw_datasets, sources


def wanted_splits(data_args: Any, training_args: TrainingArguments) -> list[tuple[str, str, str | None, bool]]:
    """Every split as (name, the option giving its file, the file, whether the run needs it)."""
    return [
        (option.removesuffix("_file"), f"--{option}", getattr(data_args, option), getattr(training_args, reading))
        for option, reading in DATA_FILES_READ["run_classification.py"].items()
    ]


def check_raw_datasets(
    raw_datasets: datasets.DatasetDict,
    data_args: Any,
    sources: dict[str, str],
    files: dict[str, str | None] | None = None,
) -> None:
    """Every split has non-empty text columns of text, and (but for test) a label column without gaps; `sources`
    says where each split came from, for messages, and `files` the file of each split read from one."""
    files = files or {}
    text_columns = [data_args.text_column_name, data_args.text_pair_column_name]
    label_column = data_args.label_column_name
    for split, dataset in raw_datasets.items():
        if len(dataset) == 0:
            raise ScriptError(f"the {split} data is empty.")
        for column in filter(None, text_columns):
            option = "--text_column_name" if column == data_args.text_column_name else "--text_pair_column_name"
            require_column(dataset, column, split, option, files.get(split))
            check_text_column(dataset, column, split)
        if split != "test" or label_column in dataset.column_names:
            require_column(dataset, label_column, split, "--label_column_name", files.get(split))
            check_label_column(dataset, label_column, split, sources[split])


def require_column(dataset: datasets.Dataset, column: str, split: str, option: str, path: str | None = None) -> None:
    """Refuse a split without `column`, naming its columns and the fix: the `option` that picks another, or for a file
    read by a layout (a .txt: one text column), the layout and the option that reads another (`DataFormat.column_fix`)."""
    if column in dataset.column_names:
        return
    found = data_format(path) if path is not None and not Path(path).is_dir() else None
    fix = (found.column_fix if found is not None else DataFormat.column_fix).format(option=option)
    raise ScriptError(
        f"the {split} data has no column {column!r} (its columns: {', '.join(dataset.column_names)}): {fix}."
    )


def check_text_column(dataset: datasets.Dataset, column: str, split: str) -> None:
    """Refuse a text column that holds something else than text, or an empty text."""
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
