"""The precision the scripts run in on a CPU: bf16 mixed precision where it pays there (`roformer_hf.cpu_arithmetic`
decides), float32 where it does not, each said in one line when it differs from what the command line asked; and the
precision an evaluation or prediction ran in, as the results and the model card name it."""

import logging
import os
from typing import Any

import torch

from ..cpu_arithmetic import cpu_bf16
from .launch import trains_on_cpu

logger = logging.getLogger(__name__)


def choose_cpu_precision(training_args: Any) -> None:
    """
    The precision of a run on the CPU, set on `training_args` (a `TrainingArguments` whose `bf16` is None when
    `--bf16` was not given) before transformers checks it:

    - `--bf16 true` is kept where bf16 pays and dropped where it does not, with one line naming what the CPU lacks;
    - with neither `--bf16` nor `--fp16`, bf16 mixed precision where it pays, said in one line with the way back
      (`--bf16 false`), else float32;
    - `--bf16_full_eval` follows the same rule as `--bf16 true`.

    On a GPU (or XPU, TPU, ...) nothing changes: an unset `--bf16` is False, as transformers has it. transformers
    accepts bf16 on a machine that has a GPU only with `--use_cpu`, which this sets where bf16 is kept.
    """
    given = training_args.bf16 is not None
    if not trains_on_cpu(training_args.use_cpu):
        training_args.bf16 = bool(training_args.bf16)
        return
    wanted, full_eval = (training_args.bf16 if given else not training_args.fp16), training_args.bf16_full_eval
    decision = cpu_bf16() if wanted or full_eval else None
    keep = decision is not None and decision.pays
    training_args.bf16, training_args.bf16_full_eval = bool(wanted and keep), bool(full_eval and keep)
    if training_args.bf16 or training_args.bf16_full_eval:
        training_args.use_cpu = True
    if decision is None or int(os.environ.get("RANK", "0")) != 0:
        return
    dropped = [name for name, value in (("--bf16", given and wanted), ("--bf16_full_eval", full_eval)) if value]
    if dropped and not keep:
        logger.warning(
            f"{' and '.join(dropped)} dropped: {decision.reason}, where bf16 is slower than float32: running in "
            "float32."
        )
    elif keep and not given:
        logger.warning(
            f"bf16 mixed precision, the default where it pays: {decision.reason}; --bf16 false runs in float32."
        )


def evaluation_precision(training_args: Any, model: torch.nn.Module) -> str:
    """
    The precision the Trainer evaluates and predicts `model` in under `training_args`: `"bfloat16"` or `"float16"`
    with `--bf16_full_eval` / `--fp16_full_eval` (the model is cast) or weights loaded in that dtype (`--dtype`),
    else `"bf16 autocast"` / `"fp16 autocast"` under `--bf16` / `--fp16` (float32 weights, matrix products in the
    half type), else `"float32"`.
    """
    if training_args.bf16_full_eval or training_args.fp16_full_eval:
        return "bfloat16" if training_args.bf16_full_eval else "float16"
    weights_dtype = next(model.parameters()).dtype
    if weights_dtype != torch.float32:
        return str(weights_dtype).removeprefix("torch.")
    if training_args.bf16 or training_args.fp16:
        return "bf16 autocast" if training_args.bf16 else "fp16 autocast"
    return "float32"


__all__ = ["choose_cpu_precision", "evaluation_precision"]
