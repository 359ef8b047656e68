"""What the training scripts (`run_mlm.py`, `run_classification.py`) share: argument parsing, the model arguments
and how they build config, tokenizer and model, user-error handling, logging and offline metrics.

A user's mistake raises `ScriptError` with a message naming the problem and the fix; `run_script` turns it (and a
missing file) into one line on stderr and a non-zero exit, without a traceback (set the environment variable
`ROFORMER_HF_DEBUG=1` to get the traceback instead). Tests call the steps directly and see the exception.
"""

import codecs
import errno
import inspect
import json
import logging
import math
import os
import re
import shlex
import shutil
import sys
import tempfile
import textwrap
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import HfArgumentParser, PreTrainedConfig, PreTrainedModel, Trainer, TrainingArguments
from transformers.training_args import ParallelMode

from .configuration import RoFormerConfig
from .interrupts import TrainingInterrupted, deferred_stops, stopped_at_once_message

logger = logging.getLogger(__name__)

# Errors caused by what the user asked for; anything else is a bug and keeps its traceback.
USER_ERRORS = (FileNotFoundError, NotADirectoryError, IsADirectoryError)
# Set to 1 to see the traceback of a user error instead of the one-line message.
DEBUG_VARIABLE = "ROFORMER_HF_DEBUG"


class ScriptError(Exception):
    """A mistake in a script's arguments or data; the message names the problem and the fix."""


def run_script(main: Callable[[], object]) -> None:
    """
    Run a script's `main()`; a `ScriptError` or a missing file becomes one line on stderr and exit status 1, a stop
    signal (`roformer_hf.interrupts`) one line and 128 + the signal (130 for Ctrl-C). With the environment variable
    `ROFORMER_HF_DEBUG=1` the error keeps its traceback.

    Args:
        main (`Callable`):
            The script's entry point, called without arguments (it reads `sys.argv`).
    """
    if os.environ.get(DEBUG_VARIABLE, "").lower() not in ("", "0", "false"):
        main()
    else:
        try:
            main()
        except ScriptError as error:
            _exit_with_message(str(error))
        except USER_ERRORS as error:
            _exit_with_message(f"{error.strerror or error}: {error.filename}" if error.filename else str(error))
        except KeyboardInterrupt as error:  # Ctrl-C outside training, or a second one: stopped at once
            _exit_with_message(stopped_at_once_message(error), getattr(error, "exit_status", 130))
        except TrainingInterrupted as error:
            if not error.announce:
                sys.exit(error.exit_status)
            _exit_with_message(str(error), error.exit_status)
    _leave_process_group()


def _leave_process_group() -> None:
    """Close torch.distributed at the end of a run. Left to interpreter exit, the gloo group's threads were seen to
    abort a rank ("terminate called without an active exception"), which torchrun reports as a failed run."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


def _exit_with_message(message: str, status: int = 1) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(status)


@dataclass
class ModelArguments:
    """Which model, config and tokenizer to start from (shared by every script of the project)."""

    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "A checkpoint to start from: a folder or Hub id of a roformer_hf model or of an original RoFormer "
            "checkpoint. Leave unset to train from scratch with --config_name / --config_overrides."
        },
    )
    config_name: str | None = field(
        default=None,
        metadata={"help": "A config folder, config.json or Hub id, if not the one of --model_name_or_path."},
    )
    config_overrides: str | None = field(
        default=None,
        metadata={
            "help": "Config fields to change, as 'key=value,key=value' (e.g. 'hidden_size=256,num_hidden_layers=4'); "
            "'rope_parameters.rope_theta=20000' sets a key inside a dict field, 'none' sets None."
        },
    )
    tokenizer_name: str | None = field(
        default=None,
        metadata={"help": "A tokenizer folder, a vocab.txt or a Hub id, if not the one of --model_name_or_path."},
    )
    attn_implementation: str | None = field(
        default=None,
        metadata={"help": "Attention backend: 'eager', 'sdpa', 'flash_attention_2', ... (default: the model's)."},
    )
    dtype: str | None = field(
        default=None,
        metadata={
            "help": "dtype to load the weights in ('auto', 'float32', 'bfloat16', 'float16'); for mixed-precision "
            "training use --bf16 / --fp16 instead.",
            "choices": ["auto", "float32", "bfloat16", "float16"],
        },
    )
    ignore_mismatched_sizes: bool = field(
        default=False,
        metadata={
            "help": "Start new weights where the checkpoint's have another shape, e.g. a classifier fine-tuned on a "
            "different number of labels (its head is then trained afresh)."
        },
    )
    cache_dir: str | None = field(
        default=None, metadata={"help": "Where to store models, tokenizers and datasets fetched from the Hub."}
    )
    model_revision: str = field(default="main", metadata={"help": "Branch, tag or commit of a Hub checkpoint."})
    token: str | None = field(default=None, metadata={"help": "Hub token, for private checkpoints."})

    def hub_kwargs(self) -> dict[str, Any]:
        """Keyword arguments every `from_pretrained` call of the scripts passes on."""
        return {"cache_dir": self.cache_dir, "revision": self.model_revision, "token": self.token}


def parse_arguments(
    dataclass_types: Sequence[type],
    argv: Sequence[str] | None = None,
    defaults: dict[str, Any] | None = None,
    description: str | None = None,
) -> tuple:
    """
    Parse command-line arguments into the given dataclasses. A first argument ending in `.json`, `.yaml` or `.yml` is
    a file of arguments, which the options after it override (as in transformers' examples:
    `python run_mlm.py args.yaml --ddp_backend gloo`). `--help` prints the short help (`short_help`) and
    `--help-all` every option; both then exit.

    Args:
        dataclass_types (`Sequence[type]`):
            The argument dataclasses, e.g. `(ModelArguments, DataArguments, TrainingArguments)`.
        argv (`Sequence[str]`, *optional*):
            The arguments without the program name; `None` reads `sys.argv[1:]`.
        defaults (`dict`, *optional*):
            Script-specific defaults that replace the dataclasses' own (e.g. `output_dir`); the user's values win.
        description (`str`, *optional*):
            What the script does (its module docstring), whose first paragraph opens the short help.

    Returns:
        `tuple`: one instance per dataclass.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    defaults = {**launch_defaults(), **(defaults or {})}
    parser = HfArgumentParser(dataclass_types)
    if is_arguments_file(argv[0] if argv else ""):
        # the file's values replace the defaults; the options after it still win, as on any command line
        defaults.update(_read_known_arguments(argv[0], dataclass_types))
        argv = argv[1:]
    parser.set_defaults(**defaults)
    if HELP_ALL_OPTION in argv:
        parser.print_help()
        sys.exit(0)
    if {"-h", "--help"} & set(argv):
        print(short_help(dataclass_types, defaults, description))
        sys.exit(0)
    try:
        arguments = parser.parse_args_into_dataclasses(args=argv)
    except ValueError as error:  # raised by the dataclasses' own checks (e.g. TrainingArguments.__post_init__)
        raise ScriptError(f"invalid arguments: {error}") from error
    check_counts(arguments)
    return arguments


