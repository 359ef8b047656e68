"""The record of what runs wrote in an output folder, so that a later run (`--overwrite_output_dir` included) replaces
or deletes only those files, never a file of the user's that lies beside them (a README.md, a modeling.py, a
vocab.txt, notes).

Every training run keeps `RECORD_NAME` in its output folder. When the run starts (`open_record`, once the folder's
lock is held and nothing of the user's has a name the run writes) the record is *open*: it lists the files earlier
runs wrote (`files`) and every other entry then in the folder (`user_files`); while it is open, an entry that is in
neither and has a name a run writes (`written_files.is_written`) is this run's. When the run ends, however it ends
(`close_record`, from `script_runner.guard_run`), those entries join `files` and `user_files` is dropped: from then on
only what `files` names is a run's. A run killed with SIGKILL leaves its record open, and the next run counts it the
same way, so nothing it wrote passes for the user's.

Where a record is kept, it alone says which entries are a run's, and of the names it lists only those a run writes
(a notes.txt listed by hand stays the user's). A record that is a symbolic link (another folder's) or not one these
scripts write (they write it whole, so it was broken by hand) is refused (`refuse_untrusted_record`), and so is a file
of the user's inside a checkpoint, stage or TensorBoard (`runs/`) folder of a run, which a run deletes whole
(`user_files_in_run_folders`).

A folder without a record (written before it existed, up to f2676ad): its `checkpoint-<n>` folders that are empty or
hold a file only the Trainer writes (a checkpoint manifest, `trainer_state.json`, `optimizer.pt`, ...), and its
`stage-<n>` folders holding such checkpoints or a Trainer's state, are a run's (`recognised_run_folders`), and where
the folder holds `training_args.bin` or `trainer_state.json` (which only the Trainer writes) beside a `config.json` of
model_type roformer_hf, every entry of a name a run writes is taken as that run's, since nothing tells them apart from
the user's: a README.md put there by hand before this record existed is replaced like the card it stands beside.
Elsewhere an entry of a name a run writes is the user's, and a run that would write it is refused
(`user_file_clashes`).
"""

import json
import os
import re
from pathlib import Path

from ..errors import ScriptError
from .checkpoint_checks import MANIFEST_NAME
from .checkpoints import write_json_atomically
from .locks import LOCK_FILE_NAME
from .written_files import is_checkpoint_file, is_written

RECORD_NAME = ".roformer_hf_outputs.json"
# Entries only a run of the scripts makes (its lock, the staging folders of its final model, its write test).
RUN_ONLY_PREFIXES = (LOCK_FILE_NAME, ".partial-model-", ".write-test-", RECORD_NAME)


def read_record(folder: str | Path) -> dict | None:
    """The record of `folder` (`{"files": [...], "user_files": [...] while open}`), or `None` when it has none, it is
    a symbolic link or it is not a JSON object of lists of names (`refuse_untrusted_record` refuses those two)."""
    path = Path(folder) / RECORD_NAME
    if path.is_symlink():  # another folder's record (refused by `refuse_untrusted_record`)
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    lists = isinstance(record, dict) and all(
        isinstance(record.get(key, []), list) and all(isinstance(name, str) for name in record.get(key, []))
        for key in ("files", "user_files")
    )
    return record if lists else None


def run_entries(folder: str | Path) -> set[str]:
    """The names of the entries at the top of `folder` that runs of the scripts wrote (see the module docstring)."""
    folder = Path(folder)
    if not folder.is_dir():
        return set()
    present = {entry.name for entry in folder.iterdir()}
    ours = {name for name in present if name.startswith(RUN_ONLY_PREFIXES)}
    record = read_record(folder)
    if record is None:
        ours |= recognised_run_folders(folder)
        if _holds_a_finished_run(folder):
            ours |= {name for name in present if is_written(Path(name))}
        return ours
    # Of the names it lists, only those a run writes: a user's notes.txt listed by hand is no run's to delete. An
    # empty checkpoint folder holds nothing to lose: a run's, listed or not.
    ours |= {name for name in set(record.get("files", [])) & present if is_written(Path(name))}
    ours |= {name for name in recognised_run_folders(folder) if not any((folder / name).iterdir())}
    if "user_files" in record:  # open: a run in progress, or killed
        user_files = set(record["user_files"])
        ours |= {name for name in present - user_files if is_written(Path(name))}
    return ours


