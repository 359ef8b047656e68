"""Checks of the scripts' settings before any data is read: counts, float ranges, the seed, the scheduler's
arguments and the reporting integrations, each refused in one line naming the setting, its range and its default."""

import json
import math
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, fields
from typing import Any

from transformers import TrainingArguments

from .errors import ScriptError

# The smallest value each count argument accepts (arguments a script does not have are skipped).
MIN_COUNTS = {
    "per_device_train_batch_size": 1,
    "per_device_eval_batch_size": 1,
    "gradient_accumulation_steps": 1,
    "eval_accumulation_steps": 1,
    "dataloader_num_workers": 0,
    "preprocessing_num_workers": 1,
    "max_train_samples": 1,
    "max_eval_samples": 1,
    "max_predict_samples": 1,
    "early_stopping_patience": 1,
}


def check_counts(arguments: Sequence[Any]) -> None:
    """
    Refuse counts below their minimum (`MIN_COUNTS`: batch sizes, accumulation steps, sample limits, workers), a
    validation share outside [0, 100) and training for no epochs, which transformers would meet with a traceback or
    a run that does nothing.

    Args:
        arguments (`Sequence`): the parsed argument dataclasses.
    """
    for instance in arguments:
        for name, minimum in MIN_COUNTS.items():
            value = getattr(instance, name, None)
            if value is not None and value < minimum:
                raise ScriptError(f"--{name} must be at least {minimum}, got {value}.")
        percentage = getattr(instance, "validation_split_percentage", None)
        if percentage is not None and not 0 <= percentage < 100:
            raise ScriptError(f"--validation_split_percentage must be in [0, 100), got {percentage}.")
        training = isinstance(instance, TrainingArguments) and instance.do_train and instance.max_steps <= 0
        if training and instance.num_train_epochs <= 0:
            raise ScriptError(
                f"--num_train_epochs must be above 0, got {instance.num_train_epochs} (or give --max_steps)."
            )


@dataclass(frozen=True)
class SettingRange:
    """The values a float setting takes: finite, from `low` (included unless `low_open`) to `high` (excluded)."""

    low: float
    low_open: bool = False
    high: float = math.inf

    def holds(self, value: float) -> bool:
        above_low = value > self.low if self.low_open else value >= self.low
        return math.isfinite(value) and above_low and value < self.high

    def __str__(self) -> str:
        if self.high < math.inf:
            return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g})"
        return f"a finite number {'above' if self.low_open else 'of at least'} {self.low:g}"


ABOVE_0, AT_LEAST_0, SHARE = SettingRange(0, low_open=True), SettingRange(0), SettingRange(0, high=1)

# The float settings that would train a model of NaNs, end in a torch traceback, or silently do nothing (a NaN
# --eval_steps evaluates never), with the values each takes. Arguments a script does not have, or leaves None, are
# skipped; --num_train_epochs below 1 is refused by `check_counts` where it matters.
SETTING_RANGES = {
    "learning_rate": ABOVE_0,
    "weight_decay": AT_LEAST_0,
    "adam_beta1": SHARE,
    "adam_beta2": SHARE,
    "adam_epsilon": ABOVE_0,
    "max_grad_norm": AT_LEAST_0,
    "label_smoothing_factor": SHARE,
    "warmup_steps": AT_LEAST_0,
    "num_train_epochs": AT_LEAST_0,
    "neftune_noise_alpha": AT_LEAST_0,
    "logging_steps": ABOVE_0,
    "eval_steps": ABOVE_0,
    "save_steps": ABOVE_0,
    "eval_delay": AT_LEAST_0,
}

# What a value means where that is not obvious from the range, for the message.
SETTING_NOTES = {
    "max_grad_norm": "0 turns gradient clipping off",
    "warmup_steps": "below 1: a share of the training steps",
    "logging_steps": "below 1: a share of the training steps",
    "eval_steps": "below 1: a share of the training steps",
    "save_steps": "below 1: a share of the training steps",
    "neftune_noise_alpha": "leave it out for no noise",
}


def check_training_settings(arguments: Sequence[Any]) -> None:
    """
    Refuse, before any data is read, in one line naming the setting, its range and its default: a float setting
    outside its range and a `--seed` numpy refuses (`check_setting_ranges`), `--lr_scheduler_kwargs` the scheduler
    does not take, a `--report_to` that is unknown or not installed, and an option passed through to torch or
    accelerate with a value they refuse (`PASSED_THROUGH_OPTIONS`). Otherwise `--weight_decay nan` or
    `--adam_epsilon 0` train a model of NaNs and save it with exit status 0, and `--learning_rate -1` ends in a torch
    traceback once training starts.

    Args:
        arguments (`Sequence`): the parsed argument dataclasses.
    """
    for instance in arguments:
        check_setting_ranges(instance)
        if isinstance(instance, TrainingArguments):
            check_scheduler_arguments(instance)
            check_reporting_integrations(instance)
            check_passed_through_options(instance)


