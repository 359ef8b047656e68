"""Reading data files and saying what is wrong with one that cannot be read: missing, empty, not UTF-8 (GBK, UTF-16,
a binary format), not JSON; the cache `datasets` cannot write. Also what both scripts do to the rows they read: the
validation split and the sample limits."""

import codecs
import errno
import json
import logging
import math
import tempfile
from pathlib import Path

import datasets

from ..errors import ScriptError

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


# How much of a data file is checked for UTF-8 before loading; the rest is checked if loading fails.
UTF8_CHECK_BYTES = 1 << 20


def find_utf8_error(path: str | Path, limit: int | None = None) -> tuple[int, int] | None:
    """
    Where a file stops being UTF-8: `(line, byte)`, the 1-based line number and the value of the first byte that
    cannot be decoded, or `None` when the file (or its first `limit` bytes) is UTF-8.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    line, remaining = 1, limit
    with open(path, "rb") as file:
        while remaining is None or remaining > 0:
            chunk = file.read(UTF8_CHECK_BYTES if remaining is None else min(remaining, UTF8_CHECK_BYTES))
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as error:
                pending = len(decoder.getstate()[0])  # bytes of a character begun in the previous chunk
                return line + chunk[: max(error.start - pending, 0)].count(b"\n"), error.object[error.start]
            if not chunk:
                return None
            line += chunk.count(b"\n")
            remaining = None if remaining is None else remaining - len(chunk)
    return None


# The first bytes of files that are not text at all, or text that iconv -f gbk would garble.
FILE_SIGNATURES = {
    b"PAR1": "a Parquet file",
    b"ARROW1": "an Arrow file",
    b"\x1f\x8b": "a gzip-compressed file",
    b"PK\x03\x04": "a zip archive (or an .xlsx workbook)",
    b"\xff\xfe\x00\x00": "UTF-32 text",
    b"\xff\xfe": "UTF-16 text",
    b"\xfe\xff": "UTF-16 text",
}


# The binary formats `datasets` reads, by what `FILE_SIGNATURES` calls them, with their suffix: no UTF-8 to check.
BINARY_SUFFIXES = {"a Parquet file": ".parquet", "an Arrow file": ".arrow"}


def is_binary_data_file(path: str | Path) -> bool:
    """Whether a data file is named as one of the binary formats `datasets` reads (Parquet, Arrow)."""
    return Path(path).suffix.lower() in BINARY_SUFFIXES.values()


def not_utf8_error(path: str | Path, what: str, line: int, byte: int) -> ScriptError:
    """The error for a file that is not UTF-8, naming the place and what converts it: iconv for text in another
    encoding (GBK, the usual one for Chinese, or UTF-16), an export to a text format for a binary file."""
    path = Path(path)
    with open(path, "rb") as file:
        head = file.read(UTF8_CHECK_BYTES)
    kind = next((name for signature, name in FILE_SIGNATURES.items() if head.startswith(signature)), None)
    if kind is None and head.count(b"\x00") > len(head) // 4:  # every other byte 0: UTF-16 without a byte-order mark
        kind = "UTF-16 text"
    converted = path.with_name(f"{path.stem}.utf8{path.suffix}")
    if kind is not None and kind.startswith("UTF-"):
        encoding = kind.split()[0].lower()
        return ScriptError(
            f"{what} {path} is {kind}, not UTF-8: convert it, e.g. iconv -f {encoding} -t utf-8 {path} > {converted}"
        )
    if kind in BINARY_SUFFIXES:  # a format datasets reads, under the name of a text format
        return ScriptError(
            f"{what} {path} is {kind}, not text: rename it to {path.with_suffix(BINARY_SUFFIXES[kind])} (a file "
            f"named {BINARY_SUFFIXES[kind]} is read as {kind.split()[-2]})."
        )
    if kind is not None:
        return ScriptError(
            f"{what} {path} is {kind}, not text: give a .txt, .jsonl, .csv, .parquet or .arrow file (e.g. export it "
            "with pandas: df.to_parquet(...))."
        )
    encoding, text = guess_line_encoding(read_line(path, line))
    utf8_lines, other_lines = count_line_encodings(path)
    if utf8_lines > other_lines:  # a UTF-8 file with a few lines pasted from elsewhere: converting it would garble it
        others = f", and {other_lines - 1} more line{'s' * (other_lines > 2)}" if other_lines > 1 else ""
        lines, them = ("those lines", "them") if other_lines > 1 else ("that line", "it")
        return ScriptError(
            f"{what} {path} is UTF-8 text but for line {line} (byte 0x{byte:02x}), which reads as {encoding} text, "
            f"{text!r}{others}: save {lines} as UTF-8 (re-type {them}, or convert {them} alone); converting the "
            "whole file would garble its other lines."
        )
    if encoding != "GBK":
        return ScriptError(
            f"{what} {path} is not UTF-8 text (byte 0x{byte:02x} on line {line}, which reads as {encoding} text, "
            f"{text!r}): convert it, e.g. iconv -f {ICONV_NAMES[encoding]} -t utf-8 {path} > {converted}"
        )
    return ScriptError(
        f"{what} {path} is not UTF-8 text (byte 0x{byte:02x} on line {line}); Chinese text in another encoding is "
        f"usually GBK: convert it, e.g. iconv -f gbk -t utf-8 {path} > {converted}"
    )


def read_line(path: str | Path, line: int) -> bytes:
    """The bytes of line `line` (1-based) of a file."""
    with open(path, "rb") as file:
        for number, content in enumerate(file, start=1):
            if number == line:
                return content
    return b""


# The most characters of a line a message quotes.
QUOTED_CHARACTERS = 60


# The encodings `guess_line_encoding` tells, in the order it tries them, and their names for iconv.
ICONV_NAMES = {"GBK": "gbk", "Big5": "big5", "Latin-1": "latin1"}


def guess_line_encoding(line: bytes) -> tuple[str, str]:
    """
    The encoding a line that is not UTF-8 is likely in, and its text so read: GBK (simplified Chinese, the usual one)
    or Big5 (traditional Chinese, Taiwan and Hong Kong) when it reads as such with Chinese characters in it, else
    Latin-1 (every byte is a Latin-1 character: é, ü, ...).
    """
    text, encoding = line.decode("latin-1"), "Latin-1"
    for chinese in ("GBK", "Big5"):
        try:
            read = line.decode(ICONV_NAMES[chinese])
        except UnicodeDecodeError:
            continue
        if any("\u4e00" <= character <= "\u9fff" for character in read):
            text, encoding = read, chinese
            break
    text = text.strip()
    return encoding, text if len(text) <= QUOTED_CHARACTERS else text[:QUOTED_CHARACTERS] + "..."


# How much of a file `count_line_encodings` reads: enough to tell a UTF-8 file from one in another encoding.
LINE_ENCODING_SCAN_BYTES = 1 << 26


def count_line_encodings(path: str | Path) -> tuple[int, int]:
    """How many lines of a file (of its first `LINE_ENCODING_SCAN_BYTES`) hold UTF-8 text beyond ASCII, and how many
    are not UTF-8."""
    utf8_lines = other_lines = scanned = 0
    with open(path, "rb") as file:
        for content in file:
            scanned += len(content)
            if scanned > LINE_ENCODING_SCAN_BYTES:
                break
            if content.isascii():
                continue
            try:
                content.decode("utf-8")
                utf8_lines += 1
            except UnicodeDecodeError:
                other_lines += 1
    return utf8_lines, other_lines


def read_utf8_text(path: str | Path, what: str) -> str:
    """The text of a small file, with a `ScriptError` naming the fix when it is not UTF-8."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise not_utf8_error(path, what, line, data[error.start]) from error


