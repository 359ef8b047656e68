"""What a script prints: logging at `--log_level`, and the closing lines that say how to load the saved model."""

import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import transformers
from transformers import TrainingArguments

from .trainer_internals import END_OF_TRAINING_MESSAGE, TRAINER_LOGGER


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
