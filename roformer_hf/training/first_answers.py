"""What the scripts answer before torch loads: `--help`, `--help-all`, and the mistakes that need no model to see (an
option no script has, nothing asked of the run, an output folder the run may not write into, a data file it reads
that is missing, empty, not UTF-8 or of a kind the scripts do not read, a tokenizer, config or checkpoint that is
not there). Importing `roformer_hf` imports torch, transformers and datasets to register the Auto classes (10 s on a
quiet 2-core CPU); the scripts read this file by path first and run `answer_first`.

It answers from `help/<script>.json`, what the script's parser is: the short `--help` text, the demo's arguments and
every option (its flags, how many values it takes, its default, choices and help), from which argparse prints
`--help-all` as the script's parser prints it and reads a command line as that parser reads it. The file is written
from the live parser by `python -m roformer_hf.training.cli run_mlm.py run_classification.py` and stamped with the
transformers version (the training options come from transformers); tests/test_first_answers.py fails when the two
drift apart.

The checks are the functions the run calls again later (`first_checks`), imported from their modules without the
package's `__init__` (`package_without_init`). Where anything is unsure (another transformers, a file of arguments,
a line argparse would refuse, tracebacks asked for), `answer_first` returns and the script's own parser and checks
answer after the imports. Standard library only, at the top.
"""

import argparse
import contextlib
import difflib
import importlib.metadata
import json
import os
import sys
import types
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

HELP_OPTIONS = ("-h", "--help")
HELP_ALL_OPTION = "--help-all"
ARGUMENTS_FILE_SUFFIXES = (".json", ".yaml", ".yml")

# One `<script>.json` per script: the stamp, the short --help, the options (`option_table`).
STORED_PARSERS_DIR = Path(__file__).resolve().parent / "help"
PACKAGE_DIR = Path(__file__).resolve().parents[1]
# What stands for the scripts' folder in a stored demo's arguments (its data files lie under it).
SCRIPT_DIR = "{script_dir}"

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

# What an option the scripts do not take means, where it is one a user is likely to try: the reason and the fix.
UNTAKEN_OPTIONS = {
    "--streaming": "run_classification.py reads its data whole (it needs every label before training starts): leave "
    "--streaming out, and --max_train_samples N keeps the first N documents (run_mlm.py streams text)",
}

# What a command line must ask, by name: the scripts it holds for, the options of which one at least must be given
# (or true), and the refusal otherwise (`check_requests`).
REQUESTS = {
    "something to do": (
        ("run_classification.py",),
        ("do_train", "do_eval", "do_predict"),
        "nothing to do: pass --do_train, --do_eval and/or --do_predict.",
    ),
    "training data": (
        ("run_mlm.py",),
        ("train_file", "dataset_name"),
        "no training data: give --train_file (a {file_kinds} file) or --dataset_name (a dataset folder or Hub id).",
    ),
    "a tokenizer": (
        ("run_mlm.py", "run_classification.py"),
        ("tokenizer_name", "model_name_or_path"),
        "no tokenizer: give --tokenizer_name (a tokenizer folder or a vocab.txt) or --model_name_or_path.",
    ),
}

# The data files each script reads, by option, and the option that has the run read it (None: always read).
DATA_FILES_READ = {
    "run_classification.py": {"train_file": "do_train", "validation_file": "do_eval", "test_file": "do_predict"},
    "run_mlm.py": {"train_file": None, "validation_file": None},
}

# Whether a run writes a model and checkpoints into --output_dir, by script: the option that says so (None: always;
# run_mlm.py saves a model even when it only evaluates). What the folder may already hold follows from it.
WRITES_A_MODEL = {"run_classification.py": "do_train", "run_mlm.py": None}

# Set to 1 to see the traceback of a user error instead of the one-line message (the checks then wait for the imports).
DEBUG_VARIABLE = "ROFORMER_HF_DEBUG"

# How transformers' parser reads the value of a boolean option (`string_to_bool`).
BOOLEAN_WORDS = {"yes": True, "true": True, "t": True, "y": True, "1": True}
BOOLEAN_WORDS |= {"no": False, "false": False, "f": False, "n": False, "0": False}


def boolean(value: str) -> bool:
    """A boolean option's value, read as transformers' parser reads it."""
    if value.lower() not in BOOLEAN_WORDS:
        raise argparse.ArgumentTypeError(f"{value!r} is not a boolean")
    return BOOLEAN_WORDS[value.lower()]


# The value types of the stored options that the first checks read as the script's parser does; a value of another
# type is kept as its text (no check reads one).
VALUE_TYPES = {"bool": boolean, "int": int, "float": float, "str": str}


def is_arguments_file(argument: str) -> bool:
    """Whether a command-line argument names a file of arguments (`args.json`, `args.yaml`) rather than an option."""
    return argument.endswith(ARGUMENTS_FILE_SUFFIXES) and not argument.startswith("-")