def check_data_file(path: str, option: str) -> None:
    """
    Check a data file before loading it: it exists, is not empty, and (as far as `UTF8_CHECK_BYTES`) is UTF-8.

    Args:
        path (`str`): the file.
        option (`str`): the argument that named it (e.g. `"--train_file"`), for the message.
    """
    if not Path(path).is_file():
        raise ScriptError(f"{option} {path}: no such file.")
    if Path(path).stat().st_size == 0:
        raise ScriptError(f"{option} {path} is empty: give a file with text.")
    if is_binary_data_file(path):
        return
    # pyarrow's JSON reader loads bytes that are not UTF-8 without a word, and a later step fails on them with a
    # traceback naming no file: JSON is checked whole (the other formats fail while loading, see data_file_error)
    whole = Path(path).suffix.lower() in (".json", ".jsonl")
    place = find_utf8_error(path, limit=None if whole else UTF8_CHECK_BYTES)
    if place is not None:
        raise not_utf8_error(path, option, *place)


# pandas reads the cells None, NA, null, NaN, n/a, ... of a CSV file as missing values; with these options of
# `datasets.load_dataset("csv", ...)` only an empty cell is missing, so that a text or a class named "NA" stays.
CSV_ONLY_EMPTY_CELLS_MISSING = {"keep_default_na": False, "na_values": [""]}


