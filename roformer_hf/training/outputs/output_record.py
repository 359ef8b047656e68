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

A folder without a record (written before it existed, up to f2676ad): its `checkpoint-<n>` folders holding a file only
the Trainer writes (a checkpoint manifest, `trainer_state.json`, `optimizer.pt`, ...) or only files of a checkpoint's
names (one cut off while it was written), and its `stage-<n>` folders holding such checkpoints or results, are a
run's, with or without a record (`recognised_run_folders`), and where the folder holds `training_args.bin` or `trainer_state.json` (which only
the Trainer writes) beside a `config.json` of model_type roformer_hf (or none), every entry of a name a run writes is
taken as that run's, since nothing tells them apart from the user's: a README.md put there by hand before this record
existed is replaced like the card it stands beside. Elsewhere an entry of a name a run writes is the user's, and a run
that would write it is refused (`user_file_clashes`).
"""

import json
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
    """The record of `folder` (`{"files": [...], "user_files": [...] while open}`), or `None` when it has none or it
    is not a JSON object of lists (then the folder counts as one without a record)."""
    path = Path(folder) / RECORD_NAME
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    lists = isinstance(record, dict) and all(isinstance(record.get(key, []), list) for key in ("files", "user_files"))
    return record if lists else None


def run_entries(folder: str | Path) -> set[str]:
    """The names of the entries at the top of `folder` that runs of the scripts wrote (see the module docstring)."""
    folder = Path(folder)
    if not folder.is_dir():
        return set()
    present = {entry.name for entry in folder.iterdir()}
    ours = {name for name in present if name.startswith(RUN_ONLY_PREFIXES)} | recognised_run_folders(folder)
    record = read_record(folder)
    if record is None:
        if _holds_a_finished_run(folder):
            ours |= {name for name in present if is_written(Path(name))}
        return ours
    ours |= set(record.get("files", [])) & present
    if "user_files" in record:  # open: a run in progress, or killed
        user_files = set(record["user_files"])
        ours |= {name for name in present - user_files if is_written(Path(name))}
    return ours


def recognised_run_folders(folder: Path) -> set[str]:
    """The `checkpoint-<n>` folders of `folder` that hold a file only the Trainer writes (its state, the optimizer's,
    a checkpoint manifest), or only files of the names a checkpoint's files have (none: a run killed while writing its
    first), and the `stage-<n>` folders that hold such a checkpoint or results (none a symbolic link:
    `run_outputs.refuse_foreign_run_folders` says what becomes of those)."""
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
    entries = list(path.iterdir())
    if any((path / name).is_file() for name in TRAINER_ONLY_FILES):
        return True
    return all(entry.is_file() and is_checkpoint_file(entry.name) for entry in entries)  # empty, or cut off early


def _is_stage(path: Path) -> bool:
    return any(_is_checkpoint(sub) for sub in path.glob("checkpoint-*")) or any(path.glob("*_results.json"))


def _holds_a_finished_run(folder: Path) -> bool:
    if not ((folder / "training_args.bin").is_file() or (folder / "trainer_state.json").is_file()):
        return False
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return True
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