ARGUMENTS_FILE_SUFFIXES = (".json", ".yaml", ".yml")


def is_arguments_file(argument: str) -> bool:
    """Whether a command-line argument names a file of arguments (`args.json`, `args.yaml`) rather than an option."""
    return argument.endswith(ARGUMENTS_FILE_SUFFIXES) and not argument.startswith("-")


def _read_known_arguments(path: str, dataclass_types: Sequence[type]) -> dict[str, Any]:
    """The arguments of a `.json` / `.yaml` file; a name no dataclass knows is refused (argparse would drop it)."""
    arguments = _read_arguments_file(path)
    known = {item.name for dataclass_type in dataclass_types for item in fields(dataclass_type) if item.init}
    unknown = sorted(set(arguments) - known)
    if unknown:
        raise ScriptError(
            f"the arguments file {path} names unknown options: {', '.join(unknown)}; fix or remove them "
            f"({HELP_ALL_OPTION} lists every option)."
        )
    return arguments


def _read_arguments_file(path: str) -> dict[str, Any]:
    import yaml

    text = read_utf8_text(path, "the arguments file")
    try:
        arguments = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except json.JSONDecodeError as error:
        raise ScriptError(
            f"the arguments file {path} is not valid JSON ({error.msg} at line {error.lineno}, column "
            f"{error.colno}): fix the file."
        ) from error
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ScriptError(f"the arguments file {path} is not valid YAML ({problem}{where}): fix the file.") from error
    if not isinstance(arguments, dict):
        raise ScriptError(f"{path} must hold a mapping of argument names to values, not {type(arguments).__name__}.")
    return arguments


# --- Help -------------------------------------------------------------------------------------------------------

HELP_ALL_OPTION = "--help-all"
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
    "bf16": "bfloat16 mixed precision on a GPU (on a CPU, where it is slow, the run trains in float32).",
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
            total = len(fields(dataclass_type))
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
    default = defaults.get(item.name, None if item.default is MISSING else item.default)
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
    logger.setLevel(log_level)
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
    trainer_logger = transformers.utils.logging.get_logger("transformers.trainer")
    if not any(isinstance(item, _OnceFilter) for item in trainer_logger.filters):
        trainer_logger.addFilter(_OnceFilter(TRAINER_MESSAGES_SHOWN_ONCE))


# transformers' Trainer logs this at the end of every `train()`, so once per stage of a staged run.
TRAINER_MESSAGES_SHOWN_ONCE = ("Training completed. Do not forget to share your model",)


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


# Options that name what to train on or start from: given any of them, a script runs what the command line says;
# given none, it runs its demo with the options given on top (`python run_mlm.py --overwrite_output_dir`).
DATA_AND_MODEL_OPTIONS = (
    "--train_file",
    "--validation_file",
    "--test_file",
    "--dataset_name",
    "--model_name_or_path",
    "--config_name",
    "--tokenizer_name",
)


