"""
Where the data of both scripts comes from, one way in for both: data files in every format `datasets` reads (CSV,
JSON or JSON lines, Parquet, Arrow, plain text), a file's rows under a top-level key of a JSON object, folders written
by `save_to_disk`, and `--dataset_name`: a local folder in the Hub's layout (data files and a README.md whose `configs:`
name them), a `save_to_disk` folder, or a Hub id (read from the datasets cache when offline). The dataset's splits
become the scripts' own (train, validation, test) by `--train_split_name` and the like, and a column may name a nested
field with dots (`meta.label`).

What is wrong with a file (missing, not UTF-8, broken JSON, ...) is said by `files`, what a local dataset folder holds
and where it is prepared by `folders`; this module says what is wrong with a source as a whole (a folder that is no
dataset, a split or a key that is not there).
"""

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets
import huggingface_hub

from ...hub.card_metadata import is_hub_dataset_id
from ..errors import ScriptError
from .files import CSV_ONLY_EMPTY_CELLS_MISSING, FILE_BUILDERS, FILE_KINDS, check_data_file, data_file_error
from .folders import (
    damaged_data_file,
    is_saved_dataset,
    load_saved_folder,
    local_folder_cache,
    refuse_differing_class_labels,
    refuse_mixed_formats,
    saved_view,
)

logger = logging.getLogger(__name__)

# How datasets name the splits of each role, by the start of the name (`dev`, `valid`, `eval_set`; `testing`).
SPLIT_NAMES_OF_ROLE = {"validation": ("val", "dev", "eval"), "test": ("test",), "train": ("train",)}


@dataclass
class DatasetArguments:
    """Where the data comes from besides data files: a dataset by name, its configuration and splits."""

    dataset_name: str | None = field(
        default=None,
        metadata={
            "help": "A dataset: a Hub id (offline: one in the datasets cache), a local folder in the Hub's layout "
            "(data files and a README.md with configs), or a folder written by save_to_disk. A --train_file / "
            "--validation_file given as well replaces that split."
        },
    )
    dataset_config_name: str | None = field(
        default=None, metadata={"help": "The configuration of --dataset_name (its README's config_name)."}
    )
    train_split_name: str = field(default="train", metadata={"help": "The split of --dataset_name to train on."})
    validation_split_name: str = field(
        default="validation", metadata={"help": "The split of --dataset_name to evaluate on."}
    )
    json_field: str | None = field(
        default=None,
        metadata={
            "help": "The top-level key of a .json file whose list holds the rows (e.g. 'data'); without it, a "
            "file that is one JSON object with a single list of objects is read from that list."
        },
    )


def load_splits(
    data_args: Any,
    files: dict[str, str | None],
    columns: Sequence[str | None],
    cache_dir: str | None = None,
    streaming: bool = False,
) -> tuple[datasets.DatasetDict | datasets.IterableDatasetDict, dict[str, str]]:
    """
    The splits a run reads, each from its file or else from `--dataset_name`.

    Args:
        data_args: a script's data arguments (a `DatasetArguments`, with `<split>_split_name` for each split asked).
        files (`dict`): each split the run needs (`"train"`, `"validation"`, `"test"`) and its file (`None`: none).
        columns (`Sequence`): the columns the script reads (`None` for one not given); one with dots that is no
            column of the data names a nested field, made a column of that name.
        cache_dir (`str`, *optional*): `--cache_dir`, where datasets keeps what it prepares.
        streaming (`bool`): read as `IterableDataset`s.

    Returns:
        `tuple`: the splits found, under the scripts' names (a split with neither a file nor a split of the dataset
        is left out), and where each came from, for messages (`{"train": "--train_file train.jsonl"}`).
    """
    named = load_named_dataset(data_args, cache_dir, streaming) if data_args.dataset_name else {}
    splits, sources = {}, {}
    for split, path in files.items():
        if path is not None:
            option = f"--{split}_file"
            splits[split] = load_data_file(path, option, cache_dir, data_args.json_field, streaming)
            sources[split] = f"{option} {path}"
            continue
        if not data_args.dataset_name:
            continue
        name = getattr(data_args, f"{split}_split_name", split)
        if name in named:
            splits[split] = named[name]
            sources[split] = f"--dataset_name {data_args.dataset_name} (split {name!r})"
        elif split == "train" or name != split:  # a split the user named, or the one to train on, is not there
            raise ScriptError(
                f"--dataset_name {data_args.dataset_name} has no split {name!r} (its splits: {', '.join(named)}): "
                f"name the {split} split with --{split}_split_name, or give --{split}_file."
            )
        else:
            say_unused_splits(data_args, split, named, files)
    for split, dataset in splits.items():
        splits[split] = with_nested_fields(dataset, columns)
    return (datasets.IterableDatasetDict if streaming else datasets.DatasetDict)(splits), sources


