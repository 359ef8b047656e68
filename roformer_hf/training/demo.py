"""The demo each script runs when its command line names no data and no model, and the command a model card shows."""

import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from .cli import is_arguments_file
from .help_text import HELP_ALL_OPTION

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
