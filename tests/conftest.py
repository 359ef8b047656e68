"""Shared fixtures: where the real data lives and a tiny configuration every test can afford."""

import functools
import hashlib
import itertools
import json
import os
import re
import shutil
import signal
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from huggingface_hub.utils import filter_repo_objects

from data.build_full_data import FILES as FULL_DATA_FILES

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Code loaded with trust_remote_code goes to a throwaway folder, not the user's ~/.cache.
os.environ.setdefault("HF_MODULES_CACHE", tempfile.mkdtemp(prefix="roformer_hf_modules_"))
# A suite started as a background job of a shell script inherits SIGINT ignored (shells ignore it there), and
# `kill -INT` went unheard: SIGINT stops the suite with pytest's summary, whatever started it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("ROFORMER_HF_DATA", REPO_ROOT.parent / "shared" / "data"))
# The original 50k vocabulary is in the repository (data/), so the tests of the tokenizer run in a fresh clone.
ROFORMER_VOCAB = REPO_ROOT / "data" / "roformer_chinese_base_vocab.txt"
# The BERT-Chinese vocabulary (character level) is in the repository too, for the char-level checkpoints' tests.
BERT_VOCAB = REPO_ROOT / "data" / "bert_base_chinese_vocab.txt"
# The shipped samples serve the tests that read a few paragraphs or court texts: the People's Daily sample is the
# full file's first 1,200 paragraphs, the CAIL sample 150 civil and 150 criminal cases of the full file.
PEOPLES_DAILY_SAMPLE = REPO_ROOT / "data" / "peoples_daily_sample.txt"
CAIL_SAMPLE = REPO_ROOT / "data" / "cail_sample.jsonl"
PEOPLES_DAILY = DATA_DIR / "pretrain" / "peoples_daily_199801.txt"
CLS_DIR = DATA_DIR / "cls"
# Seconds after which a test takes a subprocess or a wait for hung: a guard far above any need on a busy machine, never
# a measure (a test asserts on what a run did, not on how long it took).
HANG_GUARD_S = 3600
# The device of the tests that take the `device` fixture (marked `device`): the CPU unless this names another, as
# `benchmarks/gpu_check.py` does (`ROFORMER_HF_TEST_DEVICE=cuda python -m pytest -m device`).
TEST_DEVICE = os.environ.get("ROFORMER_HF_TEST_DEVICE", "cpu")

# A model of a few thousand parameters, without dropout: the tests' default configuration.
TINY = {
    "vocab_size": 99,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 37,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}

# A tiny model over the 50k RoFormer vocabulary, for tests that tokenize real text (small embeddings keep it light).
TINY_WORD_VOCAB = {
    "vocab_size": 50000,
    "embedding_size": 16,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 48,
}


@functools.cache
def full_data_problems(folder: Path = DATA_DIR) -> tuple[str, ...]:
    """What keeps `folder` from being the full data: each file that data/build_full_data.py pins, missing or not
    whole (another SHA-256). Hashed once a session (19 MB: a fraction of a second); empty where all are whole."""
    problems = []
    for data_file in FULL_DATA_FILES:
        path = folder / data_file.path
        if not path.is_file():
            problems.append(f"{data_file.path} is missing")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != data_file.sha256:
            problems.append(f"{data_file.path} is damaged (not its pinned SHA-256)")
    return tuple(problems)


def full_data_present() -> bool:
    """Whether the tests read the full data (every pinned file whole) rather than the samples in data/."""
    return not full_data_problems()


# The start of the one reason of every test that needs the full data, so pytest's summary folds them into one line.
MISSING_DATA = f"the full data folder {DATA_DIR} is not there or not whole"


def missing_data_reason() -> str:
    problems = full_data_problems()
    what = "it is missing" if not DATA_DIR.is_dir() else "; ".join(problems)
    return (
        f"{MISSING_DATA} ({what}): set ROFORMER_HF_DATA to a folder laid out as data/README.md describes (section "
        "'The tests' full data'), or build it with data/build_full_data.py, to run these tests"
    )


def skip_without_data() -> None:
    pytest.skip(missing_data_reason())


