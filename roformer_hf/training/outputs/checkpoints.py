"""What makes a checkpoint complete, and how the scripts write files whole.

transformers' `Trainer` writes a checkpoint file by file, none of them atomically and `trainer_state.json` last, and a
resume loads the optimizer, scheduler and RNG states only where their files exist: a checkpoint that lost
`optimizer.pt` resumed with a new Adam without a word, and one whose `trainer_state.json` was of a later step than its
weights trained nothing. So every checkpoint the scripts write gets a manifest, `checkpoint_manifest.json`, written
last: the step, and every file with its size and checksum (XXH3, 64 bits). A checkpoint is complete when its manifest
lists what a resume loads, every file it lists is there with that size and checksum, and the manifest,
`trainer_state.json` and the folder's name are of one step. Only a complete checkpoint is resumed from by
`--resume_from_checkpoint true`; one of the run's without a manifest is *unfinished* (the run stopped before writing
it), and is skipped, named. A checkpoint without a manifest (one of transformers' own Trainer, or an unfinished one)
is resumed from only when `--resume_from_checkpoint` names it: *unverified*, said in one line, once its files can be
read (`check_readable`); one that cannot be read is refused, naming the file.

XXH3 rather than a cryptographic hash: the manifest guards against accidents (a file cut short, lost, swapped for
another checkpoint's, changed on disk), not against tampering, since whoever can change a file can change the manifest
too. At the base shape (1.4 GiB of weights and Adam state) it adds 15% to the save where zlib's CRC-32 added 60% and
SHA-256 170% (`benchmarks/bench_checkpoint_manifest.py`, the numbers in docs/scripts.md).

Before a checkpoint is written, an earlier folder of its step (a damaged one that the resume skipped, or one past the
checkpoint a resume was given) is deleted, so that none of its files passes for part of the new one; a symbolic link in
its place is removed, never followed.

Files written whole: `atomic_path` gives a temporary name beside the file, renamed onto it once written, so that a
reader, or a process killed while writing, sees the old file or the new one, never half of one. The temporary file has
the mode a plain write gives (`0o666` less the umask; so do the weights, which safetensors writes 0o600:
`give_plain_modes`), and the rename replaces a symbolic link in the file's place rather than writing through it. Every
write first checks that the run still holds its output folder's lock (`locks.check_folder_held`).
"""

import fnmatch
import json
import logging
import os
import stat
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from safetensors import SafetensorError, safe_open

from ..errors import ScriptError
from .locks import check_folder_held
from .written_files import run_folder_number

logger = logging.getLogger(__name__)

CHECKSUM = "xxh3_64"  # the manifest's name for its checksums
READ_CHUNK_BYTES = 4 * 2**20
MANIFEST_NAME = "checkpoint_manifest.json"

# What a resume loads, each as the names any one of which will do (plain, sharded, FSDP and DeepSpeed layouts); a
# message names the first.
RESUME_STATE = (
    ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model_fsdp*"),
    ("optimizer.pt", "optimizer.bin", "optimizer_*", "global_step*"),
    ("scheduler.pt",),
    ("rng_state.pth", "rng_state_*.pth"),
    ("trainer_state.json",),
)


class DamagedCheckpoint(Exception):
    """What keeps a checkpoint from being resumed from, in words naming the file (`its optimizer.pt is missing`)."""


# --- files written whole ---


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """
    A temporary path beside `path` (same folder, same suffix) to write to; it is renamed onto `path` when the block
    ends without error (see the module docstring).
    """
    path = Path(path)
    check_folder_held(path)
    temporary = _new_file_beside(path)
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _new_file_beside(path: Path) -> Path:
    """An empty file of a name of its own beside `path` (two writers of one file never share one), created as a plain
    write creates a file: `tempfile.mkstemp` would make it 0o600, and the rename would keep that."""
    while True:
        temporary = path.with_name(f".{path.stem}.partial-{os.getpid()}-{os.urandom(4).hex()}{path.suffix}")
        try:
            os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666))
        except FileExistsError:
            continue
        return temporary


def give_plain_modes(folder: Path) -> None:
    """Give the weights files of `folder` the mode a plain write gives: safetensors writes them 0o600 whatever the
    umask, while the config.json and vocab.txt beside them follow it."""
    probe = _new_file_beside(folder / "mode-probe")
    try:
        mode = stat.S_IMODE(probe.stat().st_mode)
    finally:
        probe.unlink()
    for path in folder.glob("*.safetensors"):
        os.chmod(path, mode)


