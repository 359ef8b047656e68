"""The scripts resume only from verified checkpoints: a damaged or inconsistent newest checkpoint is skipped with one
line naming its file and the run ends with exactly the weights of an uninterrupted one; a damaged checkpoint given by
path is refused in one line naming the file and the newest complete checkpoint; a checkpoint without a manifest is
resumed from only when named, unverified and said so; a run killed before its first checkpoint is told a way out that
works; a resume of a finished run changes nothing and says so."""

import json
import logging
import shutil
from pathlib import Path

import pytest
from distributed_worker import files_sha256
from test_checkpoints import DAMAGES as CHECKPOINT_DAMAGES
from test_checkpoints import cut_in_half
from test_output_safety import (
    assert_same_weights,
    classification_arguments,
    classification_files,
    exit_line,
    mlm_arguments,
    news_file,  # noqa: F401 (a fixture)
)

import run_classification
import run_mlm
from roformer_hf.training.outputs.checkpoints import MANIFEST_NAME, is_complete_checkpoint, verify_checkpoint
from roformer_hf.training.outputs.output_record import RECORD_NAME, open_record

FINAL_MODEL_FILES = (
    "model.safetensors",
    "config.json",
    "trainer_state.json",
    "all_results.json",
    "train_results.json",
)


@pytest.fixture(scope="module")
def straight_classification_run(tmp_path_factory) -> tuple[Path, list[str]]:
    """An uninterrupted run of 6 steps, a checkpoint every 2: the reference of the resumed ones, and their start."""
    folder = tmp_path_factory.mktemp("straight")
    files = classification_files.__wrapped__(folder)
    arguments = classification_arguments(files, folder / "out", "--max_steps", "6")
    run_classification.main(arguments)
    return folder / "out", arguments


def interrupted_copy(straight: Path, output_dir: Path) -> Path:
    """The straight run's folder as a run stopped after checkpoint-4 left it: checkpoints 2 and 4, no final model (a
    resume from a damaged checkpoint-4 trains on, 2 steps, from what it holds)."""
    shutil.copytree(straight, output_dir, ignore=shutil.ignore_patterns("checkpoint-6"))
    for name in FINAL_MODEL_FILES:
        (output_dir / name).unlink()
    return output_dir


def with_output_dir(arguments: list[str], output_dir: Path) -> list[str]:
    arguments = list(arguments)
    arguments[arguments.index("--output_dir") + 1] = str(output_dir)
    return arguments


def replace_with_the_earlier(name: str):
    def damage(checkpoint: Path) -> None:
        shutil.copyfile(checkpoint.parent / "checkpoint-2" / name, checkpoint / name)

    return damage


# The damages of test_checkpoints.py that a resume of a real run meets (each case is a training run), and a crash
# between two writes the other way round: a trainer state older than the weights.
DAMAGES = {
    name: CHECKPOINT_DAMAGES[name]
    for name in (
        "optimizer_missing",
        "scheduler_missing",
        "rng_state_missing",
        "weights_truncated",
        "weights_empty",
        "optimizer_empty",
        "config_truncated",
        "config_a_list",
        "run_settings_empty",
        "vocab_truncated",
        "weights_of_another_step",  # the state of a later step than the weights
    )
} | {"state_behind_the_weights": (replace_with_the_earlier("trainer_state.json"), "its trainer_state.json")}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_newest_checkpoint_is_skipped_and_the_resume_ends_with_the_uninterrupted_weights(
    damage, tmp_path, straight_classification_run, caplog
):
    straight, arguments = straight_classification_run
    output_dir = interrupted_copy(straight, tmp_path / "out")
    damage_checkpoint, named = DAMAGES[damage]
    damage_checkpoint(output_dir / "checkpoint-4")
    with caplog.at_level(logging.WARNING):
        run_classification.main([*with_output_dir(arguments, output_dir), "--resume_from_checkpoint", "true"])
    warnings = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    about_it = [line for line in warnings if "checkpoint-4" in line]
    assert len(about_it) == 1, warnings
    assert about_it[0].startswith(f"skipping the checkpoint {output_dir / 'checkpoint-4'}: {named}")
    assert about_it[0].endswith(f"resuming from {output_dir / 'checkpoint-2'}, the newest complete one.")
    assert_same_weights(straight, output_dir)
    assert verify_checkpoint(output_dir / "checkpoint-4") is True  # written again, whole


def test_a_damaged_checkpoint_given_by_path_is_refused_in_one_line_and_nothing_changes(
    tmp_path, straight_classification_run, capsys
):
    """Nothing changes but the record of what runs wrote, which now records checkpoint-4 as it is (issue 51)."""
    straight, arguments = straight_classification_run
    output_dir = interrupted_copy(straight, tmp_path / "out")
    (output_dir / "checkpoint-4" / "optimizer.pt").unlink()
    before = files_sha256(output_dir)
    del before[RECORD_NAME]
    resume = [*with_output_dir(arguments, output_dir), "--resume_from_checkpoint", str(output_dir / "checkpoint-4")]
    line = exit_line(run_classification.main, resume, capsys)
    assert line == (
        f"error: --resume_from_checkpoint {output_dir / 'checkpoint-4'} cannot be resumed from: its optimizer.pt is "
        f"missing; {output_dir / 'checkpoint-2'} is complete: resume from that one."
    )
    assert {name: digest for name, digest in files_sha256(output_dir).items() if name != RECORD_NAME} == before