def check_setting_ranges(instance: Any) -> None:
    """Refuse a setting of `SETTING_RANGES` outside its range, and a `--seed` outside numpy's (`ScriptError`).
    `ScriptTrainingArguments` calls it before transformers' own checks, some of which end in a traceback on an
    infinite value."""
    for name, allowed in SETTING_RANGES.items():
        value = getattr(instance, name, None)
        if value is not None and not allowed.holds(value):
            raise ScriptError(f"--{name} must be {allowed}{_setting_notes(instance, name)}, got {value}.")
    seed = getattr(instance, "seed", None)
    if seed is not None and not 0 <= seed < SEED_LIMIT:
        raise ScriptError(f"--seed must be a whole number from 0 to 2**32 - 1, got {seed}.")


# numpy's seeds, which transformers' set_seed sets from --seed, are below it.
SEED_LIMIT = 2**32


def _setting_notes(instance: Any, name: str) -> str:
    """What the message adds in brackets: what a value means (`SETTING_NOTES`) and the setting's default."""
    default = next((item.default for item in fields(instance) if item.name == name), None)
    notes = [SETTING_NOTES.get(name), None if default in (None, MISSING) else f"the default is {default}"]
    notes = [note for note in notes if note]
    return f" ({'; '.join(notes)})" if notes else ""


def check_scheduler_arguments(training_args: TrainingArguments) -> None:
    """Refuse `--lr_scheduler_kwargs` that `--lr_scheduler_type`'s scheduler does not take, by building it on a
    throwaway optimizer (transformers would fail with a traceback when training starts)."""
    if not training_args.lr_scheduler_kwargs:
        return
    import torch
    from transformers import get_scheduler

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=training_args.learning_rate)
    scheduler_type = getattr(training_args.lr_scheduler_type, "value", training_args.lr_scheduler_type)
    try:
        get_scheduler(
            scheduler_type,
            optimizer,
            num_warmup_steps=0,
            num_training_steps=10,
            scheduler_specific_kwargs=training_args.lr_scheduler_kwargs,
        )
    except (TypeError, ValueError) as error:
        raise ScriptError(
            f"--lr_scheduler_kwargs {json.dumps(training_args.lr_scheduler_kwargs)} does not suit --lr_scheduler_type "
            f"{scheduler_type} ({error}): give only the arguments of that scheduler, or leave the option out."
        ) from error


def check_reporting_integrations(training_args: TrainingArguments) -> None:
    """Refuse a `--report_to` that transformers does not know, or whose package is not installed (transformers would
    fail with a traceback when it builds the trainer, after the data was read and tokenized)."""
    from transformers.integrations import get_available_reporting_integrations, get_reporting_integration_callbacks

    available = get_available_reporting_integrations()
    for name in training_args.report_to or []:
        try:
            get_reporting_integration_callbacks([name])
        except ValueError as error:
            raise ScriptError(
                f"--report_to {name}: {str(error).rstrip('.')}; or give none, for no reports."
            ) from error
        if name not in available:
            raise ScriptError(
                f"--report_to {name}: {name} is not installed: install it (e.g. pip install {name}), or leave "
                "--report_to out."
            )


def torch_compile_modes() -> list[str]:
    """The modes `torch.compile` takes (`torch._inductor.list_mode_options`, which its documentation names)."""
    import torch._inductor

    return list(torch._inductor.list_mode_options())


def torch_compile_backends() -> list[str]:
    """The backends `torch.compile` has here (`torch._dynamo.list_backends`, which its documentation names) that
    accelerate passes on (its `DynamoBackend`, which the Trainer compiles through)."""
    import torch._dynamo
    from accelerate.utils import DynamoBackend

    passed_on = {backend.value.lower() for backend in DynamoBackend}
    return sorted(set(torch._dynamo.list_backends(exclude_tags=())) & passed_on)


# Options the Trainer passes on to torch or accelerate unchecked, with what reads them and the values it takes: a
# value they refuse ended in a traceback at the first step, after the data was read and tokenized.
PASSED_THROUGH_OPTIONS = {
    "torch_compile_mode": ("torch.compile", torch_compile_modes),
    "torch_compile_backend": ("torch.compile through accelerate", torch_compile_backends),
}


def check_passed_through_options(training_args: TrainingArguments) -> None:
    """Refuse a value of a `PASSED_THROUGH_OPTIONS` option that what reads it does not take, naming those it does."""
    for name, (reader, accepted) in PASSED_THROUGH_OPTIONS.items():
        value = getattr(training_args, name, None)
        if value is None:
            continue
        values = accepted()
        if value not in values:
            raise ScriptError(
                f"--{name} {value}: {reader} takes one of {', '.join(values)}; give one of them, or leave it out."
            )
