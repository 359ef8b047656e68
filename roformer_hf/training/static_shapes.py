"""
Static shapes for compiled training: every batch a script gives the model has one of a few fixed shapes, so that
`torch.compile` compiles once per shape and CUDA graphs (`--torch_compile_mode reduce-overhead`) can capture it.

- Rows: a partial batch (an epoch's last, an evaluation's last) is padded to the full batch with copies of its first
  row labelled -100, which the loss ignores (the same loss and gradients); evaluation drops their outputs again.
- Lengths: padded to the smallest of a few buckets (powers of two from `SMALLEST_BUCKET`, then the longest length).
- Sparse MLM prediction: a fixed number of prediction slots (`roformer_hf.modeling.slot_count`).

Where the loss cannot ignore a row (regression, multi-label classification: float labels), a partial batch keeps its
rows (one more shape); `--dataloader_drop_last true` drops it instead.
"""

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn import functional as F
from transformers import Trainer, TrainingArguments

from .machine.launch import DYNAMIC_COMPILE_VARIABLE, trains_on_cpu

logger = logging.getLogger(__name__)

SMALLEST_BUCKET = 64
# Padding values of the token-level inputs (input_ids takes the tokenizer's padding id).
TOKEN_PADDING = {"labels": -100, "attention_mask": 0, "token_type_ids": 0, "position_ids": 0, "word_ids": -1}


def length_buckets(max_length: int, smallest: int = SMALLEST_BUCKET) -> tuple[int, ...]:
    """The lengths batches are padded to: powers of two from `smallest` below `max_length`, then `max_length`."""
    lengths, length = [], smallest
    while length < max_length:
        lengths.append(length)
        length *= 2
    return (*lengths, max_length)


def uses_static_shapes(training_args: TrainingArguments) -> bool:
    """`--static_shapes` as given; unset, on with `--torch_compile` (eager gains nothing from padding)."""
    chosen = getattr(training_args, "static_shapes", None)
    return bool(training_args.torch_compile) if chosen is None else chosen


@dataclass(frozen=True)
class StaticShapes:
    """
    The fixed shapes of a run's batches.

    Args:
        lengths (`tuple[int, ...]`): the lengths a batch is padded to (the smallest that holds it).
        pad_token_id (`int`): the id padding tokens get.
        pads_rows (`bool`): whether a partial batch is padded to full size (the loss must ignore rows labelled -100).
        row_logits (`bool`): whether the logits have a row per input row (not sparse MLM prediction's slots), so that
            evaluation can drop the padding rows' logits.
    """

    lengths: tuple[int, ...]
    pad_token_id: int
    pads_rows: bool = True
    row_logits: bool = True

    def length_for(self, length: int) -> int:
        """The bucket a batch of `length` tokens is padded to (its own length beyond the longest bucket)."""
        return next((bucket for bucket in self.lengths if bucket >= length), length)

    def pad(self, inputs: dict[str, Any], rows: int) -> dict[str, Any]:
        """The batch `inputs` padded to its length's bucket and, where `pads_rows`, to `rows` rows."""
        batch, length = inputs["input_ids"].shape[:2]
        target_length, target_rows = self.length_for(length), max(rows, batch) if self.pads_rows else batch
        return {
            key: _padded(key, value, batch, length, target_rows, target_length, self.pad_token_id)
            for key, value in inputs.items()
        }

    def describe(self, rows: int, slots: int | None = None) -> str:
        """The shapes in words, for the run's log."""
        partial = "the last padded, its extra rows ignored by the loss" if self.pads_rows else "the last may be short"
        lengths = ", ".join(map(str, self.lengths))
        text = f"batches of {rows} rows ({partial}), lengths padded to {lengths} tokens"
        return text + (f", MLM prediction in {slots:,} slots" if slots is not None else "")


def _padded(key: str, value: Any, batch: int, length: int, rows: int, target_length: int, pad_token_id: int) -> Any:
    if not isinstance(value, torch.Tensor) or value.dim() == 0 or value.shape[0] != batch:
        return value
    if value.dim() >= 2 and value.shape[1] == length and target_length > length:
        fill = pad_token_id if key == "input_ids" else TOKEN_PADDING.get(key, 0)
        pad = [0, 0] * (value.dim() - 2) + [0, target_length - length]
        value = F.pad(value, pad, value=fill)
    if rows > batch:
        # copies of the first row: real inputs (an all-padding row would attend to nothing), labels ignored
        extra = value[:1].expand(rows - batch, *value.shape[1:])
        extra = torch.full_like(extra, -100) if key == "labels" else extra
        value = torch.cat([value, extra])
    return value


