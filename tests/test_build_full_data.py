"""data/build_full_data.py: its conversions on small inputs in the sources' own formats, its checks, and its pins
against the full data the tests read (where it is present). The downloads themselves need the internet: not here."""

import hashlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest
from conftest import HANG_GUARD_S, PEOPLES_DAILY_SAMPLE, REPO_ROOT, full_data_problems

from data import build_full_data, full_data_conversions
from data.build_full_data import BuildError, DataFile, Downloads, build, main


def test_peoples_daily_loses_its_tags_and_nothing_else():
    tagged = (
        "迈向/v  充满/v  希望/n  的/u  新/a  世纪/n  ——/w  一九九八年/t  新年/t  讲话/n  （/w  附/v  图片/n  １/m  张/q  ）/w\n"
        "中共中央/nt  总书记/n  、/w  国家/n  主席/n  江/nr  泽民/nr\n"
        "\n"
        "１/2/m  这/r\n"  # a word that holds the separator keeps it: only the last "/tag" goes
    )
    expected = PEOPLES_DAILY_SAMPLE.read_text(encoding="utf-8").splitlines()[:2]
    assert full_data_conversions.peoples_daily(tagged).split("\n") == [*expected, "", "１/2这", ""]


def test_fudan_articles_lose_the_header_that_names_their_class():
    journal = "宇航学报\nJOURNAL OF ASTRONAUTICS\n1999年 第20卷 第2期 vol.20 No.2 1999\n科技期刊\n\n  卫星轨道　设计\t方法\n结论\n"
    assert full_data_conversions.fudan_text(journal.encode()) == "卫星轨道 设计 方法\n结论"
    digest = "【 文献号 】3-1234\n【原文出处】人大复印资料\n【 正  文 】\n 艺术 的".encode() + b"\xb0\xa1 \xff"
    assert full_data_conversions.fudan_text(digest + " 声音\n".encode()) == "艺术 的 声音"  # GBK bytes are dropped
    plain = "第一段\n第二段".encode()  # neither header: the text as it is
    assert full_data_conversions.fudan_text(plain) == "第一段\n第二段"


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
    records = full_data_conversions.fudan_records(documents)
    assert records == [
        {"id": "test/C3-Art/C3-Art0009.txt", "label": "Art", "text": long_text, "split": "train"},
        {"id": "train/C39-Sports/C39-Sports0001.txt", "label": "Sports", "text": other, "split": "train"},
    ]


def test_the_second_fudan_file_takes_the_next_articles_of_the_same_pools():
    """fudan_more_records: the 101st to the 250th article of each class's shuffled pool, none of fudan_records'."""
    documents = {f"train/C3-Art/C3-Art{index:04d}.txt": f"{index:04d}".encode() * 60 for index in range(300)}
    first = [record["id"] for record in full_data_conversions.fudan_records(documents)]
    more = full_data_conversions.fudan_more_records(documents)
    pool = [path for path, _ in full_data_conversions.fudan_pools(documents)["C3-Art"]]
    assert first == pool[:60] and [record["id"] for record in more] == pool[100:250]
    assert list(more[0]) == ["id", "split", "label", "text"] and more[0]["label"] == "Art"
    assert sorted(pool) == sorted(documents)  # every article is 240 characters: all of them in the pool


def test_cail_cases_become_records_in_file_order():
    def case(number, domain, casename, context):
        return {"caseid": number, "domain": domain, "paragraphs": [{"casename": casename, "context": context}]}

    source = {
        "data": [case(1, "civil", "借款合同纠纷", " 经审理查明: 原告..."), case(2, "criminal", "盗窃", "公诉机关指控")]
    }
    records = full_data_conversions.cail_records(source, "阅读理解/data/dev_ground_truth.json", "train")
    assert records == [
        {"id": "dev_ground_truth-1", "split": "train", "label": "civil", "casename": "借款合同纠纷",
         "text": " 经审理查明: 原告..."},  # the context as it is
        {"id": "dev_ground_truth-2", "split": "train", "label": "criminal", "casename": "盗窃", "text": "公诉机关指控"},
    ]  # fmt: skip
    two_paragraphs = {"data": [{**case(3, "civil", "x", "y"), "paragraphs": [{}, {}]}]}
    with pytest.raises(BuildError, match=r"case 3 of test_ground_truth\.json has 2 paragraphs, not one"):
        full_data_conversions.cail_records(two_paragraphs, "test_ground_truth.json", "test")


def test_chnsenticorp_drops_the_empty_review_and_splits_a_tenth_a_tenth_the_rest():
    reviews = [f'{number % 2},"第{number}条, 评论"' for number in range(41)]
    reviews[7] = "0,"  # the CSV's one empty review
    records = full_data_conversions.chnsenticorp_records("label,review\n" + "\n".join(reviews) + "\n")
    assert [record["id"] for record in records] == list(range(40))
    assert records[7] == {
        "id": 7,
        "split": records[7]["split"],
        "label": 0,
        "text": "第8条, 评论",
    }  # quoted comma kept
    splits = [record["split"] for record in records]
    assert (splits.count("test"), splits.count("dev"), splits.count("train")) == (4, 4, 32)
    assert full_data_conversions.chnsenticorp_records("label,review\n" + "\n".join(reviews) + "\n") == records


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