def say_unused_splits(data_args: Any, split: str, named: dict, files: dict[str, str | None]) -> None:
    """
    One line where `--dataset_name` has no split of the default name for `split` (`validation`, `test`) but has
    splits the run reads for nothing (a `dev`, say): the run goes on without it (run_classification.py holds out part
    of train for validation), and the line names the splits and the option that would read one.
    """
    used = {getattr(data_args, f"{role}_split_name", role) for role in files}
    unused = [name for name in named if name not in used]
    if unused:
        # the split whose name says the role (`testing` for test, `dev` for validation), else the first
        likely = next((name for name in unused if name.lower().startswith(SPLIT_NAMES_OF_ROLE[split])), unused[0])
        logger.warning(
            f"--dataset_name {data_args.dataset_name} has no split {split!r}, but has {', '.join(map(repr, unused))}: "
            f"to read one as the {split} split, pass --{split}_split_name {likely}."
        )


def load_named_dataset(
    data_args: Any, cache_dir: str | None, streaming: bool
) -> datasets.DatasetDict | datasets.IterableDatasetDict:
    """The splits of `--dataset_name` (a saved Dataset is the `train` split), by the dataset's own split names."""
    return load_dataset_by_name(data_args.dataset_name, data_args.dataset_config_name, cache_dir, streaming)


def load_dataset_by_name(
    name: str, config_name: str | None, cache_dir: str | None, streaming: bool
) -> datasets.DatasetDict | datasets.IterableDatasetDict:
    """The splits of the dataset `name` (a `save_to_disk` folder, a Hub-layout folder, a Hub id in the datasets cache
    or, offline, in the Hub cache as `hf download` left it), in configuration `config_name`."""
    if Path(name).is_dir() and is_saved_dataset(Path(name)):
        if config_name is not None:
            raise ScriptError(
                f"--dataset_name {name} is a folder written by save_to_disk, which has no configurations: leave out "
                f"--dataset_config_name {config_name}."
            )
        return load_saved_folder(name, streaming, cache_dir)
    if Path(name).is_file():
        raise ScriptError(f"--dataset_name {name} is a file, not a dataset: give it as --train_file {name}.")
    if Path(name).is_dir():
        refuse_mixed_formats(Path(name))
        refuse_differing_class_labels(Path(name))
        cache_dir = local_folder_cache(Path(name), cache_dir)
    try:
        builder = datasets.load_dataset_builder(name, config_name, cache_dir=cache_dir)
        options = CSV_ONLY_EMPTY_CELLS_MISSING if builder.name == "csv" else {}  # a class named "NA" stays a class
        return datasets.load_dataset(name, config_name, cache_dir=cache_dir, streaming=streaming, **options)
    except (datasets.exceptions.DatasetGenerationError, ValueError, OSError) as error:
        snapshot = downloaded_snapshot(name)
        if snapshot is None:
            raise named_dataset_error(name, config_name, error, cache_dir) from error
    logger.warning(
        f"--dataset_name {name}: not in the datasets cache, reading the copy `hf download` fetched, {snapshot} (pass "
        "that folder as --dataset_name to read it so directly)"
    )
    return load_dataset_by_name(str(snapshot), config_name, cache_dir, streaming)


