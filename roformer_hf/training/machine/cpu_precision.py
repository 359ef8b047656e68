"""The precision the scripts run in on a CPU: bf16 mixed precision where it pays for this model there
(`roformer_hf.training.machine.cpu_arithmetic` decides), float32 where it does not, each said in one line when it
differs from what the command line asked.

Two steps, because whether bf16 pays depends on the model's sizes, known only once it is built:
`choose_cpu_precision` (while the arguments are parsed) settles what the command line and the CPU's flags decide
(`--bf16 true/false`, `--fp16`, a CPU without bf16 instructions) and leaves an unset `--bf16` on a CPU with them to
`settle_cpu_precision`, which probes the built model (or one of its layers) at the run's tokens per step. Also the
precision an evaluation or prediction ran in, as the results and the model card name it (`evaluation_precision`)."""

import logging
import os
from typing import Any

import torch

from ..trainer_internals import update_mixed_precision
from .cpu_arithmetic import cpu_bf16, step_bf16
from .launch import trains_on_cpu
from .precisions import evaluation_precision_name, training_precision

logger = logging.getLogger(__name__)


def choose_cpu_precision(training_args: Any) -> None:
    """
    The precision of a run on the CPU, set on `training_args` (a `TrainingArguments` whose `bf16` is None when
    `--bf16` was not given) before transformers checks it:

    - `--bf16 true` is kept where the CPU has bf16 instructions and dropped where it has none, with one line naming
      what the CPU lacks; `--bf16 false` is kept;
    - with neither `--bf16` nor `--fp16`: float32 where the CPU has no bf16 instructions; where it has them, bf16 for
      now, and `settle_cpu_precision` decides from a probe once the model is built (in a distributed launch bf16
      stays, as every process must train alike);
    - `--bf16_full_eval` follows the same rule as `--bf16 true`.

    On a GPU (or XPU, TPU, ...) nothing changes: an unset `--bf16` is False, as transformers has it. transformers
    accepts bf16 on a machine that has a GPU only with `--use_cpu`, which this sets where bf16 is kept.
    """
    given, training_args.bf16_from_probe = training_args.bf16 is not None, False
    if not trains_on_cpu(training_args.use_cpu):
        training_args.bf16 = bool(training_args.bf16)
        return
    wanted, full_eval = (training_args.bf16 if given else not training_args.fp16), training_args.bf16_full_eval
    decision = cpu_bf16() if wanted or full_eval else None
    keep = decision is not None and decision.pays
    training_args.bf16, training_args.bf16_full_eval = bool(wanted and keep), bool(full_eval and keep)
    if training_args.bf16 or training_args.bf16_full_eval:
        training_args.use_cpu = True
    default_bf16 = bool(wanted and keep and not given)
    # each process of a distributed launch would probe on its own and might decide otherwise: they keep the flags'
    training_args.bf16_from_probe = default_bf16 and int(os.environ.get("WORLD_SIZE", "1")) == 1
    if default_bf16 and not training_args.bf16_from_probe and is_main_process():
        logger.warning(
            f"bf16 mixed precision, the default of a distributed launch where {decision.reason}; "
            "--bf16 false runs in float32."
        )
    dropped = [name for name, value in (("--bf16", given and wanted), ("--bf16_full_eval", full_eval)) if value]
    if dropped and not keep and is_main_process():
        logger.warning(
            f"{' and '.join(dropped)} dropped: {decision.reason}, where bf16 is slower than float32: running in "
            "float32."
        )


def settle_cpu_precision(training_args: Any, model: torch.nn.Module, seq_len: int) -> None:
    """
    Decide an unset `--bf16` that `choose_cpu_precision` left to the probe: bf16 mixed precision where this model
    trains enough faster in it (`cpu_arithmetic.step_bf16`: its whole step, or one layer of a wide model), else
    float32; either said in one line with the measured ratio and the way to the other. Does nothing where the
    precision was already decided (given on the command line, a GPU, a CPU without bf16 instructions).

    Args:
        training_args (`TrainingArguments`): the run's arguments, after `choose_cpu_precision`.
        model (`PreTrainedModel`): the built model (a copy of it, or of one layer, is probed).
        seq_len (`int`): the length of the training sequences (the batch is `--per_device_train_batch_size`).
    """
    if not training_args.bf16_from_probe:
        return
    training_args.bf16_from_probe = False
    decision = step_bf16(model, training_args.per_device_train_batch_size, seq_len)
    training_args.bf16 = decision.pays
    update_mixed_precision(training_args)
    if not is_main_process():
        return
    if decision.pays:
        logger.warning(f"bf16 mixed precision: {decision.reason}; --bf16 false runs in float32.")
    else:
        logger.warning(f"float32: {decision.reason}; --bf16 true runs in bf16 mixed precision.")


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def evaluation_precision(training_args: Any, model: torch.nn.Module) -> str:
    """The precision the Trainer evaluates and predicts `model` in under `training_args`, e.g. `"bf16 autocast"`
    (`precisions.evaluation_precision_name`, for the dtype of the model's weights)."""
    weights_dtype_name = str(next(model.parameters()).dtype).removeprefix("torch.")
    return evaluation_precision_name(training_args, weights_dtype_name)


def training_arithmetic(training_args: Any) -> dict[str, Any]:
    """
    How a run trained, for its results (`train_results.json`, `all_results.json`) and model card: `train_threads`,
    torch's thread count (`threads.choose_threads`), and `train_precision`, `"bf16 mixed precision"`, `"fp16 mixed
    precision"` or `"float32"`. The same command on the same machine gives the same two (docs/scripts.md).
    """
    return {"train_threads": torch.get_num_threads(), "train_precision": training_precision(training_args)}


__all__ = ["choose_cpu_precision", "evaluation_precision", "settle_cpu_precision", "training_arithmetic"]