def recognised_run_folders(folder: Path) -> set[str]:
    """In a folder without a record: the `checkpoint-<n>` folders of `folder` that are empty or hold a file only the
    Trainer writes (its state, the optimizer's, a checkpoint manifest), and the `stage-<n>` folders that hold such a
    checkpoint or a Trainer's state (none a symbolic link: `run_outputs.refuse_foreign_run_folders` says what becomes
    of those). A folder of model files alone (a user's copy of a model, named `checkpoint-7`) is the user's; where a
    record is kept, it alone says which folders are a run's, but for empty ones."""
    checks = {"checkpoint": _is_checkpoint, "stage": _is_stage}
    names = set()
    for path in folder.iterdir():
        kind = re.fullmatch(r"(checkpoint|stage)-\d+", path.name)
        if kind and not path.is_symlink() and path.is_dir() and checks[kind.group(1)](path):
            names.add(path.name)
    return names


# Files only the Trainer writes into a checkpoint: a folder holding one (or nothing) is a checkpoint, whole or cut off.
TRAINER_ONLY_FILES = (MANIFEST_NAME, "trainer_state.json", "optimizer.pt", "scheduler.pt", "training_args.bin")


def _is_checkpoint(path: Path) -> bool:
    return any((path / name).is_file() for name in TRAINER_ONLY_FILES) or not any(path.iterdir())


def _is_stage(path: Path) -> bool:
    return any(_is_checkpoint(sub) for sub in path.glob("checkpoint-*")) or (path / "trainer_state.json").is_file()


def _holds_a_finished_run(folder: Path) -> bool:
    """A Trainer's files beside the config.json of a roformer_hf model: a finished run's (a user's trainer_state.json
    or training_args.bin alone makes no folder a run's)."""
    if not ((folder / "training_args.bin").is_file() or (folder / "trainer_state.json").is_file()):
        return False
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and config.get("model_type") == "roformer_hf"


def open_record(folder: str | Path) -> None:
    """At the start of a run that holds the folder's lock: record the files of earlier runs and every other entry
    (the user's), so that what appears from now on with a name a run writes counts as this run's."""
    folder = Path(folder)
    ours = run_entries(folder)
    present = {entry.name for entry in folder.iterdir()}
    earlier = (read_record(folder) or {}).get("files", [])  # names gone since stay: a record changes only by runs
    record = {"files": _recorded(ours | set(earlier)), "user_files": sorted(present - ours)}
    write_json_atomically(folder / RECORD_NAME, record, indent=1)


def close_record(folder: str | Path) -> None:
    """When a run ends: what it wrote joins the files of earlier runs, and the record says only those are a run's."""
    folder = Path(folder)
    record = read_record(folder)
    if record is None or "user_files" not in record:
        return
    files = _recorded(run_entries(folder) | set(record.get("files", [])))
    write_json_atomically(folder / RECORD_NAME, {"files": files}, indent=1)


def _recorded(names: set[str]) -> list[str]:
    """What the record lists: the lock, the record and staging folders are a run's by their names alone."""
    return sorted(name for name in names if not name.startswith(RUN_ONLY_PREFIXES))


def forget_entries(folder: str | Path, names: set[str]) -> None:
    """Take `names` (deleted by `--overwrite_output_dir`) out of an open record's files."""
    record = read_record(folder)
    if record is not None:
        record["files"] = sorted(set(record.get("files", [])) - names)
        write_json_atomically(Path(folder) / RECORD_NAME, record, indent=1)


