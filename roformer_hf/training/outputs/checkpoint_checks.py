"""The checks of a checkpoint's files that need no manifest, and what a checkpoint without one gets: it is *unverified*.

A manifest (`checkpoints`) records every file's size and checksum once the checkpoint is whole, so that any change
since, even one flipped bit, is found out. Without one (a checkpoint written before roformer_hf wrote manifests) a file
changed or swapped since the save cannot be told apart from the one saved, and the checkpoint is resumed from only
after the checks that need no record, each of which finds out a kind of damage seen in practice:

- what a resume loads is there (`RESUME_STATE`), and every file is whole as what its name says: each JSON file an
  object, safetensors' header against the file's size, the zip checksums of `torch.save`'s files, `vocab.txt`
  non-empty UTF-8 text;
- `trainer_state.json` is of the folder's step, and the optimizer and the scheduler are of that step too: Adam's step
  count and the scheduler's last step (counted from the start of the run, so a stage of run_mlm.py adds the steps of
  the stages before it, from `run_settings.json`) equal the step of `trainer_state.json`. Older `optimizer.pt` and
  `scheduler.pt` under a newer `trainer_state.json` trained on from the wrong step without a word;
- the weights (`model.safetensors`) load and are finite.

Weights of another step beside an optimizer and a scheduler of the right one, or a flipped bit in the weights that
leaves them finite, pass these checks: the line that announces an unverified resume says so.
"""

import fnmatch
import json
import os
import re
import zipfile
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from .pickle_refusal import is_refused_pickle

MANIFEST_NAME = "checkpoint_manifest.json"
CHECKPOINT_NAME = re.compile(r"checkpoint-(\d+)")

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


def verify_without_manifest(checkpoint: Path) -> int:
    """
    Check what can be checked of a checkpoint without a manifest (see the module docstring); returns its step.

    Raises `DamagedCheckpoint` naming the first file found missing, cut short, damaged or of another step.
    """
    step = trainer_state_step(checkpoint)
    check_resume_state([path.name for path in checkpoint.iterdir()])
    check_step(checkpoint, step, f"its trainer_state.json is of step {step}")
    for path in checkpoint_files(checkpoint):
        check_whole(path, path.relative_to(checkpoint).as_posix())
    check_optimizer_and_scheduler_step(checkpoint, step)
    check_weights_finite(checkpoint)
    return step


def checkpoint_files(checkpoint: Path) -> list[Path]:
    """Every file of a checkpoint folder and its subfolders (FSDP, DeepSpeed), but its manifest and the temporary files
    of writes cut off by a kill; links not followed."""
    files = []
    for folder, _, names in os.walk(checkpoint):
        files += [Path(folder, name) for name in names if not Path(folder, name).is_symlink()]
    return sorted(path for path in files if path != checkpoint / MANIFEST_NAME and not _is_partial(path))


def _is_partial(path: Path) -> bool:
    """Whether `path` is the temporary file of an `atomic_path` write that a killed process left behind."""
    return path.name.startswith(".") and ".partial-" in path.name


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
    match = CHECKPOINT_NAME.fullmatch(checkpoint.name)
    if match is not None and int(match.group(1)) != step:
        raise DamagedCheckpoint(f"{what}, its folder's name says {match.group(1)} (copied from another checkpoint?)")


def check_whole(path: Path, name: str) -> None:
    """Raise `DamagedCheckpoint` for a file that is cut short or unreadable as what its name says it is."""
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