def demo_or_given_arguments(
    argv: Sequence[str] | None, demo_arguments: Sequence[str], announce: bool = True
) -> list[str]:
    """
    The command-line arguments (`sys.argv[1:]` for `None`), or the demo's when they name no data and no model (no
    option of `DATA_AND_MODEL_OPTIONS`, no file of arguments, no `--help`): then the given options follow the demo's
    and win over them, so `--overwrite_output_dir` or `--output_dir elsewhere` re-run the demo. For the demo, prints
    the equivalent command first (data paths relative to the current folder where they lie inside it).

    Args:
        argv (`Sequence[str]`, *optional*): the arguments without the program name.
        demo_arguments (`Sequence[str]`): the arguments of the script's demo.
        announce (`bool`, defaults to `True`): print the demo's command (`False`: only return the arguments).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if not runs_the_demo(argv):
        return argv
    if announce and int(os.environ.get("RANK", "0")) == 0:
        shown = [_relative_if_inside(argument, Path.cwd()) for argument in demo_arguments]
        command = shlex.join(["python", Path(sys.argv[0]).name, *shown, *argv])
        opening = "No arguments" if not argv else "No data or model given"
        print(f"{opening}: running the demo, i.e. {command}", flush=True)
    return [*demo_arguments, *argv]


def runs_the_demo(argv: Sequence[str]) -> bool:
    """Whether the arguments leave the data and the model to the demo (see `demo_or_given_arguments`)."""
    if argv and is_arguments_file(argv[0]):
        return False
    names = {argument.split("=", 1)[0] for argument in argv if argument.startswith("-")}
    return not names & {*DATA_AND_MODEL_OPTIONS, "-h", "--help", HELP_ALL_OPTION}


def command_line(script_file: str | Path, argv: Sequence[str] | None) -> str:
    """
    The command that ran a script, as its model card shows it: `python <script> <arguments>`, quoted for a shell.

    Args:
        script_file (`str` or `Path`): the script's own file (`__file__`), named when `argv` was passed in.
        argv (`Sequence[str]`, *optional*): the arguments `main` was given; `None`: those of `sys.argv`.
    """
    if argv is None:
        return shlex.join(["python", *sys.argv])
    return shlex.join(["python", Path(script_file).name, *argv])


def _relative_if_inside(argument: str, folder: Path) -> str:
    path = Path(argument)
    if path.is_absolute() and path.exists() and path.is_relative_to(folder):
        return str(path.relative_to(folder))
    return argument


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


def find_resume_checkpoint(training_args: TrainingArguments) -> str | None:
    """
    The checkpoint that `--resume_from_checkpoint` names: a path, or for `True` the newest complete one in output_dir
    (`last_complete_checkpoint`).

    Raises `ScriptError` when the path does not exist or output_dir holds no checkpoint.
    """
    resume = training_args.resume_from_checkpoint
    if resume is None or str(resume).lower() == "false":
        return None
    if str(resume).lower() == "true":
        last = last_complete_checkpoint(training_args.output_dir)
        if last is None:
            raise ScriptError(
                f"--resume_from_checkpoint True, but {training_args.output_dir} holds no complete checkpoint-* "
                "folder: give the checkpoint's path or leave the option out."
            )
        return last
    if not Path(resume).is_dir():
        raise ScriptError(f"--resume_from_checkpoint {resume}: no such folder.")
    if not is_complete_checkpoint(resume):
        raise ScriptError(
            f"--resume_from_checkpoint {resume} is incomplete (no trainer_state.json: the run stopped while saving "
            "it): give an earlier checkpoint, or True for the newest complete one."
        )
    return str(resume)


def parse_config_overrides(overrides: str | None, config: PreTrainedConfig) -> dict[str, Any]:
    """
    Parse `"key=value,key=value"` into config keyword arguments, each converted to the type of the field.

    Args:
        overrides (`str`, *optional*):
            The text of `--config_overrides`. `"a.b=value"` sets key `b` of the dict field `a`.
        config (`PreTrainedConfig`):
            A config of the target class, whose fields name the allowed keys and their types.

    Returns:
        `dict`: the keyword arguments (dict fields merged with their current value).
    """
    kwargs: dict[str, Any] = {}
    for item in (overrides or "").split(","):
        if not item.strip():
            continue
        key, separator, text = (part.strip() for part in item.partition("="))
        if not separator or not key:
            raise ScriptError(f"--config_overrides: {item!r} is not 'key=value'; separate pairs with commas.")
        field_name, _, sub_key = key.partition(".")
        if not hasattr(config, field_name):
            raise ScriptError(f"--config_overrides: {type(config).__name__} has no field {field_name!r}.")
        if sub_key:
            current = kwargs.get(field_name, getattr(config, field_name))
            if not isinstance(current, dict):
                raise ScriptError(f"--config_overrides: {field_name!r} is not a dict field, so {key!r} is invalid.")
            value = _convert_value(key, text, current[sub_key], ()) if sub_key in current else _guess_value(text)
            kwargs[field_name] = {**current, sub_key: value}
        else:
            kwargs[key] = _convert_value(key, text, getattr(config, key), _field_types(type(config), key))
    return kwargs


def _field_types(config_class: type, key: str) -> tuple[type, ...]:
    for klass in config_class.__mro__:
        annotation = inspect.get_annotations(klass).get(key)
        if annotation is not None:
            if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
                return tuple(typing.get_origin(arg) or arg for arg in typing.get_args(annotation))
            return (typing.get_origin(annotation) or annotation,)
    return ()


def _convert_value(key: str, text: str, current: Any, field_types: tuple[type, ...]) -> Any:
    allowed = field_types or (type(current),)
    if text.lower() in ("none", "null"):
        if type(None) in allowed or current is None:
            return None
        raise ScriptError(f"--config_overrides: {key} cannot be None.")
    for kind in allowed:  # bool before int: bool is a subclass of int
        if kind is bool and text.lower() in ("true", "false"):
            return text.lower() == "true"
        if kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                continue
        if kind is str:
            return text
        if kind in (dict, list):
            raise ScriptError(f"--config_overrides: set the keys of {key} one by one ('{key}.name=value').")
    names = " or ".join(kind.__name__ for kind in allowed if kind is not type(None))
    raise ScriptError(f"--config_overrides: {key}={text!r} is not a valid {names}.")


def _guess_value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None, "null": None}.get(text.lower(), text)


def build_config(
    model_args: ModelArguments, config_class: type[PreTrainedConfig] = RoFormerConfig, **defaults: Any
) -> PreTrainedConfig:
    """
    Build the model config: `--config_name` or the checkpoint's config (else the class defaults), then `defaults`
    (e.g. `vocab_size`, `num_labels`), then `--config_overrides`; the config's own checks run on the result.

    Args:
        model_args (`ModelArguments`):
            The parsed model arguments.
        config_class (`type`, defaults to `RoFormerConfig`):
            The config class (also for original RoFormer checkpoints, whose field names it shares).
        defaults:
            Values the script derives (from the tokenizer, the labels...), applied before the user's overrides.
    """
    source = model_args.config_name or model_args.model_name_or_path
    if source is not None:
        option = "--config_name" if model_args.config_name else "--model_name_or_path"
        check_model_source(source, option, "config.json", model_args)
    try:
        if source is None:
            config_dict = {}
        else:
            config_dict, _ = config_class.get_config_dict(source, **model_args.hub_kwargs())
        overrides = parse_config_overrides(model_args.config_overrides, config_class(**config_dict))
        if "hidden_size" in overrides and config_dict.get("embedding_size") == config_dict.get("hidden_size"):
            config_dict["embedding_size"] = None  # an embedding size that followed the hidden size keeps following it
        config_dict.pop("model_type", None)  # original checkpoints say "roformer"
        return config_class(**{**config_dict, **defaults, **overrides})
    except (OSError, ValueError, TypeError) as error:
        origin = " + ".join(
            filter(None, [source or "the defaults", model_args.config_overrides and "--config_overrides"])
        )
        raise ScriptError(f"cannot build the model config from {origin}: {error}") from error


def build_tokenizer(model_args: ModelArguments):
    """
    Load the `RoFormerJiebaTokenizer` of `--tokenizer_name` (a folder, a vocab.txt or a Hub id) or of the checkpoint.
    """
    from .tokenization import RoFormerJiebaTokenizer

    source = model_args.tokenizer_name or model_args.model_name_or_path
    if source is None:
        raise ScriptError(
            "no tokenizer: give --tokenizer_name (a tokenizer folder or a vocab.txt) or --model_name_or_path."
        )
    option = "--tokenizer_name" if model_args.tokenizer_name else "--model_name_or_path"
    if source.endswith(".txt") and not Path(source).is_file():
        raise ScriptError(f"{option} {source}: no such file.")
    check_model_source(source, option, "vocab.txt", model_args)
    if Path(source).is_dir() and not (Path(source) / "vocab.txt").is_file():
        raise ScriptError(
            f"{option} {source} holds no vocab.txt, so it is not a tokenizer folder: give the folder a tokenizer "
            "was saved in, or a vocab.txt."
        )
    try:
        if Path(source).is_file():
            return RoFormerJiebaTokenizer(vocab_file=source)
        return RoFormerJiebaTokenizer.from_pretrained(source, **model_args.hub_kwargs())
    except (OSError, ValueError) as error:
        raise ScriptError(f"cannot load a tokenizer from {source}: {error}") from error


def build_model(
    model_args: ModelArguments, config: PreTrainedConfig, model_class: type[PreTrainedModel]
) -> PreTrainedModel:
    """
    Load `model_class` from `--model_name_or_path` with `config`, or initialise it from scratch when there is none.
    """
    if model_args.model_name_or_path is None:
        model = model_class(config)
        if model_args.attn_implementation is not None:
            model.set_attn_implementation(model_args.attn_implementation)
        return model
    from safetensors import SafetensorError

    check_model_source(model_args.model_name_or_path, "--model_name_or_path", "config.json", model_args)
    try:
        return model_class.from_pretrained(
            model_args.model_name_or_path,
            config=config,
            attn_implementation=model_args.attn_implementation,
            dtype=model_args.dtype,
            ignore_mismatched_sizes=model_args.ignore_mismatched_sizes,
            **model_args.hub_kwargs(),
        )
    except SafetensorError as error:
        raise damaged_weights_error(model_args.model_name_or_path, error) from error
    except OSError as error:
        raise ScriptError(f"cannot load a model from {model_args.model_name_or_path}: {error}") from error
    except ValueError as error:  # e.g. a config that does not describe the checkpoint's encoder
        raise ScriptError(f"cannot load {model_args.model_name_or_path}: {error}") from error
    except RuntimeError as error:
        if "ignore_mismatched_sizes" not in str(error):
            raise
        raise ScriptError(
            f"some weights of {model_args.model_name_or_path} do not fit the model (the load report above names "
            "them; e.g. a classifier fine-tuned on another number of labels): add --ignore_mismatched_sizes to "
            "start those weights afresh."
        ) from error


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
# How much of a data file is checked for UTF-8 before loading; the rest is checked if loading fails.
UTF8_CHECK_BYTES = 1 << 20
# "name" or "namespace/name": what the Hub accepts as a repository id.
HUB_ID_PATTERN = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def check_counts(arguments: Sequence[Any]) -> None:
    """
    Refuse counts below their minimum (`MIN_COUNTS`: batch sizes, accumulation steps, sample limits, workers) and
    training for no epochs, which transformers would meet with a traceback or a run that does nothing.

    Args:
        arguments (`Sequence`): the parsed argument dataclasses.
    """
    for instance in arguments:
        for name, minimum in MIN_COUNTS.items():
            value = getattr(instance, name, None)
            if value is not None and value < minimum:
                raise ScriptError(f"--{name} must be at least {minimum}, got {value}.")
        training = isinstance(instance, TrainingArguments) and instance.do_train and instance.max_steps <= 0
        if training and instance.num_train_epochs <= 0:
            raise ScriptError(
                f"--num_train_epochs must be above 0, got {instance.num_train_epochs} (or give --max_steps)."
            )


def find_utf8_error(path: str | Path, limit: int | None = None) -> tuple[int, int] | None:
    """
    Where a file stops being UTF-8: `(line, byte)`, the 1-based line number and the value of the first byte that
    cannot be decoded, or `None` when the file (or its first `limit` bytes) is UTF-8.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    line, remaining = 1, limit
    with open(path, "rb") as file:
        while remaining is None or remaining > 0:
            chunk = file.read(UTF8_CHECK_BYTES if remaining is None else min(remaining, UTF8_CHECK_BYTES))
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as error:
                pending = len(decoder.getstate()[0])  # bytes of a character begun in the previous chunk
                return line + chunk[: max(error.start - pending, 0)].count(b"\n"), error.object[error.start]
            if not chunk:
                return None
            line += chunk.count(b"\n")
            remaining = None if remaining is None else remaining - len(chunk)
    return None