def write_json_atomically(path: str | Path, content: Any, **dump_options: Any) -> None:
    """Write `content` as JSON (UTF-8, `ensure_ascii=False`) through `atomic_path`."""
    with atomic_path(path) as temporary:
        temporary.write_text(json.dumps(content, ensure_ascii=False, **dump_options) + "\n", encoding="utf-8")


# --- writing checkpoints ---


def write_manifest(checkpoint: Path, step: int) -> None:
    """Write `checkpoint`'s manifest: the step, and the size and checksum of every file in it."""
    files = {
        path.relative_to(checkpoint).as_posix(): {"size": path.stat().st_size, CHECKSUM: file_checksum(path)}
        for path in checkpoint_files(checkpoint)
    }
    write_json_atomically(checkpoint / MANIFEST_NAME, {"global_step": step, "files": files}, indent=1)


def checkpoint_files(checkpoint: Path) -> list[Path]:
    """Every file of a checkpoint folder and its subfolders (FSDP, DeepSpeed), but its manifest and the temporary files
    of writes cut off by a kill; links not followed."""
    files = []
    for folder, _, names in os.walk(checkpoint):
        files += [Path(folder, name) for name in names if not Path(folder, name).is_symlink()]
    return sorted(path for path in files if path != checkpoint / MANIFEST_NAME and not is_partial_write(path))


def is_partial_write(path: Path) -> bool:
    """Whether `path` is the temporary file of an `atomic_path` write that a killed process left behind."""
    return path.name.startswith(".") and ".partial-" in path.name


def file_checksum(path: Path) -> str:
    """The XXH3 (64-bit) checksum of a file's bytes, as 16 hex digits, read in chunks into one buffer."""
    import xxhash  # the `train` extra's (datasets needs it too); the converter imports this module without it

    checksum, buffer = xxhash.xxh3_64(), memoryview(bytearray(READ_CHUNK_BYTES))
    with open(path, "rb", buffering=0) as file:
        while length := file.readinto(buffer):
            checksum.update(buffer[:length])
    return checksum.hexdigest()


# --- verifying checkpoints ---


def verify_checkpoint(checkpoint: str | Path) -> bool:
    """
    Check that `checkpoint` can be resumed from (see the module docstring). Returns `True` when its manifest matched,
    `False` when it has none and its files can be read (`check_readable`): it is unverified.

    Raises `DamagedCheckpoint` naming the first file found missing, cut short, changed or of another step.
    """
    checkpoint = Path(checkpoint)
    if not checkpoint.is_dir():
        raise DamagedCheckpoint("it is not a folder")
    if not (checkpoint / MANIFEST_NAME).exists():
        check_readable(checkpoint)
        return False
    _verify_with_manifest(checkpoint)
    return True


def check_readable(checkpoint: Path) -> None:
    """Raise `DamagedCheckpoint` naming the first file of a checkpoint without a manifest that a resume loads and that
    is missing, or that cannot be read as what its name says (`check_whole`)."""
    trainer_state_step(checkpoint)
    check_resume_state([path.name for path in checkpoint.iterdir()])
    for path in checkpoint_files(checkpoint):
        check_whole(path, path.relative_to(checkpoint).as_posix())


# Why `--resume_from_checkpoint true` passes by a checkpoint of the run without a manifest: every checkpoint the
# scripts write gets one, last, so one without was cut off (the run was killed between the Trainer's files and the
# manifest) or lost it, and whatever changed in it since cannot be found out.
UNFINISHED_CHECKPOINT = (
    f"it has no {MANIFEST_NAME}, which is written last: an unfinished checkpoint of this run (it stopped before "
    "writing the manifest, or the manifest was deleted), so nothing in it can be verified; to resume from it "
    "unverified, give its path to --resume_from_checkpoint"
)


