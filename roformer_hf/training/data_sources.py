"""
Where the data of both scripts comes from, one way in for both: data files in every format `datasets` reads (CSV,
JSON or JSON lines, Parquet, Arrow, plain text), a file's rows under a top-level key of a JSON object, folders written
by `save_to_disk`, and `--dataset_name`: a local folder in the Hub's layout (data files and a README.md whose `configs:`
name them), a `save_to_disk` folder, or a Hub id (read from the datasets cache when offline). The dataset's splits
become the scripts' own (train, validation, test) by `--train_split_name` and the like, and a column may name a nested
field with dots (`meta.label`).

What is wrong with a file (missing, not UTF-8, broken JSON, ...) is said by `data_files`; this module says what is
wrong with a source as a whole (a folder that is no dataset, a split or a key that is not there).
"""

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets
import huggingface_hub
import pyarrow
import pyarrow.ipc
import pyarrow.parquet

from ..card_metadata import is_hub_dataset_id
from .data_files import CSV_ONLY_EMPTY_CELLS_MISSING, check_data_file, data_file_error, diagnose_data_file
from .errors import ScriptError

logger = logging.getLogger(__name__)

# The loader `datasets` reads each kind of data file with, by suffix (any case).
FILE_BUILDERS = {
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".parquet": "parquet",
    ".arrow": "arrow",
    ".txt": "text",
}
FILE_KINDS = ".csv, .json, .jsonl, .parquet, .arrow or .txt"
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