# Why writing `datasets`' cache can fail: no space, a read-only file system, no permission, a disk quota, a file
# where a folder should be.
CACHE_WRITE_ERRORS = (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.ENOTDIR)


def data_file_error(files: dict[str, str], error: Exception, cache_dir: str | None = None) -> ScriptError:
    """
    The `ScriptError` for data files that `datasets` failed to load: a cache that cannot be written, else what is
    wrong with one of the files (see `diagnose_data_file`) when that can be found, else the loader's own message.

    Args:
        files (`dict[str, str]`): the files, by the argument that named each (e.g. `{"--train_file": "a.jsonl"}`).
        error (`Exception`): what the loader raised.
        cache_dir (`str`, *optional*): the `--cache_dir` given to the loader (`None`: datasets' default cache).
    """
    write_error = cache_write_error(error)
    data_files = {Path(path).resolve() for path in files.values()}
    if write_error is not None and (
        write_error.filename is None or Path(write_error.filename).resolve() not in data_files
    ):
        cache = f"--cache_dir {cache_dir}" if cache_dir else f"the datasets cache {datasets.config.HF_DATASETS_CACHE}"
        return ScriptError(
            f"cannot write {cache} ({write_error.strerror or write_error}) while loading the data: give --cache_dir "
            "a folder you can write to, on a disk with free space."
        )
    for option, path in files.items():
        found = diagnose_data_file(path, option)
        if found is not None:
            return found
    cause = str(error.__cause__ or error).strip().splitlines() or [type(error).__name__]
    return ScriptError(f"cannot read {', '.join(map(str, files.values()))}: {cause[0]}")


def check_caches_writable(cache_dir: str | None, evaluates: bool) -> None:
    """
    Before any data is read: refuse a cache the run would fail to write later, `--cache_dir` (else datasets' own
    cache, under `HF_HOME`) where the data is loaded, and when the run evaluates, the folder where `evaluate` copies
    the metrics' code (`HF_MODULES_CACHE`, under `HF_HOME` whatever `--cache_dir` says), which a read-only `HF_HOME`
    made fail at the first evaluation, after tokenizing and training.

    Args:
        cache_dir (`str`, *optional*): the run's `--cache_dir`.
        evaluates (`bool`): whether the run computes metrics (`--do_eval`, `--do_predict`).
    """
    datasets_cache = Path(cache_dir or datasets.config.HF_DATASETS_CACHE)
    error = folder_write_error(datasets_cache)
    if error is not None and cache_dir is not None:
        raise ScriptError(
            f"cannot write --cache_dir {cache_dir} ({error}): give --cache_dir a folder you can write to, on a disk "
            "with free space."
        )
    if error is not None:
        raise ScriptError(
            f"cannot write the datasets cache {datasets_cache} ({error}): give --cache_dir a folder you can write to "
            "(or set HF_HOME to one)."
        )
    if not evaluates:
        return
    import evaluate

    modules_cache = Path(evaluate.config.HF_MODULES_CACHE)
    error = folder_write_error(modules_cache)
    if error is not None:
        raise ScriptError(
            f"cannot write {modules_cache} ({error}), where evaluate copies the code of the metrics: set HF_HOME (or "
            "HF_MODULES_CACHE) to a folder you can write to; --cache_dir does not move it."
        )


