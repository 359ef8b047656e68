"""The bad inputs of the section "The data build, served recipes, hand-damaged folders and benchmarks" of
docs/bad_inputs.md (issue 35): each gets the one line the table shows, without a traceback, and leaves the user's
files as they were (no folder, no process left behind).

The table is the expectation, as in test_bad_inputs.py: each row names a case of `CASES` and the message, with
`<placeholders>` for what changes from run to run. Nothing is downloaded: the data build runs on local fakes.
"""

import functools
import importlib
import json
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import datasets
import pytest
import torch
import transformers
from conftest import HANG_GUARD_S, REPO_ROOT, bad_input_rows, check_table_names_the_cases
from safetensors.torch import load_file, save_file
from test_bad_inputs import template_pattern
from test_build_full_data import file_of, kept_cail_download, stopped_build
from transformers import pipeline

import roformer_hf
from data import build_full_data
from roformer_hf import RoFormerConfig, RoFormerForSequenceClassification, RoFormerJiebaTokenizer, RoFormerModel
from roformer_hf.text_classification_pipeline import DocumentRecipe
from roformer_hf.training.classification.labels import LabelInfo, check_known_labels
from roformer_hf.training.errors import ScriptError

SECTION = "## The data build, served recipes, hand-damaged folders and benchmarks"
RECIPE = {
    "max_seq_length": 32,
    "truncation_side": "head",
    "long_doc_strategy": "truncate",
    "chunk_stride": 8,
    "chunk_pooling": "mean",
}
DOCUMENT = "原告与被告签订借款合同，约定借款十万元。" * 20


# ----------------------------------------------------------------------------------------------------------------
# The data build (data/build_full_data.py): one line, exit status 1 or 2, the folders as they were
# ----------------------------------------------------------------------------------------------------------------


def build_line(status: int, *arguments: str, files: list | None = None) -> Callable:
    """A case: build_full_data's main() on `arguments` (`{tmp}` is the case's folder), with `files` to build."""

    def case(tmp: Path, monkeypatch, capsys) -> str:
        if files is not None:
            monkeypatch.setattr(build_full_data, "FILES", files)
        return unchanging(tmp, lambda: build_full_data.main([a.format(tmp=tmp) for a in arguments]), capsys, status)

    return case