def saved_view(folder: Path, cache_dir: str | None) -> Path:
    """
    A folder of `cache_dir` (else the datasets cache) holding the files of the `save_to_disk` folder `folder`, hard
    links where the file system allows (else copies), made once per content of `folder` (its files' names, sizes
    and times). `datasets` writes the cache files of every `map` beside the data files it reads: read from here,
    they go into the cache, never into the user's folder (which may be read-only).
    """
    files = sorted(path for path in folder.rglob("*") if path.is_file())
    cache = Path(cache_dir or datasets.config.HF_DATASETS_CACHE) / "saved_to_disk"
    view = cache / f"{folder.resolve().name}-{folder_content_key(folder)}"
    if view.is_dir():
        return view
    staging = Path(tempfile.mkdtemp(prefix=".view-", dir=_made(cache)))
    try:
        for path in files:
            target = staging / path.relative_to(folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(path, target)
            except OSError:  # another file system, or links not allowed: a copy
                shutil.copyfile(path, target)
        os.replace(staging, view)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not view.is_dir():  # not made by another run at the same time
            raise
    return view


def folder_content_key(folder: Path) -> str:
    """A key that changes with the folder's place and content: its path, its files' names, sizes and times."""
    key = hashlib.sha256(str(folder.resolve()).encode())
    for path in sorted(path for path in folder.rglob("*") if path.is_file()):
        stat = path.stat()
        key.update(f"{path.relative_to(folder)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return key.hexdigest()[:16]


def _made(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def is_saved_dataset(folder: Path) -> bool:
    """Whether `folder` was written by `Dataset.save_to_disk` or `DatasetDict.save_to_disk`."""
    return (folder / "state.json").is_file() or (folder / "dataset_dict.json").is_file()


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


def local_folder_cache(folder: Path, cache_dir: str | None) -> str:
    """
    Where datasets prepares the Hub-layout folder `folder`: a cache of its own for each place and content of the
    folder. datasets keys a folder whose README.md names its configs by the folder's base name and the configs alone,
    so a second folder of the same name, or the same folder with new data files, silently got the first one's rows.
    """
    cache = Path(cache_dir or datasets.config.HF_DATASETS_CACHE) / "local_folders"
    return str(cache / f"{folder.resolve().name}-{folder_content_key(folder)}")


def downloaded_snapshot(name: str) -> Path | None:
    """The folder of the Hub dataset `name` that `hf download --repo-type dataset` (`snapshot_download`) left in the
    Hub cache, the usual hand-over to a machine without a connection; `None` where there is none."""
    if not is_hub_dataset_id(name):
        return None
    try:
        return Path(huggingface_hub.snapshot_download(name, repo_type="dataset", local_files_only=True))
    except (OSError, ValueError, huggingface_hub.errors.LocalEntryNotFoundError):
        return None


def refuse_mixed_formats(folder: Path) -> None:
    """
    Refuse a dataset folder without `configs:` in its README.md whose data files are of several formats: `datasets`
    reads only the files of its most common format and leaves the others out without a word (a folder of a
    vocabulary .txt and a .jsonl of documents would be read as the vocabulary).
    """
    readme = folder / "README.md"
    if readme.is_file() and "configs:" in readme.read_text(encoding="utf-8", errors="replace"):
        return  # its configs name the files of each split
    kinds: dict[str, list[str]] = {}
    for path in sorted(folder.rglob("*")):
        kind = data_file_kind(path)
        hidden = any(part.startswith((".", "__")) for part in path.relative_to(folder).parts)  # datasets skips them
        if kind is not None and path.is_file() and not hidden:
            kinds.setdefault(kind, []).append(str(path.relative_to(folder)))
    if len(kinds) > 1:
        held = "; ".join(
            f"{len(names)} {kind} ({', '.join(names[:2])}{', ...' * (len(names) > 2)})"
            for kind, names in kinds.items()
        )
        raise ScriptError(
            f"--dataset_name {folder} holds data files of several formats ({held}), of which datasets would read "
            "only one kind: give the files to read with --train_file (and --validation_file), or add a README.md "
            "whose configs: name each split's files."
        )


def declared_class_names(path: Path) -> dict[str, list[str]]:
    """The class names each `ClassLabel` column (or list of them) of a Parquet or Arrow file declares in its schema,
    by column; empty for another kind of file."""
    if path.suffix.lower() == ".parquet":
        schema = pyarrow.parquet.read_schema(path)
    elif path.suffix.lower() == ".arrow":
        with pyarrow.memory_map(str(path)) as source:
            try:
                schema = pyarrow.ipc.open_stream(source).schema
            except pyarrow.ArrowInvalid:  # the file format, not the stream format save_to_disk writes
                schema = pyarrow.ipc.open_file(source).schema
    else:
        return {}
    names = {}
    for column, feature in datasets.Features.from_arrow_schema(schema).items():
        inner = feature.feature if isinstance(feature, (datasets.List, datasets.Sequence)) else feature
        if isinstance(inner, datasets.ClassLabel):
            names[column] = list(inner.names)
    return names


def refuse_differing_class_labels(folder: Path) -> None:
    """
    Refuse a dataset folder whose data files declare a `ClassLabel` column with other class names or another order
    (a dev split saved with its own `class_encode_column`): datasets reads every file's ids by the first file's
    names, so a dev `civil` would silently be scored as `criminal`.
    """
    first: dict[str, tuple[str, list[str]]] = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if relative.startswith(".") or not path.is_file():
            continue
        for column, names in declared_class_names(path).items():
            seen, seen_names = first.setdefault(column, (relative, names))
            if names != seen_names:
                raise ScriptError(
                    f"--dataset_name {folder}: the files declare the classes of column {column!r} differently "
                    f"({seen}: {seen_names}; {relative}: {names}), and datasets would read every file's ids by one "
                    "file's names: save every split with the same ClassLabel (cast_column with one "
                    "ClassLabel), or give each split as its own file (--train_file, --validation_file), read by its "
                    "own names."
                )


# The kinds of data file a dataset folder may hold, as `datasets` reads them: a .tsv is a CSV file of other
# separators (beside a .csv, datasets stops with its own words), a compressed file is of the kind it holds.
DATA_FILE_KINDS = {**FILE_BUILDERS, ".tsv": "tsv", ".ndjson": "json"}
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".lz4")


def data_file_kind(path: Path) -> str | None:
    """The kind of data `path` holds by its name (`DATA_FILE_KINDS`; `train.csv.gz` is a csv), `None` for no data."""
    suffixes = [suffix.lower() for suffix in path.suffixes]
    while suffixes and suffixes[-1] in COMPRESSION_SUFFIXES:
        suffixes.pop()
    return DATA_FILE_KINDS.get(suffixes[-1]) if suffixes else None


def load_saved_folder(
    folder: str, streaming: bool, cache_dir: str | None = None
) -> datasets.DatasetDict | datasets.IterableDatasetDict:
    """A `save_to_disk` folder as a dict of splits (a Dataset is the `train` split), read through `saved_view`."""
    loaded = datasets.load_from_disk(str(saved_view(Path(folder), cache_dir)))
    if isinstance(loaded, datasets.Dataset):
        loaded = datasets.DatasetDict({"train": loaded})
    if streaming:
        return datasets.IterableDatasetDict({split: part.to_iterable_dataset() for split, part in loaded.items()})
    return loaded


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


def damaged_data_file(folder: Path) -> ScriptError | None:
    """What makes a data file of a local `--dataset_name` folder unreadable (a Parquet file of no rows in one split, a
    CSV of its header only, text that is not UTF-8: `diagnose_data_file`), where datasets said only "An error occurred
    while generating the dataset"; None for a Hub id or where every file reads."""
    if not folder.is_dir():
        return None
    for path in sorted(folder.rglob("*")):
        if (
            path.suffix.lower() in FILE_BUILDERS
            and path.is_file()
            and not path.relative_to(folder).parts[0].startswith(".")
        ):
            found = diagnose_data_file(str(path), f"--dataset_name {folder}: its file")
            if found is not None:
                return found
    return None


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