# The first bytes of files that are not text at all, or text that iconv -f gbk would garble.
FILE_SIGNATURES = {
    b"PAR1": "a Parquet file",
    b"\x1f\x8b": "a gzip-compressed file",
    b"PK\x03\x04": "a zip archive (or an .xlsx workbook)",
    b"\xff\xfe\x00\x00": "UTF-32 text",
    b"\xff\xfe": "UTF-16 text",
    b"\xfe\xff": "UTF-16 text",
}


def not_utf8_error(path: str | Path, what: str, line: int, byte: int) -> ScriptError:
    """The error for a file that is not UTF-8, naming the place and what converts it: iconv for text in another
    encoding (GBK, the usual one for Chinese, or UTF-16), an export to a text format for a binary file."""
    path = Path(path)
    with open(path, "rb") as file:
        head = file.read(UTF8_CHECK_BYTES)
    kind = next((name for signature, name in FILE_SIGNATURES.items() if head.startswith(signature)), None)
    if kind is None and head.count(b"\x00") > len(head) // 4:  # every other byte 0: UTF-16 without a byte-order mark
        kind = "UTF-16 text"
    converted = path.with_name(f"{path.stem}.utf8{path.suffix}")
    if kind is not None and kind.startswith("UTF-"):
        encoding = kind.split()[0].lower()
        return ScriptError(
            f"{what} {path} is {kind}, not UTF-8: convert it, e.g. iconv -f {encoding} -t utf-8 {path} > {converted}"
        )
    if kind is not None:
        return ScriptError(
            f"{what} {path} is {kind}, not text: give a .txt, .jsonl or .csv file (e.g. export a Parquet file with "
            "pandas: read_parquet(...).to_json(..., orient='records', lines=True, force_ascii=False))."
        )
    return ScriptError(
        f"{what} {path} is not UTF-8 text (byte 0x{byte:02x} on line {line}); Chinese text in another encoding is "
        f"usually GBK: convert it, e.g. iconv -f gbk -t utf-8 {path} > {converted}"
    )