def runs_the_demo(argv: Sequence[str]) -> bool:
    """Whether the arguments leave the data and the model to the demo (`cli.demo_or_given_arguments`)."""
    if argv and is_arguments_file(argv[0]):
        return False
    names = {argument.split("=", 1)[0] for argument in argv if argument.startswith("-")}
    return not names & {*DATA_AND_MODEL_OPTIONS, *HELP_OPTIONS, HELP_ALL_OPTION}


def unknown_options(unknown: Sequence[str], options: Iterable[str]) -> str:
    """The one line for command-line arguments no option takes: the reason of `UNTAKEN_OPTIONS`, else the closest of
    `options` (the fields' `--name`s)."""
    name = next((argument.split("=", 1)[0] for argument in unknown if argument.startswith("-")), unknown[0])
    if name in UNTAKEN_OPTIONS:
        return f"{name}: {UNTAKEN_OPTIONS[name]}."
    close = difflib.get_close_matches(name, sorted(set(options)), n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return (
        f"unknown argument {' '.join(unknown)}: {hint}{HELP_ALL_OPTION} lists every option (a value with spaces "
        "needs quotes)."
    )


def check_requests(script: str, values: Mapping[str, Any]) -> None:
    """Refuse a command line that does not ask `script` what it must (`REQUESTS`); `values` holds the options. The
    run checks each request again where it needs it (`check_request`)."""
    for name, (scripts, _, _) in REQUESTS.items():
        if script in scripts:
            check_request(name, values)


def check_request(name: str, values: Mapping[str, Any]) -> None:
    """Refuse options (`values`) that give none of the options of the request `name` of `REQUESTS`."""
    from roformer_hf.training.data.files import FILE_KINDS  # absolute: this file is also read by path
    from roformer_hf.training.errors import ScriptError

    _, options, refusal = REQUESTS[name]
    if not any(values.get(option) for option in options):
        raise ScriptError(refusal.format(file_kinds=FILE_KINDS))


def shows_tracebacks() -> bool:
    """Whether a user error keeps its traceback (`DEBUG_VARIABLE` set to anything but 0 or false)."""
    return os.environ.get(DEBUG_VARIABLE, "").lower() not in ("", "0", "false")


def writes_a_model(script: str, values: Mapping[str, Any]) -> bool:
    """Whether a run of `script` with the options `values` writes a model into `--output_dir` (`WRITES_A_MODEL`)."""
    option = WRITES_A_MODEL.get(script)
    return option is None or bool(values.get(option))


# --- the stored parser ---


def parser_stamp() -> str:
    """The stamp of a stored parser: the transformers version its `TrainingArguments` options come from."""
    try:
        return f"transformers {importlib.metadata.version('transformers')}"
    except importlib.metadata.PackageNotFoundError:
        return "transformers not installed"


def option_table(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """What of `parser` `--help-all` prints and a command line is read by: its epilog and, per option, its flags,
    destination, action, number of values, constant, default (as printed), choices, help and value type."""
    actions = {action: name for name, action in parser._registries["action"].items() if name is not None}
    options = []
    for action in parser._actions:
        value_type = getattr(action.type, "__name__", None)
        options.append(
            {
                "flags": list(action.option_strings),
                "dest": action.dest,
                "action": actions[type(action)],
                "nargs": action.nargs,
                "const": action.const,
                "default": action.default if is_json_value(action.default) else str(action.default),
                "choices": None if action.choices is None else [str(choice) for choice in action.choices],
                "help": action.help,
                "type": "bool" if value_type == "string_to_bool" else value_type,
            }
        )
    return {"epilog": parser.epilog, "options": options}


def is_json_value(value: Any) -> bool:
    """Whether JSON keeps `value` as it is (argparse prints a default by `str`: the same after the round trip)."""
    if isinstance(value, list):
        return all(map(is_json_value, value))
    return value is None or isinstance(value, bool | int | float | str)


def stored_parser(script: str) -> dict[str, Any] | None:
    """The stored parser of `script` (a file name: `run_mlm.py`), where its stamp is the installed transformers."""
    stored = STORED_PARSERS_DIR / f"{script}.json"
    if not stored.is_file():
        return None
    table = json.loads(stored.read_text(encoding="utf-8"))
    return table if table["stamp"] == parser_stamp() else None


def rebuilt_parser(table: Mapping[str, Any], for_help: bool = True) -> argparse.ArgumentParser:
    """An argparse parser with the options of a stored table: for `--help-all` (the defaults as the script's parser
    prints them), or to read a command line as the script's parser reads it (`VALUE_TYPES`, choices), setting only
    what it gives."""
    parser = _Parser(formatter_class=argparse.ArgumentDefaultsHelpFormatter, epilog=table["epilog"], add_help=False)
    for option in table["options"]:
        if option["action"] == "help":
            parser.add_argument(*option["flags"], action="help", help=option["help"])
            continue
        settings = {"dest": option["dest"], "action": option["action"], "help": option["help"]}
        settings["default"] = option["default"] if for_help else argparse.SUPPRESS
        if option["action"] == "store":
            settings |= {"nargs": option["nargs"], "const": option["const"], "choices": option["choices"]}
            if not for_help and option["type"] in VALUE_TYPES:
                settings["type"] = VALUE_TYPES[option["type"]]
            if not for_help and option["type"] not in (None, "str"):
                settings["choices"] = None  # stored as text: the script's parser checks them
        parser.add_argument(*option["flags"], **settings)
    return parser


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are raised, never printed: the script's own parser says them."""

    def error(self, message: str):
        raise _NotRead(message)


class _NotRead(Exception):
    """A command line the stored parser leaves to the script's parser."""


def given_values(table: Mapping[str, Any], argv: Sequence[str]) -> tuple[dict[str, Any], list[str]] | None:
    """The options a command line gives, read as the script's parser reads them, and the arguments no option takes;
    `None` where the parser would refuse the line (its own message then says why)."""
    try:
        namespace, unknown = rebuilt_parser(table, for_help=False).parse_known_args(list(argv))
    except (_NotRead, argparse.ArgumentError):
        return None
    return vars(namespace), unknown


def help_all(table: Mapping[str, Any]) -> str:
    """`--help-all`: every option, as the script's parser prints it."""
    return rebuilt_parser(table).format_help()


# --- answering ---


@contextlib.contextmanager
def package_without_init() -> Iterator[None]:
    """Within the block, modules of `roformer_hf` are imported without its `__init__` (which imports torch and
    transformers); after it they are forgotten, so that the run imports the package whole."""
    if "roformer_hf" in sys.modules:  # imported already (a test, or the run itself): use it
        yield
        return
    package = types.ModuleType("roformer_hf")
    package.__path__ = [str(PACKAGE_DIR)]
    sys.modules["roformer_hf"] = package
    try:
        yield
    finally:
        for name in [name for name in sys.modules if name.split(".")[0] == "roformer_hf"]:
            del sys.modules[name]


def first_checks(script: str, table: Mapping[str, Any], argv: Sequence[str]) -> None:
    """
    The checks that need no model, on the command line as the script's parser would read it (its demo's arguments
    first where it runs the demo), each the function that the run calls again after the imports: an option no script
    has, nothing asked (`check_requests`), an `--output_dir` the run may not write into
    (`output_folder.refuse_output_dir`), a data file the run reads that cannot be read (`files.check_data_file`), a
    tokenizer, config or checkpoint that is not there (`model_sources`). Raises `ScriptError`; returns where the line
    is left to the parser.
    """
    from roformer_hf.training.data.files import check_data_file, headerless_columns
    from roformer_hf.training.errors import ScriptError
    from roformer_hf.training.model_sources import check_config_source, check_tokenizer_source
    from roformer_hf.training.outputs.output_folder import refuse_output_dir

    if runs_the_demo(argv):
        script_dir = str(Path(sys.argv[0]).resolve().parent)
        argv = [*(argument.replace(SCRIPT_DIR, script_dir) for argument in table["demo"]), *argv]
    read = given_values(table, argv)
    if read is None:
        return
    given, unknown = read
    if unknown:
        fields = (f"--{option['dest']}" for option in table["options"] if option["action"] != "help")
        raise ScriptError(unknown_options(unknown, fields))
    values = {}
    for option in table["options"]:  # the first action of a destination gives its default, as in argparse
        values.setdefault(option["dest"], option["default"])
    values |= given
    check_requests(script, values)
    refuse_output_dir(
        values["output_dir"],
        writes_a_model(script, values),
        values.get("overwrite_output_dir", False),
        values.get("resume_from_checkpoint"),
    )
    columns = headerless_columns(values.get("columns"))
    for name, reading in DATA_FILES_READ.get(script, {}).items():
        path = values.get(name)
        if path is None or Path(path).is_dir() or (reading is not None and not values.get(reading)):
            continue  # not read by this run, or a folder (a save_to_disk split, which the run reads to check)
        check_data_file(path, f"--{name}", columns)
    check_tokenizer_source(values)
    check_config_source(values)


def answer_first() -> None:
    """
    Answer the running script's command line where no model is needed, and exit: `--help`, `--help-all`, or one line
    for a mistake `first_checks` sees. Otherwise return, with nothing imported: the script goes on.
    """
    argv, script = sys.argv[1:], Path(sys.argv[0]).name
    table = stored_parser(script)
    if table is None or (argv and is_arguments_file(argv[0])):  # the help shows a file's values: the parser's
        return
    if HELP_ALL_OPTION in argv:
        sys.stdout.write(help_all(table))
        sys.exit(0)
    if set(HELP_OPTIONS) & set(argv):
        sys.stdout.write(table["help"])
        sys.exit(0)
    if shows_tracebacks():  # the run's own checks raise with their tracebacks
        return
    with package_without_init():
        from roformer_hf.training.errors import ScriptError

        try:
            first_checks(script, table, argv)
        except ScriptError as error:
            print(f"error: {error}", file=sys.stderr)
            sys.exit(1)
