"""A run whose weights turn NaN stops at that step with one line and saves nothing of it
(roformer_hf/training/outputs/divergence.py): the checkpoints of the steps before stay, finite; no checkpoint of that
step or later, no final model, no results."""

import math
import re

import pytest
import torch
from distributed_worker import trainer_builder
from safetensors.torch import load_file
from test_bad_inputs import SCRIPTS, run_in_process, training_run, with_value
from transformers import TrainerCallback

from roformer_hf.training.outputs.divergence import StopOnNonFiniteWeights, weights_are_finite
from roformer_hf.training.script_runner import run_script


class NaNAtStep(TrainerCallback):
    """Writes a NaN into one weight right after the optimizer step `step` (as a diverged update would)."""

    def __init__(self, step: int):
        self.step = step

    def on_optimizer_step(self, args, state, control, model=None, **kwargs):
        if state.global_step + 1 == self.step:  # global_step counts the step once it has ended
            with torch.no_grad():
                next(model.parameters()).view(-1)[0] = math.nan


def inject_nan(monkeypatch, script: str, step: int) -> None:
    owner, builder_name = trainer_builder(script)
    builder = getattr(owner, builder_name)

    def build_with_nan(*args, **kwargs):
        trainer = builder(*args, **kwargs)
        trainer.add_callback(NaNAtStep(step))
        return trainer

    monkeypatch.setattr(owner, builder_name, build_with_nan)


def assert_finite_checkpoints(output_dir, steps: list[int]) -> None:
    found = sorted(int(path.name.split("-")[1]) for path in output_dir.glob("checkpoint-*"))
    assert found == steps
    for step in steps:
        weights = load_file(output_dir / f"checkpoint-{step}" / "model.safetensors")
        assert all(torch.isfinite(tensor).all() for tensor in weights.values())


@pytest.mark.parametrize("script", list(SCRIPTS))
def test_a_nan_in_step_3_stops_the_run_before_its_checkpoint(script, tmp_path, capsys, monkeypatch):
    inject_nan(monkeypatch, script, step=3)
    arguments = training_run(script, tmp_path, "--save_strategy", "steps", "--save_steps", "1", "--disable_tqdm", "1")
    message = run_in_process(script, with_value(arguments, "--max_steps", "5"), capsys)
    assert re.fullmatch(r"error: training diverged at step 3: .*checkpoint-2, holds finite weights.*", message)
    output_dir = tmp_path / "out"
    assert_finite_checkpoints(output_dir, [1, 2])
    assert not (output_dir / "model.safetensors").exists()
    assert not list(output_dir.glob("*_results.json"))


def test_an_epoch_end_saves_no_checkpoint_of_a_diverged_step(tmp_path, capsys, monkeypatch):
    """--save_strategy epoch: the default flow asks for a save at the epoch's end, after the step that diverged."""
    script = "run_classification.py"
    inject_nan(monkeypatch, script, step=5)  # 9 training documents, 2 a step: the last step of the first epoch
    arguments = training_run(script, tmp_path, "--save_strategy", "epoch", "--num_train_epochs", "2")
    message = run_in_process(script, with_value(arguments, "--max_steps", "-1"), capsys)
    assert message.startswith("error: training diverged at step 5: ")
    assert "no checkpoint was saved before it" in message
    assert not list((tmp_path / "out").glob("checkpoint-*"))
    assert not (tmp_path / "out" / "model.safetensors").exists()


@pytest.mark.parametrize("script", list(SCRIPTS))
def test_a_diverging_learning_rate_keeps_the_finite_checkpoint(script, tmp_path, capsys):
    options = ("--learning_rate", "1e6", "--save_strategy", "steps", "--save_steps", "1", "--disable_tqdm", "1")
    options += ("--bf16", "false")
    arguments = with_value(training_run(script, tmp_path, *options), "--max_steps", "4")
    capsys.readouterr()
    with pytest.raises(SystemExit):
        run_script(lambda: SCRIPTS[script].main(arguments))
    # float32 overflows in step 2 or 3, by the dropout masks drawn: every checkpoint before that step is kept
    diverged = int(re.search(r"training diverged at step (\d+)", capsys.readouterr().err)[1])
    assert 2 <= diverged <= 3
    assert_finite_checkpoints(tmp_path / "out", list(range(1, diverged)))
    assert not (tmp_path / "out" / "model.safetensors").exists()


def test_weights_are_finite_sees_one_nan_or_infinity():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    args = type("Args", (), {"device": torch.device("cpu"), "world_size": 1})()
    assert weights_are_finite(model, args)
    with torch.no_grad():
        model[1].bias[0] = math.inf
    assert not weights_are_finite(model, args)
    with torch.no_grad():
        model[1].bias[0], model[0].weight[1, 2] = 0.0, math.nan
    assert not weights_are_finite(model, args)


def test_the_callback_leaves_a_finite_run_alone():
    callback, control = StopOnNonFiniteWeights(), type("Control", (), {})()
    control.should_save = control.should_evaluate = True
    control.should_training_stop = False
    args = type("Args", (), {"device": torch.device("cpu"), "world_size": 1})()
    state = type("State", (), {"global_step": 1})()
    callback.on_step_end(args, state, control, model=torch.nn.Linear(2, 2))
    assert control.should_save and control.should_evaluate and not control.should_training_stop