def read_utf8_text(path: str | Path, what: str) -> str:
    """The text of a small file, with a `ScriptError` naming the fix when it is not UTF-8."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise not_utf8_error(path, what, line, data[error.start]) from error


def check_data_file(path: str, option: str) -> None:
    """
    Check a data file before loading it: it exists, is not empty, and (as far as `UTF8_CHECK_BYTES`) is UTF-8.

    Args:
        path (`str`): the file.
        option (`str`): the argument that named it (e.g. `"--train_file"`), for the message.
    """
    if not Path(path).is_file():
        raise ScriptError(f"{option} {path}: no such file.")
    if Path(path).stat().st_size == 0:
        raise ScriptError(f"{option} {path} is empty: give a file with text.")
    # pyarrow's JSON reader loads bytes that are not UTF-8 without a word, and a later step fails on them with a
    # traceback naming no file: JSON is checked whole (the other formats fail while loading, see data_file_error)
    whole = Path(path).suffix.lower() in (".json", ".jsonl")
    place = find_utf8_error(path, limit=None if whole else UTF8_CHECK_BYTES)
    if place is not None:
        raise not_utf8_error(path, option, *place)


# pandas reads the cells None, NA, null, NaN, n/a, ... of a CSV file as missing values; with these options of
# `datasets.load_dataset("csv", ...)` only an empty cell is missing, so that a text or a class named "NA" stays.
CSV_ONLY_EMPTY_CELLS_MISSING = {"keep_default_na": False, "na_values": [""]}

# Why writing `datasets`' cache can fail: no space, a read-only file system, no permission, a disk quota, a file
# where a folder should be.
CACHE_WRITE_ERRORS = (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.ENOTDIR)


def data_file_error(files: dict[str, str], error: Exception, cache_dir: str | None = None) -> ScriptError:
    """
    The `ScriptError` for data files that `datasets` failed to load: a cache that cannot be written, else what is
    wrong with one of the files (see `diagnose_data_file`) when that can be found, else the loader's own message.

    Args:
        files (`dict[str, str]`): the files, by the argument that named each (e.g. `{"--train_file": "a.jsonl"}`).
        error (`Exception`): what the loader raised.
        cache_dir (`str`, *optional*): the `--cache_dir` given to the loader (`None`: datasets' default cache).
    """
    write_error = cache_write_error(error)
    data_files = {Path(path).resolve() for path in files.values()}
    if write_error is not None and (
        write_error.filename is None or Path(write_error.filename).resolve() not in data_files
    ):
        import datasets

        cache = f"--cache_dir {cache_dir}" if cache_dir else f"the datasets cache {datasets.config.HF_DATASETS_CACHE}"
        return ScriptError(
            f"cannot write {cache} ({write_error.strerror or write_error}) while loading the data: give --cache_dir "
            "a folder you can write to, on a disk with free space."
        )
    for option, path in files.items():
        found = diagnose_data_file(path, option)
        if found is not None:
            return found
    cause = str(error.__cause__ or error).strip().splitlines() or [type(error).__name__]
    return ScriptError(f"cannot read {', '.join(map(str, files.values()))}: {cause[0]}")


def cache_write_error(error: BaseException) -> OSError | None:
    """The OSError of a failed write (`CACHE_WRITE_ERRORS`) among `error` and its causes, or `None`."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, OSError) and error.errno in CACHE_WRITE_ERRORS:
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def diagnose_data_file(path: str, option: str) -> ScriptError | None:
    """What makes a data file unreadable: not UTF-8, only blank lines, or a line that is not JSON; else `None`."""
    place = find_utf8_error(path)
    if place is not None:
        return not_utf8_error(path, option, *place)
    with open(path, encoding="utf-8") as file:
        if not any(line.strip() for line in file):
            return ScriptError(f"{option} {path} holds only blank lines: give a file with data.")
    if Path(path).suffix.lower() in (".json", ".jsonl"):
        json_error = find_json_error(path)
        if json_error is not None:
            return ScriptError(f"{option} {path}: {json_error}")
    return None


def find_json_error(path: str | Path) -> str | None:
    """What makes a JSON document or JSON-lines file unreadable, with its line, or `None` when it parses."""
    with open(path, encoding="utf-8") as file:
        if file.read(4096).lstrip().startswith("["):  # one JSON array rather than JSON lines: parse it whole
            file.seek(0)
            try:
                json.load(file)
            except json.JSONDecodeError as error:
                return f"not valid JSON at line {error.lineno}, column {error.colno} ({error.msg}): fix the file."
            return None
        file.seek(0)
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                return (
                    f"line {number} is not valid JSON ({error.msg} at column {error.colno}): JSON lines need one "
                    "complete object a line; fix or remove the line."
                )
            if not isinstance(record, dict):
                return f"line {number} holds a {type(record).__name__}, not a JSON object: give one object a line."
    return None


def check_model_source(source: str, option: str, filename: str, model_args: ModelArguments) -> None:
    """
    Check that `source` is a local folder or file, or a Hub id that can be loaded: refuse a missing local path and,
    when the Hub is offline, a Hub id that is not in the cache (transformers' own messages for both are misleading).

    Args:
        source (`str`): the folder, file or Hub id given.
        option (`str`): the argument that named it, for the message.
        filename (`str`): a file every such source holds (`"vocab.txt"`, `"config.json"`), looked up in the cache.
        model_args (`ModelArguments`): for the cache folder and revision.
    """
    from huggingface_hub import constants, try_to_load_from_cache

    if Path(source).exists():
        return
    if not HUB_ID_PATTERN.fullmatch(source) or source.startswith("."):
        raise ScriptError(f"{option} {source}: no such folder or file.")
    if not constants.HF_HUB_OFFLINE:
        return
    cached = try_to_load_from_cache(
        source, filename, cache_dir=model_args.cache_dir, revision=model_args.model_revision
    )
    if not isinstance(cached, str):
        raise ScriptError(
            f"{option} {source}: there is no such local folder, and the Hub model {source} is not in the cache while "
            "the Hub is offline (HF_HUB_OFFLINE=1): give a local folder, or download it once with the network on."
        )


def damaged_weights_error(source: str, error: Exception) -> ScriptError:
    """The error for a checkpoint whose `.safetensors` file cannot be read (cut short by a failed copy or save)."""
    from safetensors import SafetensorError, safe_open

    damaged = []
    for weights_file in sorted(Path(source).glob("*.safetensors")):
        try:
            with safe_open(str(weights_file), framework="pt"):
                pass
        except (SafetensorError, OSError):
            damaged.append(str(weights_file))
    named = ", ".join(damaged) or f"a weights file of {source}"
    return ScriptError(
        f"{named} is damaged or incomplete ({error}): download it again, or save the model again from where it came."
    )


# --- Distributed launches ---------------------------------------------------------------------------------------

MPI_WORLD_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


def launch_defaults() -> dict[str, Any]:
    """
    `TrainingArguments` defaults that follow from the machine and how the script was launched. Without an
    accelerator: no pinned memory (torch warns at every data loader that it cannot pin), and `use_cpu` for a
    multi-process launch (torchrun, `accelerate launch --multi_gpu`); without it transformers sets up the process
    group but not distributed training, and every process trains its own model.
    """
    if torch.accelerator.is_available():
        return {}
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return {"use_cpu": True, "dataloader_pin_memory": False}
    return {"dataloader_pin_memory": False}


def check_distributed_launch(training_args: TrainingArguments) -> None:
    """
    Refuse a launch that asked for several processes but trains in one, or in several unconnected ones.

    Raises `ScriptError` naming the command that starts the processes.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size > 1 and training_args.parallel_mode != ParallelMode.DISTRIBUTED:
        raise ScriptError(
            f"launched as {world_size} processes, but transformers set up {training_args.parallel_mode.value} "
            "training, so each process would train its own model: on a machine without a GPU add --use_cpu true."
        )
    # accelerate's plain launcher (no --multi_gpu) runs the script once; it sets MASTER_ADDR only when asked for
    # several processes or machines, which it then expects mpirun to start.
    launched_by_accelerate = "ACCELERATE_USE_CPU" in os.environ and "MASTER_ADDR" in os.environ
    started_alone = not any(name in os.environ for name in ("WORLD_SIZE", *MPI_WORLD_SIZE_VARIABLES))
    if launched_by_accelerate and started_alone:
        raise ScriptError(
            "accelerate launch was asked for several processes but started only this one (without a GPU it starts "
            "them through mpirun, given --mpirun_hostfile): use 'accelerate launch --multi_gpu --num_processes N' "
            "(it starts them like torchrun, with or without a GPU) or torchrun."
        )


# --- Output folders ---------------------------------------------------------------------------------------------

# What a run of the scripts leaves in its output_dir (model, checkpoints, stage folders, results).
RUN_OUTPUT_PATTERNS = (
    *("checkpoint-*", "stage-*", "*.safetensors", "model.safetensors.index.json", "config.json"),
    *("trainer_state.json", "training_args.bin", "*_results.json", "predictions.jsonl"),
)


@dataclass
class ScriptTrainingArguments(TrainingArguments):
    """
    `TrainingArguments` with the option transformers 5 dropped (whether a run may replace an earlier one), a quiet
    console by default, and `--bf16` on a CPU mapped to float32 (see `__post_init__`).
    """

    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Replace an earlier run in output_dir: its checkpoints, stage folders, model and results are "
            "deleted when training starts. Without it such a folder stops the script before training."
        },
    )
    log_level: str = field(
        default="warning",
        metadata={
            "help": "Console verbosity of the main process: 'warning' shows warnings, the progress bar and the "
            "results; 'info' (or 'passive') adds transformers' and datasets' progress reports.",
            "choices": ["debug", "info", "warning", "error", "critical", "passive"],
        },
    )

    def __post_init__(self):
        # bf16 on a CPU: transformers refuses it without --use_cpu, and with it trains about 12x slower than float32
        # for the same accuracy (measured on a classification run). So a command written for a GPU runs unchanged
        # on a CPU, in float32, with a warning.
        if (self.bf16 or self.bf16_full_eval) and trains_on_cpu(self.use_cpu):
            if int(os.environ.get("RANK", "0")) == 0:
                logger.warning(BF16_ON_CPU_WARNING)
            self.bf16 = self.bf16_full_eval = False
        super().__post_init__()


BF16_ON_CPU_WARNING = (
    "--bf16 on a CPU is about 12x slower than float32 for the same accuracy: training in float32 instead (leave out "
    "--bf16 on a machine without a GPU)."
)


def trains_on_cpu(use_cpu: bool) -> bool:
    """Whether training runs on the CPU: `--use_cpu`, or no accelerator (GPU, XPU, MPS...) and no TPU."""
    from transformers.utils import is_torch_xla_available

    return use_cpu or not (torch.accelerator.is_available() or is_torch_xla_available())


def earlier_run_outputs(output_dir: str | Path) -> list[Path]:
    """The files and folders of an earlier run in `output_dir` (empty when it does not exist)."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    return sorted({path for pattern in RUN_OUTPUT_PATTERNS for path in output_dir.glob(pattern)})


def is_resuming(training_args: TrainingArguments) -> bool:
    """Whether `--resume_from_checkpoint` asks to continue a run."""
    resume = training_args.resume_from_checkpoint
    return resume is not None and str(resume).lower() != "false"


def check_output_dir(training_args: TrainingArguments) -> None:
    """
    Before anything is loaded or written: refuse an output_dir that holds an earlier run (unless
    `--overwrite_output_dir` or `--resume_from_checkpoint`), and check that the folder can be written.

    Raises `ScriptError` naming the options that allow it, or the reason the folder cannot be written.
    """
    output_dir = Path(training_args.output_dir)
    earlier = earlier_run_outputs(output_dir)
    if earlier and not getattr(training_args, "overwrite_output_dir", False) and not is_resuming(training_args):
        names = ", ".join(path.name for path in earlier[:3]) + (", ..." if len(earlier) > 3 else "")
        raise ScriptError(
            f"--output_dir {output_dir} holds an earlier run ({names}): add --overwrite_output_dir to replace it, "
            "--resume_from_checkpoint true to continue it, or choose another --output_dir."
        )
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=output_dir, prefix=".write-test-"):
            pass
    except OSError as error:
        raise ScriptError(
            f"cannot write to --output_dir {output_dir}: {error.strerror or error}; choose a folder you can write to."
        ) from error


