"""Tests of roformer_hf.training.mlm.stages, the multi-stage length schedule of run_mlm.py (whole staged runs, resumed
ones included: test_run_mlm.py)."""

import json
import logging
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_checkpoints import write_checkpoint

import run_mlm
from roformer_hf.training.errors import ScriptError
from roformer_hf.training.mlm.stages import (
    Stage,
    canonical_stages,
    find_starting_point,
    format_stage_table,
    parse_stages,
    plan_stages,
    plot_loss_curve,
    stage_dir,
    stage_training_args,
)
from roformer_hf.training.outputs.resume import RUN_SETTINGS_FILE, check_resume

DATA = Path(__file__).resolve().parents[1] / "data"
# The stages are planned before any text is read: the shipped sample stands for the training text.
COMMON = ["--train_file", str(DATA / "peoples_daily_sample.txt"), "--tokenizer_name", str(DATA / "demo_vocab.txt")]


def test_parse_stages():
    assert parse_stages("512:256:200000, 1536:256:12500") == [
        Stage(512, 256, 200000),
        Stage(1536, 256, 12500),
    ]


@pytest.mark.parametrize("text", ["512:256", "512:256:x", "512:256:100:1", "512:-2:100", "512:256:0", ""])
def test_malformed_stages_are_named(text):
    with pytest.raises(ScriptError, match="--stages"):
        parse_stages(text)


def test_global_batch_sets_gradient_accumulation(tmp_path):
    arguments = [*COMMON, "--output_dir", str(tmp_path / "out"), "--per_device_train_batch_size", "4"]
    _, data_args, masking_args, training_args = run_mlm.parse_mlm_arguments([*arguments, "--stages", "32:24:5,64:8:3"])
    stages = plan_stages(masking_args.stages, data_args.max_seq_length, training_args)
    first, second = (stage_training_args(training_args, stages, index) for index in (0, 1))
    assert (first.gradient_accumulation_steps, first.max_steps, second.gradient_accumulation_steps) == (6, 5, 2)
    assert Path(second.output_dir) == tmp_path / "out" / "stage-2"
    with pytest.raises(ScriptError, match="not a multiple of per_device_train_batch_size"):
        plan_stages("32:8:5,64:10:5", data_args.max_seq_length, training_args)


def test_a_run_shorter_than_logging_steps_is_told_its_curve_has_no_training_line(caplog):
    common = [*COMMON, "--stages", "32:8:30,64:8:10"]
    for given, warned in (([], True), (["--logging_steps", "5"], False)):
        _, data_args, masking_args, training_args = run_mlm.parse_mlm_arguments([*common, *given])
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            plan_stages(masking_args.stages, data_args.max_seq_length, training_args)
        expected = (
            "--logging_steps 500 is more than the 30 steps of the longest stage: no training loss will be logged"
        )
        assert (expected in caplog.text and "use e.g. --logging_steps 3." in caplog.text) is warned


def test_without_stages_one_stage_runs_in_output_dir(tmp_path):
    _, data_args, masking_args, training_args = run_mlm.parse_mlm_arguments(
        [*COMMON, "--output_dir", str(tmp_path / "out"), "--max_seq_length", "48", "--max_steps", "7"]
    )
    stages = plan_stages(masking_args.stages, data_args.max_seq_length, training_args)
    assert stages == [Stage(48)]
    assert stage_dir(training_args, stages, 0) == tmp_path / "out"
    args = stage_training_args(training_args, stages, 0)
    assert (args.output_dir, args.max_steps, args.seed) == (str(tmp_path / "out"), 7, training_args.seed)
    assert (args.remove_unused_columns, args.push_to_hub) == (False, False)


