"""Issue 35, items 1 and 2: a run never destroys what it reads, and a checkpoint without a manifest is unverified.

The table "Inputs a run would destroy, and unverified checkpoints" of docs/bad_inputs.md is the expectation: each row
names a case of `CASES` and its one line; every case also checks that every file the user had (the model being
fine-tuned, its tokenizer, the data, the checkpoints) is byte-identical after the refused run. The cases a run handles
(it trains, and leaves its inputs as they were, or resumes to the weights of an uninterrupted run) are tests below it.
"""

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from conftest import bad_input_rows, check_table_names_the_cases
from distributed_worker import files_sha256
from test_bad_inputs import DEMO_VOCAB, SCRIPTS, run_in_process, template_pattern, transformers_checkpoint
from test_checkpoint_resume import interrupted_copy, straight_classification_run, with_output_dir  # noqa: F401
from test_output_safety import TINY_MODEL, assert_same_weights, mlm_arguments

import run_classification
from roformer_hf import RoFormerConfig, RoFormerForMaskedLM, RoFormerJiebaTokenizer
from roformer_hf.training.outputs.checkpoints import MANIFEST_NAME
from roformer_hf.training.outputs.output_record import RECORD_NAME, read_record

REPO_ROOT = Path(__file__).resolve().parents[1]
TABLE_HEADER = "| Case | Where | What the user did | Before | What it gets |"
BOTH = "both scripts"


def tiny_model(folder: Path) -> Path:
    """A tiny RoFormer MLM over the demo vocabulary with its tokenizer: the model a user fine-tunes."""
    vocab_size = len(DEMO_VOCAB.read_text(encoding="utf-8").splitlines())
    config = RoFormerConfig(
        vocab_size=vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64
    )
    torch.manual_seed(0)
    RoFormerForMaskedLM(config).save_pretrained(folder)
    RoFormerJiebaTokenizer(vocab_file=str(DEMO_VOCAB)).save_pretrained(folder)
    return folder


