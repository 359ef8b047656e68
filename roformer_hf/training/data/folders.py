"""
A local dataset folder (`--dataset_name` of a folder in the Hub's layout, or one `save_to_disk` wrote), read as it is
and never written into: refused where `datasets` would read less or other than it holds (data files of several formats,
splits declaring their `ClassLabel` names differently), prepared in a cache of its own per place and content (datasets
keys a folder by its base name alone), `save_to_disk` folders read through a view in the cache so that `map`'s cache
files never land in the user's folder, and the file that makes such a folder unreadable named.
"""

import hashlib
import logging
import os
import shutil
import tempfile
from functools import partial
from pathlib import Path

import datasets

from ..errors import ScriptError
from .files import data_file_kind, data_format, files_datasets_reads, find_utf8_error, not_utf8_error, read_data

logger = logging.getLogger(__name__)


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


def local_folder_cache(folder: Path, cache_dir: str | None) -> str:
    """
    Where datasets prepares the Hub-layout folder `folder`: a cache of its own for each place and content of the
    folder. datasets keys a folder whose README.md names its configs by the folder's base name and the configs alone,
    so a second folder of the same name, or the same folder with new data files, silently got the first one's rows.
    """
    cache = Path(cache_dir or datasets.config.HF_DATASETS_CACHE) / "local_folders"
    return str(cache / f"{folder.resolve().name}-{folder_content_key(folder)}")


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
    for path in files_datasets_reads(folder):
        kind = data_file_kind(path)
        if kind is not None:
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


def say_tab_separated_files(folder: Path) -> None:
    """One line where a dataset folder holds .tsv files, which datasets reads as columns named by their first line:
    what it reads, and the option for a file whose first line is data (`label<TAB>text` lines)."""
    tab_separated = [path for path in files_datasets_reads(folder) if data_file_kind(path) == "tsv"]
    if not tab_separated:
        return
    found = data_format(tab_separated[0])
    names = f" ({', '.join(found.schema(tab_separated[0]))} in {tab_separated[0].name})" if found else ""
    logger.warning(
        f"--dataset_name {folder}: reading its .tsv files as tab-separated columns named by their first line{names}; "
        "for label<TAB>text lines without such a line, give each file as --train_file / --validation_file with "
        "--columns label,text."
    )


def declared_class_names(path: Path) -> dict[str, list[str]]:
    """The class names each `ClassLabel` column (or list of them) of a data file declares in its schema (Parquet and
    Arrow files declare one), by column."""
    found = data_format(path)
    names = {}
    for column, feature in (found.schema(path) if found is not None else {}).items():
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
    for path in files_datasets_reads(folder):
        relative = path.relative_to(folder).as_posix()
        declared = read_data(partial(declared_class_names, path), {f"--dataset_name {folder}: its file": path})
        for column, names in declared.items():
            seen, seen_names = first.setdefault(column, (relative, names))
            if names != seen_names:
                raise ScriptError(
                    f"--dataset_name {folder}: the files declare the classes of column {column!r} differently "
                    f"({seen}: {seen_names}; {relative}: {names}), and datasets would read every file's ids by one "
                    "file's names: save every split with the same ClassLabel (cast_column with one "
                    "ClassLabel), or give each split as its own file (--train_file, --validation_file), read by its "
                    "own names."
                )


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


def refuse_undecodable_files(folder: Path) -> None:
    """Refuse a data file of the folder that is not UTF-8 in a format whose reader would load it without a word (JSON
    lines of GBK text: a traceback from a later step, naming no file)."""
    for path in files_datasets_reads(folder):
        found = data_format(path)
        if found is not None and found.reader_takes_any_bytes:
            place = find_utf8_error(path)
            if place is not None:
                raise not_utf8_error(path, f"--dataset_name {folder}: its file", *place)
