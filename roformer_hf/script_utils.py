"""What the training scripts (`run_mlm.py`, `run_classification.py`) share: argument parsing, the model arguments
and how they build config, tokenizer and model, user-error handling, logging and offline metrics.

A user's mistake raises `ScriptError` with a message naming the problem and the fix; `run_script` turns it (and a
missing file) into one line on stderr and a non-zero exit, without a traceback. Tests call the steps directly and
see the exception.
"""

import inspect
import json
import logging
import os
import sys
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
from transformers import HfArgumentParser, PreTrainedConfig, PreTrainedModel, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint
from transformers.training_args import ParallelMode

from .configuration import RoFormerConfig

logger = logging.getLogger(__name__)

# Errors caused by what the user asked for; anything else is a bug and keeps its traceback.
USER_ERRORS = (FileNotFoundError, NotADirectoryError, IsADirectoryError)


class ScriptError(Exception):
    """A mistake in a script's arguments or data; the message names the problem and the fix."""


def run_script(main: Callable[[], object]) -> None:
    """
    Run a script's `main()`; a `ScriptError` or a missing file becomes one line on stderr and exit status 1.

    Args:
        main (`Callable`):
            The script's entry point, called without arguments (it reads `sys.argv`).
    """
    try:
        main()
    except ScriptError as error:
        _exit_with_message(str(error))
    except USER_ERRORS as error:
        _exit_with_message(f"{error.strerror or error}: {error.filename}" if error.filename else str(error))


def _exit_with_message(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)


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
    dataclass_types: Sequence[type], argv: Sequence[str] | None = None, defaults: dict[str, Any] | None = None
) -> tuple:
    """
    Parse command-line arguments, or a single `.json` / `.yaml` file of them, into the given dataclasses.

    Args:
        dataclass_types (`Sequence[type]`):
            The argument dataclasses, e.g. `(ModelArguments, DataArguments, TrainingArguments)`.
        argv (`Sequence[str]`, *optional*):
            The arguments without the program name; `None` reads `sys.argv[1:]`.
        defaults (`dict`, *optional*):
            Script-specific defaults that replace the dataclasses' own (e.g. `output_dir`); the user's values win.

    Returns:
        `tuple`: one instance per dataclass.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    defaults = {**launch_defaults(), **(defaults or {})}
    parser = HfArgumentParser(dataclass_types)
    try:
        if len(argv) == 1 and argv[0].endswith((".json", ".yaml", ".yml")):
            return parser.parse_dict({**defaults, **_read_arguments_file(argv[0])})
        parser.set_defaults(**defaults)
        return parser.parse_args_into_dataclasses(args=argv)
    except ValueError as error:  # raised by the dataclasses' own checks (e.g. TrainingArguments.__post_init__)
        raise ScriptError(f"invalid arguments: {error}") from error


def _read_arguments_file(path: str) -> dict[str, Any]:
    text = Path(path).read_text(encoding="utf-8")
    if path.endswith(".json"):
        arguments = json.loads(text)
    else:
        import yaml

        arguments = yaml.safe_load(text)
    if not isinstance(arguments, dict):
        raise ScriptError(f"{path} must hold a mapping of argument names to values, not {type(arguments).__name__}.")
    return arguments


def setup_logging(training_args: TrainingArguments) -> None:
    """Log like transformers' example scripts: INFO on the main process, warnings elsewhere."""
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


def find_resume_checkpoint(training_args: TrainingArguments) -> str | None:
    """
    The checkpoint that `--resume_from_checkpoint` names: a path, or the last one in output_dir for `True`.

    Raises `ScriptError` when the path does not exist or output_dir holds no checkpoint.
    """
    resume = training_args.resume_from_checkpoint
    if resume is None or str(resume).lower() == "false":
        return None
    if str(resume).lower() == "true":
        last = get_last_checkpoint(training_args.output_dir) if Path(training_args.output_dir).is_dir() else None
        if last is None:
            raise ScriptError(
                f"--resume_from_checkpoint True, but {training_args.output_dir} holds no checkpoint-* folder: "
                "give the checkpoint's path or leave the option out."
            )
        return last
    if not Path(resume).is_dir():
        raise ScriptError(f"--resume_from_checkpoint {resume}: no such folder.")
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
        raise ScriptError(f"cannot build the model config from {source or 'the defaults'}: {error}") from error


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
    try:
        return model_class.from_pretrained(
            model_args.model_name_or_path,
            config=config,
            attn_implementation=model_args.attn_implementation,
            dtype=model_args.dtype,
            ignore_mismatched_sizes=model_args.ignore_mismatched_sizes,
            **model_args.hub_kwargs(),
        )
    except OSError as error:
        raise ScriptError(f"cannot load a model from {model_args.model_name_or_path}: {error}") from error
    except RuntimeError as error:
        if "ignore_mismatched_sizes" not in str(error):
            raise
        raise ScriptError(
            f"some weights of {model_args.model_name_or_path} do not fit the model (the load report above names "
            "them; e.g. a classifier fine-tuned on another number of labels): add --ignore_mismatched_sizes to "
            "start those weights afresh."
        ) from error


def accuracy(predictions: np.ndarray, references: np.ndarray) -> float:
    """
    Fraction of correct predictions, computed offline with scikit-learn (`evaluate.load("accuracy")` needs the Hub).

    Args:
        predictions (`np.ndarray`): predicted ids or labels.
        references (`np.ndarray`): true ids or labels, of the same shape.
    """
    from sklearn.metrics import accuracy_score

    return float(accuracy_score(np.ravel(references), np.ravel(predictions)))


def classification_metrics(predictions: np.ndarray, references: np.ndarray) -> dict[str, float]:
    """Accuracy and macro-averaged F1 of class predictions, computed offline with scikit-learn."""
    from sklearn.metrics import f1_score

    return {
        "accuracy": accuracy(predictions, references),
        "f1_macro": float(f1_score(np.ravel(references), np.ravel(predictions), average="macro")),
    }


__all__ = [
    "ModelArguments",
    "ScriptError",
    "accuracy",
    "build_config",
    "build_model",
    "build_tokenizer",
    "classification_metrics",
    "find_resume_checkpoint",
    "parse_arguments",
    "parse_config_overrides",
    "run_script",
    "setup_logging",
]


# --- Distributed launches ---------------------------------------------------------------------------------------

MPI_WORLD_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


def launch_defaults() -> dict[str, Any]:
    """
    `TrainingArguments` defaults that follow from how the script was launched: `use_cpu` for a multi-process launch
    (torchrun, `accelerate launch --multi_gpu`) on a machine without an accelerator. Without it transformers sets up
    the process group but not distributed training, and every process trains its own model.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.accelerator.is_available():
        return {"use_cpu": True}
    return {}


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