def test_checkpoints_without_manifests_are_resumed_only_when_named_and_said_so_to_the_same_weights(
    tmp_path, straight_classification_run, caplog, capsys
):
    """Issue 50: `true` takes no checkpoint without a manifest (before, it took one "written before manifests" after
    heuristics); named by path, one that cannot be read is refused naming the file, one that can is resumed from
    with one line saying it is unverified."""
    straight, arguments = straight_classification_run
    output_dir = interrupted_copy(straight, tmp_path / "out")
    for manifest in output_dir.glob(f"checkpoint-*/{MANIFEST_NAME}"):
        manifest.unlink()
    cut_in_half(output_dir / "checkpoint-4" / "optimizer.pt")
    resume = [*with_output_dir(arguments, output_dir), "--resume_from_checkpoint"]
    line = exit_line(run_classification.main, [*resume, "true"], capsys)
    assert line.startswith(f"error: --resume_from_checkpoint true, but {output_dir} holds no complete checkpoint")
    line = exit_line(run_classification.main, [*resume, str(output_dir / "checkpoint-4")], capsys)
    assert line.startswith(f"error: --resume_from_checkpoint {output_dir / 'checkpoint-4'} cannot be resumed from: ")
    assert "its optimizer.pt is cut short or damaged (" in line
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        run_classification.main([*resume, str(output_dir / "checkpoint-2")])
    warnings = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    unverified = [line for line in warnings if "checkpoint-2" in line and MANIFEST_NAME in line]
    assert len(unverified) == 1
    assert unverified[0].startswith(
        f"resuming from {output_dir / 'checkpoint-2'} unverified: it has no {MANIFEST_NAME}"
    )
    assert_same_weights(straight, output_dir)


@pytest.mark.parametrize("given", ["true", "checkpoint-6"])
def test_a_resume_of_a_finished_run_says_so_and_changes_nothing(given, tmp_path, straight_classification_run, capsys):
    """Issue 51: a resume of a run whose last checkpoint is at --max_steps trained "step 7 of 6", wrote checkpoint-7
    and rewrote its results and card, exit 0. Now: one line, exit status 0, no file changed."""
    from roformer_hf.training.script_runner import run_script

    straight, arguments = straight_classification_run
    output_dir = tmp_path / "out"
    shutil.copytree(straight, output_dir)
    before = files_sha256(output_dir)
    resume = [*with_output_dir(arguments, output_dir), "--resume_from_checkpoint", given]
    if given != "true":
        resume[-1] = str(output_dir / given)
    capsys.readouterr()
    run_script(lambda: run_classification.main(resume))  # no SystemExit: exit status 0
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        f"the run is finished: {output_dir / 'checkpoint-6'} is at step 6, the end of --max_steps 6, so there is "
        "nothing to resume and nothing was changed (no checkpoint, results or card written); to train on, resume with "
        "a larger --max_steps or --num_train_epochs."
    ]
    assert files_sha256(output_dir) == before and not (output_dir / "checkpoint-7").exists()


def test_a_resume_at_the_end_of_the_last_stage_is_finished_once_the_run_saved_its_end(tmp_path):
    """run_mlm.py --stages: the end of the last stage is the end of the run (before, a resume there evaluated again and
    rewrote the final model, the results and the card); a run stopped between that checkpoint and its final save is
    not finished, and its resume saves what is missing."""
    from test_checkpoints import write_checkpoint
    from test_stages import COMMON

    from roformer_hf.training.mlm.stages import find_starting_point, plan_stages
    from roformer_hf.training.outputs.resume import RunFinished

    arguments = [*COMMON, "--output_dir", str(tmp_path / "out"), "--stages", "32:8:4,64:8:4"]
    checkpoint = write_checkpoint(tmp_path / "out" / "stage-2" / "checkpoint-4", 4)
    _, data_args, masking_args, training_args = run_mlm.parse_mlm_arguments(
        [*arguments, "--resume_from_checkpoint", "true"]
    )
    stages = plan_stages(masking_args.stages, data_args.max_seq_length, training_args)
    assert find_starting_point(training_args, stages) == (1, str(checkpoint))  # killed at its final save
    shutil.copy(checkpoint / "trainer_state.json", checkpoint.parent / "trainer_state.json")  # saved after the model
    with pytest.raises(
        RunFinished, match=r"stage-2/checkpoint-4 is at step 4, the end of the last of --stages \(4 steps\)"
    ):
        find_starting_point(training_args, stages)


def stopped_before_its_final_save(straight: Path, output_dir: Path) -> Path:
    """The straight run's folder as a run killed (SIGKILL) after its last checkpoint, at --max_steps, and before its
    final save left it (test_output_safety.py's `final-save` kill): every checkpoint, no final model or state."""
    shutil.copytree(straight, output_dir)
    for name in FINAL_MODEL_FILES:
        (output_dir / name).unlink(missing_ok=True)
    return output_dir