def check_optimizer_and_scheduler_step(checkpoint: Path, step: int) -> None:
    """
    Raise `DamagedCheckpoint` when Adam's step count in `optimizer.pt` or the last step of `scheduler.pt` is not the
    step of `trainer_state.json` (plus the steps of earlier stages, for a stage of run_mlm.py). Under fp16, steps that
    overflowed are skipped by both, so there they may be fewer. Other optimizer layouts (FSDP, DeepSpeed) are not read.
    """
    expected, fewer_allowed = _steps_from_start(checkpoint, step)
    counts = {}
    if (checkpoint / "optimizer.pt").is_file():
        counts["optimizer.pt"] = _optimizer_step(_load_tensors(checkpoint / "optimizer.pt"))
    if (checkpoint / "scheduler.pt").is_file():
        counts["scheduler.pt"] = _load_tensors(checkpoint / "scheduler.pt").get("last_epoch")
    for name, count in counts.items():
        if count is not None and not _count_fits(count, step, expected, fewer_allowed):
            of_step = f"step {step}" if expected in (None, step) else f"step {step} ({expected} from the run's start)"
            raise DamagedCheckpoint(
                f"its {name} is of step {count}, its trainer_state.json of {of_step} (the {name} of another "
                "checkpoint?)"
            )


def _count_fits(count: int, step: int, expected: int | None, fewer_allowed: bool) -> bool:
    if expected is None:  # a later stage of a run that recorded no stages: the count only has a lower bound
        return count >= step
    return count == expected or (count < expected and fewer_allowed)


def _load_tensors(path: Path) -> dict:
    """A `torch.save` file of plain tensors and containers, mapped rather than read (only the values looked at are)."""
    try:
        content = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:
        if is_refused_pickle(error):
            raise DamagedCheckpoint(
                f"its {path.name} is not a plain tensor file (unpickling it would run code)"
            ) from None
        raise DamagedCheckpoint(f"its {path.name} cannot be read ({reason(error).splitlines()[0]})") from None
    if not isinstance(content, dict):
        raise DamagedCheckpoint(f"its {path.name} holds a {type(content).__name__}, not a state dictionary")
    return content


def _optimizer_step(optimizer_state: dict) -> int | None:
    """The most steps any parameter's state counts (Adam's `step`), or `None` for an optimizer that keeps none."""
    per_parameter = optimizer_state.get("state")
    if not isinstance(per_parameter, dict):
        return None
    steps = [state["step"] for state in per_parameter.values() if isinstance(state, dict) and "step" in state]
    return max(int(float(step)) for step in steps) if steps else None


def _steps_from_start(checkpoint: Path, step: int) -> tuple[int | None, bool]:
    """
    The optimizer steps from the start of the run to `checkpoint` (`None` where a stage's start is unknown), and
    whether fewer are possible (fp16, whose overflowing steps the optimizer and the scheduler skip), from the run's
    `run_settings.json`.
    """
    settings_file = checkpoint / "run_settings.json"
    try:
        settings = json.loads(settings_file.read_text(encoding="utf-8")) if settings_file.is_file() else {}
    except (OSError, ValueError):
        settings = {}
    fewer_allowed = settings.get("mixed_precision") == "fp16"
    stage = re.fullmatch(r"stage-(\d+)", checkpoint.parent.name)
    if stage is None or int(stage.group(1)) == 1:
        return step, fewer_allowed
    stages = settings.get("stages")
    try:  # 'max_seq_length:global_batch:steps,...', checked when the run started
        earlier = [int(part.split(":")[2]) for part in stages.split(",")][: int(stage.group(1)) - 1]
    except (AttributeError, IndexError, ValueError):
        return None, fewer_allowed
    return step + sum(earlier), fewer_allowed


def check_weights_finite(checkpoint: Path) -> None:
    """Raise `DamagedCheckpoint` when `model.safetensors` holds a NaN or an infinity (a flipped exponent bit)."""
    path = checkpoint / "model.safetensors"
    if not path.is_file():
        return
    try:
        with safe_open(path, "pt") as weights:
            names = weights.keys()
            for name in names:
                tensor = weights.get_tensor(name)
                if tensor.is_floating_point() and not torch.isfinite(tensor).all():
                    raise DamagedCheckpoint(f"its model.safetensors holds values that are not finite (in {name})")
    except (OSError, SafetensorError) as error:
        raise DamagedCheckpoint(f"its model.safetensors is cut short or damaged ({reason(error)})") from None


__all__ = [
    "CHECKPOINT_NAME",
    "MANIFEST_NAME",
    "RESUME_STATE",
    "DamagedCheckpoint",
    "checkpoint_files",
    "verify_without_manifest",
]