def prepare_output_dir(
    training_args: TrainingArguments, model: torch.nn.Module, steps_per_folder: Sequence[int | None] | None = None
) -> None:
    """
    Right before training: with `--overwrite_output_dir`, delete the earlier run's outputs (so that no old checkpoint
    is resumed from or rotated later); then check the free space (`check_free_space`, given `steps_per_folder`, by
    default `--max_steps` in output_dir).
    """
    with training_args.main_process_first(local=False, desc="clearing output_dir"):
        overwrite = getattr(training_args, "overwrite_output_dir", False)
        if overwrite and training_args.should_save and not is_resuming(training_args):
            for path in earlier_run_outputs(training_args.output_dir):
                logger.warning(f"--overwrite_output_dir: deleting {path}")
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()
    if steps_per_folder is None:
        steps_per_folder = [training_args.max_steps if training_args.max_steps > 0 else None]
    check_free_space(training_args, model, steps_per_folder)


def check_free_space(
    training_args: TrainingArguments, model: torch.nn.Module, steps_per_folder: Sequence[int | None] = (None,)
) -> None:
    """
    Refuse to train when output_dir's disk cannot hold what the run writes (see `bytes_to_write`).

    Args:
        training_args (`TrainingArguments`): the run's arguments (save strategy, steps and limit).
        model (`torch.nn.Module`): the model to train.
        steps_per_folder (`Sequence`): the optimizer steps of each folder that keeps its own checkpoints (one per
            stage of run_mlm.py), `None` where unknown (epochs).
    """
    needed, parts = bytes_to_write(training_args, model, steps_per_folder)
    free = shutil.disk_usage(training_args.output_dir).free
    if free < needed:
        raise ScriptError(
            f"--output_dir {training_args.output_dir} has {free / 2**20:.1f} MiB free, but this run writes about "
            f"{needed / 2**20:.1f} MiB ({parts}): free some space, lower --save_total_limit or choose another "
            "--output_dir."
        )


