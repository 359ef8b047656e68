"""The record of what runs wrote in an output folder, so that a later run (`--overwrite_output_dir` included) replaces
or deletes only those files, never a file of the user's that lies beside them (a README.md, a modeling.py, a
vocab.txt, notes), and proves them by their content, not their names.

Every run of the scripts keeps `RECORD_NAME` in its output folder. When the run starts (`open_record`, once the
folder's lock is held and nothing of the user's has a name the run writes) the record is *open*: it lists the entries
of earlier runs (`files`) and every other entry then in the folder (`user_files`); while it is open, an entry that is
in neither and has a name a run writes (`written_files.is_written`) is this run's. When the run ends, however it ends
(`close_record`, from `script_runner.guard_run`), every entry of the run's is recorded by its content (`fingerprint`):
a file by its size, modification time and XXH3 digest, a folder (a checkpoint, a stage, TensorBoard's `runs/`) by the
size and time of every file in it. From then on an entry is a run's only while it matches its entry (`matches`):
whatever does not match, or is not listed, is the user's, whatever its name, and is never deleted or written over. So
files put under a run's names after `rm -rf OUT/*`, or beside a record copied into another folder, are the user's;
a record none of whose entries the folder still holds is *stale*, and a run says so (`stale_record_line`). A run
killed with SIGKILL leaves its record open, and the next run counts it the same way, so nothing it wrote passes for
the user's.

A folder matches while it still holds one of the files recorded in it unchanged (one cut short since is a damaged
file of the run's, which a resume skips). Inside it, a file it did not hold when recorded is the user's (a run
deletes the folder whole: `user_files_in_run_folders` refuses it), but for what a run of the scripts wrote there and
recorded in a record of its own (an evaluation's results written into a checkpoint folder: results join the record
of the folder they are written into).

A folder without this version's record is the user's: only the lock, the record and staging folders, which only a
run makes, are a run's there. A record that is a symbolic link (another folder's) or not one this version writes is
refused (`refuse_untrusted_record`).
"""

import json
import logging
import os
import re
from pathlib import Path, PurePath

from ..errors import ScriptError
from .checkpoints import CHECKSUM, file_checksum, is_partial_write, write_json_atomically
from .locks import LOCK_FILE_NAME
from .written_files import is_checkpoint_file, is_written, run_folder_number

logger = logging.getLogger(__name__)

RECORD_NAME = ".roformer_hf_outputs.json"
RECORD_VERSION = 2
# Entries only a run of the scripts makes (its lock, the staging folders of its final model, its write test).
RUN_ONLY_PREFIXES = (LOCK_FILE_NAME, ".partial-model-", ".write-test-", RECORD_NAME)
# TensorBoard's folder of event files (`--report_to tensorboard`), a run's folder like its checkpoints and stages.
TENSORBOARD_FOLDER = "runs"


def read_record(folder: str | Path) -> dict | None:
    """The record of `folder` (`{"version": 2, "files": {name: entry}, "user_files": [...] while open}`), or `None`
    when it has none, it is a symbolic link or it is not one this version writes (`refuse_untrusted_record` refuses
    those two)."""
    path = Path(folder) / RECORD_NAME
    if path.is_symlink():  # another folder's record (refused by `refuse_untrusted_record`)
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (isinstance(record, dict) and record.get("version") == RECORD_VERSION):
        return None
    files, user_files = record.get("files"), record.get("user_files", [])
    well_formed = (
        isinstance(files, dict)
        and all(isinstance(entry, dict) for entry in files.values())
        and isinstance(user_files, list)
        and all(isinstance(name, str) for name in user_files)
    )
    return record if well_formed else None


# --- an entry's content ---


def fingerprint(path: Path) -> dict | None:
    """What the record keeps of a run's entry: a file's size, modification time and XXH3 digest; a folder's files,
    each by its size and time (a checkpoint's content is digested by its own manifest). `None` for a symbolic link,
    which is never a run's file."""
    if path.is_symlink() or not path.exists():
        return None
    if path.is_dir():
        return {"files": {name: [size, time] for name, (size, time) in _folder_files(path).items()}}
    status = path.stat()
    return {"size": status.st_size, "mtime_ns": status.st_mtime_ns, CHECKSUM: _digest(path)}


def matches(path: Path, entry: dict) -> bool:
    """Whether the entry at `path` is still the one recorded as `entry` (see the module docstring)."""
    if path.is_symlink() or not path.exists():
        return False
    if "files" in entry:
        recorded, present = entry["files"], _folder_files(path) if path.is_dir() else None
        if present is None or not isinstance(recorded, dict):
            return False
        if not recorded:
            return not present
        return any(present.get(name) == tuple(value) for name, value in recorded.items() if isinstance(value, list))
    status = path.stat()
    return (
        path.is_file()
        and (status.st_size, status.st_mtime_ns) == (entry.get("size"), entry.get("mtime_ns"))
        and _digest(path) == entry.get(CHECKSUM)
    )


