"""Reading data files and saying what is wrong with one that cannot be read. One table, `DATA_FORMATS`, holds each
kind of data file (suffixes, reader, schema, what empty means, what else breaks one), and one boundary, `read_data`,
turns whatever a reader raises into one line naming the file and the fix: missing, empty, not UTF-8 (GBK, UTF-16, a
binary format), not JSON, a dataset card or a `save_to_disk` state that does not parse, the cache `datasets` cannot
write. Standard library at the top: the checks of a data file named on the command line also run before torch loads
(`training/first_answers.py`); `datasets` is imported where a file is read."""

from __future__ import annotations  # the annotations name datasets' types, imported where a file is read

import codecs
import csv
import errno
import json
import logging
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ScriptError

if TYPE_CHECKING:
    import datasets

logger = logging.getLogger(__name__)

Loaded = TypeVar("Loaded")


# pandas reads the cells None, NA, null, NaN, n/a, ... of a CSV file as missing values; with these options of
# `datasets.load_dataset("csv", ...)` only an empty cell is missing, so that a text or a class named "NA" stays.
CSV_ONLY_EMPTY_CELLS_MISSING = {"keep_default_na": False, "na_values": [""]}
# A tab-separated file has no quoting (a tab never lies inside a field): a text may begin with a quotation mark.
TAB_SEPARATED = {"sep": "\t", "quoting": csv.QUOTE_NONE, **CSV_ONLY_EMPTY_CELLS_MISSING}


@dataclass(frozen=True)
class DataFormat:
    """
    One kind of data file, the only place its traits are written: the suffixes it goes by, the `datasets` builder that
    reads it with its options, how its columns are read without loading it, what makes a file of it hold no rows, what
    else makes one unreadable, and the separator of its fields where `--columns` names them (a file without a header).
    """

    name: str  # as `datasets` calls the kind in a folder: csv, tsv, json, parquet, arrow, text
    suffixes: tuple[str, ...]
    builder: str
    options: dict[str, Any] = field(default_factory=dict)
    signature: tuple[bytes, str] | None = None  # a binary format: its first bytes, and what they say it is
    schema: Callable[[Path], datasets.Features] = lambda path: text_columns([])  # its columns, read from the file
    no_rows: Callable[[Path], str | None] = lambda path: None  # the words after the file's name for one of no rows
    broken: Callable[[Path], str | None] = lambda path: None  # what else makes it unreadable, after its name
    reader_takes_any_bytes: bool = False  # the reader loads bytes that are not UTF-8 without a word: check them all
    field_separator: str | None = None  # of a file without a header line, whose columns --columns names
    column_fix: str = "name the right one with {option}"  # for a column the file lacks ({option}: the column's)

    @property
    def binary(self) -> bool:
        return self.signature is not None

    @property
    def described(self) -> str:
        """What a file of this format is, in words ("a Parquet file"); its name for a text format."""
        return self.signature[1] if self.signature is not None else self.name


def header_schema(separator: str) -> Callable[[Path], datasets.Features]:
    """The schema of a delimited file: the names on its first line, columns of text."""

    def schema(path: Path) -> datasets.Features:
        with open(path, encoding="utf-8-sig", errors="replace") as file:
            names = [name.strip() for name in file.readline().rstrip("\r\n").split(separator)]
        return text_columns(names)

    return schema


def text_columns(names: Sequence[str]) -> datasets.Features:
    """Columns of the given names, of text: the schema of a format that declares no types."""
    import datasets

    return datasets.Features({name: datasets.Value("string") for name in names})


def header_only(path: Path) -> str | None:
    """A delimited file whose only line is its header."""
    with open(path, encoding="utf-8-sig") as file:
        lines = [line for line in file if line.strip()]
    return f" holds only its header line ({lines[0].strip()[:80]}), no rows" if len(lines) == 1 else None


def parquet_schema(path: Path) -> datasets.Features:
    import datasets
    import pyarrow.parquet as pq  # datasets' own dependency

    return datasets.Features.from_arrow_schema(pq.read_schema(path))