def straight_run_of(case: str, tmp_path: Path, straight_classification_run, news_text: Path):
    """An uninterrupted run of --max_steps 6, a checkpoint every 2 steps: its folder, arguments and script's main."""
    if case == "run_classification":
        return (*straight_classification_run, run_classification.main)
    output_dir, main = tmp_path / "straight", run_classification.main
    if case == "run_mlm":  # one plain stage
        arguments, main = mlm_arguments(news_text, output_dir, "--max_steps", "6"), run_mlm.main
        del arguments[arguments.index("--stages") : arguments.index("--stages") + 2]
    else:  # the final model is the best checkpoint's, here the one of the highest loss: not checkpoint-6's
        best = ("--load_best_model_at_end", "--metric_for_best_model", "loss", "--greater_is_better", "true")
        evaluations = ("--eval_strategy", "steps", "--eval_steps", "2", *best)
        arguments = classification_arguments(classification_files.__wrapped__(tmp_path), output_dir, *evaluations)
        arguments += ["--max_steps", "6"]
    main(arguments)
    return output_dir, arguments, main


@pytest.mark.parametrize("case", ["run_classification", "run_mlm", "load_best_model_at_end"])
def test_a_resume_from_the_end_of_a_run_stopped_before_its_final_save_trains_no_step(
    case,
    tmp_path,
    straight_classification_run,
    news_file,  # noqa: F811
    capsys,
):
    """A resume from checkpoint-6 of a run of --max_steps 6 stopped before its final save trained a 7th step (the
    Trainer checks the end after a step, not before the first; step 6 is mid-epoch here) and wrote checkpoint-7. Now it
    trains none: the final model is checkpoint-6's (the best checkpoint's under --load_best_model_at_end), the weights
    of the uninterrupted run, with its state; the next resume finds the run finished. run_mlm.py without --stages
    likewise (its last stage is `resume.train_from`'s)."""
    from roformer_hf.training.script_runner import run_script

    straight, arguments, main = straight_run_of(case, tmp_path, straight_classification_run, news_file)
    output_dir = stopped_before_its_final_save(straight, tmp_path / "out")
    resume = [*with_output_dir(arguments, output_dir), "--resume_from_checkpoint", "true"]
    main(resume)
    checkpoints = sorted(path.name for path in output_dir.glob("checkpoint-*"))
    assert checkpoints == ["checkpoint-2", "checkpoint-4", "checkpoint-6"]
    assert json.loads((output_dir / "trainer_state.json").read_text())["global_step"] == 6
    assert_same_weights(straight, output_dir)
    if case == "load_best_model_at_end":
        with pytest.raises(AssertionError):
            assert_same_weights(straight / "checkpoint-6", output_dir)
    capsys.readouterr()
    run_script(lambda: main(resume))  # no SystemExit: exit status 0
    finished = capsys.readouterr().err.strip()
    assert finished.startswith(
        f"the run is finished: {output_dir / 'checkpoint-6'} is at step 6, the end of --max_steps"
    )


def test_every_checkpoint_a_script_writes_is_verified(straight_classification_run):
    straight, _ = straight_classification_run
    for step in (2, 4, 6):
        manifest = json.loads((straight / f"checkpoint-{step}" / MANIFEST_NAME).read_text())
        assert manifest["global_step"] == step
        assert {"model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json"} <= set(
            manifest["files"]
        )
        assert {"run_settings.json", "config.json", "vocab.txt"} <= set(manifest["files"])
        assert verify_checkpoint(straight / f"checkpoint-{step}") is True


def test_a_run_killed_before_its_first_checkpoint_is_told_a_way_out_that_works(
    tmp_path,
    news_file,  # noqa: F811
    capsys,
):
    output_dir = tmp_path / "out"
    arguments = mlm_arguments(news_file, output_dir, "--stages", "32:4:2")
    # what a run_mlm.py killed (SIGKILL) during its first step leaves: its record, still open, and its first stage's
    # folder and initial results
    output_dir.mkdir()
    open_record(output_dir)
    (output_dir / "stage-1").mkdir()
    (output_dir / "stage-1" / "initial_results.json").write_text('{"eval_loss": 6.9}')
    line = exit_line(run_mlm.main, arguments, capsys)
    assert line == (
        f"error: --output_dir {output_dir} holds an earlier run (stage-1) without a complete checkpoint to resume "
        "from: add --overwrite_output_dir to replace it, or choose another --output_dir."
    )
    line = exit_line(run_mlm.main, [*arguments, "--resume_from_checkpoint", "true"], capsys)
    assert line == (
        f"error: --resume_from_checkpoint true, but no stage of {output_dir} has a complete checkpoint: start the run "
        "again with --overwrite_output_dir in place of --resume_from_checkpoint (a checkpoint skipped as damaged is "
        "named above), or give the path of a checkpoint."
    )
    run_mlm.main([*arguments, "--overwrite_output_dir"])  # the way out both lines give
    assert (output_dir / "model.safetensors").exists()
    assert is_complete_checkpoint(output_dir / "stage-1" / "checkpoint-2")