def bytes_to_write(
    training_args: TrainingArguments, model: torch.nn.Module, steps_per_folder: Sequence[int | None] = (None,)
) -> tuple[int, str]:
    """
    The bytes a run writes at its peak and what they are, in words: the final model (twice while it replaces an earlier
    one), and every checkpoint kept at once, each the weights and Adam's two moments (3 x the parameter bytes):
    `--save_total_limit` per folder plus the one being written before the oldest is deleted, or every checkpoint
    without a limit (one where the number of steps is unknown: then it is a lower bound).
    """
    weights = sum(parameter.numel() * parameter.element_size() for parameter in model.parameters())
    final_copies = 2 if (Path(training_args.output_dir) / "model.safetensors").exists() else 1
    checkpoints = 0
    if training_args.save_strategy != "no":
        limit = training_args.save_total_limit
        for steps in steps_per_folder:
            saves = 1 if steps is None or steps <= 0 else math.ceil(steps / max(training_args.save_steps, 1))
            checkpoints += min(saves, limit + 1) if limit else saves
    needed = weights * (final_copies + 3 * checkpoints)
    parts = f"the final model, {weights / 2**20:.1f} MiB" + (
        " twice while it replaces the earlier one" * (final_copies > 1)
    )
    if checkpoints:
        parts += f", and {checkpoints} checkpoint{'s' * (checkpoints > 1)} of weights and optimizer state kept at once"
    return needed, parts


