"""Config (with `--config_overrides`), tokenizer and model from the model arguments, refusing sources that cannot be
loaded with a message that names the fix."""

import inspect
import logging
import sys
import types
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from transformers import PreTrainedConfig, PreTrainedModel

from ..compat import LOAD_REPORT_LOGGER, TENSOR_PARALLEL_LOGGERS
from ..configuration import RoFormerConfig, without_replaced_labels
from .cli import ModelArguments
from .errors import ScriptError
from .first_answers import check_request
from .model_sources import check_config_source, check_model_source, check_tokenizer_source

logger = logging.getLogger(__name__)


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
            holders = [name for name, value in vars(config).items() if isinstance(value, dict) and field_name in value]
            hint = f" (a key of {holders[0]}: write {holders[0]}.{key}={text})" if holders else ""
            raise ScriptError(f"--config_overrides: {type(config).__name__} has no field {field_name!r}{hint}.")
        if sub_key:
            current = kwargs.get(field_name, getattr(config, field_name))
            if not isinstance(current, dict):
                raise ScriptError(f"--config_overrides: {field_name!r} is not a dict field, so {key!r} is invalid.")
            sub_key = next((name for name in current if str(name) == sub_key), sub_key)  # id2label's keys are ints
            value = _convert_value(key, text, current[sub_key], ()) if sub_key in current else _guess_value(text)
            kwargs[field_name] = {**current, sub_key: value}
        else:
            kwargs[key] = _convert_value(key, text, getattr(config, key), _field_types(type(config), key))
    return kwargs


def _field_types(config_class: type, key: str) -> tuple[type, ...]:
    for klass in config_class.__mro__:
        annotation = inspect.get_annotations(klass).get(key)
        if isinstance(annotation, str):  # a module with `from __future__ import annotations` (transformers' configs)
            try:
                annotation = eval(annotation, vars(sys.modules[klass.__module__]))  # as inspect's eval_str does
            except Exception:  # a name imported only for type checkers: the current value's type decides
                return ()
        if annotation is not None:
            if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
                return tuple(_plain_type(arg) for arg in typing.get_args(annotation))
            return (_plain_type(annotation),)
    return ()


def _plain_type(annotation: Any) -> Any:
    """`list[int]` as `list`; a `Literal` kept whole, for its values."""
    return annotation if typing.get_origin(annotation) is Literal else typing.get_origin(annotation) or annotation


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
        if get_origin(kind) is Literal and text in get_args(kind):  # problem_type=regression, say
            return text
    names = " or ".join(_type_name(kind) for kind in allowed if kind is not type(None))
    raise ScriptError(f"--config_overrides: {key}={text!r} is not a valid {names}.")


def _type_name(kind: Any) -> str:
    """A field's type in words: `int`, or the values of a `Literal` (`'regression' or 'single_label_classification'`)."""
    if get_origin(kind) is Literal:
        return " or ".join(repr(value) for value in get_args(kind))
    return getattr(kind, "__name__", str(kind))


def _guess_value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None, "null": None}.get(text.lower(), text)


def build_config(
    model_args: ModelArguments, config_class: type[RoFormerConfig] = RoFormerConfig, **defaults: Any
) -> RoFormerConfig:
    """
    Build the model config: `--config_name` or the checkpoint's config (else the class defaults), then `defaults`
    (e.g. `vocab_size`, `num_labels`), then `--config_overrides`; the config's own checks run on the result, and
    those the model runs when built (`check_attention_heads`).

    Args:
        model_args (`ModelArguments`):
            The parsed model arguments.
        config_class (`type`, defaults to `RoFormerConfig`):
            The config class (also for original RoFormer checkpoints, whose field names it shares).
        defaults:
            Values the script derives (from the tokenizer, the labels...), applied before the user's overrides.
    """
    source = check_config_source(vars(model_args))
    try:
        if source is None:
            config_dict = {}
        else:
            config_dict, _ = config_class.get_config_dict(source, **model_args.hub_kwargs())
        # The source's settings are checked as given, also those the defaults replace; a dict field's keys
        # (`label2id.civil=1`) are then set in the value the run uses: the defaults' labels, not the LABEL_0, ... of a
        # config that does not know them yet.
        before_overrides = config_class(**config_dict)
        if defaults:
            before_overrides = config_class(**{**without_replaced_labels(config_dict, defaults), **defaults})
        overrides = parse_config_overrides(model_args.config_overrides, before_overrides)
        if "hidden_size" in overrides and config_dict.get("embedding_size") == config_dict.get("hidden_size"):
            config_dict["embedding_size"] = None  # an embedding size that followed the hidden size keeps following it
        config_dict.pop("model_type", None)  # original checkpoints say "roformer"
        config_dict = without_replaced_labels(config_dict, {**defaults, **overrides})  # the data's labels replace them
        config = config_class(**{**config_dict, **defaults, **overrides})
        config.check_attention_heads()  # the model checks it too, but the script can say so before reading data
        return config
    except (OSError, ValueError, TypeError) as error:
        origin = " + ".join(
            filter(None, [source or "the defaults", model_args.config_overrides and "--config_overrides"])
        )
        raise ScriptError(f"cannot build the model config from {origin}: {error}") from error