def downloaded_snapshot(name: str) -> Path | None:
    """The folder of the Hub dataset `name` that `hf download --repo-type dataset` (`snapshot_download`) left in the
    Hub cache, the usual hand-over to a machine without a connection; `None` where there is none."""
    if not is_hub_dataset_id(name):
        return None
    try:
        return Path(huggingface_hub.snapshot_download(name, repo_type="dataset", local_files_only=True))
    except (OSError, ValueError, huggingface_hub.errors.LocalEntryNotFoundError):
        return None


def named_dataset_error(name: str, config_name: str | None, error: Exception, cache_dir: str | None) -> ScriptError:
    """The one line for a `--dataset_name` that `datasets` could not load: not found, another config, no data."""
    if isinstance(error, datasets.data_files.EmptyDatasetError):
        return ScriptError(
            f"--dataset_name {name} holds no data files datasets reads ({FILE_KINDS} files, or a README.md whose "
            "configs name them): give a folder in the Hub's layout, or one written by save_to_disk."
        )
    if isinstance(error, ConnectionError) or "offline" in str(error).lower():
        cache = cache_dir or datasets.config.HF_DATASETS_CACHE
        return ScriptError(
            f"--dataset_name {name}: no such folder, and no Hub dataset of that id in the datasets cache {cache} "
            "(the Hub is out of reach: HF_HUB_OFFLINE or no connection): give a local folder, or load the dataset "
            "once with a connection."
        )
    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    several = re.search(r"multiple '.*' configurations in the cache: (.+)", first_line)
    if several is not None:
        configurations = sorted(several.group(1).split(", "))
        return ScriptError(
            f"--dataset_name {name} has several configurations in the datasets cache ({', '.join(configurations)}): "
            f"name the one to read with --dataset_config_name (e.g. --dataset_config_name {configurations[0]})."
        )
    if config_name is not None and config_name in first_line:
        return ScriptError(
            f"--dataset_name {name} has no configuration {config_name!r} ({first_line}): name one of its "
            "configurations with --dataset_config_name."
        )
    return damaged_data_file(Path(name)) or ScriptError(f"cannot read --dataset_name {name}: {first_line}")


def load_data_file(
    path: str, option: str, cache_dir: str | None, json_field: str | None = None, streaming: bool = False
) -> datasets.Dataset | datasets.IterableDataset:
    """
    One split from a data file (any suffix of `FILE_BUILDERS`) or a folder a Dataset was saved to with
    `save_to_disk`; `option` names the argument that gave it, for messages.
    """
    if Path(path).is_dir():
        return load_saved_split(path, option, streaming, cache_dir)
    builder = FILE_BUILDERS.get(Path(path).suffix.lower())
    if builder is None:
        raise ScriptError(f"{option} {path}: use a {FILE_KINDS} file, or a folder written by save_to_disk.")
    check_data_file(path, option)
    options = CSV_ONLY_EMPTY_CELLS_MISSING if builder == "csv" else {}  # a text or a class named "NA" stays
    if builder == "json":
        rows_key = json_rows_key(path, option, json_field)
        options = {"field": rows_key} if rows_key is not None else {}
    try:
        return datasets.load_dataset(
            builder, data_files=str(path), split="train", cache_dir=cache_dir, streaming=streaming, **options
        )
    except (datasets.exceptions.DatasetGenerationError, ValueError, OSError) as error:
        raise data_file_error({option: path}, error, cache_dir=cache_dir) from error


def load_saved_split(
    folder: str, option: str, streaming: bool, cache_dir: str | None = None
) -> datasets.Dataset | datasets.IterableDataset:
    """A split from a folder a Dataset was saved to; a DatasetDict's folder is refused (it is a `--dataset_name`)."""
    if not is_saved_dataset(Path(folder)):
        raise ScriptError(
            f"{option} {folder} is a folder, not a data file: give a {FILE_KINDS} file, a folder written by "
            f"save_to_disk, or a dataset folder in the Hub's layout as --dataset_name {folder}."
        )
    loaded = datasets.load_from_disk(str(saved_view(Path(folder), cache_dir)))
    if isinstance(loaded, datasets.DatasetDict):
        raise ScriptError(
            f"{option} {folder} holds a DatasetDict (splits: {', '.join(loaded)}), not one split: give it as "
            f"--dataset_name {folder}."
        )
    return loaded.to_iterable_dataset() if streaming else loaded