def parquet_of_no_rows(path: Path) -> str | None:
    """A Parquet file of no rows (pyarrow says "BatchSize must be greater than 0")."""
    import pyarrow.parquet as pq

    try:
        metadata = pq.ParquetFile(path).metadata
    except Exception:  # not a readable Parquet file: the loader's message says why
        return None
    if metadata.num_rows > 0:
        return None
    return f" is a Parquet file of no rows (columns: {', '.join(metadata.schema.names) or 'none'})"


def arrow_schema(path: Path) -> datasets.Features:
    import datasets
    import pyarrow.ipc

    with pyarrow.memory_map(str(path)) as source:
        try:
            schema = pyarrow.ipc.open_stream(source).schema
        except pyarrow.ArrowInvalid:  # the file format, not the stream format save_to_disk writes
            schema = pyarrow.ipc.open_file(source).schema
    return datasets.Features.from_arrow_schema(schema)


# What `json_document_error` says of a JSON file that is an empty array.
EMPTY_ARRAY = "an empty JSON array ([]), no rows"


def json_document_error(path: str | Path) -> str | None:
    """What makes a JSON document or JSON-lines file unreadable, with its line (`EMPTY_ARRAY` for `[]`), or `None`."""
    with open(path, encoding="utf-8-sig") as file:
        if file.read(4096).lstrip().startswith("["):  # one JSON array rather than JSON lines: parse it whole
            file.seek(0)
            try:
                rows = json.load(file)
            except json.JSONDecodeError as error:
                return f"not valid JSON at line {error.lineno}, column {error.colno} ({error.msg}): fix the file."
            return EMPTY_ARRAY if rows == [] else None
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


def json_schema(path: Path) -> datasets.Features:
    """The columns of a JSON-lines file: the keys of its first object (none known for another JSON layout)."""
    with open(path, encoding="utf-8-sig", errors="replace") as file:
        first = next((line for line in file if line.strip()), "")
    try:
        record = json.loads(first)
    except json.JSONDecodeError:
        return text_columns([])
    return text_columns(list(record) if isinstance(record, dict) else [])


def empty_json_array(path: Path) -> str | None:
    return f": {EMPTY_ARRAY}" if json_document_error(path) == EMPTY_ARRAY else None


def json_problem(path: Path) -> str | None:
    problem = json_document_error(path)
    return None if problem in (None, EMPTY_ARRAY) else f": {problem}"


HEADERLESS_HINT = "for lines of label<TAB>text without a header line, pass --columns label,text"

# Every kind of data file the scripts read; each list of kinds, suffixes and diagnoses is read from here.
DATA_FORMATS = (
    DataFormat(
        "csv", (".csv",), "csv", CSV_ONLY_EMPTY_CELLS_MISSING, schema=header_schema(","), no_rows=header_only,
        field_separator=",", column_fix="name the right one with {option} (a .csv's first line names its columns; "
        "for a file without that line, pass --columns label,text)",
    ),
    DataFormat(
        "tsv", (".tsv",), "csv", TAB_SEPARATED, schema=header_schema("\t"), no_rows=header_only,
        field_separator="\t", column_fix="name the right one with {option} (a .tsv's first line names its columns; "
        f"{HEADERLESS_HINT})",
    ),
    DataFormat(
        "json", (".json", ".jsonl", ".ndjson"), "json", schema=json_schema,
        no_rows=empty_json_array, broken=json_problem, reader_takes_any_bytes=True,
    ),
    DataFormat("parquet", (".parquet",), "parquet", signature=(b"PAR1", "a Parquet file"), schema=parquet_schema,
               no_rows=parquet_of_no_rows),
    DataFormat("arrow", (".arrow",), "arrow", signature=(b"ARROW1", "an Arrow file"), schema=arrow_schema),
    DataFormat(
        "text", (".txt",), "text", schema=lambda path: text_columns(["text"]), field_separator="\t",
        column_fix=f"a .txt is read as one text column, 'text', a line a row; {HEADERLESS_HINT}",
    ),
)  # fmt: skip
FORMAT_OF_SUFFIX = {suffix: data_format for data_format in DATA_FORMATS for suffix in data_format.suffixes}
SUFFIXES = [suffix for data_format in DATA_FORMATS for suffix in data_format.suffixes]
FILE_KINDS = ", ".join(SUFFIXES[:-1]) + " or " + SUFFIXES[-1]  # ".csv, .tsv, ... or .txt"
# The binary formats datasets reads, by what their first bytes say a file is ("a Parquet file").
BINARY_FORMATS = {data_format.described: data_format for data_format in DATA_FORMATS if data_format.binary}
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".lz4")