# The build's failure paths, on local fakes (nothing is downloaded): one line, no traceback, nothing left behind.
SCRIPT = REPO_ROOT / "data" / "build_full_data.py"


def run_script(*arguments: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )


def one_line(completed: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in completed.stderr
    (line,) = completed.stderr.splitlines()
    return line


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("--output", "a_file"), "--output a_file is a file, not a folder: give the folder to build"),
        (("--output", "a_file/data"), "--output a_file/data: the folder a_file that would hold it does not exist"),
        (("--output", "no/such/data"), "--output no/such/data: the folder no/such that would hold it does not exist"),
        (("--output", "data", "--downloads", "a_file"), "--downloads a_file is a file, not a folder: give a folder"),
    ],
)
def test_wrong_folders_are_refused_before_any_work(tmp_path, arguments, message):
    (tmp_path / "a_file").write_bytes(b"mine\n")
    completed = run_script(*arguments, cwd=tmp_path)
    assert completed.returncode == 2
    assert one_line(completed).startswith(f"build_full_data: error: {message}")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a_file"]  # nothing created
    assert (tmp_path / "a_file").read_bytes() == b"mine\n"


def test_an_output_where_nothing_can_be_written_is_one_line(tmp_path, monkeypatch, capsys):
    """A read-only folder (simulated: the tests may run as root, whom permissions do not stop)."""
    real_mkdtemp = tempfile.mkdtemp

    def read_only(suffix=None, prefix=None, dir=None):
        if dir is not None and Path(dir) == tmp_path / "read_only":
            raise PermissionError(13, "Permission denied", str(dir))
        return real_mkdtemp(suffix, prefix, dir)

    (tmp_path / "read_only").mkdir()
    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    monkeypatch.setattr(build_full_data, "FILES", [file_of(b"pinned\n")[0]])
    assert main(["--output", str(tmp_path / "read_only" / "data")]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"build_full_data: error: cannot write in {tmp_path / 'read_only'} (Permission denied): give an --output "
        "where you can write"
    )
    assert list((tmp_path / "read_only").iterdir()) == []


def test_a_failed_build_leaves_no_folder_and_an_existing_one_as_it_was(tmp_path):
    right, _ = file_of(b"pinned\n", "cls/right.jsonl")
    wrong, _ = file_of(b"something else\n", "cls/wrong.jsonl")
    with pytest.raises(BuildError, match=r"^cls/wrong.jsonl built from its sources is not the file"):
        build(tmp_path / "out", Downloads(tmp_path), [right, wrong])
    assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == []  # no partial folder, no staging one
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "README.md").write_bytes(b"mine\n")
    with pytest.raises(BuildError):
        build(tmp_path / "out", Downloads(tmp_path), [right, wrong])
    assert [path.name for path in (tmp_path / "out").rglob("*")] == ["README.md"]  # right.jsonl not added alone


def test_a_built_folder_has_the_modes_of_a_plain_folder(tmp_path):
    right, _ = file_of(b"pinned\n")
    build(tmp_path / "out", Downloads(tmp_path), [right])
    plain = tmp_path / "plain"
    plain.mkdir()
    assert (tmp_path / "out").stat().st_mode == plain.stat().st_mode  # not mkdtemp's 0700


def kept_cail_download(folder: Path, data: bytes) -> Path:
    """A file where `Downloads` keeps the CAIL dev file downloaded from GitHub."""
    source = next(iter(build_full_data.CAIL_FILES))
    path = folder / f"china-ai-law-challenge+CAIL2019+010ebcedb4a1+{source.replace('/', '+')}"
    path.write_bytes(data)
    return path


