"""A run writes, renames and deletes only its own files: no write follows a symbolic link out of the output folder.
A checkpoint or stage folder that is a link is refused in one line before anything is read (`--overwrite_output_dir`
deletes the link itself); files written whole replace a link in their place; the lock's record is never written
through a link; a dangling link as `--output_dir` gets one line. Every file the scripts write has the mode a plain
write gives. The checks: checksums of the folders a link points to are unchanged."""

import os
import stat
from pathlib import Path

import pytest
from distributed_worker import files_sha256
from test_output_safety import (
    classification_arguments,
    classification_files,  # noqa: F401 (a fixture)
    exit_line,
    mlm_arguments,
    news_file,  # noqa: F401 (a fixture)
)

import run_classification
import run_mlm
from roformer_hf.training.outputs.checkpoints import is_complete_checkpoint
from roformer_hf.training.outputs.locks import LOCK_FILE_NAME


@pytest.fixture
def other_model(tmp_path, classification_files) -> Path:  # noqa: F811
    """Another run's folder (its final model and checkpoints), which links in the output folder point to."""
    run_classification.main(classification_arguments(classification_files, tmp_path / "other", "--seed", "5"))
    return tmp_path / "other"


@pytest.fixture
def stopped_run(tmp_path, classification_files) -> tuple[Path, list[str]]:  # noqa: F811
    """A run stopped after checkpoint-2 (its checkpoint-4 and final model deleted), and its arguments."""
    arguments = classification_arguments(classification_files, tmp_path / "out")
    run_classification.main(arguments)
    output_dir = tmp_path / "out"
    for path in [*(output_dir / "checkpoint-4").iterdir(), output_dir / "checkpoint-4"]:
        path.rmdir() if path.is_dir() else path.unlink()
    (output_dir / "model.safetensors").unlink()
    return output_dir, arguments


@pytest.mark.parametrize("target", ["final model", "complete checkpoint"])
def test_a_checkpoint_folder_linked_to_another_model_is_refused_and_the_other_model_unchanged(
    target, stopped_run, other_model, capsys
):
    output_dir, arguments = stopped_run
    linked = other_model if target == "final model" else other_model / "checkpoint-4"
    (output_dir / "checkpoint-4").symlink_to(linked, target_is_directory=True)
    other_before, ours_before = files_sha256(other_model), files_sha256(output_dir / "checkpoint-2")
    for extra in (["--resume_from_checkpoint", "true"], []):
        line = exit_line(run_classification.main, [*arguments, *extra], capsys)
        assert line == (
            f"error: --output_dir {output_dir} holds checkpoint-4, a symbolic link to {linked}: a run writes only into "
            "folders of its own, and would write its checkpoints through the link; remove the link (rm "
            f"{output_dir / 'checkpoint-4'}, which leaves what it points to as it is), or add --overwrite_output_dir, "
            "which deletes the link and nothing it points to (to resume from the checkpoint it points to, give that "
            "folder to --resume_from_checkpoint)."
        )
    assert files_sha256(other_model) == other_before
    assert files_sha256(output_dir / "checkpoint-2") == ours_before


def test_overwrite_output_dir_deletes_a_link_and_nothing_it_points_to(stopped_run, other_model, capsys):
    """A link named as a run's checkpoint folder is deleted (never what it points to); a link put where the run's
    model.safetensors was is no file the run wrote, and is refused, naming it (issue 51: a run's file is one that
    matches its record)."""
    output_dir, arguments = stopped_run
    (output_dir / "checkpoint-4").symlink_to(other_model, target_is_directory=True)
    (output_dir / "model.safetensors").symlink_to(other_model / "model.safetensors")
    before = files_sha256(other_model)
    line = exit_line(run_classification.main, [*arguments, "--overwrite_output_dir"], capsys)
    assert line.startswith(f"error: --output_dir {output_dir} holds model.safetensors, which no run of these scripts")
    (output_dir / "model.safetensors").unlink()
    run_classification.main([*arguments, "--overwrite_output_dir"])  # was: Cannot call rmtree on a symbolic link
    assert files_sha256(other_model) == before
    assert not (output_dir / "checkpoint-4").is_symlink() and is_complete_checkpoint(output_dir / "checkpoint-4")
    assert not (output_dir / "model.safetensors").is_symlink()


