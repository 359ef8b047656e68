"""training/machine/precisions.py: the one home of the precision names. Each name is one that transformers and torch
take (a `TrainingArguments` flag, a torch dtype), the command line's `--dtype` reads its choices there, and every
label a run writes (results, card, run settings) follows from a run's flags through it."""

import dataclasses
from types import SimpleNamespace

import pytest
import torch
from transformers import TrainingArguments

from roformer_hf.training.cli import ModelArguments
from roformer_hf.training.machine.precisions import (
    DTYPE_CHOICES,
    FULL_PRECISION,
    HALF_PRECISIONS,
    evaluation_precision_name,
    mixed_precision,
    training_precision,
)

FLAGS = ("bf16", "fp16", "bf16_full_eval", "fp16_full_eval")


def flags(**given: bool) -> SimpleNamespace:
    return SimpleNamespace(**dict.fromkeys(FLAGS, False) | given)


def test_every_half_type_is_a_flag_of_training_arguments_and_a_torch_dtype():
    fields = {field.name for field in dataclasses.fields(TrainingArguments)}
    for half in HALF_PRECISIONS:
        assert {half.label, half.full_eval_flag} <= fields
        assert isinstance(half.dtype, torch.dtype) and half.dtype.is_floating_point and half.dtype.itemsize == 2
    assert isinstance(getattr(torch, FULL_PRECISION), torch.dtype)


def test_the_command_line_s_dtype_choices_are_the_vocabulary_s():
    dtype = next(field for field in dataclasses.fields(ModelArguments) if field.name == "dtype")
    assert tuple(dtype.metadata["choices"]) == DTYPE_CHOICES == ("auto", "float32", "bfloat16", "float16")
    assert all(f"'{choice}'" in dtype.metadata["help"] for choice in DTYPE_CHOICES)


@pytest.mark.parametrize(
    ("given", "mixed", "trained"),
    [
        ({}, "no", "float32"),
        ({"bf16": True}, "bf16", "bf16 mixed precision"),
        ({"fp16": True}, "fp16", "fp16 mixed precision"),
        ({"bf16_full_eval": True}, "no", "float32"),  # evaluation only: training stays float32
    ],
)
def test_a_run_s_flags_name_its_training_precision(given, mixed, trained):
    """The labels a run's results, card and checkpoints' run settings record (earlier runs recorded the same)."""
    assert (mixed_precision(flags(**given)), training_precision(flags(**given))) == (mixed, trained)


@pytest.mark.parametrize(
    ("given", "weights", "expected"),
    [
        ({"fp16_full_eval": True, "fp16": True}, "float32", "float16"),
        ({"bf16_full_eval": True}, "float16", "bfloat16"),  # the cast wins over the weights' dtype
        ({"fp16": True}, "bfloat16", "bfloat16"),  # weights loaded in a half type run in it
    ],
)
def test_the_evaluation_precision_is_the_cast_then_the_weights_then_autocast(given, weights, expected):
    assert evaluation_precision_name(flags(**given), weights) == expected