def data_files(tmp: Path) -> Path:
    """A few court texts as train and validation files (both scripts read them: text and label columns)."""
    rows = [json.loads(line) for line in (REPO_ROOT / "data" / "cail_sample.jsonl").open(encoding="utf-8")][:40]
    rows = [row for row in rows if row["label"] in ("civil", "criminal")]
    for name, part in (("train", rows[:16]), ("validation", rows[16:20])):
        lines = [json.dumps({"text": row["text"], "label": row["label"]}, ensure_ascii=False) for row in part]
        (tmp / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp


def script_run(script: str, tmp: Path, output_dir: str | Path, *extra: str) -> list[str]:
    """A tiny run of `script` on the data of `data_files`, from `--model_name_or_path` or `--tokenizer_name` in
    `extra` (else a tiny model over the demo vocabulary)."""
    if not (tmp / "train.jsonl").exists():
        data_files(tmp)
    start = [] if {"--model_name_or_path", "--tokenizer_name"} & set(extra) else ["--tokenizer_name", str(DEMO_VOCAB)]
    if not {"--model_name_or_path", "--config_name"} & set(extra):  # a new model: a tiny one
        start += ["--config_overrides", TINY_MODEL]
    common = [*start, "--output_dir", str(output_dir), "--max_steps", "2", "--report_to", "none", *extra]
    if script == "run_mlm.py":
        return ["--train_file", str(tmp / "train.jsonl"), "--max_seq_length", "32", *common]
    return ["--train_file", str(tmp / "train.jsonl"), "--do_train", "--max_seq_length", "32", *common]


def fine_tune_into(output: Callable[[Path], str], *extra: str, model: Callable[[Path], str] | None = None):
    """A run that fine-tunes the tiny model in `tmp/model` (or `model(tmp)`) into `output(tmp)`."""

    def arguments(script: str, tmp: Path, monkeypatch) -> list[str]:
        tiny_model(tmp / "model")
        model_path = model(tmp) if model else str(tmp / "model")
        return script_run(script, tmp, output(tmp), "--model_name_or_path", model_path, *extra)

    return arguments


def linked(tmp: Path, name: str, target: str) -> str:
    (tmp / name).symlink_to(tmp / target, target_is_directory=True)
    return str(tmp / name)


def relative_through_dotdot(script: str, tmp: Path, monkeypatch) -> list[str]:
    tiny_model(tmp / "model")
    (tmp / "runs").mkdir()
    monkeypatch.chdir(tmp)
    return script_run(script, tmp, "runs/../model", "--model_name_or_path", "./model", "--overwrite_output_dir")


def earlier_run(script: str, tmp: Path) -> Path:
    """A finished tiny run_classification.py run in `tmp/out`, a checkpoint every step."""
    SCRIPTS[script].main(script_run(script, tmp, tmp / "out", "--save_steps", "1"))
    return tmp / "out"


def model_in_a_checkpoint(script: str, tmp: Path, monkeypatch) -> list[str]:
    out = earlier_run(script, tmp)
    return script_run(
        script, tmp, out, "--model_name_or_path", str(out / "checkpoint-1"), "--overwrite_output_dir", "--seed", "5"
    )


def tokenizer_folder_as_output(script: str, tmp: Path, monkeypatch) -> list[str]:
    RoFormerJiebaTokenizer(vocab_file=str(DEMO_VOCAB)).save_pretrained(tmp / "tokenizer")
    return script_run(script, tmp, tmp / "tokenizer", "--tokenizer_name", str(tmp / "tokenizer"))


def vocab_in_output_dir(script: str, tmp: Path, monkeypatch) -> list[str]:
    (tmp / "out").mkdir()
    shutil.copy(DEMO_VOCAB, tmp / "out" / "vocab.txt")
    return script_run(script, tmp, tmp / "out", "--tokenizer_name", str(tmp / "out" / "vocab.txt"))


def config_in_output_dir(script: str, tmp: Path, monkeypatch) -> list[str]:
    tiny_model(tmp / "out")  # a saved model, whose config is to start a new one from
    arguments = script_run(script, tmp, tmp / "out", "--config_name", str(tmp / "out" / "config.json"))
    return [*arguments, "--overwrite_output_dir"]


def saved_dataset(folder: Path, tmp: Path) -> None:
    import datasets

    rows = [json.loads(line) for line in data_files(tmp).joinpath("train.jsonl").open(encoding="utf-8")]
    datasets.Dataset.from_list([{"text": row["text"]} for row in rows]).save_to_disk(str(folder))


def dataset_in_a_stage_folder(script: str, tmp: Path, monkeypatch) -> list[str]:
    saved_dataset(tmp / "out" / "stage-1" / "corpus", tmp)
    arguments = mlm_arguments(tmp / "unused.txt", tmp / "out", "--overwrite_output_dir")
    at = arguments.index("--train_file")
    return [*arguments[:at], "--dataset_name", str(tmp / "out" / "stage-1" / "corpus"), *arguments[at + 2 :]]


def output_dir_inside_dataset(script: str, tmp: Path, monkeypatch) -> list[str]:
    saved_dataset(tmp / "corpus", tmp)
    arguments = mlm_arguments(tmp / "unused.txt", tmp / "corpus" / "out")
    at = arguments.index("--train_file")
    return [*arguments[:at], "--dataset_name", str(tmp / "corpus"), *arguments[at + 2 :]]


def resume_into(output: Callable[[Path], Path]):
    """A resume from checkpoint-1 of an earlier run, archived as `tmp/archive`, with the output folder `output`."""

    def arguments(script: str, tmp: Path, monkeypatch) -> list[str]:
        out = earlier_run(script, tmp)
        shutil.copytree(out / "checkpoint-1", tmp / "archive")
        return script_run(
            script, tmp, output(tmp), "--save_steps", "1", "--resume_from_checkpoint", str(tmp / "archive")
        )

    return arguments


# id -> (where, as in the table's second column; the arguments of the run, given the script, a temporary folder and
# pytest's monkeypatch)
CASES: dict[str, tuple[str, Callable]] = {
    "model_is_output_dir": (BOTH, fine_tune_into(lambda tmp: str(tmp / "model"))),
    "model_is_output_dir_with_overwrite": (
        BOTH,
        fine_tune_into(lambda tmp: str(tmp / "model"), "--overwrite_output_dir"),
    ),
    "output_dir_inside_model": (BOTH, fine_tune_into(lambda tmp: str(tmp / "model" / "finetuned"))),
    "model_links_to_output_dir": (
        "run_classification.py",
        fine_tune_into(
            lambda tmp: str(tmp / "model"), "--overwrite_output_dir", model=lambda tmp: linked(tmp, "link", "model")
        ),
    ),
    "output_dir_links_to_model": (
        "run_mlm.py",
        fine_tune_into(lambda tmp: linked(tmp, "link", "model"), "--overwrite_output_dir"),
    ),
    "output_dir_through_dotdot": ("run_classification.py", relative_through_dotdot),
    "model_in_a_checkpoint_of_output_dir": ("run_classification.py", model_in_a_checkpoint),
    "tokenizer_folder_is_output_dir": ("run_mlm.py", tokenizer_folder_as_output),
    "vocab_in_output_dir": (BOTH, vocab_in_output_dir),
    "config_in_output_dir": ("run_mlm.py", config_in_output_dir),
    "dataset_in_a_stage_folder": ("run_mlm.py", dataset_in_a_stage_folder),
    "output_dir_inside_dataset": ("run_mlm.py", output_dir_inside_dataset),
    "resume_checkpoint_is_output_dir": ("run_classification.py", resume_into(lambda tmp: tmp / "archive")),
    "output_dir_inside_resume_checkpoint": ("run_classification.py", resume_into(lambda tmp: tmp / "archive" / "x")),
}


def convert_into(output: Callable[[Path], str]):
    def arguments(tmp: Path) -> list[str]:
        source = transformers_checkpoint(tmp)
        return [str(source), output(tmp), "--overwrite"]

    return arguments


CONVERT_CASES = {
    "convert_output_links_to_source": ("convert", convert_into(lambda tmp: linked(tmp, "link", "source"))),
    "convert_output_holds_source": ("convert", convert_into(lambda tmp: str(tmp / "source" / ".."))),
}


def test_the_table_and_the_cases_name_the_same_bad_inputs():
    check_table_names_the_cases(TABLE_HEADER, {**CASES, **CONVERT_CASES})


def script_parameters() -> list:
    parameters = []
    for case, (where, _) in CASES.items():
        scripts = list(SCRIPTS) if where == BOTH else [where]
        parameters += [pytest.param(case, script, id=f"{case}-{script.removesuffix('.py')}") for script in scripts]
    return parameters


def all_files(folder: Path) -> dict[str, str]:
    return files_sha256(folder)


@pytest.mark.parametrize(("case", "script"), script_parameters())
def test_an_input_the_run_would_destroy_gets_one_line_and_stays_as_it_was(case, script, tmp_path, capsys, monkeypatch):
    arguments = CASES[case][1](script, tmp_path, monkeypatch)
    before = all_files(tmp_path)
    message = run_in_process(script, arguments, capsys)
    pattern = template_pattern(bad_input_rows(TABLE_HEADER)[case][2])
    assert pattern.fullmatch(message), f"{script} {case}:\n  got      {message}\n  expected {pattern.pattern}"
    assert "--overwrite_output_dir" not in message  # never offered: it would destroy the input
    after = all_files(tmp_path)
    assert {name: after.get(name) for name in before} == before  # every file the user had, byte-identical
    assert not [name for name in after if name not in before]  # and nothing left behind


@pytest.mark.parametrize("case", list(CONVERT_CASES))
def test_a_conversion_never_replaces_its_source(case, tmp_path, capsys):
    from roformer_hf.conversion import convert

    arguments = CONVERT_CASES[case][1](tmp_path)
    before = all_files(tmp_path / "source")
    capsys.readouterr()
    assert convert.main(arguments) == 1
    error_lines = capsys.readouterr().err.splitlines()
    assert len(error_lines) == 1 and template_pattern(bad_input_rows(TABLE_HEADER)[case][2]).fullmatch(
        error_lines[0]
    ), error_lines
    assert all_files(tmp_path / "source") == before


# --- what a run handles: it trains, and its inputs stay as they were ---


def test_predicting_into_the_folder_of_the_model_leaves_the_model_as_it_was(tmp_path):
    """An evaluation writes its results and predictions beside the model it evaluates: no file of the model."""
    model = tmp_path / "classifier"
    run_classification.main(script_run("run_classification.py", tmp_path, model))
    before = all_files(model)
    shutil.copy(tmp_path / "train.jsonl", tmp_path / "test.jsonl")
    arguments = [
        "--model_name_or_path",
        str(model),
        "--output_dir",
        str(model),
        "--test_file",
        str(tmp_path / "test.jsonl"),
    ]
    run_classification.main([*arguments, "--do_predict", "--max_seq_length", "32", "--report_to", "none"])
    after = all_files(model)

    def the_model(name: str) -> bool:  # not the results or the record of what runs wrote, which the evaluation adds to
        return not name.endswith("_results.json") and name != RECORD_NAME

    assert {name: after[name] for name in before if the_model(name)} == {
        name: digest for name, digest in before.items() if the_model(name)
    }
    assert (model / "predictions.jsonl").is_file() and "predictions.jsonl" in read_record(model)["files"]


def test_a_model_kept_in_the_output_folder_but_not_in_a_run_folder_is_read_and_left_alone(tmp_path):
    tiny_model(tmp_path / "out" / "base")
    before = all_files(tmp_path / "out" / "base")
    run_classification.main(
        script_run(
            "run_classification.py", tmp_path, tmp_path / "out", "--model_name_or_path", str(tmp_path / "out" / "base")
        )
    )
    assert (tmp_path / "out" / "model.safetensors").is_file()
    assert all_files(tmp_path / "out" / "base") == before


@pytest.mark.slow
def test_a_resume_from_a_checkpoint_of_the_output_folder_with_overwrite_output_dir_resumes_to_the_same_weights(
    tmp_path,
    straight_classification_run,  # noqa: F811 (a fixture)
):
    """How resuming works: the checkpoint named lies in the output folder, and --overwrite_output_dir clears nothing."""
    straight, arguments = straight_classification_run
    output_dir = interrupted_copy(straight, tmp_path / "out")
    resume = ["--resume_from_checkpoint", str(output_dir / "checkpoint-4"), "--overwrite_output_dir"]
    run_classification.main([*with_output_dir(arguments, output_dir), *resume])
    assert_same_weights(straight, output_dir)


def test_an_unfinished_newest_checkpoint_is_skipped_and_the_resume_ends_with_the_same_weights(
    tmp_path,
    straight_classification_run,  # noqa: F811 (a fixture)
    caplog,
):
    """The issue's silently wrong case: checkpoint-4's weights, optimizer and scheduler of step 2 under its
    trainer_state.json of step 4 gave other final weights, exit 0. Without its manifest (issue 50: one without is an
    unfinished checkpoint of the run, never taken by `true`), it is skipped."""
    straight, arguments = straight_classification_run
    output_dir = interrupted_copy(straight, tmp_path / "out")
    for name in ("model.safetensors", "optimizer.pt", "scheduler.pt"):
        shutil.copy(output_dir / "checkpoint-2" / name, output_dir / "checkpoint-4" / name)
    (output_dir / "checkpoint-4" / MANIFEST_NAME).unlink()
    run_classification.main([*with_output_dir(arguments, output_dir), "--resume_from_checkpoint", "true"])
    skipped = [record.getMessage() for record in caplog.records if "skipping the checkpoint" in record.getMessage()]
    assert len(skipped) == 1 and skipped[0].startswith(f"skipping the checkpoint {output_dir / 'checkpoint-4'}: ")
    assert "an unfinished checkpoint of this run" in skipped[0]
    assert_same_weights(straight, output_dir)