def test_a_stage_folder_linked_elsewhere_is_refused(tmp_path, news_file, other_model, capsys):  # noqa: F811
    output_dir = tmp_path / "mlm"
    output_dir.mkdir()
    (output_dir / "stage-2").symlink_to(other_model, target_is_directory=True)
    before = files_sha256(other_model)
    line = exit_line(run_mlm.main, mlm_arguments(news_file, output_dir), capsys)
    assert line.startswith(f"error: --output_dir {output_dir} holds stage-2, a symbolic link to {other_model}: ")
    assert files_sha256(other_model) == before


@pytest.mark.parametrize("script", ["run_mlm", "run_classification"])
def test_a_dangling_link_as_output_dir_gets_one_line(
    script,
    tmp_path,
    news_file,  # noqa: F811
    classification_files,  # noqa: F811
    capsys,
):
    output_dir = tmp_path / "out"
    output_dir.symlink_to(tmp_path / "scratch" / "run", target_is_directory=True)  # the scratch disk is not mounted
    main, arguments = {
        "run_mlm": (run_mlm.main, mlm_arguments(news_file, output_dir)),
        "run_classification": (run_classification.main, classification_arguments(classification_files, output_dir)),
    }[script]
    line = exit_line(main, arguments, capsys)  # was: cannot write to --output_dir <folder>: File exists
    assert line == (
        f"error: --output_dir {output_dir}: {output_dir} is a symbolic link to {tmp_path / 'scratch' / 'run'}, which "
        f"does not exist: create that folder, or remove the link (rm {output_dir}) to have a folder made in its place."
    )
    assert output_dir.is_symlink() and not (tmp_path / "scratch").exists()


def test_the_lock_record_is_never_written_through_a_link(tmp_path, classification_files):  # noqa: F811
    precious = tmp_path / "precious.txt"
    precious.write_text("the user's notes")
    output_dir = tmp_path / "out"
    output_dir.mkdir()
    (output_dir / LOCK_FILE_NAME).symlink_to(precious)  # say, left by a sync tool
    run_classification.main(classification_arguments(classification_files, output_dir))
    assert precious.read_text() == "the user's notes"
    assert not (output_dir / LOCK_FILE_NAME).exists()


def test_every_file_a_run_writes_follows_the_umask(tmp_path, classification_files):  # noqa: F811
    """Results, predictions, pictures, trainer_state.json, the model and the checkpoints: what a plain write gives."""
    (classification_files / "test.jsonl").write_bytes((classification_files / "validation.jsonl").read_bytes())
    output_dir = tmp_path / "out"
    arguments = classification_arguments(classification_files, output_dir, "--do_predict")
    arguments += ["--test_file", str(classification_files / "test.jsonl")]
    previous = os.umask(0o027)
    try:
        run_classification.main(arguments)
    finally:
        os.umask(previous)
    modes = {str(path.relative_to(output_dir)): stat.S_IMODE(path.stat().st_mode) for path in output_dir.rglob("*")}
    written_whole = ["predictions.jsonl", "trainer_state.json", "all_results.json", "checkpoint-4/run_settings.json"]
    assert set(written_whole) <= set(modes) and any(name.endswith(".png") for name in modes)
    assert {"model.safetensors", "checkpoint-4/model.safetensors"} <= set(modes)
    plain = {name: 0o750 if (output_dir / name).is_dir() else 0o640 for name in modes}  # umask 0o027
    assert {name: oct(mode) for name, mode in modes.items() if mode != plain[name]} == {}


def test_a_conversion_follows_the_umask_too(tmp_path):
    """The converted folder was 0o700 (tempfile.mkdtemp) and its weights 0o600 (safetensors), whatever the umask."""
    from test_bad_inputs import transformers_checkpoint

    from roformer_hf.conversion.convert import convert

    source = transformers_checkpoint(tmp_path)
    previous = os.umask(0o022)
    try:
        convert(source, tmp_path / "converted")
    finally:
        os.umask(previous)
    converted = tmp_path / "converted"
    assert stat.S_IMODE(converted.stat().st_mode) == 0o755
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in converted.iterdir()}
    assert "model.safetensors" in modes and {name: oct(mode) for name, mode in modes.items() if mode != 0o644} == {}
