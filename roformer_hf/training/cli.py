"""The command line of the scripts: the model arguments, transformers' `TrainingArguments` as the scripts use them, and
parsing them, from files of arguments (`.json`, `.yaml`) too; the demo each script runs when its command line names
no data and no model, and the command a model card shows; the short `--help` (the scripts' own options, then the
most used of `TrainingArguments`; `first_answers.py` keeps it, and every option, to answer before torch loads). The
checks of the settings are in `setting_checks.py`."""

import argparse
import json
import logging
import os
import shlex
import sys
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any

from transformers import HfArgumentParser, TrainingArguments

from .data.files import read_utf8_text
from .errors import ScriptError
from .first_answers import (
    HELP_ALL_OPTION,
    HELP_OPTIONS,
    SCRIPT_DIR,
    STORED_PARSERS_DIR,
    is_arguments_file,
    option_table,
    parser_stamp,
    runs_the_demo,
    unknown_options,
)
from .machine.cpu_precision import choose_cpu_precision
from .machine.launch import LAUNCH_DEFAULTS_NOTE, launch_defaults
from .machine.precisions import DTYPE_CHOICES
from .setting_checks import check_counts, check_setting_ranges, check_training_settings

logger = logging.getLogger(__name__)


# --- the short --help ---

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
    "threads": None,  # the scripts' own fields (`ScriptTrainingArguments`), named by the README
    "license": None,
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


# --- the arguments ---


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
            "help": f"dtype to load the weights in ({', '.join(map(repr, DTYPE_CHOICES))}); for mixed-precision "
            "training use --bf16 / --fp16 instead.",
            "choices": list(DTYPE_CHOICES),
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


class ParsedArguments(tuple):
    """The argument dataclasses a command line filled in, one per type, and `given`: the names of the options the
    command line (or its file of arguments) gave, so that a default can be told from a value the user chose."""

    given: frozenset[str]

    def __new__(cls, arguments: Sequence[Any], given: Iterable[str]):
        parsed = super().__new__(cls, arguments)
        parsed.given = frozenset(given)
        return parsed


def parse_arguments(
    dataclass_types: Sequence[type],
    argv: Sequence[str] | None = None,
    defaults: dict[str, Any] | None = None,
    description: str | None = None,
) -> ParsedArguments:
    """
    Parse command-line arguments into the given dataclasses. A first argument ending in `.json`, `.yaml` or `.yml` is
    a file of arguments, which the options after it override (as in transformers' examples:
    `python run_mlm.py args.yaml --ddp_backend gloo`). `--help` prints the short help (`short_help`) and
    `--help-all` every option; both then exit. An option no dataclass has is refused in one line (`unknown_options`).

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
        `ParsedArguments`: one instance per dataclass, and the names of the options given.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    from_file = {}
    if is_arguments_file(argv[0] if argv else ""):
        # the file's values replace the defaults; the options after it still win, as on any command line
        from_file = _read_known_arguments(argv[0], dataclass_types)
        argv = argv[1:]
    defaults = {**(defaults or {}), **from_file}
    parser = argument_parser(dataclass_types, defaults)
    if HELP_ALL_OPTION in argv:
        parser.print_help()
        sys.exit(0)
    if set(HELP_OPTIONS) & set(argv):
        print(short_help(dataclass_types, defaults, description))
        sys.exit(0)
    parser.set_defaults(**{**launch_defaults(), **defaults})
    try:
        *arguments, unknown = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=True)
    except ValueError as error:  # raised by the dataclasses' own checks (e.g. TrainingArguments.__post_init__)
        raise ScriptError(f"invalid arguments: {error}") from error
    if unknown:
        options = (
            f"--{item.name}" for dataclass_type in dataclass_types for item in fields(dataclass_type) if item.init
        )
        raise ScriptError(unknown_options(unknown, options))
    check_counts(arguments)
    check_training_settings(arguments)
    return ParsedArguments(arguments, {*from_file, *given_options(dataclass_types, argv)})


def argument_parser(dataclass_types: Sequence[type], defaults: dict[str, Any]) -> HfArgumentParser:
    """The scripts' parser of `dataclass_types`, with the script's `defaults`, as `--help-all` prints it: the defaults
    that follow the machine (`launch.launch_defaults`, set before parsing) are named in its epilog, not printed, so
    that what it prints holds on every machine (`first_answers` stores it)."""
    parser = HfArgumentParser(dataclass_types, epilog=LAUNCH_DEFAULTS_NOTE)
    parser.set_defaults(**defaults)
    return parser


def given_options(dataclass_types: Sequence[type], argv: Sequence[str]) -> set[str]:
    """The fields that `argv` gives a value (`--name`, `--no_name`, an alias, an abbreviation argparse accepts): those
    a parse sets in a namespace that takes no defaults (`_OnlyGiven`)."""
    namespace, _ = HfArgumentParser(dataclass_types).parse_known_args(argv, namespace=_OnlyGiven())
    return set(vars(namespace))


class _OnlyGiven(argparse.Namespace):
    """A namespace that appears to hold every option already, so that argparse fills in no default and only the
    options the command line gives are set in it."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # argparse's own bookkeeping, e.g. its list of unrecognized arguments
            raise AttributeError(name)
        return _NOT_GIVEN


