"""data/build_full_data.py: its conversions on small inputs in the sources' own formats, its checks, and its pins
against the full data the tests read (where it is present). The downloads themselves need the internet: not here."""

import hashlib
import json
import urllib.request

import pytest
from conftest import PEOPLES_DAILY_SAMPLE, REPO_ROOT

from data import build_full_data
from data.build_full_data import BuildError, DataFile, Downloads, build, main


def test_peoples_daily_loses_its_tags_and_nothing_else():
    tagged = (
        "迈向/v  充满/v  希望/n  的/u  新/a  世纪/n  ——/w  一九九八年/t  新年/t  讲话/n  （/w  附/v  图片/n  １/m  张/q  ）/w\n"
        "中共中央/nt  总书记/n  、/w  国家/n  主席/n  江/nr  泽民/nr\n"
        "\n"
        "１/2/m  这/r\n"  # a word that holds the separator keeps it: only the last "/tag" goes
    )
    expected = PEOPLES_DAILY_SAMPLE.read_text(encoding="utf-8").splitlines()[:2]
    assert build_full_data.peoples_daily(tagged).split("\n") == [*expected, "", "１/2这", ""]


def test_fudan_articles_lose_the_header_that_names_their_class():
    journal = "宇航学报\nJOURNAL OF ASTRONAUTICS\n1999年 第20卷 第2期 vol.20 No.2 1999\n科技期刊\n\n  卫星轨道　设计\t方法\n结论\n"
    assert build_full_data.fudan_text(journal.encode()) == "卫星轨道 设计 方法\n结论"
    digest = "【 文献号 】3-1234\n【原文出处】人大复印资料\n【 正  文 】\n 艺术 的".encode() + b"\xb0\xa1 \xff"
    assert build_full_data.fudan_text(digest + " 声音\n".encode()) == "艺术 的 声音"  # GBK bytes are dropped
    plain = "第一段\n第二段".encode()  # neither header: the text as it is
    assert build_full_data.fudan_text(plain) == "第一段\n第二段"


def test_fudan_keeps_long_first_copies_of_each_class():
    long_text, other = "长" * 200, "文" * 250
    documents = {
        "train/C3-Art/C3-Art0002.txt": long_text.encode(),
        "test/C3-Art/C3-Art0009.txt": long_text.encode(),  # the same text, first in path order: its path is kept
        "test/C3-Art/C3-Art0001.txt": ("短" * 199).encode(),  # too short
        "train/C39-Sports/C39-Sports0001.txt": other.encode(),
        "train/C19-Computer/C19-Computer0001.txt": other.encode(),  # not one of the 7 classes
        "answer/C3-Art/C3-Art0003.txt": other.encode(),  # not under train/ or test/
    }
    records = build_full_data.fudan_records(documents)
    assert records == [
        {"id": "test/C3-Art/C3-Art0009.txt", "label": "Art", "text": long_text, "split": "train"},
        {"id": "train/C39-Sports/C39-Sports0001.txt", "label": "Sports", "text": other, "split": "train"},
    ]


def test_cail_cases_become_records_in_file_order():
    def case(number, domain, casename, context):
        return {"caseid": number, "domain": domain, "paragraphs": [{"casename": casename, "context": context}]}

    source = {
        "data": [case(1, "civil", "借款合同纠纷", " 经审理查明: 原告..."), case(2, "criminal", "盗窃", "公诉机关指控")]
    }
    records = build_full_data.cail_records(source, "阅读理解/data/dev_ground_truth.json", "train")
    assert records == [
        {"id": "dev_ground_truth-1", "split": "train", "label": "civil", "casename": "借款合同纠纷",
         "text": " 经审理查明: 原告..."},  # the context as it is
        {"id": "dev_ground_truth-2", "split": "train", "label": "criminal", "casename": "盗窃", "text": "公诉机关指控"},
    ]  # fmt: skip
    two_paragraphs = {"data": [{**case(3, "civil", "x", "y"), "paragraphs": [{}, {}]}]}
    with pytest.raises(BuildError, match=r"case 3 of test_ground_truth\.json has 2 paragraphs, not one"):
        build_full_data.cail_records(two_paragraphs, "test_ground_truth.json", "test")