def pytest_configure(config) -> None:
    """The suite's threads as the scripts choose theirs with --threads auto (roformer_hf.training.machine.threads):
    without OMP_NUM_THREADS, the usable cores less those other processes keep busy (the suite's speed on a shared
    machine; its tests compare runs within one session), set here and, through OMP_NUM_THREADS (and OMP_WAIT_POLICY
    where several threads share cores), in the scripts and benchmarks the tests start in subprocesses."""
    if "OMP_NUM_THREADS" in os.environ:
        return
    from roformer_hf.training.machine.threads import busy_cores_of_others, decide_threads, usable_cores

    busy = busy_cores_of_others()
    threads = decide_threads("auto", None, usable_cores(), busy).threads
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)
    if threads > 1 and busy is not None and round(busy) > 0:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Report every skip for missing data at one place, so `-ra` folds them into a single summary line."""
    report = yield
    if report.skipped and isinstance(report.longrepr, tuple) and MISSING_DATA in report.longrepr[2]:
        report.longrepr = (__file__, skip_without_data.__code__.co_firstlineno + 1, report.longrepr[2])
    return report


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(items) -> None:
    """Marks `device` every test that runs on the `device` fixture, so `-m device` selects what a GPU can check."""
    for item in items:
        if "device" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.device)


@pytest.fixture(scope="session")
def device() -> torch.device:
    """Where the model tests that can run on an accelerator run: `ROFORMER_HF_TEST_DEVICE`, the CPU by default."""
    device = torch.device(TEST_DEVICE)
    if device.type == "cuda" and not torch.cuda.is_available():
        pytest.exit(f"ROFORMER_HF_TEST_DEVICE={TEST_DEVICE}, but torch {torch.__version__} sees no CUDA device", 2)
    return device


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not full_data_present():
        skip_without_data()
    return DATA_DIR


@pytest.fixture(scope="session")
def roformer_vocab() -> Path:
    return ROFORMER_VOCAB


@pytest.fixture(scope="module")  # a module's tests may change it (added tokens, lengths): one per test file
def tokenizer(roformer_vocab):
    """The word-level tokenizer of the original 50k RoFormer vocab."""
    from roformer_hf import RoFormerJiebaTokenizer

    return RoFormerJiebaTokenizer(vocab_file=str(roformer_vocab))


def skip_unless_bf16_pays() -> None:
    """Skips a test of bf16 mixed precision on a CPU where the scripts would not use it (no bf16 instructions)."""
    from roformer_hf.training.machine.cpu_arithmetic import cpu_bf16

    decision = cpu_bf16()
    if not decision.pays:
        pytest.skip(f"bf16 mixed precision is not used on this CPU: {decision.reason}")


def skip_unless_transformers_causal_lm_is_causal() -> None:
    """Skips a comparison with transformers' own RoFormerForCausalLM where it is no reference: before transformers
    5.18 it attends to later tokens (its first token's logits change with the last token)."""
    import transformers

    torch.manual_seed(0)
    config = transformers.RoFormerConfig(**TINY, is_decoder=True)
    model = transformers.RoFormerForCausalLM(config).eval()
    input_ids = torch.arange(1, 9)[None]
    changed = input_ids.clone()
    changed[0, -1] = 20
    with torch.no_grad():
        first_token = [model(ids).logits[0, 0] for ids in (input_ids, changed)]
    if not torch.equal(*first_token):
        pytest.skip(f"transformers {transformers.__version__}'s RoFormerForCausalLM sees later tokens: no reference")


def fail_final_saves_on_a_full_disk(monkeypatch) -> None:
    """Makes the scripts' final save (the weights written into a `.partial-model-*` staging folder) fail as a full
    disk fails it in safetensors; checkpoints are saved as usual."""
    from safetensors import SafetensorError
    from transformers import modeling_utils

    save_file = modeling_utils.safe_save_file

    def save_on_a_full_disk(tensors, filename, *args, **kwargs):
        if ".partial-model-" in str(filename):
            raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
        return save_file(tensors, filename, *args, **kwargs)

    monkeypatch.setattr(modeling_utils, "safe_save_file", save_on_a_full_disk)


def enable_activation_checkpointing(model: torch.nn.Module) -> None:
    """transformers 5.23 renamed `gradient_checkpointing_enable` to `activation_checkpointing_enable` (5.24 deprecates
    the old name); the oldest supported release has only the old one."""
    enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    enable()


def assert_padding_changes_nothing(model: torch.nn.Module) -> None:
    """Nine random tokens read alone and followed by four masked padding tokens give the same hidden states (on the
    model's device)."""
    device = next(model.parameters()).device
    input_ids = torch.randint(1, TINY["vocab_size"], (1, 9)).to(device)
    padded = torch.cat([input_ids, torch.zeros(1, 4, dtype=torch.long, device=device)], dim=1)
    mask = torch.cat([torch.ones(1, 9), torch.zeros(1, 4)], dim=1).long().to(device)
    with torch.no_grad():
        expected = model(input_ids).last_hidden_state
        actual = model(padded, attention_mask=mask).last_hidden_state[:, :9]
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


BAD_INPUTS_PAGE = REPO_ROOT / "docs" / "bad_inputs.md"
# What a case got before its fix, as the Before column of docs/bad_inputs.md's case tables starts.
BEFORE_CLASSES = ("lost", "silently wrong", "traceback", "misleading line", "one line", "handled")


def bad_input_rows(after: str) -> dict[str, tuple[str, str, str]]:
    """The rows of the first case table (`| Case | Where | ... | Before | ... |`) of docs/bad_inputs.md at or after
    the line that starts with `after` (a heading, or the table's own header): case id -> (where, before, message)."""
    lines = BAD_INPUTS_PAGE.read_text(encoding="utf-8").splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith(after))
    header = next(index for index in range(start, len(lines)) if lines[index].startswith("| Case |"))
    rows = {}
    for line in itertools.takewhile(lambda line: line.startswith("|"), lines[header + 2 :]):
        cells = [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        assert len(cells) == 5, f"a row of {BAD_INPUTS_PAGE.name} has {len(cells)} cells, not 5: {line}"
        case, where, _, before, message = (cell.strip("`") for cell in cells)
        assert case not in rows, f"{case} has two rows in {BAD_INPUTS_PAGE.name}"
        rows[case] = (where, before, message)
    return rows


def check_table_names_the_cases(after: str, cases: dict[str, tuple[str, object]]) -> None:
    """The case table at `after` (see `bad_input_rows`) and a test file's `cases` (case id -> (where, how to make
    it)) name the same cases in the same places, and each row's Before cell starts with one of `BEFORE_CLASSES`."""
    table = bad_input_rows(after)
    assert {case: where for case, (where, _, _) in table.items()} == {
        case: where for case, (where, _) in cases.items()
    }
    for case, (_, before, _) in table.items():
        assert before.startswith(BEFORE_CLASSES), f"{case}: the 'before' cell starts with none of {BEFORE_CLASSES}"


def first_texts(path: Path, count: int) -> list[str]:
    """The `text` of the first `count` records of a JSON-lines file."""
    with path.open(encoding="utf-8") as reader:
        return [json.loads(line)["text"] for line in itertools.islice(reader, count)]


def peoples_daily_file() -> Path:
    """People's Daily, one paragraph a line: the whole month where the full data is present, else the shipped sample
    (its first 1,200 paragraphs)."""
    return PEOPLES_DAILY if full_data_present() else PEOPLES_DAILY_SAMPLE


def long_documents(count: int) -> list[str]:
    """`count` long documents: the first Fudan articles (median 5,600 characters) where the full data is present,
    else runs of consecutive paragraphs of the People's Daily sample, each joined into a document of at least 5,000
    characters, so that a fresh clone tests long inputs on real text too."""
    if full_data_present():
        return first_texts(CLS_DIR / "fudan_longdoc_7cls.jsonl", count)
    documents, paragraphs, length = [], [], 0
    for paragraph in PEOPLES_DAILY_SAMPLE.read_text(encoding="utf-8").splitlines():
        paragraphs.append(paragraph)
        length += len(paragraph)
        if length >= 5000:
            documents.append("\n".join(paragraphs))
            paragraphs, length = [], 0
    assert len(documents) >= count, f"the People's Daily sample makes {len(documents)} long documents, not {count}"
    return documents[:count]


def short_texts(count: int) -> list[str]:
    """`count` short texts: the first ChnSentiCorp reviews (mean 129 characters) where the full data is present, else
    the sentences of the People's Daily sample (mean 39 characters; 2,740 of them)."""
    if full_data_present():
        return first_texts(CLS_DIR / "chnsenticorp_htl.jsonl", count)
    text = PEOPLES_DAILY_SAMPLE.read_text(encoding="utf-8")
    sentences = [sentence for sentence in re.findall(r"[^。！？\n]+[。！？]?", text) if sentence.strip()]
    assert len(sentences) >= count, f"the People's Daily sample has {len(sentences)} sentences, not {count}"
    return sentences[:count]


@pytest.fixture(scope="module")
def cail_rows() -> list[dict]:
    """60 CAIL court texts, the first 30 civil and the first 30 criminal cases of the shipped sample."""
    lines = CAIL_SAMPLE.read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    civil = [row for row in rows if row["label"] == "civil"][:30]
    return civil + [row for row in rows if row["label"] == "criminal"][:30]


def fake_upload_folder(uploads: list, root: Path):
    """
    A stand-in for `HfApi.upload_folder` (no network): each call is appended to `uploads` as its `repo_id`, the
    files it sends (those of the folder that its `allow_patterns` and `ignore_patterns` let through, filtered as
    huggingface_hub filters them), a copy of them under `root` (`copied`), and its other arguments.
    """

    def upload_folder(api, *, repo_id, folder_path, allow_patterns=None, ignore_patterns=None, **options):
        folder = Path(folder_path)
        paths = [path.relative_to(folder).as_posix() for path in sorted(folder.rglob("*")) if path.is_file()]
        sent = list(filter_repo_objects(paths, allow_patterns=allow_patterns, ignore_patterns=ignore_patterns))
        copied = root / f"upload-{len(uploads)}"
        for name in sent:
            (copied / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / name, copied / name)
        uploads.append(SimpleNamespace(repo_id=repo_id, sent=sent, copied=copied, options=options))
        return "commit"

    return upload_folder


def pytest_terminal_summary(terminalreporter) -> None:
    """After a run that included tests/test_house.py: the sizes worth a second look, as notes for review (never a
    failure; docs/development.md says when a size is worth a look)."""
    reports = (report for outcome in terminalreporter.stats.values() for report in outcome)
    if not any(getattr(report, "nodeid", "").startswith("tests/test_house.py") for report in reports):
        return
    from test_house import REPO_ROOT, review_notes

    terminalreporter.write_sep("-", "sizes worth a second look (review notes, tests/test_house.py)")
    for note in review_notes(REPO_ROOT):
        terminalreporter.write_line(note)