def test_resuming_starts_at_the_stage_of_the_checkpoint(tmp_path):
    arguments = [*COMMON, "--output_dir", str(tmp_path / "out"), "--stages", "32:8:4,64:8:4"]
    checkpoint = write_checkpoint(tmp_path / "out" / "stage-2" / "checkpoint-2", 2)
    _, data_args, masking_args, training_args = run_mlm.parse_mlm_arguments(
        [*arguments, "--resume_from_checkpoint", str(checkpoint)]
    )
    stages = plan_stages(masking_args.stages, data_args.max_seq_length, training_args)
    assert find_starting_point(training_args, stages) == (1, str(checkpoint))
    elsewhere = tmp_path / "checkpoint-2"
    elsewhere.mkdir()
    training_args.resume_from_checkpoint = str(elsewhere)
    with pytest.raises(ScriptError, match="output_dir/stage-<n>/"):
        find_starting_point(training_args, stages)
    training_args.resume_from_checkpoint = "True"
    assert find_starting_point(training_args, stages) == (1, str(checkpoint))
    (checkpoint / "optimizer.pt").unlink()  # no stage has a complete checkpoint
    with pytest.raises(
        ScriptError, match=r"no stage of .* has a complete checkpoint: start the run again with --over"
    ):
        find_starting_point(training_args, stages)


def test_stage_table_starts_with_the_untrained_model():
    table = [
        {"stage": 1, "max_seq_length": 32, "global_batch_size": 8, "steps": 4, "train_loss": 9.5, "eval_loss": 9.0}
        | {"perplexity": 8103.08, "eval_accuracy": 0.05, "initial_eval_loss": 10.25, "initial_eval_accuracy": 0.0},
        {"stage": 2, "max_seq_length": 64, "global_batch_size": 8, "steps": 4, "eval_loss": 8.5},
    ]
    lines = format_stage_table(table).splitlines()
    assert lines[0] == (
        "| stage | max_seq_length | global_batch_size | steps | train_loss | eval_loss | perplexity | eval_accuracy |"
    )
    assert lines[2] == "| before training |  |  |  |  | 10.2500 |  | 0.0000 |"
    assert lines[3] == "| 1 | 32 | 8 | 4 | 9.5000 | 9.0000 | 8103.0800 | 0.0500 |"
    assert lines[4] == "| 2 | 64 | 8 | 4 |  | 8.5000 |  |  |"


@pytest.mark.parametrize("logged", [[], [{"step": 1, "eval_loss": 2.5}]])
def test_a_loss_curve_of_a_run_that_logged_no_training_loss_is_drawn_without_warnings(logged, tmp_path):
    """A run too short to log its loss (fewer steps than --logging_steps) still gets its chart, without matplotlib's
    "no artists with labels" warning about an empty legend."""
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": logged, "global_step": 1}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plot_loss_curve(SimpleNamespace(output_dir=str(tmp_path)), [Stage(32)], tmp_path / "loss_curve.png")
    assert (tmp_path / "loss_curve.png").stat().st_size > 0


def test_stages_are_recorded_and_compared_as_parsed(tmp_path):
    """A space after a comma, or a leading zero, gives the same stages: the run records them as parsed, and a resume
    compares the stages a checkpoint recorded (an earlier run's spelling) with this run's as parsed (issue 51)."""
    arguments = [*COMMON, "--output_dir", str(tmp_path / "out"), "--per_device_train_batch_size", "8"]
    _, _, masking_args, _ = run_mlm.parse_mlm_arguments([*arguments, "--stages", " 32:024:5, 64:8:3 "])
    assert masking_args.stages == canonical_stages("32:24:5,64:8:3") == "32:24:5,64:8:3"
    checkpoint = tmp_path / "checkpoint-5"
    checkpoint.mkdir()
    (checkpoint / RUN_SETTINGS_FILE).write_text(json.dumps({"stages": "32:24:5, 64:8:3"}))
    check_resume(checkpoint, None, None, {"stages": masking_args.stages})
    with pytest.raises(ScriptError, match="--stages"):  # other stages are still refused
        check_resume(checkpoint, None, None, {"stages": "32:24:5,64:8:4"})