def folder_write_error(folder: Path) -> str | None:
    """Why `folder` cannot be created or written (e.g. "Read-only file system"), or `None` when it can."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as error:
        return error.strerror or str(error)
    return None


def cache_write_error(error: BaseException) -> OSError | None:
    """The OSError of a failed write (`CACHE_WRITE_ERRORS`) among `error` and its causes, or `None`."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, OSError) and error.errno in CACHE_WRITE_ERRORS:
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def diagnose_data_file(path: str, option: str) -> ScriptError | None:
    """What makes a data file unreadable: not UTF-8, only blank lines, a CSV header without rows, a line that is not
    JSON, a Parquet file of no rows; else `None` (the loader's own message is the one to show)."""
    if is_binary_data_file(path):
        return empty_parquet_error(path, option)
    place = find_utf8_error(path)
    if place is not None:
        return not_utf8_error(path, option, *place)
    with open(path, encoding="utf-8-sig") as file:  # without the byte-order mark an editor may write first
        lines = [line for line in file if line.strip()]
    if not lines and Path(path).read_bytes().startswith(codecs.BOM_UTF8):
        return ScriptError(
            f"{option} {path} holds only a byte-order mark (the 3 bytes some editors write first in a UTF-8 file), no "
            "data: give a file with data."
        )
    if not lines:
        return ScriptError(f"{option} {path} holds only blank lines: give a file with data.")
    if Path(path).suffix.lower() == ".csv" and len(lines) == 1:
        return ScriptError(
            f"{option} {path} holds only its header line ({lines[0].strip()[:80]}), no rows: give a file with data."
        )
    if Path(path).suffix.lower() in (".json", ".jsonl"):
        json_error = find_json_error(path)
        if json_error is not None:
            return ScriptError(f"{option} {path}: {json_error}")
    return None


def empty_parquet_error(path: str, option: str) -> ScriptError | None:
    """The error for a Parquet file of no rows (pyarrow says "BatchSize must be greater than 0"), else `None`."""
    if Path(path).suffix.lower() != ".parquet":
        return None
    import pyarrow.parquet as pq  # datasets' own dependency

    try:
        metadata = pq.ParquetFile(path).metadata
    except Exception:  # not a readable Parquet file: the loader's message says why
        return None
    if metadata.num_rows > 0:
        return None
    columns = ", ".join(metadata.schema.names) or "none"
    return ScriptError(f"{option} {path} is a Parquet file of no rows (columns: {columns}): give a file with data.")


def find_json_error(path: str | Path) -> str | None:
    """What makes a JSON document or JSON-lines file unreadable, with its line, or `None` when it parses."""
    with open(path, encoding="utf-8-sig") as file:
        if file.read(4096).lstrip().startswith("["):  # one JSON array rather than JSON lines: parse it whole
            file.seek(0)
            try:
                rows = json.load(file)
            except json.JSONDecodeError as error:
                return f"not valid JSON at line {error.lineno}, column {error.colno} ({error.msg}): fix the file."
            return "an empty JSON array ([]), no rows: give a file with data." if rows == [] else None
        file.seek(0)
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                return (
                    f"line {number} is not valid JSON ({error.msg} at column {error.colno}): JSON lines need one "
                    "complete object a line; fix or remove the line."
                )
            if not isinstance(record, dict):
                return f"line {number} holds a {type(record).__name__}, not a JSON object: give one object a line."
    return None


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