_NOT_GIVEN = object()


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


@dataclass
class ScriptTrainingArguments(TrainingArguments):
    """
    `TrainingArguments` with the option transformers 5 dropped (whether a run may replace an earlier one), a quiet
    console by default, and on a CPU the precision that pays there (`cpu_precision.choose_cpu_precision`).
    """

    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Replace an earlier run in output_dir: its checkpoints, stage folders, model and results are "
            "deleted when training starts. Without it such a folder stops the script before training."
        },
    )
    bf16: bool | None = field(
        default=None,  # not given: chosen from the machine in __post_init__
        metadata={
            "help": BF16_HELP,
            "nargs": "?",  # --bf16 alone means true, as for transformers' own boolean options
            "const": True,
        },
    )
    license: str | None = field(
        default=None,
        metadata={
            "help": "The model's license in its card, as the Hub names it (apache-2.0, mit, cc-by-4.0, ...). By "
            "default the license of the checkpoint the run starts from, as its card says."
        },
    )
    hub_strategy: str = field(
        default="end",
        metadata={
            "help": "With --push_to_hub the scripts upload the final model once, at the end of the run ('end'); the "
            "Trainer's pushes at each save or checkpoint (every_save, checkpoint, all_checkpoints) are refused."
        },
    )
    hub_include_run_files: bool = field(
        default=False,
        metadata={
            "help": "With --push_to_hub, also upload what is private to the run: the predictions, the confusion "
            "matrix pictures, the run settings and trainer state. By default only the model, its code, tokenizer, "
            "card and metrics go up."
        },
    )
    threads: str | None = field(
        default=None,
        metadata={
            "help": "Threads to compute with: a number, or auto (the cores this process may use less those other "
            "processes keep busy when it starts: faster on a busy machine, but a run on another count may end with "
            "other weights). Default: OMP_NUM_THREADS where set, else one per usable core, whatever runs beside."
        },
    )
    static_shapes: bool | None = field(
        default=None,
        metadata={
            "help": "Give the model batches of a few fixed shapes: the last partial batch padded to full size (its "
            "extra rows ignored by the loss), lengths padded to powers of two up to max_seq_length, sparse MLM "
            "prediction in a fixed number of slots; --torch_compile then compiles once per shape, and "
            "--torch_compile_mode reduce-overhead captures CUDA graphs. Default: on with --torch_compile, off "
            "otherwise (said in one line).",
            "nargs": "?",
            "const": True,
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

    # Whether the probe of the built model decides --bf16 (`cpu_precision.settle_cpu_precision`): set by
    # `choose_cpu_precision` where --bf16 was not given on a CPU with bf16 instructions. Not an option.
    bf16_from_probe: bool = field(default=False, init=False, repr=False)

    def __post_init__(self):
        check_setting_ranges(self)
        choose_cpu_precision(self)
        super().__post_init__()


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


# --- the stored parsers (`first_answers`) ---


def live_help(script: str | Path, option: str) -> str:
    """What `python <script> <option>` (`--help`, `--help-all`) prints through the script's parser (its `main`, run
    in this process)."""
    import contextlib
    import io
    import runpy

    script_globals = runpy.run_path(str(script), run_name="live_help")  # defines the script, runs nothing
    printed, program_arguments = io.StringIO(), sys.argv
    sys.argv = [str(script), option]  # the usage line names the script by sys.argv[0], as when a user runs it
    try:
        with contextlib.redirect_stdout(printed):
            script_globals["main"]()
    except SystemExit as stop:
        if stop.code in (0, None):
            return printed.getvalue()
    finally:
        sys.argv = program_arguments
    raise RuntimeError(f"{script} {option} did not print its help and exit 0")


def live_table(script: str | Path) -> dict[str, Any]:
    """The stored parser of `script` (`first_answers.stored_parser`) as the script makes it now: its short help, its
    demo's arguments (its folder written `SCRIPT_DIR`) and the options of `argument_parser` for its `ARGUMENT_TYPES`
    and `SCRIPT_DEFAULTS`."""
    import runpy

    script_globals = runpy.run_path(str(script), run_name="live_table")
    parser = argument_parser(script_globals["ARGUMENT_TYPES"], script_globals["SCRIPT_DEFAULTS"])
    script_dir = str(Path(script).resolve().parent)
    demo = [argument.replace(script_dir, SCRIPT_DIR) for argument in script_globals["DEMO_ARGUMENTS"]]
    return {"stamp": parser_stamp(), "help": live_help(script, HELP_OPTIONS[1]), "demo": demo, **option_table(parser)}


def write_stored_parsers(scripts: list[str]) -> None:
    """Store each script's parser (`live_table`) where `first_answers` reads it (`STORED_PARSERS_DIR`)."""
    for script in scripts:
        stored = STORED_PARSERS_DIR / f"{Path(script).name}.json"
        text = json.dumps(live_table(script), ensure_ascii=False, indent=1)
        stored.write_text(text + "\n", encoding="utf-8")
        print(f"wrote {stored}")


if __name__ == "__main__":  # python -m roformer_hf.training.cli run_mlm.py run_classification.py
    write_stored_parsers(sys.argv[1:])
