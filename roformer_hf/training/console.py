"""What a script prints: logging at `--log_level`, the speed of the run once it is measured (`ReportSpeed`), and the
closing lines that say how to load the saved model."""

import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import transformers
from transformers import TrainerCallback, TrainingArguments

from .trainer_internals import END_OF_TRAINING_MESSAGE, TRAINER_LOGGER

logger = logging.getLogger(__name__)


def setup_logging(training_args: TrainingArguments) -> None:
    """
    Log at `--log_level` on the main process (the scripts default to warning: warnings, the progress bar and the
    results; 'info' adds transformers' and datasets' progress reports, 'passive' is info too) and at
    `--log_level_replica` elsewhere. The results are printed, so they show at every level.
    """
    import datasets

    logging.basicConfig(
        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
        datefmt="%m/%d/%Y %H:%M:%S",
        handlers=[logging.StreamHandler(sys.stdout)],
    )
    if training_args.should_log:
        transformers.utils.logging.set_verbosity_info()
    log_level = training_args.get_process_log_level()
    logging.getLogger("__main__").setLevel(log_level)
    logging.getLogger(__package__).setLevel(log_level)  # the modules of roformer_hf.training
    transformers.utils.logging.set_verbosity(log_level)
    transformers.utils.logging.enable_default_handler()
    transformers.utils.logging.enable_explicit_format()
    datasets.utils.logging.set_verbosity(log_level)
    for library in (datasets.utils.logging, transformers.utils.logging):
        # Each library prints through its own handler. transformers also hands its records to the root logger's
        # handler when the environment variable CI is set, which printed every line twice on CI machines.
        library.disable_propagation()
        # datasets' bars (loading, tokenizing) and transformers' (saving) are progress reports; the training bar stays
        library.enable_progress_bar() if log_level <= logging.INFO else library.disable_progress_bar()
    trainer_logger = transformers.utils.logging.get_logger(TRAINER_LOGGER)
    if not any(isinstance(item, _OnceFilter) for item in trainer_logger.filters):
        trainer_logger.addFilter(_OnceFilter([END_OF_TRAINING_MESSAGE]))


class _OnceFilter(logging.Filter):
    """Lets through the first record whose message contains one of `texts`, and drops its repeats."""

    def __init__(self, texts: Sequence[str]):
        super().__init__()
        self.texts, self.seen = tuple(texts), set()

    def filter(self, record: logging.LogRecord) -> bool:
        text = next((text for text in self.texts if text in record.getMessage()), None)
        if text is None:
            return True
        repeated = text in self.seen
        self.seen.add(text)
        return not repeated


class ReportSpeed(TrainerCallback):
    """
    Say in one line, at the first training loss logged after the first step (or at the end of a shorter run), how
    many optimizer steps a second the model trains on this machine and how long the steps left take, so that a user
    can size a run. The first step (warm-up, compilation) is left out of the rate.
    """

    def __init__(self):
        self.start: tuple[int, float] | None = None  # (step, time) at the end of the first step
        self.reported = False

    def on_step_end(self, args, state, control, **kwargs):
        if self.start is None:
            self.start = (state.global_step, time.perf_counter())

    def on_log(self, args, state, control, logs=None, **kwargs):
        if "loss" in (logs or {}):
            self.report(state, kwargs.get("model"))

    def on_train_end(self, args, state, control, **kwargs):
        self.report(state, kwargs.get("model"))

    def report(self, state, model) -> None:
        if self.reported or self.start is None or state.global_step <= self.start[0]:
            return
        self.reported = True
        steps_per_second = (state.global_step - self.start[0]) / (time.perf_counter() - self.start[1])
        if state.is_world_process_zero:
            logger.warning(speed_line(steps_per_second, state.global_step, state.max_steps, model))


def speed_line(steps_per_second: float, step: int, max_steps: int, model=None) -> str:
    """The line of `ReportSpeed`: the rate, the model's size, and the time the steps after `step` take."""
    size = f" ({model.num_parameters() / 1e6:.1f}M parameters)" if model is not None else ""
    left = max(0, max_steps - step)
    line = f"speed: {steps_per_second:.2f} optimizer steps/s for this model{size} on this machine"
    if left == 0:
        return f"{line}, measured over the steps after the first."
    return f"{line}: the {left:,} steps left take about {duration(left / steps_per_second)}."


def duration(seconds: float) -> str:
    """A duration in the unit a person plans with: seconds, minutes or hours."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def loading_instructions(output_dir: str | Path, model_class: type) -> str:
    """
    The closing lines of a successful run: where the model was saved, and the Python that loads it. The tokenizer
    loads through `AutoTokenizer` (importing roformer_hf registers ours), since a char-level checkpoint saves
    transformers' `BertTokenizer`.

    Args:
        output_dir (`str` or `Path`): the folder the model and tokenizer were saved in.
        model_class (`type`): the class of the saved model, e.g. `RoFormerForMaskedLM`.
    """
    folder = json.dumps(str(output_dir), ensure_ascii=False)  # a Python string literal too
    name = model_class.__name__
    return "\n".join(
        [
            f"model saved to {output_dir}; load it with:",
            f"    from roformer_hf import {name}",
            "    from transformers import AutoTokenizer",
            f"    model = {name}.from_pretrained({folder})",
            f"    tokenizer = AutoTokenizer.from_pretrained({folder})  # the tokenizer the model was trained with",
        ]
    )
