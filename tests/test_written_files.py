"""Tests of roformer_hf/training/written_files.py: which files of the output folder a run writes, and the comparison of
an input file with them (through symlinks and hard links). The refusals in the scripts are rows of
docs/bad_inputs.md (tests/test_bad_settings_and_data.py)."""

import os
from pathlib import Path, PurePath

import pytest
from test_bad_inputs import ROWS, SCRIPTS, good_run, with_value, write_jsonl

from roformer_hf.training.written_files import check_inputs_are_not_outputs, is_written, written_file_clash


@pytest.mark.parametrize(
    "name",
    [
        "predictions.jsonl",
        "eval_results.json",
        "all_results.json",
        "config.json",
        "model.safetensors",
        "vocab.txt",
        "README.md",
        "confusion_matrix_eval.csv",
        "confusion_matrix_test_labels.csv",
        "loss_curve.png",
        "checkpoint-4/trainer_state.json",
        "stage-2/checkpoint-1/optimizer.pt",
        ".roformer_hf.lock",
    ],
)
def test_the_files_a_run_writes(name):
    assert is_written(PurePath(name))


@pytest.mark.parametrize("name", ["train.jsonl", "test.jsonl", "data/predictions.jsonl", "notes.md", "corpus.txt"])
def test_the_files_a_run_leaves_alone(name):
    assert not is_written(PurePath(name))


def test_a_data_file_beside_the_outputs_is_no_clash(tmp_path):
    (tmp_path / "out").mkdir()
    test_file = write_jsonl(tmp_path / "out" / "test.jsonl", ROWS)
    write_jsonl(tmp_path / "out" / "predictions.jsonl", ROWS)  # an earlier run's, another file
    assert written_file_clash(test_file, tmp_path / "out") is None
    check_inputs_are_not_outputs({"--test_file": str(test_file), "--validation_file": None}, tmp_path / "out")


def test_links_are_seen_through(tmp_path):
    (tmp_path / "out").mkdir()
    predictions = write_jsonl(tmp_path / "out" / "predictions.jsonl", ROWS)
    os.link(predictions, tmp_path / "hard.jsonl")
    (tmp_path / "soft.jsonl").symlink_to(predictions)
    (tmp_path / "out-link").symlink_to(tmp_path / "out", target_is_directory=True)
    for input_file in ("hard.jsonl", "soft.jsonl"):
        assert written_file_clash(tmp_path / input_file, tmp_path / "out") == Path("predictions.jsonl")
    assert written_file_clash(predictions, tmp_path / "out-link") == Path("predictions.jsonl")
    # a path that does not exist yet but would be written: refused by name
    assert written_file_clash(tmp_path / "new" / "checkpoint-2" / "x.json", tmp_path / "new") is not None


def every_file_under(folder: Path) -> list[PurePath]:
    return [path.relative_to(folder) for path in folder.rglob("*") if path.is_file()]


@pytest.mark.parametrize("script", list(SCRIPTS))
def test_every_file_a_run_writes_is_known(script, tmp_path):
    """What a tiny run of each script leaves in its output folder (model, code, card, results, pictures, predictions,
    checkpoints, stages) is all in `WRITTEN_FILES` / `WRITTEN_FOLDERS`: a data file of any of those names is refused."""
    write_jsonl(tmp_path / "test.jsonl", ROWS[:4])
    if script == "run_mlm.py":
        extra = ["--stages", "16:2:1,16:2:1", "--line_by_line"]
    else:
        extra = ["--do_predict", "--test_file", str(tmp_path / "test.jsonl")]
    arguments = good_run("--save_strategy", "steps", "--save_steps", "1", *extra)(script, tmp_path)
    SCRIPTS[script].main(with_value(arguments, "--max_steps", "2"))
    written = every_file_under(tmp_path / "out")
    assert len(written) > 20
    assert [name for name in written if not is_written(name)] == []


# --- every input of a run against what it writes (issue 35) ---


@pytest.mark.parametrize(
    ("option", "input_path", "trains", "refused"),
    [
        ("--model_name_or_path", "out", True, "are the same folder"),
        ("--model_name_or_path", "out", False, None),  # an evaluation writes its results beside the model
        ("--model_name_or_path", ".", True, "lies inside --model_name_or_path"),
        ("--model_name_or_path", ".", False, None),
        ("--model_name_or_path", "out/base", True, None),  # kept in the output folder, in no folder a run writes
        ("--model_name_or_path", "out/checkpoint-2", True, "lies in checkpoint-2"),
        ("--model_name_or_path", "out/checkpoint-2", False, None),  # an evaluation writes no checkpoint
        ("--tokenizer_name", "out/stage-1/checkpoint-2/vocab.txt", True, "lies in stage-1"),
        ("--resume_from_checkpoint", "out/checkpoint-2", True, None),  # how resuming works
        ("--resume_from_checkpoint", "out/stage-2/checkpoint-2", True, None),
        ("--resume_from_checkpoint", "out/.partial-model-1/checkpoint-2", True, "lies in .partial-model-1"),
        ("--resume_from_checkpoint", "out", True, None),  # a run's folder: refused as no checkpoint, by the resume
        ("--dataset_name", "out/runs/corpus", True, "lies in runs"),
        ("--model_name_or_path", "user/model", True, None),  # a Hub id: no folder of the run
    ],
)
def test_every_input_is_compared_with_what_the_run_writes(option, input_path, trains, refused, tmp_path, monkeypatch):
    from roformer_hf.training.written_files import overlap_refusal

    monkeypatch.chdir(tmp_path)
    (tmp_path / "out" / "checkpoint-1").mkdir(parents=True)  # a run's folder
    refusal = overlap_refusal(option, input_path, "out", trains)
    assert refusal is None if refused is None else refused in refusal
    if refusal is not None:
        assert "--overwrite_output_dir" not in refusal and "\n" not in refusal


def test_a_hub_id_spelled_as_the_output_folder_is_refused(tmp_path, monkeypatch):
    """`--model_name_or_path user/model --output_dir user/model`: the run would make the folder, then load it."""
    from roformer_hf.training.written_files import overlap_refusal

    monkeypatch.chdir(tmp_path)
    assert "are the same folder" in overlap_refusal("--model_name_or_path", "user/model", "user/model")