# --- Crash-safe writes and checkpoints --------------------------------------------------------------------------


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """
    A temporary path beside `path` (same folder, same suffix) to write to; it is renamed onto `path` when the block
    ends without error. So a reader, or a process killed while writing, sees the old file or the new one, never half
    of one.
    """
    path = Path(path)
    # a name of its own, so that two writers of the same file (two processes, two threads) never share one
    handle, name = tempfile.mkstemp(prefix=f".{path.stem}.partial-", suffix=path.suffix, dir=path.parent)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def write_json_atomically(path: str | Path, content: Any, **dump_options: Any) -> None:
    """Write `content` as JSON (UTF-8, `ensure_ascii=False`) through `atomic_path`."""
    with atomic_path(path) as temporary:
        temporary.write_text(json.dumps(content, ensure_ascii=False, **dump_options) + "\n", encoding="utf-8")


def save_metrics(trainer: Trainer, split: str, metrics: dict[str, Any], combined: bool = True) -> None:
    """`Trainer.save_metrics` with every file written through `atomic_path` (on the main process only)."""
    if not trainer.is_world_process_zero():
        return
    output_dir = Path(trainer.args.output_dir)
    write_json_atomically(output_dir / f"{split}_results.json", metrics, indent=4, sort_keys=True)
    if combined:
        all_results = output_dir / "all_results.json"
        earlier = json.loads(all_results.read_text(encoding="utf-8")) if all_results.is_file() else {}
        write_json_atomically(all_results, {**earlier, **metrics}, indent=4, sort_keys=True)


def save_state(trainer: Trainer) -> None:
    """`Trainer.save_state` (trainer_state.json, with the log history) written through `atomic_path`."""
    if trainer.is_world_process_zero():
        with atomic_path(Path(trainer.args.output_dir) / "trainer_state.json") as temporary:
            trainer.state.save_to_json(str(temporary))


def save_model_atomically(trainer: Trainer, output_dir: str | Path | None = None) -> None:
    """
    `trainer.save_model` into a staging folder of its own inside `output_dir` (`.partial-model-<unique>`), whose files
    are then renamed into place one by one, weights last (each is the old or the new one, never half written); a
    stop signal waits until the renames are done. The staging folder is deleted whatever happens; when the disk is
    full the model is saved elsewhere (`run_guard.rescue_final_model`) and a `ScriptError` says where. Every process
    calls it, as `save_model` needs.
    """
    from .run_guard import final_save_failed_error, is_disk_full, rescue_final_model  # run_guard imports this module

    output_dir = Path(output_dir or trainer.args.output_dir)
    staging = output_dir / f"{STAGING_PREFIX}{_shared_unique_name()}"
    try:
        try:
            trainer.save_model(str(staging))
        except Exception as error:
            if not is_disk_full(error):
                raise
            shutil.rmtree(staging, ignore_errors=True)  # frees the space of what was written
            raise final_save_failed_error(output_dir, rescue_final_model(trainer, output_dir), error) from error
        if trainer.args.should_save:
            with deferred_stops():
                for path in sorted(staging.iterdir(), key=lambda path: path.suffix == ".safetensors"):
                    os.replace(path, output_dir / path.name)
    finally:
        if trainer.args.should_save:
            shutil.rmtree(staging, ignore_errors=True)


# Staging folders of the final model; one left by a killed process is deleted by the next run holding the lock.
STAGING_PREFIX = ".partial-model-"


def _shared_unique_name() -> str:
    """A name unique to this save, the same on every process of a distributed run (they save into one folder)."""
    names = [f"{os.getpid()}-{os.urandom(4).hex()}"]
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.broadcast_object_list(names, src=0)
    return names[0]


def remove_stale_staging(output_dir: str | Path) -> None:
    """Delete staging folders that killed runs left in `output_dir` (call it only while holding its lock)."""
    for staging in Path(output_dir).glob(f"{STAGING_PREFIX}*"):
        shutil.rmtree(staging, ignore_errors=True)


def is_complete_checkpoint(checkpoint: str | Path) -> bool:
    """
    Whether a checkpoint folder was written to the end: transformers' `Trainer._save_checkpoint` writes the weights,
    optimizer, scheduler and RNG states first and `trainer_state.json` last (none of them atomically), so a
    checkpoint whose `trainer_state.json` is missing or truncated was cut off while being written.
    """
    try:
        return "global_step" in json.loads((Path(checkpoint) / "trainer_state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


def last_complete_checkpoint(folder: str | Path) -> str | None:
    """The newest complete `checkpoint-<step>` folder in `folder`; newer incomplete ones are skipped with a warning."""
    folder = Path(folder)
    checkpoints = [path for path in folder.glob("checkpoint-*") if re.fullmatch(r"checkpoint-\d+", path.name)]
    for checkpoint in sorted(checkpoints, key=lambda path: int(path.name.split("-")[1]), reverse=True):
        if checkpoint.is_dir() and is_complete_checkpoint(checkpoint):
            return str(checkpoint)
        logger.warning(
            f"skipping the incomplete checkpoint {checkpoint} (its trainer_state.json, written last, is missing or "
            "truncated: the run stopped while saving it)"
        )
    return None


__all__ = [
    "CSV_ONLY_EMPTY_CELLS_MISSING",
    "ModelArguments",
    "ScriptError",
    "ScriptTrainingArguments",
    "atomic_path",
    "build_config",
    "build_model",
    "build_tokenizer",
    "bytes_to_write",
    "check_counts",
    "check_data_file",
    "check_distributed_launch",
    "check_free_space",
    "check_output_dir",
    "data_file_error",
    "demo_or_given_arguments",
    "find_resume_checkpoint",
    "is_complete_checkpoint",
    "last_complete_checkpoint",
    "loading_instructions",
    "parse_arguments",
    "parse_config_overrides",
    "prepare_output_dir",
    "remove_stale_staging",
    "run_script",
    "save_metrics",
    "save_model_atomically",
    "save_state",
    "setup_logging",
    "short_help",
    "trains_on_cpu",
    "write_json_atomically",
]