def _first_rows(output: Any, rows: int, padded_rows: int) -> Any:
    if isinstance(output, (tuple, list)):
        return type(output)(_first_rows(part, rows, padded_rows) for part in output)
    if isinstance(output, torch.Tensor) and output.dim() > 0 and output.shape[0] == padded_rows:
        return output[:rows].clone()  # a copy: CUDA graphs overwrite their outputs at the next replay
    return output


class StaticShapeTrainer(Trainer):
    """
    A `Trainer` that pads every batch to its static shape (`StaticShapes`) before the model sees it, and tells CUDA
    graphs where each step begins (`torch.compiler.cudagraph_mark_step_begin`), so that no output of a graph is read
    after the next replay overwrote it (transformers' Trainer does not). Evaluation drops the padding rows' outputs.

    Args:
        static_shapes (`StaticShapes`, *optional*): the shapes; `None`: batches as the collator made them.
    """

    def __init__(self, *args, static_shapes: StaticShapes | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.static_shapes = static_shapes
        self._evaluated_model = None  # (the model, its compiled form) for evaluation

    def _evaluation_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """With `--torch_compile`, the model compiled for evaluation too: the Trainer evaluates the uncompiled model
        once training has compiled it. Its graphs are separate from training's (other guards: no gradients, eval mode)."""
        if not self.args.torch_compile or hasattr(model, "_orig_mod"):
            return model
        if self._evaluated_model is None or self._evaluated_model[0] is not model:
            compiled = torch.compile(model, **self.accelerator.state.dynamo_plugin.to_kwargs())
            self._evaluated_model = (model, compiled)
        return self._evaluated_model[1]

    def training_step(self, model, inputs, num_items_in_batch=None):
        if self.static_shapes is not None:
            inputs = self.static_shapes.pad(inputs, self.args.train_batch_size)
            torch.compiler.cudagraph_mark_step_begin()
        return super().training_step(model, inputs, num_items_in_batch)

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        if self.static_shapes is None:
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys)
        rows = inputs["input_ids"].shape[0]
        padded = self.static_shapes.pad(inputs, self.args.eval_batch_size)
        padded_rows = padded["input_ids"].shape[0]
        model = self._evaluation_model(model)
        torch.compiler.cudagraph_mark_step_begin()
        loss, logits, labels = super().prediction_step(model, padded, prediction_loss_only, ignore_keys=ignore_keys)
        loss = None if loss is None else loss.clone()
        if self.static_shapes.row_logits:
            logits = _first_rows(logits, rows, padded_rows)
        return loss, logits, _first_rows(labels, rows, padded_rows)


@contextlib.contextmanager
def compiled_once_per_shape(training_args: TrainingArguments, shapes: int) -> Iterator[None]:
    """
    While a run with static shapes and `--torch_compile` builds its Trainers: one static graph per shape
    (`torch.compile(..., dynamic=False)` through accelerate's variable, restored afterwards; a value the user set
    wins), and room for `shapes` graphs in dynamo's recompile limit. torch's default (`dynamic=None`) would compile
    the second shape it meets again, with dynamic shapes, which CUDA graphs then record per shape anyway.
    """
    if not training_args.torch_compile or DYNAMIC_COMPILE_VARIABLE in os.environ:
        yield
        return
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, shapes)
    os.environ[DYNAMIC_COMPILE_VARIABLE] = "false"
    try:
        yield
    finally:
        del os.environ[DYNAMIC_COMPILE_VARIABLE]


def announce_static_shapes(training_args: TrainingArguments, description: str) -> None:
    """Say in one line which shapes the run's batches have and why (or nothing, where static shapes are off)."""
    if not uses_static_shapes(training_args) or int(os.environ.get("RANK", "0")) != 0:
        return
    why = "--static_shapes true" if training_args.static_shapes else "on with --torch_compile"
    compiled = "compiled once per shape" if training_args.torch_compile else "ready for --torch_compile"
    if training_args.torch_compile and training_args.torch_compile_mode == "reduce-overhead":
        on_cpu = trains_on_cpu(training_args.use_cpu)
        compiled += " (reduce-overhead: CUDA graphs exist on CUDA only)" if on_cpu else " and captured as CUDA graphs"
    logger.warning(f"static shapes ({why}; --static_shapes false: off): {description}; {compiled}.")
