"""
Where the data of both scripts comes from, one way in for both: data files in every format `datasets` reads (CSV,
JSON or JSON lines, Parquet, Arrow, plain text), a file's rows under a top-level key of a JSON object, folders written
by `save_to_disk`, and `--dataset_name`: a local folder in the Hub's layout (data files and a README.md whose `configs:`
name them), a `save_to_disk` folder, or a Hub id (read from the datasets cache when offline). The dataset's splits
become the scripts' own (train, validation, test) by `--train_split_name` and the like, and a column may name a nested
field with dots (`meta.label`).

What is wrong with a file (missing, not UTF-8, broken JSON, ...) is said by `files`, what a local dataset folder holds
and where it is prepared by `folders`; this module says what is wrong with a source as a whole (a folder that is no
dataset, a split or a key that is not there). Also what both scripts do to the rows they read: the validation split
and the sample limits.
"""

import json
import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets
import huggingface_hub

from ...hub.card_metadata import is_hub_dataset_id
from ..errors import ScriptError
from .files import (
    CSV_ONLY_EMPTY_CELLS_MISSING,
    FILE_KINDS,
    check_data_file,
    format_reading,
    headerless_columns,
    read_data,
)
from .folders import (
    is_saved_dataset,
    load_saved_folder,
    local_folder_cache,
    refuse_differing_class_labels,
    refuse_mixed_formats,
    refuse_undecodable_files,
    saved_view,
    say_tab_separated_files,
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
    columns: str | None = field(
        default=None,
        metadata={
            "help": "The columns of data files without a header line, in order: --columns label,text reads the "
            "label<TAB>text lines of THUCNews, cnews and most Chinese classification corpora from a .txt or .tsv "
            "(a .csv: label,text lines)."
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
    named = load_named_dataset(data_args, cache_dir, streaming, columns) if data_args.dataset_name else {}
    headerless = headerless_columns(getattr(data_args, "columns", None))
    splits, sources = {}, {}
    for split, path in files.items():
        if path is not None:
            option = f"--{split}_file"
            splits[split] = load_data_file(path, option, cache_dir, data_args.json_field, streaming, headerless)
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
        percentage = getattr(data_args, "validation_split_percentage", 0)
        instead = ""
        if split == "validation":
            instead = (
                f" the run evaluates on {percentage}% of the {data_args.train_split_name} split, held out of training,"
                " instead;"
                if percentage
                else " the run evaluates on nothing (--validation_split_percentage 0);"
            )
        logger.warning(
            f"--dataset_name {data_args.dataset_name} has no split {split!r}, but has {', '.join(map(repr, unused))}:"
            f"{instead} to read one as the {split} split, pass --{split}_split_name {likely}."
        )


def load_named_dataset(
    data_args: Any, cache_dir: str | None, streaming: bool, columns: Sequence[str | None] = ()
) -> datasets.DatasetDict | datasets.IterableDatasetDict:
    """The splits of `--dataset_name` (a saved Dataset is the `train` split), by the dataset's own split names."""
    return load_dataset_by_name(data_args.dataset_name, data_args.dataset_config_name, cache_dir, streaming, columns)


def load_dataset_by_name(
    name: str, config_name: str | None, cache_dir: str | None, streaming: bool, columns: Sequence[str | None] = ()
) -> datasets.DatasetDict | datasets.IterableDatasetDict:
    """The splits of the dataset `name` (a `save_to_disk` folder, a Hub-layout folder, a Hub id in the datasets cache
    or, offline, in the Hub cache as `hf download` left it), in configuration `config_name`; `columns` are those the
    script reads, for the configuration a message proposes."""
    what = f"--dataset_name {name}: its file"
    if Path(name).is_dir() and is_saved_dataset(Path(name)):
        if config_name is not None:
            raise ScriptError(
                f"--dataset_name {name} is a folder written by save_to_disk, which has no configurations: leave out "
                f"--dataset_config_name {config_name}."
            )
        return read_data(lambda: load_saved_folder(name, streaming, cache_dir), {what: name}, cache_dir)
    if Path(name).is_file():
        raise ScriptError(f"--dataset_name {name} is a file, not a dataset: give it as --train_file {name}.")
    if Path(name).is_dir():
        for check in (refuse_mixed_formats, refuse_differing_class_labels, refuse_undecodable_files):
            check(Path(name))
        say_tab_separated_files(Path(name))
    prepared_in = local_folder_cache(Path(name), cache_dir) if Path(name).is_dir() else cache_dir
    files = {what: name} if Path(name).is_dir() else {}
    try:
        return read_data(
            lambda: load_by_builder(name, config_name, prepared_in, streaming),
            files,
            cache_dir,
            otherwise=lambda error: named_dataset_error(name, config_name, error, prepared_in, columns),
        )
    except ScriptError:
        snapshot = None if Path(name).is_dir() else downloaded_snapshot(name)
        if snapshot is None:
            raise
    logger.warning(
        f"--dataset_name {name}: not in the datasets cache, reading the copy `hf download` fetched, {snapshot} (pass "
        "that folder as --dataset_name to read it so directly)"
    )
    return load_dataset_by_name(str(snapshot), config_name, cache_dir, streaming, columns)


def load_by_builder(
    name: str, config_name: str | None, cache_dir: str | None, streaming: bool
) -> datasets.DatasetDict | datasets.IterableDatasetDict:
    """`datasets.load_dataset` of a Hub id or Hub-layout folder, CSV cells read as `CSV_ONLY_EMPTY_CELLS_MISSING`."""
    builder = datasets.load_dataset_builder(name, config_name, cache_dir=cache_dir)
    options = CSV_ONLY_EMPTY_CELLS_MISSING if builder.name == "csv" else {}  # a class named "NA" stays a class
    return datasets.load_dataset(name, config_name, cache_dir=cache_dir, streaming=streaming, **options)


def downloaded_snapshot(name: str) -> Path | None:
    """The folder of the Hub dataset `name` that `hf download --repo-type dataset` (`snapshot_download`) left in the
    Hub cache, the usual hand-over to a machine without a connection; `None` where there is none."""
    if not is_hub_dataset_id(name):
        return None
    try:
        return Path(huggingface_hub.snapshot_download(name, repo_type="dataset", local_files_only=True))
    except (OSError, ValueError, huggingface_hub.errors.LocalEntryNotFoundError):
        return None


def named_dataset_error(
    name: str, config_name: str | None, error: Exception, cache_dir: str | None, columns: Sequence[str | None] = ()
) -> ScriptError:
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
        needed = [column.split(".")[0] for column in columns if column]
        fitting = [config for config in configurations if set(needed) <= cached_columns(name, config, cache_dir)]
        example = f"{fitting[0]}, which has the columns {', '.join(needed)}" if fitting else configurations[0]
        return ScriptError(
            f"--dataset_name {name} has several configurations in the datasets cache ({', '.join(configurations)}): "
            f"name the one to read with --dataset_config_name (e.g. --dataset_config_name {example})."
        )
    if config_name is not None and config_name in first_line:
        return ScriptError(
            f"--dataset_name {name} has no configuration {config_name!r} ({first_line}): name one of its "
            "configurations with --dataset_config_name."
        )
    return ScriptError(f"cannot read --dataset_name {name}: {first_line}")


def cached_columns(name: str, config_name: str, cache_dir: str | None) -> set[str]:
    """The columns the datasets cache records for configuration `config_name` of the Hub dataset `name`."""
    cache = Path(cache_dir or datasets.config.HF_DATASETS_CACHE) / name.replace("/", "___") / config_name
    for info in sorted(cache.glob("*/*/dataset_info.json")):
        try:
            return set(json.loads(info.read_text(encoding="utf-8")).get("features") or {})
        except (OSError, ValueError):
            continue
    return set()


def load_data_file(
    path: str,
    option: str,
    cache_dir: str | None,
    json_field: str | None = None,
    streaming: bool = False,
    headerless: Sequence[str] | None = None,
) -> datasets.Dataset | datasets.IterableDataset:
    """
    One split from a data file (a format of `files.DATA_FORMATS`) or a folder a Dataset was saved to with
    `save_to_disk`; `option` names the argument that gave it, for messages; `headerless` (`--columns`) names the
    columns of a file without a header line.
    """
    if Path(path).is_dir():
        return load_saved_split(path, option, streaming, cache_dir)
    found = check_data_file(path, option, headerless)
    builder, options = format_reading(found, path, headerless)
    if builder == "json":
        rows_key = json_rows_key(path, option, json_field)
        options = {"field": rows_key} if rows_key is not None else {}
    return read_data(
        lambda: datasets.load_dataset(
            builder, data_files=str(path), split="train", cache_dir=cache_dir, streaming=streaming, **options
        ),
        {option: path},
        cache_dir,
    )


def load_saved_split(
    folder: str, option: str, streaming: bool, cache_dir: str | None = None
) -> datasets.Dataset | datasets.IterableDataset:
    """A split from a folder a Dataset was saved to; a DatasetDict's folder is refused (it is a `--dataset_name`)."""
    if not is_saved_dataset(Path(folder)):
        raise ScriptError(
            f"{option} {folder} is a folder, not a data file: give a {FILE_KINDS} file, a folder written by "
            f"save_to_disk, or a dataset folder in the Hub's layout as --dataset_name {folder}."
        )
    loaded = read_data(
        lambda: datasets.load_from_disk(str(saved_view(Path(folder), cache_dir))),
        {f"{option} {folder}: its file": folder},
    )
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


def hold_out_validation(
    train: datasets.Dataset | datasets.IterableDataset, percentage: int, seed: int | None = None
) -> tuple[datasets.Dataset | datasets.IterableDataset, datasets.Dataset | datasets.IterableDataset]:
    """
    Split `--validation_split_percentage`% of the training rows off for validation, when no validation file is given.

    Args:
        train (`datasets.Dataset` or `datasets.IterableDataset`): the training rows.
        percentage (`int`): the share to hold out, 1 to 99.
        seed (`int`, *optional*):
            `None` holds out the last rows in file order (run_mlm.py: the lines of a corpus follow its documents,
            so validation text is not a neighbour of training text); a seed holds out a random sample
            (run_classification.py: labelled files are often sorted by label, so the last rows would all be of one
            class).

    Returns:
        `tuple`: the rows left for training and the rows held out.
    """
    if seed is not None:
        if len(train) - math.ceil(percentage / 100 * len(train)) < 1:  # scikit-learn's train_test_split rounds up
            raise ScriptError(
                f"the training data has {len(train)} row{'s' if len(train) > 1 else ''}, too few to hold out "
                f"{percentage}% for validation: give --validation_file, a lower --validation_split_percentage, or "
                "more training data."
            )
        held_out = train.train_test_split(test_size=percentage / 100, seed=seed)
        return held_out["train"], held_out["test"]
    if isinstance(train, datasets.IterableDataset):  # no length: every row whose index ends in 00..percentage-1
        kept = train.filter(lambda _, index: index % 100 >= percentage, with_indices=True)
        return kept, train.filter(lambda _, index: index % 100 < percentage, with_indices=True)
    if len(train) < 2:
        raise ScriptError(
            f"the training data holds only one text, too little to hold out {percentage}% of it for validation: "
            "give --validation_file, or --validation_split_percentage 0 to train without evaluation."
        )
    cut = len(train) - max(1, len(train) * percentage // 100)
    return train.select(range(cut)), train.select(range(cut, len(train)))


def limit_examples(
    examples: datasets.DatasetDict, limits: dict[str, int | None], streaming: bool
) -> datasets.DatasetDict:
    """Keep only the first `limits[split]` examples of each split that has a limit (`None`: all): the
    `--max_train_samples`, `--max_eval_samples` and `--max_predict_samples` of both scripts."""
    for split, limit in limits.items():
        if limit is not None and split in examples:
            part = examples[split]
            examples[split] = part.take(limit) if streaming else part.select(range(min(limit, len(part))))
    return examples