def test_a_damaged_kept_download_is_named_not_read(tmp_path, monkeypatch, capsys):
    kept = kept_cail_download(tmp_path, b'{"data": []}')  # valid JSON, not the pinned file
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: pytest.fail("downloaded again"))
    monkeypatch.setattr(build_full_data, "FILES", [f for f in build_full_data.FILES if f.path.startswith("cls/cail")])
    assert main(["--output", str(tmp_path / "out"), "--downloads", str(tmp_path)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"build_full_data: error: the kept download {kept} is not the file pinned here (SHA-256 ")
    assert line.endswith(": delete it to download it again")
    assert kept.read_bytes() == b'{"data": []}' and not (tmp_path / "out").exists()


def test_a_damaged_kept_zip_is_one_line_not_bad_zip_file(tmp_path, monkeypatch):
    kept = tmp_path / "ubaops+text_classify+a6035ed63452.zip"
    kept.write_bytes(b"PK\x03\x04" + bytes(100))  # cut short: not a zip any more
    with pytest.raises(BuildError, match=rf"^the kept download {re.escape(str(kept))} is not a readable zip file"):
        build_full_data.build_fudan(Downloads(tmp_path))
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as writer:  # a whole zip holding other articles
        writer.writestr("text_classify-x/train/C3-Art/C3-Art0001.txt", "文" * 300)
    kept.write_bytes(archive.getvalue())
    with pytest.raises(BuildError, match=r"does not hold the articles pinned here \(1 articles, SHA-256 "):
        build_full_data.build_fudan(Downloads(tmp_path))


def test_a_download_that_differs_from_its_pin_is_not_kept(tmp_path, monkeypatch):
    class Response(io.BytesIO):
        def __enter__(self):
            return self

    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: Response(b"<html>rate limited</html>"))
    with pytest.raises(BuildError, match=r"^the download of .*dev_ground_truth.json is not the file pinned here"):
        build_full_data.build_cail(Downloads(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_a_kept_download_that_matches_its_pin_is_used(tmp_path, monkeypatch):
    monkeypatch.setattr(build_full_data, "SOURCE_SHA256", {**build_full_data.SOURCE_SHA256})
    source = next(iter(build_full_data.CAIL_FILES))
    build_full_data.SOURCE_SHA256[source] = hashlib.sha256(b"kept\n").hexdigest()
    kept_cail_download(tmp_path, b"kept\n")
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: pytest.fail("downloaded again"))
    assert (
        Downloads(tmp_path).github(build_full_data.CAIL_REPOSITORY, build_full_data.CAIL_COMMIT, source) == b"kept\n"
    )


# Runs the build of People's Daily with a `pip download` that hangs (and says its process id), as a user would; like
# pip, it unpacks into a temporary folder of its own first (`pip-unpack-*` in TMPDIR).
HANGING_PIP = """
import sys
from data import build_full_data, full_data_conversions

build_full_data.PIP_DOWNLOAD = [
    sys.executable, "-c",
    "import os, sys, tempfile, time; unpacked = tempfile.mkdtemp(prefix='pip-unpack-'); "
    "open(os.path.join(unpacked, 'sdist.tar.gz'), 'w').write('x' * 1000); "
    "open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(3600)",
    sys.argv[1],
]
build_full_data.FILES = [f for f in build_full_data.FILES if f.path.startswith("pretrain/")]
sys.exit(build_full_data.main(sys.argv[2:]))
"""


def stopped_build(tmp_path: Path, stop: signal.Signals, sigint_ignored: bool = False) -> str:
    """Stops a build of People's Daily whose `pip download` hangs with `stop`; checks that the build exits with
    128 + the signal's number, its child is gone and no folder is left; returns its one line. `sigint_ignored`
    starts the build as a shell starts a background job (CI's, perhaps): SIGINT ignored. pip's own temporary
    folders (in TMPDIR, here `tmp`) are gone too."""
    pid_file, output, temporary = tmp_path / "pip.pid", tmp_path / "out", tmp_path / "tmp"
    temporary.mkdir()
    build_process = subprocess.Popen(
        [sys.executable, "-c", HANGING_PIP, str(pid_file), "--output", str(output)],
        cwd=REPO_ROOT,
        env={**os.environ, "TMPDIR": str(temporary), "PYTHONPATH": str(REPO_ROOT)},
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None,
    )
    while not (pid_file.is_file() and pid_file.read_text()) and build_process.poll() is None:
        time.sleep(0.05)
    child = int(pid_file.read_text())
    build_process.send_signal(stop)
    _, stderr = build_process.communicate(timeout=HANG_GUARD_S)
    assert build_process.returncode == 128 + stop
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # the child is gone (killed and reaped)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pip.pid", "tmp"] and list(temporary.iterdir()) == []
    pid_file.unlink()
    temporary.rmdir()
    (line,) = stderr.splitlines()
    return line


@pytest.mark.parametrize("sigint_ignored", [False, True])
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_build_ends_its_pip_child_and_leaves_no_folder(tmp_path, stop, sigint_ignored):
    name = "SIGTERM" if stop == signal.SIGTERM else "Ctrl-C"
    line = stopped_build(tmp_path, stop, sigint_ignored)
    assert line == f"build_full_data: stopped ({name}): {tmp_path / 'out'} is as it was"


def test_the_tests_find_the_full_data_by_its_pinned_files(tmp_path):
    """A partial or damaged folder is not the full data: the tests read the samples and skip, naming each file."""
    assert len(full_data_problems(tmp_path / "empty")) == len(build_full_data.FILES)
    vocab = build_full_data.FILES[0]
    (tmp_path / "partial" / vocab.path).parent.mkdir(parents=True)
    (tmp_path / "partial" / vocab.path).write_bytes(vocab.build(None)[:-1])  # one byte short
    problems = full_data_problems(tmp_path / "partial")
    assert problems[0] == f"{vocab.path} is damaged (not its pinned SHA-256)"
    assert problems[1:] == tuple(f"{f.path} is missing" for f in build_full_data.FILES[1:])