def trainer_state_step(checkpoint: Path) -> int:
    """The step of `checkpoint/trainer_state.json`, the file transformers writes last."""
    path = checkpoint / "trainer_state.json"
    if not path.is_file():
        raise DamagedCheckpoint("its trainer_state.json, written last, is missing (the run stopped while saving it)")
    try:
        step = json.loads(path.read_text(encoding="utf-8"))["global_step"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise DamagedCheckpoint(f"its trainer_state.json is cut short or damaged ({reason(error)})") from None
    if not isinstance(step, int):
        raise DamagedCheckpoint(f"its trainer_state.json holds the step {step!r}, not a whole number")
    return step


def check_resume_state(names: list[str]) -> None:
    """Raise `DamagedCheckpoint` when `names` (top-level paths of a checkpoint) lack something a resume loads."""
    tops = {name.split("/")[0] for name in names}
    for alternatives in RESUME_STATE:
        if not any(fnmatch.filter(tops, pattern) for pattern in alternatives):
            raise DamagedCheckpoint(f"its {alternatives[0]} is missing")


def check_step(checkpoint: Path, step: int, what: str) -> None:
    """Raise `DamagedCheckpoint` when the folder's name says another step than `step` (`what` says whose)."""
    named = run_folder_number(checkpoint.name, "checkpoint")
    if named is not None and named != step:
        raise DamagedCheckpoint(f"{what}, its folder's name says {named} (copied from another checkpoint?)")


def check_whole(path: Path, name: str) -> None:
    """Raise `DamagedCheckpoint` for a file that is cut short or unreadable as what its name says it is: a JSON file
    not an object, safetensors' header against the file's size, the zip checksums of `torch.save`'s files, an empty
    vocab.txt."""
    try:
        if path.suffix == ".json":
            content = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(content, dict):
                raise DamagedCheckpoint(f"its {name} holds a JSON {type(content).__name__}, not an object")
        elif path.suffix == ".safetensors":
            with safe_open(path, "pt"):
                pass
        elif path.suffix in (".pt", ".pth", ".bin"):  # torch.save writes zip archives, a CRC-32 per member
            with zipfile.ZipFile(path) as archive:
                damaged_member = archive.testzip()
            if damaged_member is not None:
                raise DamagedCheckpoint(f"its {name} is damaged (a checksum error in {damaged_member})")
        elif path.name == "vocab.txt" and not path.read_text(encoding="utf-8").strip():
            raise DamagedCheckpoint(f"its {name} is empty")
    except (OSError, ValueError, SafetensorError, zipfile.BadZipFile) as error:
        raise DamagedCheckpoint(f"its {name} is cut short or damaged ({reason(error)})") from None


def reason(error: Exception) -> str:
    return str(error) or type(error).__name__


def checkpoint_problem(checkpoint: str | Path) -> str | None:
    """What keeps `checkpoint` from being resumed from, naming the file; `None` for a complete checkpoint."""
    try:
        verify_checkpoint(checkpoint)
    except DamagedCheckpoint as problem:
        return str(problem)
    return None


def is_complete_checkpoint(checkpoint: str | Path) -> bool:
    """Whether `checkpoint` can be resumed from: its manifest matches, or without one, its files can be read."""
    return checkpoint_problem(checkpoint) is None


def _verify_with_manifest(checkpoint: Path) -> None:
    step, files = _read_manifest(checkpoint)
    check_resume_state(list(files))
    check_step(checkpoint, step, f"its {MANIFEST_NAME} is of step {step}")
    for name, (size, _) in files.items():  # sizes first: a missing file is named before a long checksum is computed
        path = checkpoint / name
        if path.is_symlink():
            raise DamagedCheckpoint(f"its {name} is a symbolic link (to {os.readlink(path)}), not the file saved")
        if not path.is_file():
            raise DamagedCheckpoint(f"its {name} is missing")
        if path.stat().st_size != size:
            raise DamagedCheckpoint(
                f"its {name} has {path.stat().st_size:,} bytes where its manifest records {size:,} (cut short or "
                "replaced since it was saved)"
            )
    for name, (_, checksum) in files.items():
        if file_checksum(checkpoint / name) != checksum:
            raise DamagedCheckpoint(f"its {name} is not the file saved (its checksum differs from its manifest's)")
    state_step = trainer_state_step(checkpoint)
    if state_step != step:
        raise DamagedCheckpoint(f"its trainer_state.json is of step {state_step}, its manifest of step {step}")


def _read_manifest(checkpoint: Path) -> tuple[int, dict[str, tuple[int, str]]]:
    """The step and the files (name -> size, checksum) of a checkpoint's manifest."""
    try:
        manifest = json.loads((checkpoint / MANIFEST_NAME).read_text(encoding="utf-8"))
        files = {str(name): (int(entry["size"]), str(entry[CHECKSUM])) for name, entry in manifest["files"].items()}
        return int(manifest["global_step"]), files
    except KeyError as error:
        raise DamagedCheckpoint(f"its {MANIFEST_NAME} has no {error.args[0]!r} field") from None
    except (OSError, ValueError, TypeError, AttributeError) as error:
        raise DamagedCheckpoint(f"its {MANIFEST_NAME} cannot be read ({reason(error)})") from None


# --- choosing the checkpoint to resume ---


def last_complete_checkpoint(*folders: str | Path, announce: bool = True) -> str | None:
    """
    The newest complete `checkpoint-<step>` folder of `folders` (a run's own: checked against its record before), searched in
    the order given, each newest first; one without a manifest is an unfinished checkpoint of the run
    (`UNFINISHED_CHECKPOINT`), never chosen. With `announce`, one warning line per newer checkpoint skipped, naming
    its damaged file.
    """
    skipped = []
    for checkpoint in _checkpoints_newest_first(folders):
        try:
            if checkpoint.is_symlink():  # a run's own checkpoints are folders of its own (run_outputs refuses links)
                raise DamagedCheckpoint(
                    f"it is a symbolic link (to {os.readlink(checkpoint)}), not a folder of the run"
                )
            if checkpoint.is_dir() and not (checkpoint / MANIFEST_NAME).exists():
                raise DamagedCheckpoint(UNFINISHED_CHECKPOINT)
            verify_checkpoint(checkpoint)
        except DamagedCheckpoint as problem:
            skipped.append(f"skipping the checkpoint {checkpoint}: {problem}")
            continue
        if announce:
            for line in skipped:
                logger.warning(f"{line}; resuming from {checkpoint}, the newest complete one.")
        return str(checkpoint)
    if announce:
        for line in skipped:
            logger.warning(f"{line}.")
    return None


def _checkpoints_newest_first(folders: tuple[str | Path, ...]) -> Iterator[Path]:
    for folder in map(Path, folders):
        by_step = {
            step: path
            for path in folder.glob("checkpoint-*")
            if (step := run_folder_number(path.name, "checkpoint")) is not None
        }
        yield from (by_step[step] for step in sorted(by_step, reverse=True))


def announce_unverified(checkpoint: str | Path) -> None:
    """The one line for a checkpoint resumed from without a manifest: unverified, and what was checked instead."""
    step = trainer_state_step(Path(checkpoint))
    logger.warning(
        f"resuming from {checkpoint} unverified: it has no {MANIFEST_NAME} (a checkpoint of transformers' own Trainer, "
        "or one whose run stopped before writing it), so a file changed since it was saved cannot be found out; its "
        f"files are there and can be read, and its trainer_state.json is of step {step}."
    )


def check_given_checkpoint(checkpoint: str | Path) -> None:
    """
    Refuse a checkpoint given by path (`--resume_from_checkpoint <folder>`) that cannot be resumed from, in one line
    naming its damaged file and the newest complete checkpoint near it (`ScriptError`); one without a manifest is
    resumed from unverified, said in one line (`announce_unverified`).
    """
    checkpoint = Path(checkpoint)
    try:
        if any(run_folder_number(path.name, "checkpoint") is not None for path in checkpoint.glob("checkpoint-*")):
            raise DamagedCheckpoint("it is a run's folder, not one of its checkpoint-<step> folders")
        verified = verify_checkpoint(checkpoint)
    except DamagedCheckpoint as problem:
        newest = _nearest_complete_checkpoint(checkpoint)
        if newest is not None:
            advice = f"{newest} is complete: resume from that one"
        else:
            advice = "no complete checkpoint lies beside it: start the run again (without --resume_from_checkpoint)"
        raise ScriptError(
            f"--resume_from_checkpoint {checkpoint} cannot be resumed from: {problem}; {advice}."
        ) from None
    if not verified:
        announce_unverified(checkpoint)


def _nearest_complete_checkpoint(path: Path) -> str | None:
    """For advice: the newest complete checkpoint in `path` (a run's folder), beside it, or holding it (a file)."""
    if not path.is_dir():
        if is_complete_checkpoint(path.parent):
            return str(path.parent)
        path = path.parent
    return last_complete_checkpoint(path, *_folders_beside(path), announce=False)


def _folders_beside(checkpoint: Path) -> list[Path]:
    """The folders a checkpoint's siblings are in: its own, and for a stage of run_mlm.py every stage, last first."""
    parent = checkpoint.parent
    if run_folder_number(parent.name, "stage") is None:
        return [parent]
    stages = [path for path in parent.parent.glob("stage-*") if run_folder_number(path.name, "stage") is not None]
    return sorted(stages, key=lambda path: run_folder_number(path.name, "stage"), reverse=True)


__all__ = [
    "MANIFEST_NAME",
    "RESUME_STATE",
    "DamagedCheckpoint",
    "announce_unverified",
    "atomic_path",
    "check_given_checkpoint",
    "checkpoint_problem",
    "give_plain_modes",
    "is_complete_checkpoint",
    "last_complete_checkpoint",
    "verify_checkpoint",
    "write_json_atomically",
]
