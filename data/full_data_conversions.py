"""The conversions of data/build_full_data.py: each source, in its own format, to the records of the tests' full
data (data/README.md). Pure functions of the sources' contents, tested on small inputs in tests/test_build_full_data.py;
the script downloads, checks and writes."""

import csv
import io
import json
import random
import re
from pathlib import Path

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


class BuildError(Exception):
    """A download or a built file that is not what the pinned sources give."""


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


def fudan_pools(documents: dict[str, bytes]) -> dict[str, list[tuple[str, str]]]:
    """Each class's articles of at least 200 characters (repository paths -> contents in, class folder -> (path,
    text) pairs out) without duplicates: the articles of a class, in path order, first copy of a text kept, shuffled by
    one `random.Random(1234)` used class after class. Both Fudan files are slices of these pools."""
    paths = sorted(path for path in documents if FUDAN_DOCUMENT.fullmatch(path))
    generator = random.Random(1234)
    pools = {}
    for folder in FUDAN_CLASSES:
        texts = {}
        for path in paths:
            if path.split("/")[1] == folder:
                texts.setdefault(fudan_text(documents[path]), path)  # a text's first path
        pools[folder] = [(path, text) for text, path in texts.items() if len(text) >= 200]
        generator.shuffle(pools[folder])
    return pools


def fudan_records(documents: dict[str, bytes]) -> list[dict]:
    """60 articles of each class drawn from the class's `test/` and `train/` files: the first 60 of `fudan_pools`."""
    return [
        {"id": path, "label": folder.split("-", 1)[1], "text": text, "split": "train"}
        for folder, pool in fudan_pools(documents).items()
        for path, text in pool[:60]
    ]


def fudan_more_records(documents: dict[str, bytes]) -> list[dict]:
    """150 more articles of each class, none in `fudan_records`: the 101st to the 250th of `fudan_pools` (the
    smallest pool, Space's, holds 251)."""
    return [
        {"id": path, "split": "train", "label": folder.split("-", 1)[1], "text": text}
        for folder, pool in fudan_pools(documents).items()
        for path, text in pool[100:250]
    ]


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