def test_chnsenticorp_drops_the_empty_review_and_splits_a_tenth_a_tenth_the_rest():
    reviews = [f'{number % 2},"第{number}条, 评论"' for number in range(41)]
    reviews[7] = "0,"  # the CSV's one empty review
    records = build_full_data.chnsenticorp_records("label,review\n" + "\n".join(reviews) + "\n")
    assert [record["id"] for record in records] == list(range(40))
    assert records[7] == {
        "id": 7,
        "split": records[7]["split"],
        "label": 0,
        "text": "第8条, 评论",
    }  # quoted comma kept
    splits = [record["split"] for record in records]
    assert (splits.count("test"), splits.count("dev"), splits.count("train")) == (4, 4, 32)
    assert build_full_data.chnsenticorp_records("label,review\n" + "\n".join(reviews) + "\n") == records


def file_of(content: bytes, path: str = "cls/made.jsonl") -> DataFile:
    calls = []

    def make(downloads):
        calls.append(downloads)
        return content

    data_file = DataFile(path, hashlib.sha256(b"pinned\n").hexdigest(), make)
    return data_file, calls


def test_a_file_that_differs_from_its_pin_is_named_and_not_written(tmp_path):
    wrong, _ = file_of(b"something else\n")
    with pytest.raises(BuildError, match=r"^cls/made.jsonl built from its sources is not the file the tests were"):
        build(tmp_path / "out", Downloads(tmp_path), [wrong])
    assert not (tmp_path / "out").exists()


def test_a_built_file_is_written_once(tmp_path):
    right, calls = file_of(b"pinned\n")
    assert build(tmp_path / "out", Downloads(tmp_path), [right]) == ["cls/made.jsonl: written, 7 bytes"]
    assert (tmp_path / "out" / "cls" / "made.jsonl").read_bytes() == b"pinned\n"
    assert build(tmp_path / "out", Downloads(tmp_path), [right]) == ["cls/made.jsonl: already there"]
    assert len(calls) == 1 and list((tmp_path / "out" / "cls").iterdir()) == [tmp_path / "out" / "cls" / "made.jsonl"]


def test_no_internet_is_one_readable_line(tmp_path, monkeypatch, capsys):
    def unreachable(url, timeout):
        raise OSError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", unreachable)
    monkeypatch.setattr(build_full_data, "FILES", [f for f in build_full_data.FILES if f.path.startswith("cls/cail")])
    assert main(["--output", str(tmp_path / "out")]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("build_full_data: error: could not download https://raw.githubusercontent.com/")
    assert "Temporary failure in name resolution" in line and not (tmp_path / "out").exists()


def test_the_vocabularies_are_the_shipped_copies():
    for data_file in build_full_data.FILES:
        if data_file.path.startswith("vocab/"):
            shipped = data_file.build(None)
            assert hashlib.sha256(shipped).hexdigest() == data_file.sha256
            assert shipped == (REPO_ROOT / "data" / data_file.path.removeprefix("vocab/")).read_bytes()


def test_the_pins_are_the_full_data_the_tests_read(data_dir):
    """Every file the tests read in the full data is one the script builds, with the SHA-256 pinned there."""
    present = sorted(str(path.relative_to(data_dir)) for path in data_dir.rglob("*.*") if path.name != "README.md")
    assert present == sorted(data_file.path for data_file in build_full_data.FILES)
    for data_file in build_full_data.FILES:
        assert hashlib.sha256((data_dir / data_file.path).read_bytes()).hexdigest() == data_file.sha256, data_file.path
    lines = (data_dir / "cls" / "chnsenticorp_htl.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["split"] == "train"  # ids and splits as chnsenticorp_records makes them