def data_format(path: str | Path, compressed: bool = False) -> DataFormat | None:
    """The format a data file is in by its name, in any case (`None` for no data file); with `compressed`, a
    compressed file is of the format it holds (`train.csv.gz` is a csv), as datasets reads it in a folder."""
    suffixes = [suffix.lower() for suffix in Path(path).suffixes]
    while compressed and suffixes and suffixes[-1] in COMPRESSION_SUFFIXES:
        suffixes.pop()
    return FORMAT_OF_SUFFIX.get(suffixes[-1]) if suffixes else None


def data_file_kind(path: Path) -> str | None:
    """The kind of data a file of a dataset folder holds by its name (`train.csv.gz` is a csv), `None` for none."""
    found = data_format(path, compressed=True)
    return found.name if found is not None else None


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
    **dict(data_format.signature for data_format in DATA_FORMATS if data_format.binary),
    b"\x1f\x8b": "a gzip-compressed file",
    b"PK\x03\x04": "a zip archive (or an .xlsx workbook)",
    b"\xff\xfe\x00\x00": "UTF-32 text",
    b"\xff\xfe": "UTF-16 text",
    b"\xfe\xff": "UTF-16 text",
}


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
    if kind in BINARY_FORMATS:  # a format datasets reads, under the name of a text format
        suffix = BINARY_FORMATS[kind].suffixes[0]
        return ScriptError(
            f"{what} {path} is {kind}, not text: rename it to {path.with_suffix(suffix)} (a file named {suffix} is "
            f"read as {kind.split()[-2]})."
        )
    if kind is not None:
        return ScriptError(
            f"{what} {path} is {kind}, not text: give a {FILE_KINDS} file (e.g. export it with pandas: "
            "df.to_parquet(...))."
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


def headerless_columns(columns: str | None) -> list[str] | None:
    """`--columns label,text` as the column names of data files without a header line, each named once."""
    if columns is None:
        return None
    names = [name.strip() for name in columns.split(",")]
    if len(names) < 2 or not all(names) or len(set(names)) < len(names):
        raise ScriptError(
            f"--columns {columns}: name each column of the file once, in order, separated by commas (e.g. --columns "
            "label,text for label<TAB>text lines)."
        )
    return names


def check_data_file(path: str, option: str, columns: Sequence[str] | None = None) -> DataFormat:
    """
    Check a data file before loading it: it is of a format the scripts read, exists, is not empty, is UTF-8 (its
    first `UTF8_CHECK_BYTES`, or all of it where the reader would take any bytes), and where `columns` names the
    columns of a file without a header, has that many fields on every line.

    Args:
        path (`str`): the file.
        option (`str`): the argument that named it (e.g. `"--train_file"`), for the message.
        columns (`Sequence[str]`, *optional*): `--columns`, the columns of a file without a header line.

    Returns:
        `DataFormat`: the file's format.
    """
    found = data_format(path)
    if found is None:
        raise ScriptError(f"{option} {path}: use a {FILE_KINDS} file, or a folder written by save_to_disk.")
    if columns and found.field_separator is None:
        raise ScriptError(
            f"{option} {path}: --columns names the columns of a .txt, .tsv or .csv file without a header line; a "
            f"{found.name} file names its own: leave out --columns."
        )
    if not Path(path).is_file():
        raise ScriptError(f"{option} {path}: no such file.")
    if Path(path).stat().st_size == 0:
        raise ScriptError(f"{option} {path} is empty: give a file with text.")
    if found.binary:
        return found
    place = find_utf8_error(path, limit=None if found.reader_takes_any_bytes else UTF8_CHECK_BYTES)
    if place is not None:
        raise not_utf8_error(path, option, *place)
    if columns:
        check_field_counts(Path(path), option, found.field_separator, columns)
    return found


def check_field_counts(path: Path, option: str, separator: str, columns: Sequence[str]) -> None:
    """Every line of a file without a header has one field per name of `--columns` (pandas would read a line of
    more as an index column, or stop with its own words)."""
    shown = "<TAB>" if separator == "\t" else separator
    with open(path, encoding="utf-8-sig") as file:
        for number, line in enumerate(file, start=1):
            fields = line.rstrip("\r\n").split(separator)
            if line.strip() and len(fields) != len(columns):
                raise ScriptError(
                    f"{option} {path}: line {number} holds {len(fields)} field{'s' * (len(fields) != 1)} separated "
                    f"by {shown}, but --columns names {len(columns)} ({','.join(columns)}): give every line "
                    f"{shown.join(columns)}, with no {shown} inside a field."
                )


def format_reading(found: DataFormat, path: str, columns: Sequence[str] | None) -> tuple[str, dict[str, Any]]:
    """The `datasets` builder and options that read a file of `found` format (`columns`: `--columns`, the columns of a
    file without a header line, separated by the format's field separator)."""
    if not columns:
        return found.builder, dict(found.options)
    return "csv", {**TAB_SEPARATED, "sep": found.field_separator, "column_names": list(columns)}


# Why writing `datasets`' cache can fail: no space, a read-only file system, no permission, a disk quota, a file
# where a folder should be.
CACHE_WRITE_ERRORS = (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.ENOTDIR)


def read_data(
    load: Callable[[], Loaded],
    files: dict[str, str | Path],
    cache_dir: str | None = None,
    otherwise: Callable[[Exception], ScriptError] | None = None,
) -> Loaded:
    """
    The one way the scripts read data: `load()`, and whatever its reader raises (datasets, pyarrow, pandas, PyYAML,
    json) made one line naming the file and the fix (`data_file_error`), the traceback kept as its cause.

    Args:
        load (`Callable`): what reads the data (`datasets.load_dataset`, `load_from_disk`, ...).
        files (`dict`): the words naming each file or folder read, and its path (`{"--train_file": "a.jsonl"}`,
            `{"--dataset_name cail: its file": "cail"}`); a folder stands for every file datasets reads in it.
        cache_dir (`str`, *optional*): the `--cache_dir` given to the loader (`None`: datasets' default cache).
        otherwise (`Callable`, *optional*): the line for an error no file explains (default: the reader's words).
    """
    try:
        return load()
    except ScriptError:
        raise
    except Exception as error:
        raise data_file_error(files, error, cache_dir, otherwise) from error


def data_file_error(
    files: dict[str, str | Path],
    error: Exception,
    cache_dir: str | None = None,
    otherwise: Callable[[Exception], ScriptError] | None = None,
) -> ScriptError:
    """The line for data that failed to load (see `read_data`): a cache that cannot be written, else what is wrong
    with one of the files (`diagnose_data_file`), else `otherwise(error)` or the reader's own first line."""
    write_error = cache_write_error(error)
    data_files = {Path(path).resolve() for path in files.values()}
    if write_error is not None and (
        write_error.filename is None or Path(write_error.filename).resolve() not in data_files
    ):
        import datasets

        cache = f"--cache_dir {cache_dir}" if cache_dir else f"the datasets cache {datasets.config.HF_DATASETS_CACHE}"
        return ScriptError(
            f"cannot write {cache} ({write_error.strerror or write_error}) while loading the data: give --cache_dir "
            "a folder you can write to, on a disk with free space."
        )
    for what, path in files.items():
        for file in files_datasets_reads(Path(path)) if Path(path).is_dir() else [Path(path)]:
            found = diagnose_data_file(str(file), what)
            if found is not None:
                return found
    if otherwise is not None:
        return otherwise(error)
    cause = str(error.__cause__ or error).strip().splitlines() or [type(error).__name__]
    return ScriptError(
        f"cannot read {', '.join(map(str, files.values()))} ({cause[0].rstrip('.')}): give a whole file of the format "
        "its name says (write or download it again)."
    )


def files_datasets_reads(folder: Path) -> list[Path]:
    """The files of `folder` that datasets may read, sorted: hidden files and folders (a .DS_Store the Finder adds, the
    .cache of `hf download`) and those named `__...` left out, at any depth, as datasets leaves them out."""
    return sorted(
        path
        for path in folder.rglob("*")
        if path.is_file() and not any(part.startswith((".", "__")) for part in path.relative_to(folder).parts)
    )


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
    import datasets

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


def diagnose_data_file(path: str, what: str) -> ScriptError | None:
    """
    What makes a file of the data unreadable, as its row of `DATASET_FILES` (a dataset card, save_to_disk's state) or
    of `DATA_FORMATS` says: not UTF-8, only blank lines, no rows, broken; `None` when nothing is found (the reader's
    own message is the one to show). `what` names the file in the line (`"--train_file"`).
    """
    dataset_file = DATASET_FILES.get(Path(path).name)
    found = data_format(path)
    if dataset_file is not None:
        problem = dataset_file(Path(path))
        return ScriptError(f"{what} {path}{problem}") if problem else None
    if found is None:
        return None
    if not found.binary:
        problem = text_problem(path, what)
        if problem is not None:
            return problem
    no_rows = found.no_rows(Path(path))
    if no_rows is not None:
        return ScriptError(f"{what} {path}{no_rows}: give a file with data.")
    broken = found.broken(Path(path))
    return ScriptError(f"{what} {path}{broken}") if broken else None


def text_problem(path: str, what: str) -> ScriptError | None:
    """What makes a text data file unreadable whatever its format: not UTF-8, only a byte-order mark, only blank
    lines."""
    place = find_utf8_error(path)
    if place is not None:
        return not_utf8_error(path, what, *place)
    with open(path, encoding="utf-8-sig") as file:  # without the byte-order mark an editor may write first
        if any(line.strip() for line in file):
            return None
    if Path(path).read_bytes().startswith(codecs.BOM_UTF8):
        return ScriptError(
            f"{what} {path} holds only a byte-order mark (the 3 bytes some editors write first in a UTF-8 file), no "
            "data: give a file with data."
        )
    return ScriptError(f"{what} {path} holds only blank lines: give a file with data.")


def card_problem(path: Path) -> str | None:
    """What keeps datasets from reading a dataset card (README.md): a YAML header between `---` lines that does not
    parse; the line and column are the file's."""
    import yaml

    lines = read_utf8_text(path, "the dataset card").splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    end = next((index for index in range(1, len(lines)) if lines[index].strip() == "---"), len(lines))
    try:
        yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        place = f" at line {mark.line + 2}, column {mark.column + 1}" if mark is not None else ""
        reason = getattr(error, "problem", None) or str(error).splitlines()[0]
        return (
            f", a dataset card, has a header that is not valid YAML ({reason}{place}): fix the YAML between its --- "
            "lines."
        )
    return None


def saved_state_problem(path: Path) -> str | None:
    """What keeps `load_from_disk` from reading a JSON file `save_to_disk` wrote (state.json, dataset_info.json,
    dataset_dict.json): not JSON, not a JSON object (a file cut short or edited by hand), a data file it lists that
    is not there (a folder copied in part)."""
    try:
        document = json.loads(read_utf8_text(path, "the file"))
    except json.JSONDecodeError as error:
        reason = f"is not valid JSON ({error.msg}: line {error.lineno}, column {error.colno})"
    else:
        if not isinstance(document, dict):
            reason = f"is a JSON {type(document).__name__}, not an object"
        else:
            listed = [entry.get("filename") for entry in document.get("_data_files", []) if isinstance(entry, dict)]
            missing = [name for name in listed if name and not (path.parent / name).is_file()]
            if not missing:
                return None
            reason = f"lists {missing[0]}, which the folder lacks"
    return (
        f", which save_to_disk writes, {reason}: the folder was cut short or edited; save the dataset again with "
        "save_to_disk."
    )


# The files of a dataset folder besides its data, by name, and what makes one unreadable (the words after its name).
DATASET_FILES: dict[str, Callable[[Path], str | None]] = {
    "README.md": card_problem,
    "state.json": saved_state_problem,
    "dataset_info.json": saved_state_problem,
    "dataset_dict.json": saved_state_problem,
}