def build_tokenizer(model_args: ModelArguments):
    """
    Load the `RoFormerJiebaTokenizer` of `--tokenizer_name` (a folder, a vocab.txt or a Hub id) or of the checkpoint.
    """
    from ..tokenization import RoFormerJiebaTokenizer

    check_request("a tokenizer", vars(model_args))
    source = check_tokenizer_source(vars(model_args))
    try:
        if Path(source).is_file():
            return RoFormerJiebaTokenizer(vocab_file=source)
        return RoFormerJiebaTokenizer.from_pretrained(source, **model_args.hub_kwargs())
    except (OSError, ValueError) as error:
        raise ScriptError(f"cannot load a tokenizer from {source}: {error}") from error


def check_vocabulary_fits(tokenizer: Any, config: PreTrainedConfig) -> None:
    """Refuse a tokenizer with more tokens than the model has embeddings (both scripts, before the model is built):
    its last ids would index past the embedding table."""
    if len(tokenizer) > config.vocab_size:
        raise ScriptError(
            f"the tokenizer has {len(tokenizer)} tokens but the model only {config.vocab_size} embeddings: use the "
            "checkpoint's own tokenizer (leave out --tokenizer_name) or a larger vocab_size."
        )


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
    check_model_source(
        model_args.model_name_or_path,
        "--model_name_or_path",
        "config.json",
        model_args.cache_dir,
        model_args.model_revision,
    )
    model, loading_info = load_checkpoint(model_args, config, model_class)
    if loading_info["mismatched_keys"] and not model_args.ignore_mismatched_sizes:
        shapes = ", ".join(
            f"{name} {tuple(saved)} vs {tuple(built)}" for name, saved, built in loading_info["mismatched_keys"]
        )
        raise ScriptError(
            f"some weights of {model_args.model_name_or_path} do not fit the model (in the checkpoint vs in the model: "
            f"{shapes}; e.g. a classifier fine-tuned on another number of labels): add --ignore_mismatched_sizes to "
            "start those weights afresh."
        )
    started = heads_started_line(model, loading_info, model_args.model_name_or_path)
    if started is not None:
        logger.warning(started)
    return model


def load_checkpoint(
    model_args: ModelArguments, config: PreTrainedConfig, model_class: type[PreTrainedModel]
) -> tuple[PreTrainedModel, dict]:
    """
    `model_class.from_pretrained(--model_name_or_path)` with `config`, and its loading info (missing, unexpected
    and mismatched weights; heads of another shape are started afresh, for `build_model` to refuse or keep).
    """
    from safetensors import SafetensorError

    try:
        with load_report_at_info_only():
            return model_class.from_pretrained(
                model_args.model_name_or_path,
                config=config,
                attn_implementation=model_args.attn_implementation,
                dtype=model_args.dtype,
                ignore_mismatched_sizes=True,
                output_loading_info=True,
                **model_args.hub_kwargs(),
            )
    except SafetensorError as error:
        raise damaged_weights_error(model_args.model_name_or_path, error) from error
    except OSError as error:
        raise ScriptError(f"cannot load a model from {model_args.model_name_or_path}: {error}") from error
    except ValueError as error:  # e.g. a config that does not describe the checkpoint's encoder
        raise ScriptError(f"cannot load {model_args.model_name_or_path}: {error}") from error


@contextmanager
def load_report_at_info_only() -> Iterator[None]:
    """
    Keeps transformers' LOAD REPORT table (its rows of missing and unexpected weights, in terminal colours) off the
    console unless the log level is info or lower: `heads_started_line` says the same in one line. Also transformers'
    tensor-parallel check, which that level turns on, and which would name every layer as "not sharded" although the
    scripts ask for no tensor parallelism (`compat.TENSOR_PARALLEL_LOGGERS`).
    """
    report_logger = logging.getLogger(LOAD_REPORT_LOGGER)
    if report_logger.isEnabledFor(logging.INFO):
        yield
        return
    quieted = [logging.getLogger(name) for name in (LOAD_REPORT_LOGGER, *TENSOR_PARALLEL_LOGGERS)]
    levels = [quieted_logger.level for quieted_logger in quieted]
    for quieted_logger in quieted:
        quieted_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for quieted_logger, level in zip(quieted, levels, strict=True):
            quieted_logger.setLevel(level)


def heads_started_line(model: PreTrainedModel, loading_info: dict, source: str) -> str | None:
    """
    One line saying which head of `model` starts at random and which of the checkpoint's is dropped (e.g. a
    classifier from an MLM checkpoint), or `None` when the checkpoint filled the whole model and nothing was left.
    The encoder is never among them: `from_pretrained` refuses a checkpoint that does not fill it.
    """
    prefix = model.base_model_prefix
    new, dropped = (head_names(loading_info[kind], prefix) for kind in ("missing_keys", "unexpected_keys"))
    if not (new or dropped):
        return None
    checkpoint_head = (model.config.architectures or ["model"])[0]  # still the checkpoint's: saving sets ours
    parts = [f"{type(model).__name__} starts from {source}"]
    if new:
        parts.append(f"new, initialised at random: {new}")
    if dropped:
        parts.append(f"dropped, the {checkpoint_head}'s head: {dropped}")
    return "; ".join(parts) + " (--log_level info shows transformers' load report)."


def head_names(weight_names: list[str], base_model_prefix: str) -> str:
    """
    The modules that `weight_names` belong to, with their weights counted: "classifier (4 weights)"; a module of
    the encoder's is named with its prefix ("roformer.pooler").
    """
    counts: dict[str, int] = {}
    for name in weight_names:
        parts = name.split(".")
        module = ".".join(parts[:2]) if parts[0] == base_model_prefix else parts[0]
        counts[module] = counts.get(module, 0) + 1
    return ", ".join(f"{module} ({count} weight{'s' * (count > 1)})" for module, count in sorted(counts.items()))


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
