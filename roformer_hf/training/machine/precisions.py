"""The precisions a run computes in, named once. Each half type has one label, the name of its `TrainingArguments`
flag and of accelerate's `mixed_precision` (`"bf16"`: `--bf16`, `--bf16_full_eval`), and one torch dtype (`bfloat16`:
`--dtype bfloat16`, a cast model's `eval_precision`); float32 is the precision no flag asks for (`"no"` mixed
precision). The command line, the results, the model card, a checkpoint's run settings and the benchmarks read these
names; no torch here, so the command line can name them before torch is imported."""

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class HalfPrecision:
    """A half type a run may train or evaluate in.

    Args:
        label (`str`): the `TrainingArguments` flag that trains in it under autocast and accelerate's name for that
            mixed precision, e.g. `"bf16"`.
        dtype_name (`str`): its torch dtype, e.g. `"bfloat16"` (`getattr(torch, dtype_name)`).
    """

    label: str
    dtype_name: str

    @property
    def full_eval_flag(self) -> str:
        """The `TrainingArguments` flag that evaluates the model cast to this type, e.g. `"bf16_full_eval"`."""
        return f"{self.label}_full_eval"

    @property
    def dtype(self) -> Any:
        """The torch dtype, e.g. `torch.bfloat16`."""
        import torch

        return getattr(torch, self.dtype_name)


# In the order a run's flags are read: bf16 first (transformers refuses both at once).
HALF_PRECISIONS = (HalfPrecision("bf16", "bfloat16"), HalfPrecision("fp16", "float16"))
FULL_PRECISION = "float32"
NO_MIXED_PRECISION = "no"  # accelerate's `mixed_precision` of a float32 run
# What `--dtype` loads the weights in: "auto" (the checkpoint's own), float32 or a half type.
DTYPE_CHOICES = ("auto", FULL_PRECISION, *(half.dtype_name for half in HALF_PRECISIONS))


def mixed_precision(training_args: Any) -> str:
    """The mixed precision of a run (a `TrainingArguments`), as accelerate, its model card and its checkpoints' run
    settings name it: `"bf16"`, `"fp16"` or `"no"` (float32)."""
    return next((half.label for half in HALF_PRECISIONS if getattr(training_args, half.label)), NO_MIXED_PRECISION)


def training_precision(training_args: Any) -> str:
    """What a run trains in, as its results and model card say: `"bf16 mixed precision"`, `"fp16 mixed precision"` or
    `"float32"`."""
    label = mixed_precision(training_args)
    return FULL_PRECISION if label == NO_MIXED_PRECISION else f"{label} mixed precision"


def evaluation_precision_name(training_args: Any, weights_dtype_name: str) -> str:
    """
    What the Trainer evaluates and predicts in under `training_args`, for weights of dtype `weights_dtype_name`: the
    half type's dtype name under `--bf16_full_eval` / `--fp16_full_eval` (the model is cast), the weights' own where
    they are not float32 (`--dtype`), else `"bf16 autocast"` / `"fp16 autocast"` under `--bf16` / `--fp16` (float32
    weights, matrix products in the half type), else `"float32"`.
    """
    cast = next((half for half in HALF_PRECISIONS if getattr(training_args, half.full_eval_flag)), None)
    if cast is not None:
        return cast.dtype_name
    if weights_dtype_name != FULL_PRECISION:
        return weights_dtype_name
    label = mixed_precision(training_args)
    return FULL_PRECISION if label == NO_MIXED_PRECISION else f"{label} autocast"


__all__ = [
    "DTYPE_CHOICES",
    "FULL_PRECISION",
    "HALF_PRECISIONS",
    "NO_MIXED_PRECISION",
    "HalfPrecision",
    "evaluation_precision_name",
    "mixed_precision",
    "training_precision",
]