def folder_state(folder: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (None) under `folder`, hidden ones included."""
    return {str(path.relative_to(folder)): path.read_bytes() if path.is_file() else None for path in folder.rglob("*")}


def unchanging(tmp: Path, call: Callable, capsys, status: int) -> str:
    """`exit_line` of `call`, once it has left `tmp` as it was: the user's files byte for byte, no new file or
    folder (a partial output, a staging or temporary folder)."""
    before = folder_state(tmp)
    line = exit_line(call, capsys, status)
    assert folder_state(tmp) == before
    return line


def exit_line(call: Callable, capsys, status: int) -> str:
    """The one line a command's main() writes on stderr, once its exit status is `status` (a `sys.exit("...")`
    message counts as the line it prints, with status 1)."""
    capsys.readouterr()
    try:
        code = call()
    except SystemExit as exit_info:
        code = exit_info.code
    error = capsys.readouterr().err
    if isinstance(code, str):
        error, code = code + "\n", 1
    assert code == status and "Traceback" not in error, (code, error)
    (line,) = error.splitlines()
    return line


def with_a_file(case: Callable) -> Callable:
    def with_file(tmp: Path, monkeypatch, capsys) -> str:
        (tmp / "a_file").write_bytes(b"mine\n")
        return case(tmp, monkeypatch, capsys)

    return with_file


def build_where_nothing_can_be_written(tmp: Path, monkeypatch, capsys) -> str:
    """A read-only folder, simulated (the tests may run as root, whom permissions do not stop)."""
    (tmp / "read_only").mkdir()
    real_mkdtemp = tempfile.mkdtemp

    def read_only(suffix=None, prefix=None, dir=None):
        if dir is not None and Path(dir) == tmp / "read_only":
            raise PermissionError(13, "Permission denied", str(dir))
        return real_mkdtemp(suffix, prefix, dir)

    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    return build_line(1, "--output", "{tmp}/read_only/data", files=[file_of(b"pinned\n")[0]])(tmp, monkeypatch, capsys)


def cail_only() -> list:
    return [data_file for data_file in build_full_data.FILES if data_file.path.startswith("cls/cail")]


def build_with_a_cut_kept_download(tmp: Path, monkeypatch, capsys) -> str:
    kept_cail_download(tmp, b'{"data": [{"caseid": 1, "domain": "civ')  # a download cut short, kept
    return build_line(1, "--output", "{tmp}/out", "--downloads", "{tmp}", files=cail_only())(tmp, monkeypatch, capsys)


def build_with_a_damaged_kept_zip(tmp: Path, monkeypatch, capsys) -> str:
    (tmp / "ubaops+text_classify+a6035ed63452.zip").write_bytes(b"PK\x03\x04" + bytes(64))
    fudan = [data_file for data_file in build_full_data.FILES if data_file.path.startswith("cls/fudan")]
    return build_line(1, "--output", "{tmp}/out", "--downloads", "{tmp}", files=fudan)(tmp, monkeypatch, capsys)


def build_whose_sources_changed(tmp: Path, monkeypatch, capsys) -> str:
    files = [file_of(b"pinned\n", "cls/right.jsonl")[0], file_of(b"changed\n", "cls/changed.jsonl")[0]]
    return build_line(1, "--output", "{tmp}/out", files=files)(tmp, monkeypatch, capsys)


def build_stopped_by_sigterm(tmp: Path, monkeypatch, capsys) -> str:
    return stopped_build(tmp, signal.SIGTERM)


# ----------------------------------------------------------------------------------------------------------------
# Served recipes and hand-damaged folders: one line (the exception's message)
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved_models(tmp_path_factory) -> dict[str, Path]:
    """A tiny classifier with a recipe (and its pipeline's code), and a tiny encoder, saved by roformer_hf."""
    folder = tmp_path_factory.mktemp("saved")
    torch.manual_seed(0)
    settings = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
    config = RoFormerConfig(vocab_size=4602, **settings, classification_inputs=RECIPE, id2label={0: "a", 1: "b"})
    RoFormerForSequenceClassification(config).save_pretrained(folder / "classifier")
    RoFormerJiebaTokenizer(str(REPO_ROOT / "data" / "demo_vocab.txt")).save_pretrained(folder / "classifier")
    RoFormerModel(RoFormerConfig(vocab_size=99, **settings)).save_pretrained(folder / "encoder")
    return {"classifier": folder / "classifier", "encoder": folder / "encoder"}


SAVED: dict[str, Path] = {}  # filled from the fixture by the test, for the cases


def copy_of(name: str, tmp: Path) -> Path:
    return Path(shutil.copytree(SAVED[name], tmp / name))


def edit_json(path: Path, change: Callable[[dict], object]) -> None:
    path.write_text(json.dumps(change(json.loads(path.read_text(encoding="utf-8")))), encoding="utf-8")


def exception_line(call: Callable[[], object]) -> str:
    """`Type: message` of what `call` raises: a ValueError or an OSError of one line."""
    with pytest.raises((ValueError, OSError)) as error_info:
        call()
    message = f"{type(error_info.value).__name__}: {error_info.value}"
    assert "\n" not in message
    return message


def served_with_recipe(change: dict | list, *call: str, **options) -> Callable:
    """A case: the classifier's config.json given `change` to its recipe, served (and called on `call`)."""

    def case(tmp: Path, monkeypatch, capsys) -> str:
        folder = copy_of("classifier", tmp)
        recipe = change if isinstance(change, list) else {**RECIPE, **change}
        edit_json(folder / "config.json", lambda config: {**config, "classification_inputs": recipe})

        def serve() -> None:
            classifier = pipeline("text-classification", model=str(folder))
            for text in call:
                classifier(text, **options)

        return exception_line(serve)

    return case


# Serves each folder with the code it carries, in a fresh interpreter where roformer_hf cannot be imported, as a user
# of trust_remote_code would; prints what each raised, as `Type: message`.
REMOTE_CODE = """
import json
import sys

sys.modules["roformer_hf"] = None  # as if roformer_hf were not installed
sys.modules["rjieba"] = None

import transformers

lines = {}
for name, folder in json.loads(sys.argv[1]).items():
    try:
        transformers.pipeline("text-classification", model=folder, trust_remote_code=True)("原告与被告签订借款合同。")
        lines[name] = "no error"
    except Exception as error:
        lines[name] = f"{type(error).__name__}: {error}"
print(json.dumps(lines))
"""
# case -> what its copy of the classifier lacks, or the change to its recipe
REMOTE_CODE_CASES = {
    "remote_code_without_pipeline_file": ("text_classification_pipeline.py", None),
    "remote_code_recipe_max_seq_length_string": (None, {"max_seq_length": "32"}),
}


@functools.cache
def remote_code_lines() -> dict[str, str]:
    """What serving each damaged copy of the classifier with its own code raised, in one child process for all."""
    folder = Path(tempfile.mkdtemp(prefix="roformer_hf_remote_code_"))
    try:
        folders = {}
        for case, (missing, recipe_change) in REMOTE_CODE_CASES.items():
            folders[case] = str(shutil.copytree(SAVED["classifier"], folder / case))
            if missing:
                (folder / case / missing).unlink()
            if recipe_change:
                recipe = {**RECIPE, **recipe_change}
                edit_json(
                    folder / case / "config.json",
                    lambda config, recipe=recipe: {**config, "classification_inputs": recipe},
                )
        completed = subprocess.run(
            [sys.executable, "-c", REMOTE_CODE, json.dumps(folders)],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
            check=False,
        )
    finally:
        shutil.rmtree(folder)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def served_by_its_own_code(case: str) -> Callable:
    """A case of `REMOTE_CODE_CASES`: its line, from the one child process that serves them all."""

    def served(tmp: Path, monkeypatch, capsys) -> str:
        line = remote_code_lines()[case]
        assert "\n" not in line
        return line

    return served


def encoder_with_config(text: str) -> Callable:
    def case(tmp: Path, monkeypatch, capsys) -> str:
        folder = copy_of("encoder", tmp)
        (folder / "config.json").write_text(text, encoding="utf-8")
        return exception_line(lambda: RoFormerModel.from_pretrained(folder))

    return case


def encoder_with_integer_weights(tmp: Path, monkeypatch, capsys) -> str:
    folder = copy_of("encoder", tmp)
    weights = load_file(folder / "model.safetensors")
    save_file({name: tensor.to(torch.int32) for name, tensor in weights.items()}, folder / "model.safetensors")
    return exception_line(lambda: RoFormerModel.from_pretrained(folder))


def label_with_a_trailing_space(tmp: Path, monkeypatch, capsys) -> str:
    validation = datasets.Dataset.from_list([{"text": "x", "label": "civil"}, {"text": "y", "label": "criminal "}])
    info = LabelInfo("single_label_classification", ["civil", "criminal"])
    with pytest.raises(ScriptError) as error_info:
        check_known_labels(validation, "label", "the validation data (--validation_file dev.jsonl)", info)
    return f"error: {error_info.value}"


# ----------------------------------------------------------------------------------------------------------------
# The benchmarks: one line, exit status 1, before any work
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture
def benchmarks(monkeypatch):
    """The benchmark scripts as modules (they import their neighbours by name); transformers' logging settings,
    which their main() changes, are restored after."""
    monkeypatch.syspath_prepend(str(REPO_ROOT / "benchmarks"))
    verbosity = transformers.logging.get_verbosity()
    progress_bars = transformers.utils.logging.is_progress_bar_enabled()
    yield
    transformers.logging.set_verbosity(verbosity)
    if progress_bars:
        transformers.logging.enable_progress_bar()


def benchmark_line(script: str, *arguments: str) -> Callable:
    """A case: the benchmark's main() on `arguments` (`{tmp}` is the case's folder), stopped before any work."""

    def case(tmp: Path, monkeypatch, capsys) -> str:
        module = importlib.import_module(script)
        monkeypatch.setattr(sys, "argv", [f"{script}.py", *(a.format(tmp=tmp) for a in arguments)])
        first_work = "write_checkpoint" if script == "bench_serving" else "write_checkpoints"
        monkeypatch.setattr(module, first_work, lambda *args: pytest.fail("work began before the checks"))
        return unchanging(tmp, module.main, capsys, 1)

    return case


def bench_model_on_cuda(tmp: Path, monkeypatch, capsys) -> str:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    return benchmark_line("bench_model", "--only", "small", "--device", "cuda")(tmp, monkeypatch, capsys)


def texts_file(lines: str) -> Callable:
    def case(tmp: Path, monkeypatch, capsys) -> str:
        (tmp / "texts.jsonl").write_text(lines, encoding="utf-8")
        return benchmark_line("bench_serving", "--tiny", "--texts", "{tmp}/texts.jsonl")(tmp, monkeypatch, capsys)

    return case


# ----------------------------------------------------------------------------------------------------------------
# The cases and the table
# ----------------------------------------------------------------------------------------------------------------

BUILD = "data/build_full_data.py"
SERVING = "bench_serving.py"
# id -> (where, as in the table's second column; the case: (its folder, monkeypatch, capsys) -> its one line)
CASES: dict[str, tuple[str, Callable[[Path, object, object], str]]] = {
    "build_output_is_a_file": (BUILD, with_a_file(build_line(2, "--output", "{tmp}/a_file"))),
    "build_output_under_a_file": (BUILD, with_a_file(build_line(2, "--output", "{tmp}/a_file/data"))),
    "build_downloads_is_a_file": (
        BUILD,
        with_a_file(build_line(2, "--output", "{tmp}/data", "--downloads", "{tmp}/a_file")),
    ),
    "build_output_read_only": (BUILD, build_where_nothing_can_be_written),
    "build_kept_download_cut_short": (BUILD, build_with_a_cut_kept_download),
    "build_kept_zip_damaged": (BUILD, build_with_a_damaged_kept_zip),
    "build_sources_changed": (BUILD, build_whose_sources_changed),
    "build_stopped": (BUILD, build_stopped_by_sigterm),
    "recipe_max_seq_length_string": ("pipeline()", served_with_recipe({"max_seq_length": "32"})),
    "recipe_max_seq_length_float": ("pipeline()", served_with_recipe({"max_seq_length": 32.0}, DOCUMENT)),
    "recipe_chunk_stride_float": (
        "pipeline()",
        served_with_recipe({"long_doc_strategy": "chunk", "chunk_stride": 8.5}, DOCUMENT),
    ),
    "recipe_a_list": ("pipeline()", served_with_recipe(["max_seq_length", "truncation_side"])),
    "recipe_truncation_false": ("pipeline()", served_with_recipe({}, DOCUMENT, truncation=False)),
    **{case: ("pipeline()", served_by_its_own_code(case)) for case in REMOTE_CODE_CASES},
    "config_json_a_list": ("from_pretrained", encoder_with_config('["roformer_hf"]')),
    "config_json_null": ("from_pretrained", encoder_with_config("null")),
    "integer_weights": ("from_pretrained", encoder_with_integer_weights),
    "label_with_a_trailing_space": ("run_classification.py", label_with_a_trailing_space),
    "bench_serving_shapes_0x16": (SERVING, benchmark_line("bench_serving", "--tiny", "--shapes", "0x16")),
    "bench_serving_rounds_0": (SERVING, benchmark_line("bench_serving", "--tiny", "--rounds", "0")),
    "bench_serving_threads_0": (SERVING, benchmark_line("bench_serving", "--tiny", "--threads", "0")),
    "bench_serving_num_texts_-1": (SERVING, benchmark_line("bench_serving", "--tiny", "--num_texts", "-1")),
    "bench_serving_json_unwritable": (
        SERVING,
        with_a_file(benchmark_line("bench_serving", "--tiny", "--json", "{tmp}/a_file/results.json")),
    ),
    "bench_serving_texts_missing": (SERVING, benchmark_line("bench_serving", "--tiny", "--texts", "{tmp}/no.jsonl")),
    "bench_serving_texts_not_json_lines": (SERVING, texts_file("原告与被告签订借款合同。\n")),
    "bench_serving_texts_too_few": (SERVING, texts_file('{"text": "好"}\n' * 3)),
    "bench_model_rounds_0": ("bench_model.py", benchmark_line("bench_model", "--only", "small", "--rounds", "0")),
    "bench_model_cuda_without_cuda": ("bench_model.py", bench_model_on_cuda),
}


def test_the_table_and_the_cases_name_the_same_bad_inputs():
    check_table_names_the_cases(SECTION, CASES)


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_gets_one_line(case, tmp_path, monkeypatch, capsys, saved_models, benchmarks):
    SAVED.update(saved_models)
    line = CASES[case][1](tmp_path, monkeypatch, capsys)
    pattern = template_pattern(bad_input_rows(SECTION)[case][2])
    assert pattern.fullmatch(line), f"{case}:\n  got      {line}\n  expected {pattern.pattern}"


def test_a_classifier_saved_again_gets_its_recipe_code_back(saved_models, tmp_path):
    """The fix the missing-file line gives: loaded and saved again where roformer_hf is installed, the folder holds
    roformer_hf's copy of the file again, and the config it had."""
    folder = Path(shutil.copytree(saved_models["classifier"], tmp_path / "classifier"))
    (folder / "text_classification_pipeline.py").unlink()
    config_before = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    RoFormerForSequenceClassification.from_pretrained(folder).save_pretrained(folder)
    package = Path(roformer_hf.__file__).parent
    name = "text_classification_pipeline.py"
    assert (folder / name).read_bytes() == (package / name).read_bytes()
    assert json.loads((folder / "config.json").read_text(encoding="utf-8")) == config_before


def test_truncation_false_is_accepted_where_windows_read_the_whole_document(saved_models, tmp_path):
    folder = Path(shutil.copytree(saved_models["classifier"], tmp_path / "classifier"))
    chunked = {**RECIPE, "long_doc_strategy": "chunk"}
    edit_json(folder / "config.json", lambda config: {**config, "classification_inputs": chunked})
    classifier = pipeline("text-classification", model=str(folder))
    assert classifier(DOCUMENT, truncation=False, top_k=None) == classifier(DOCUMENT, top_k=None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"max_seq_length": True}, r"max_seq_length True \(a bool\): use a whole number of tokens, 8 or more"),
        ({"chunk_stride": "8"}, r"chunk_stride '8' \(a str\): use a whole number of tokens, at least 0 and less than"),
        ({"truncation_side": ["head"]}, r"truncation_side \['head'\]: use one of 'head', 'tail', 'head_tail'"),
        ({"chunk_pooling": None}, "chunk_pooling None: use one of 'mean', 'max'"),
    ],
)
def test_a_recipe_of_the_wrong_type_is_named_when_it_is_read(change, message):
    with pytest.raises(ValueError, match=message):
        DocumentRecipe.from_settings({**RECIPE, **change})