def user_file_clashes(output_dir: str | Path, trains: bool = True) -> list[str]:
    """The entries at the top of `output_dir` that no run wrote (`run_entries`) and that a training run would write
    over or delete (a user's README.md, modeling.py, vocab.txt, config.json, ...), or a run that only evaluates or
    predicts (`trains=False`: a user's all_results.json, predictions.jsonl, ...)."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    ours = run_entries(output_dir)
    # By name too: under torchrun the main rank takes the lock (and writes the record) while another rank checks the
    # folder, so those can appear between run_entries' listing and this one.
    return sorted(
        entry.name
        for entry in output_dir.iterdir()
        if entry.name not in ours
        and not entry.name.startswith(RUN_ONLY_PREFIXES)
        and is_written(Path(entry.name), trains)
    )


def user_files_refusal(output_dir: str | Path, clashes: list[str]) -> ScriptError:
    """The one line refusing an output folder where a run would write over the user's `clashes`; it never offers
    `--overwrite_output_dir`, which would replace them too."""
    shown = ", ".join(clashes[:4]) + (f" and {len(clashes) - 4} more" if len(clashes) > 4 else "")
    return ScriptError(
        f"--output_dir {output_dir} holds {shown}, which no run of these scripts wrote there and this run would "
        f"write over (its model, code, tokenizer, card, results or checkpoints have those names): choose another "
        f"--output_dir (a new folder), or move {'it' if len(clashes) == 1 else 'them'} out of {output_dir}."
    )


def refuse_untrusted_record(output_dir: str | Path) -> None:
    """
    Refuse (`ScriptError`) an output folder whose record is a symbolic link (to another folder's record, whose names
    would pass this folder's files for a run's) or is not a record these scripts write (broken by hand: it is always
    written whole), before anything trusts it or writes over it.
    """
    path = Path(output_dir) / RECORD_NAME
    if path.is_symlink():
        problem = f"a symbolic link to {os.readlink(path)}"
    elif path.exists() and read_record(output_dir) is None:
        problem = "not a record these scripts write (a JSON object of lists of names)"
    else:
        return
    raise ScriptError(
        f"--output_dir {output_dir} holds {RECORD_NAME}, {problem}: it records which files runs wrote there, the only "
        f"ones a run may replace or delete, so the folder's files cannot be told from yours: choose another "
        f"--output_dir, or put back the record the last run wrote."
    )


def user_files_in_run_folders(output_dir: str | Path) -> list[str]:
    """The entries inside the output folder's checkpoint, stage and TensorBoard (`runs/`) folders of earlier runs that
    no run writes there (a user's notes.txt in checkpoint-2 or in runs/): a run deletes those folders whole
    (`--overwrite_output_dir`, the Trainer's `--save_total_limit`), so it would delete them with it."""
    output_dir = Path(output_dir)
    found = []
    for name in sorted(run_entries(output_dir)):
        path = output_dir / name
        if re.fullmatch(r"(checkpoint|stage)-\d+|runs", name) and path.is_dir() and not path.is_symlink():
            found += [str(entry.relative_to(output_dir)) for entry in _foreign_entries(path)]
    return found


# What TensorBoard's writer (`--report_to tensorboard`) puts in `runs/`: event files, in a folder per run (and one per
# hyperparameter record inside it).
TENSORBOARD_EVENTS = re.compile(r"events\.out\.tfevents\..*")


def _foreign_entries(folder: Path) -> list[Path]:
    if folder.name == "runs":
        return [
            path for path in sorted(folder.rglob("*")) if not (path.is_dir() or TENSORBOARD_EVENTS.match(path.name))
        ]
    foreign = []
    for entry in sorted(folder.iterdir()):
        if folder.name.startswith("stage-") and re.fullmatch(r"checkpoint-\d+|runs", entry.name) and entry.is_dir():
            foreign += _foreign_entries(entry)
        elif folder.name.startswith("stage-"):
            foreign += [] if is_written(Path(entry.name)) else [entry]
        elif not (entry.is_file() and is_checkpoint_file(entry.name)):
            foreign.append(entry)
    return foreign


def foreign_entries_refusal(output_dir: str | Path, found: list[str]) -> ScriptError:
    """The one line refusing a folder where an earlier run's checkpoint or stage folder holds a file of the user's."""
    shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    return ScriptError(
        f"--output_dir {output_dir} holds {shown}, which no run of these scripts wrote, inside a checkpoint, stage or "
        f"runs/ folder of an earlier run, which a run deletes whole (replacing that run, or keeping --save_total_limit "
        f"checkpoints): move "
        f"{'it' if len(found) == 1 else 'them'} out of {output_dir}, or choose another --output_dir."
    )