def json_rows_key(path: str, option: str, json_field: str | None) -> str | None:
    """
    The top-level key whose list holds a JSON file's rows: `--json_field`, checked; else, for a .json file that is
    one JSON object, its only key holding a list of objects (e.g. `{"version": 2, "data": [{...}, ...]}`); else
    `None`, the file's rows are the file's (JSON lines or a JSON array).
    """
    if json_field is None and Path(path).suffix.lower() != ".json":
        return None
    document = whole_json_object(path)
    if json_field is not None:
        if document is None:
            raise ScriptError(
                f"{option} {path} is not one JSON object with rows under a key (JSON lines or an array): leave out "
                f"--json_field {json_field}."
            )
        if not isinstance(document.get(json_field), list):
            found = f"holds {type(document[json_field]).__name__}" if json_field in document else "is not there"
            raise ScriptError(
                f"{option} {path}: the key {json_field!r} {found}, not a list of rows (its keys: "
                f"{', '.join(document)}): name the key that holds the rows with --json_field."
            )
        return json_field
    if document is None:
        return None
    keys = [key for key, value in document.items() if is_list_of_rows(value)]
    if len(keys) > 1:
        raise ScriptError(
            f"{option} {path} holds lists of rows under several keys ({', '.join(keys)}): name the one to read "
            "with --json_field."
        )
    lengths = {len(value) if isinstance(value, list) else -1 for value in document.values()}
    if not keys and len(lengths) == 1 and min(lengths) > 1:  # pandas' to_json(orient="list"): columns, not rows
        raise ScriptError(
            f"{option} {path} holds one JSON object of columns ({', '.join(document)}: lists of {min(lengths)} values "
            "each), which datasets reads as a single row: write one object a row, as JSON lines (pandas: "
            'df.to_json(path, orient="records", lines=True, force_ascii=False)).'
        )
    if keys:
        logger.info(f"{option} {path}: reading the rows under its key {keys[0]!r} (--json_field names another)")
    return keys[0] if keys else None


def whole_json_object(path: str) -> dict[str, Any] | None:
    """The file's JSON object when the whole file is one (not JSON lines, not an array), else `None`. JSON lines are
    told by their first line, so that a large corpus is not read whole for this."""
    with open(path, encoding="utf-8") as file:
        first_line = file.readline()
        if not first_line.lstrip().startswith("{"):
            return None
        try:
            json.loads(first_line)
        except json.JSONDecodeError:  # an object over several lines (or a broken one, which the loader reports)
            pass
        else:
            if file.read(4096).strip():  # an object a line: JSON lines
                return None
        file.seek(0)
        try:
            document = json.load(file)
        except json.JSONDecodeError:
            return None
    return document if isinstance(document, dict) else None


def is_list_of_rows(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(item, dict) for item in value)


def with_nested_fields(
    dataset: datasets.Dataset | datasets.IterableDataset, columns: Sequence[str | None]
) -> datasets.Dataset | datasets.IterableDataset:
    """
    The rows with each nested field that `columns` names with dots (`meta.label`: the `label` of the object in
    column `meta`) as a column of that name; a dataset whose columns are all there as it is.
    """
    present = dataset.column_names or []
    nested = [column for column in columns if column and "." in column and column not in present]
    if not nested:
        return dataset
    if isinstance(dataset, datasets.Dataset):
        return dataset.flatten()  # every object column becomes a column per field, named parent.field
    return dataset.map(nested_fields, fn_kwargs={"names": nested})


def nested_fields(row: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """The values of the fields `names` (`meta.label`) of one row, `None` for one that is not there."""
    values = {}
    for name in names:
        value = row
        for part in name.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        values[name] = value
    return values
