"""The scripts' short `--help`: their own options, then the most used of transformers' `TrainingArguments`."""

import sys
import textwrap
from collections.abc import Sequence
from dataclasses import MISSING, Field, fields
from pathlib import Path
from typing import Any

from transformers import TrainingArguments

HELP_ALL_OPTION = "--help-all"

# --bf16 of both scripts, in --help and --help-all alike (its default is decided by `machine.cpu_precision`)
BF16_HELP = (
    "bfloat16 mixed precision. On a CPU: by default where bf16 pays for this model (the CPU has bf16 instructions, "
    "e.g. avx512_bf16, amx_bf16, and a probe of one layer measures it faster), dropped with a warning where the CPU "
    "has no bf16 instructions. On a GPU: off unless given."
)


# The TrainingArguments options shown by --help (every other one is accepted too, and listed by --help-all), with a
# help text short enough for one line.
COMMON_TRAINING_OPTIONS = {
    "output_dir": "Where the model, checkpoints and results are written.",
    "overwrite_output_dir": "Replace an earlier run in output_dir (else such a folder stops the script).",
    "do_train": "Train.",
    "do_eval": "Evaluate on the validation data.",
    "do_predict": "Predict on the test data.",
    "num_train_epochs": "Epochs to train (ignored when --max_steps is given).",
    "max_steps": "Optimizer steps to train; overrides --num_train_epochs.",
    "per_device_train_batch_size": "Training examples per step on each device.",
    "per_device_eval_batch_size": "Evaluation examples per step on each device.",
    "gradient_accumulation_steps": "Steps whose gradients are summed before each optimizer update.",
    "learning_rate": "Peak learning rate (AdamW).",
    "warmup_steps": "Steps of linear warm-up (a float below 1: a share of all steps).",
    "eval_strategy": "When to evaluate during training: 'no', 'steps' or 'epoch'.",
    "eval_steps": "Steps between evaluations with --eval_strategy steps.",
    "save_strategy": "When to save a checkpoint: 'no', 'steps', 'epoch' or 'best'.",
    "save_steps": "Steps between checkpoints with --save_strategy steps.",
    "logging_steps": "Steps between loss reports.",
    "bf16": None,  # BF16_HELP, the help of the scripts' own --bf16 field (`cli.ScriptTrainingArguments`)
    "seed": "Random seed of initialisation, masking and data order.",
    "resume_from_checkpoint": "A checkpoint folder to continue from, or True for the newest in output_dir.",
    "log_level": "Console verbosity: 'warning' shows warnings and results, 'info' also transformers' progress.",
}


HELP_WIDTH = 110


HELP_INDENT = 30  # the column where help texts start, as in argparse


def short_help(
    dataclass_types: Sequence[type], defaults: dict[str, Any] | None = None, description: str | None = None
) -> str:
    """
    The `--help` text: the first paragraph of `description`, then the script's own options under one heading per
    argument dataclass, then the `TrainingArguments` options of `COMMON_TRAINING_OPTIONS` (`--help-all` lists all).

    Args:
        dataclass_types (`Sequence[type]`): the argument dataclasses, as given to `parse_arguments`.
        defaults (`dict`, *optional*): the script's defaults, shown instead of the dataclasses' own.
        description (`str`, *optional*): what the script does (its module docstring).
    """
    script = Path(sys.argv[0]).name
    lines = [f"usage: python {script} [args.json|args.yaml] [--option value ...]", ""]
    if description:
        lines += [*textwrap.wrap(" ".join(description.strip().split("\n\n")[0].split()), HELP_WIDTH), ""]
    for dataclass_type in dataclass_types:
        if issubclass(dataclass_type, TrainingArguments):
            shown = [item for item in fields(dataclass_type) if item.name in COMMON_TRAINING_OPTIONS]
            shown.sort(key=lambda item: list(COMMON_TRAINING_OPTIONS).index(item.name))
            total = sum(item.init for item in fields(dataclass_type))
            heading = f"training options - the {len(shown)} most used of the {total} of TrainingArguments"
        else:
            heading = f"{dataclass_type.__name__.removesuffix('Arguments').lower()} options"
            summary = (dataclass_type.__doc__ or "").strip().split("\n")[0].rstrip(".")
            heading = f"{heading} - {summary[0].lower()}{summary[1:]}" if summary else heading
            shown = [item for item in fields(dataclass_type) if item.init]
        lines += [heading, *(line for item in shown for line in _option_help(item, defaults or {})), ""]
    lines.append(f"{HELP_ALL_OPTION} lists every option (all of TrainingArguments' are accepted).")
    lines.append("Without arguments the script runs its demo.")
    return "\n".join(lines)


def _option_help(item: Field, defaults: dict[str, Any]) -> list[str]:
    """The lines of one option: `--name VALUE`, then its help text and default, wrapped at `HELP_INDENT`."""
    help_text = COMMON_TRAINING_OPTIONS.get(item.name) or item.metadata.get("help", "")
    choices = item.metadata.get("choices")
    default = defaults.get(item.name)
    if default is None and item.default is not MISSING:  # a script default of None settled later (the input settings)
        default = item.default
    if choices:
        value = "{" + ",".join(map(str, choices)) + "}"
    else:
        value = "" if item.type in (bool, "bool") else {int: "INT", float: "FLOAT"}.get(item.type, "VALUE")
    if default is True and f"--no_{item.name}" in help_text:
        help_text += " (default: True)"
    elif default is True:
        help_text += f" (default: True; --no_{item.name} turns it off)"
    elif default is not None and default is not False and default != "":
        help_text += f" (default: {getattr(default, 'value', default)})"  # an enum's value, e.g. 'steps'
    option = f"  --{item.name} {value}".rstrip()
    wrapped = textwrap.wrap(help_text, HELP_WIDTH - HELP_INDENT, break_long_words=False, break_on_hyphens=False)
    wrapped = wrapped or [""]
    if len(option) < HELP_INDENT - 1:
        return [option.ljust(HELP_INDENT) + wrapped[0], *(" " * HELP_INDENT + line for line in wrapped[1:])]
    return [option, *(" " * HELP_INDENT + line for line in wrapped)]
