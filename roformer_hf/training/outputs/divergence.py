"""A training run whose weights turn NaN or infinite (a loss that diverged, or overflowed) stops at that step with one
line, and saves nothing of it: neither a checkpoint nor the final model.

`StopOnNonFiniteWeights`, a callback of every trainer of the scripts, checks the weights after every optimizer step,
before transformers saves a checkpoint of that step. The weights rather than the loss: a callback does not see the
loss (and transformers' `logging_nan_inf_filter` keeps a NaN out of the logged one), a non-finite loss makes the
weights non-finite at the step it happens (its gradients are NaN, and so is any update made of them), and the weights
also catch what leaves the loss finite for a step (`--weight_decay inf`, an Adam update of 0/0). Steps that mixed
precision skips for an overflow leave the weights finite, so they do not stop the run.

The check is one norm over all parameters (`torch.nn.utils.get_total_norm`, batched by `foreach`; on the CPU about 30
ms for 110M parameters) and one read of the result: on a GPU one sync per optimizer step, beside the one transformers
already makes for every micro-batch to filter NaN losses out of its logs. Under torch.distributed the processes agree
by an all-reduce, so that all stop at the same step.

On a NaN the callback stops the training loop without a checkpoint or an evaluation of the step, and raises
`ScriptError` at the end of `train()` (after the progress bar has closed), so the scripts never reach their final
save.
"""

import logging
from pathlib import Path

import torch
from transformers import TrainerCallback

from ..errors import ScriptError

logger = logging.getLogger(__name__)


def weights_are_finite(model: torch.nn.Module, args) -> bool:
    """Whether every parameter of `model` is finite, on every process of the run (an all-reduce when distributed)."""
    parameters = [parameter for parameter in model.parameters() if parameter.numel()]
    finite = torch.isfinite(torch.nn.utils.get_total_norm(parameters)).to(args.device, torch.int32)
    if args.world_size > 1 and torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(finite, op=torch.distributed.ReduceOp.MIN)
    return bool(finite.item())


def first_non_finite_parameter(model: torch.nn.Module) -> str | None:
    """The name of the first parameter holding a NaN or an infinity (on this process), for the message."""
    for name, parameter in model.named_parameters():
        if not torch.isfinite(parameter).all():
            return name
    return None


class StopOnNonFiniteWeights(TrainerCallback):
    """Stops training, without saving, at the step whose update made the weights non-finite (see the module
    docstring); the last checkpoint this run saved stays the newest."""

    def __init__(self):
        self.diverged_at: int | None = None  # the step whose weights were not finite
        self.parameter_name: str | None = None
        self.last_checkpoint: Path | None = None  # the newest this callback saw saved (one instance can serve stages)

    def on_save(self, args, state, control, **kwargs):
        self.last_checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if self.diverged_at is None and not weights_are_finite(model, args):
            self.diverged_at, self.parameter_name = state.global_step, first_non_finite_parameter(model)
        if self.diverged_at is not None:
            self._stop_without_saving(control)
        return control

    def on_epoch_end(self, args, state, control, **kwargs):
        if self.diverged_at is not None:  # the default flow asks for a save at an epoch's end
            self._stop_without_saving(control)
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if self.diverged_at is not None:
            raise ScriptError(divergence_message(self.diverged_at, self.parameter_name, self.last_checkpoint, args))

    @staticmethod
    def _stop_without_saving(control) -> None:
        control.should_training_stop = True
        control.should_save = control.should_evaluate = False


def divergence_message(step: int, parameter_name: str | None, last_checkpoint: Path | None, args) -> str:
    """The line for a run whose weights turned non-finite: the step, what was kept, and what to change."""
    where = f" (first in {parameter_name})" if parameter_name else ""
    if last_checkpoint is not None:
        kept = f"the newest checkpoint, {last_checkpoint}, holds finite weights"
    else:
        kept = "no checkpoint was saved before it"
    clipping = "" if args.max_grad_norm > 0 else " or clip gradients (--max_grad_norm 1.0)"
    return (
        f"training diverged at step {step}: the loss or the weights turned NaN or infinite{where}, so nothing of that "
        f"step was saved ({kept}): train again with a lower --learning_rate (this run: {args.learning_rate}){clipping}."
    )
