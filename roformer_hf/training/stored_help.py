"""The scripts' `--help`, stored as text so that it answers before torch loads: the scripts run `answer_help` first
(this file read by path: importing `roformer_hf` imports torch and transformers to register the Auto classes). A
stored text is what the script's own parser prints, written by `python -m roformer_hf.training.stored_help` and
stamped with the transformers version it was written with (its training options and defaults come from
transformers); tests/test_stored_help.py fails when the two drift apart. Standard library only, at the top."""

import importlib.metadata
import sys
from pathlib import Path

HELP_OPTIONS = ("-h", "--help")
HELP_ALL_OPTION = "--help-all"
ARGUMENTS_FILE_SUFFIXES = (".json", ".yaml", ".yml")

# One `<script>.txt` per script: the stamp line, then what `python <script> --help` prints.
STORED_HELP_DIR = Path(__file__).resolve().parent / "help"


def is_arguments_file(argument: str) -> bool:
    """Whether a command-line argument names a file of arguments (`args.json`, `args.yaml`) rather than an option."""
    return argument.endswith(ARGUMENTS_FILE_SUFFIXES) and not argument.startswith("-")


def answer_help() -> None:
    """
    Print the running script's stored `--help` and exit, where it is what the script's parser would print: the
    command line asks for `--help` (not `--help-all`, whose defaults follow the machine: `launch.launch_defaults`;
    not after a file of arguments, whose values the help shows), the script has a stored text under its name, and the
    installed transformers is the one the text was written with. Otherwise return: the script's parser answers.
    """
    argv = sys.argv[1:]
    if not set(HELP_OPTIONS) & set(argv) or HELP_ALL_OPTION in argv or (argv and is_arguments_file(argv[0])):
        return
    stored = STORED_HELP_DIR / f"{Path(sys.argv[0]).name}.txt"
    if not stored.is_file():
        return
    stamp, text = stored.read_text(encoding="utf-8").split("\n", 1)
    if stamp == help_stamp():
        sys.stdout.write(text)
        sys.exit(0)


def help_stamp() -> str:
    """The first line of a stored text: the transformers version its `TrainingArguments` options come from."""
    try:
        return f"transformers {importlib.metadata.version('transformers')}"
    except importlib.metadata.PackageNotFoundError:
        return "transformers not installed"


def live_help(script: str | Path) -> str:
    """What `python <script> --help` prints through the script's parser (its `main`, run in this process)."""
    import contextlib
    import io
    import runpy

    script_globals = runpy.run_path(str(script), run_name="live_help")  # defines the script, runs nothing
    printed, program_arguments = io.StringIO(), sys.argv
    sys.argv = [str(script), "--help"]  # the usage line names the script by sys.argv[0], as when a user runs it
    try:
        with contextlib.redirect_stdout(printed):
            script_globals["main"]()
    except SystemExit as stop:
        if stop.code in (0, None):
            return printed.getvalue()
    finally:
        sys.argv = program_arguments
    raise RuntimeError(f"{script} --help did not print its help and exit 0")


def write_stored_help(scripts: list[str]) -> None:
    """Store what each script's parser prints for `--help`, stamped (`help_stamp`), in `STORED_HELP_DIR`."""
    STORED_HELP_DIR.mkdir(exist_ok=True)
    for script in scripts:
        stored = STORED_HELP_DIR / f"{Path(script).name}.txt"
        stored.write_text(f"{help_stamp()}\n{live_help(script)}", encoding="utf-8")
        print(f"wrote {stored}")


if __name__ == "__main__":  # python -m roformer_hf.training.stored_help run_mlm.py run_classification.py
    write_stored_help(sys.argv[1:])