def _folder_files(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under `folder` (links not followed) by its path in it: size and modification time; the entries
    only a run makes and the temporary files of cut-off writes left out."""
    files = {}
    for parent, _, names in os.walk(folder):
        for name in names:
            path = Path(parent, name)
            if not (name.startswith(RUN_ONLY_PREFIXES) or is_partial_write(path)):
                status = path.lstat()
                files[path.relative_to(folder).as_posix()] = (status.st_size, status.st_mtime_ns)
    return files


_DIGESTS: dict[tuple, str] = {}


def _digest(path: Path) -> str:
    """A file's XXH3 digest, computed once a process for each version of the file (a run asks several times)."""
    status = path.stat()
    key = (str(path.resolve()), status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = file_checksum(path)
    return _DIGESTS[key]


# --- which entries are a run's ---


def run_entries(folder: str | Path) -> set[str]:
    """The names of the entries at the top of `folder` that runs of the scripts wrote (see the module docstring)."""
    folder = Path(folder)
    if not folder.is_dir():
        return set()
    present = {entry.name for entry in folder.iterdir()}
    ours = {name for name in present if name.startswith(RUN_ONLY_PREFIXES)}
    record = read_record(folder)
    if record is None:  # no record of this version: the user's folder
        return ours
    listed = {name for name in set(record["files"]) & present if is_written(Path(name))}
    if "user_files" in record:  # open: a run in progress, or killed
        user_files = set(record["user_files"])
        return ours | listed | {name for name in present - user_files if is_written(Path(name))}
    return ours | {name for name in listed if matches(folder / name, record["files"][name])}


def stale_record_line(folder: str | Path) -> str | None:
    """The line saying that `folder`'s record is stale (closed, listing entries of which the folder holds none as
    recorded: they were deleted or replaced), or `None`."""
    folder = Path(folder)
    record = read_record(folder)
    if record is None or "user_files" in record or not record["files"]:
        return None
    if any(matches(folder / name, entry) for name, entry in record["files"].items()):
        return None
    return (
        f"{folder / RECORD_NAME} is stale: none of the {len(record['files'])} entries it records runs wrote there is "
        f"still there as written (deleted or replaced since), so every file in {folder} counts as yours."
    )


def open_record(folder: str | Path) -> None:
    """At the start of a run that holds the folder's lock: record the entries of earlier runs by their content and
    every other entry (the user's), so that what appears from now on with a name a run writes counts as this run's."""
    folder = Path(folder)
    files = _fingerprints(folder, run_entries(folder), read_record(folder))
    present = {entry.name for entry in folder.iterdir()}
    record = {"version": RECORD_VERSION, "files": files, "user_files": sorted(present - set(files))}
    write_json_atomically(folder / RECORD_NAME, record, indent=1, sort_keys=True)


def close_record(folder: str | Path) -> None:
    """When a run ends: record every entry of the runs' by its content, and from then on only those that match."""
    folder = Path(folder)
    record = read_record(folder)
    if record is None or "user_files" not in record:
        return
    files = _fingerprints(folder, run_entries(folder), record)
    write_json_atomically(folder / RECORD_NAME, {"version": RECORD_VERSION, "files": files}, indent=1, sort_keys=True)


def _fingerprints(folder: Path, ours: set[str], record: dict | None) -> dict[str, dict]:
    """The record's files: each of `ours` by its content now, and the entries of `record` whose files are gone (a
    record changes only by what runs write, so a refused run leaves it as it was; a file that comes back under such a
    name is a run's only if it is the one recorded)."""
    earlier = (record or {}).get("files", {})
    files = {name: entry for name, entry in earlier.items() if not (folder / name).exists()}
    for name in _recorded(ours):
        entry = fingerprint(folder / name)
        if entry is not None:
            files[name] = entry
    return files


def _recorded(names: set[str]) -> set[str]:
    """What the record lists: the lock, the record and staging folders are a run's by their names alone."""
    return {name for name in names if not name.startswith(RUN_ONLY_PREFIXES)}


def forget_entries(folder: str | Path, names: set[str]) -> None:
    """Take `names` (deleted by `--overwrite_output_dir`) out of an open record's files."""
    record = read_record(folder)
    if record is not None:
        record["files"] = {name: entry for name, entry in record["files"].items() if name not in names}
        write_json_atomically(Path(folder) / RECORD_NAME, record, indent=1, sort_keys=True)


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
        f"--output_dir {output_dir} holds {shown}, which no run of these scripts wrote there as it is now, and this run "
        f"would write over (its model, code, tokenizer, card, results or checkpoints have those names): choose another "
        f"--output_dir (a new folder), or move {'it' if len(clashes) == 1 else 'them'} out of {output_dir}."
    )


def refuse_untrusted_record(output_dir: str | Path) -> None:
    """
    Refuse (`ScriptError`) an output folder whose record is a symbolic link (to another folder's record) or is not a
    record this version of the scripts writes (broken by hand: it is always written whole; or of an earlier version),
    before anything trusts it or writes over it.
    """
    path = Path(output_dir) / RECORD_NAME
    if path.is_symlink():
        problem = f"a symbolic link to {os.readlink(path)}"
    elif path.exists() and read_record(output_dir) is None:
        problem = (
            f"not a record these scripts write (a JSON object of version {RECORD_VERSION} recording each file by its "
            "size, time and digest)"
        )
    else:
        return
    raise ScriptError(
        f"--output_dir {output_dir} holds {RECORD_NAME}, {problem}: it records which files runs wrote there, the only "
        f"ones a run may replace or delete, so the folder's files cannot be told from yours: choose another "
        f"--output_dir, put back the record the last run wrote, or delete it (every file there then counts as yours)."
    )


def user_files_in_run_folders(output_dir: str | Path) -> list[str]:
    """The files inside the output folder's checkpoint, stage and TensorBoard (`runs/`) folders of earlier runs that
    no run wrote there (a user's notes.txt in checkpoint-2 or in runs/): a run deletes those folders whole
    (`--overwrite_output_dir`, the Trainer's `--save_total_limit`), so it would delete them with it."""
    output_dir = Path(output_dir)
    record = read_record(output_dir) or {"files": {}}
    found = []
    for name in sorted(run_entries(output_dir)):
        path = output_dir / name
        is_run_folder = run_folder_number(name) is not None or name == TENSORBOARD_FOLDER
        if is_run_folder and path.is_dir() and not path.is_symlink():
            found += [f"{name}/{relative}" for relative in _foreign_files(path, record)]
    return found


# What TensorBoard's writer (`--report_to tensorboard`) puts in `runs/`: event files, in a folder per run (and one per
# hyperparameter record inside it).
TENSORBOARD_EVENTS = re.compile(r"events\.out\.tfevents\..*")


def _foreign_files(folder: Path, record: dict) -> list[str]:
    """The files under a run's `folder` that it did not hold when recorded, nor a record inside it proves a run's;
    while the record is open (a run killed), those of the names a run writes there are a run's too."""
    recorded = record["files"].get(folder.name, {}).get("files", {})
    found = []
    for relative in sorted(_folder_files(folder)):
        if relative in recorded or _proven_by_a_record_inside(folder, PurePath(relative)):
            continue
        if "user_files" in record and _named_as_a_runs(PurePath(folder.name, relative)):
            continue
        found.append(relative)
    return found


def _proven_by_a_record_inside(folder: Path, relative: PurePath) -> bool:
    """Whether a record kept in `folder` or a folder under it (an evaluation's, written into a checkpoint) proves
    the file at `relative` a run's."""
    for depth in range(len(relative.parts)):
        inner = folder.joinpath(*relative.parts[:depth])
        if (inner / RECORD_NAME).is_file() and relative.parts[depth] in run_entries(inner):
            return True
    return False


def _named_as_a_runs(relative: PurePath) -> bool:
    """Whether a run writes the file at `relative` (from the output folder) inside its checkpoint, stage or runs/
    folder: for a record still open, whose new folders have no recorded content yet."""
    top, rest = relative.parts[0], relative.parts[1:]
    in_stage = run_folder_number(top, "stage") is not None
    if in_stage and len(rest) > 1 and (run_folder_number(rest[0], "checkpoint") is not None or rest[0] == "runs"):
        return _named_as_a_runs(PurePath(*rest))
    if in_stage:
        return len(rest) == 1 and is_written(PurePath(rest[0]))
    if top == TENSORBOARD_FOLDER:
        return TENSORBOARD_EVENTS.fullmatch(rest[-1]) is not None
    return len(rest) == 1 and is_checkpoint_file(rest[0])


def foreign_entries_refusal(output_dir: str | Path, found: list[str]) -> ScriptError:
    """The one line refusing a folder where an earlier run's checkpoint or stage folder holds a file of the user's."""
    shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    return ScriptError(
        f"--output_dir {output_dir} holds {shown}, which no run of these scripts wrote, inside a checkpoint, stage or "
        f"runs/ folder of an earlier run, which a run deletes whole (replacing that run, or keeping --save_total_limit "
        f"checkpoints): move "
        f"{'it' if len(found) == 1 else 'them'} out of {output_dir}, or choose another --output_dir."
    )
