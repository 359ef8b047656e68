"""What a run writes into its output folder, and how it keeps a user's earlier work whole: the folder checked before
anything is written (`output_folder` refuses what a run may not write into), the free-space check, every checkpoint
written whole (the Trainer's hooks; what makes one complete is `checkpoints`'), a final model that replaces the old one
file by file, and only its own files: no write, rename or delete follows a symbolic link out of the folder (see
`output_folder.refuse_foreign_run_folders`; files are written whole by `checkpoints.atomic_path`, which replaces a link
in a file's place)."""

import errno
import json
import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

from ..errors import ScriptError
from ..trainer_internals import around_checkpoint_weights
from .checkpoints import (
    MANIFEST_NAME,
    atomic_path,
    give_plain_modes,
    write_json_atomically,
    write_manifest,
)
from .interrupts import deferred_stops
from .locks import check_folder_held, output_dir_not_writable
from .output_folder import (
    earlier_run_outputs,
    is_resuming,
    refuse_untrusted_output_dir,
    refuse_what_output_dir_holds,
)
from .output_record import forget_entries, open_record, stale_record_line
from .written_files import run_folder_number

logger = logging.getLogger(__name__)


def check_output_dir(training_args: TrainingArguments, trains: bool = True) -> None:
    """
    Before anything is loaded or written: refuse an output folder a run may not write into (`output_folder`'s two
    halves of `refuse_output_dir`, with the line that its record is stale between them), check that it can be
    written, and open its record of what runs wrote there (`output_record`).

    Raises `ScriptError` naming the options that allow it, or the reason the folder cannot be written.
    """
    output_dir = Path(training_args.output_dir)
    overwrite = getattr(training_args, "overwrite_output_dir", False)
    refuse_untrusted_output_dir(output_dir)
    stale = stale_record_line(output_dir)  # said first: it is why files under a run's names count as the user's
    if stale is not None:
        logger.warning(stale)
    refuse_what_output_dir_holds(output_dir, trains, overwrite, training_args.resume_from_checkpoint)
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=output_dir, prefix=".write-test-"):
            pass
    except OSError as error:
        raise output_dir_not_writable(output_dir, error) from error
    if training_args.should_save:
        open_record(output_dir)


def prepare_output_dir(
    training_args: TrainingArguments, model: torch.nn.Module, steps_per_folder: Sequence[int | None] | None = None
) -> None:
    """
    Right before training: with `--overwrite_output_dir`, delete the earlier run's outputs (so that no old checkpoint
    is resumed from or rotated later); then check the free space (`check_free_space`, given `steps_per_folder`, by
    default `--max_steps` in output_dir).
    """
    with training_args.main_process_first(local=False, desc="clearing output_dir"):
        overwrite = getattr(training_args, "overwrite_output_dir", False)
        if overwrite and training_args.should_save and not is_resuming(training_args.resume_from_checkpoint):
            earlier = earlier_run_outputs(training_args.output_dir)
            for path in earlier:  # only what runs wrote (output_record): the user's files stay
                logger.warning(f"--overwrite_output_dir: deleting {path}")
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:  # a file, or a symbolic link: the link itself, never what it points to
                    path.unlink()
            forget_entries(training_args.output_dir, {path.name for path in earlier})
    if steps_per_folder is None:
        steps_per_folder = [training_args.max_steps if training_args.max_steps > 0 else None]
    check_free_space(training_args, model, steps_per_folder)


def check_free_space(
    training_args: TrainingArguments, model: torch.nn.Module, steps_per_folder: Sequence[int | None] = (None,)
) -> None:
    """
    Refuse to train when output_dir's disk cannot hold what the run writes (see `bytes_to_write`).

    Args:
        training_args (`TrainingArguments`): the run's arguments (save strategy, steps and limit).
        model (`torch.nn.Module`): the model to train.
        steps_per_folder (`Sequence`): the optimizer steps of each folder that keeps its own checkpoints (one per
            stage of run_mlm.py), `None` where unknown (epochs).
    """
    needed, parts = bytes_to_write(training_args, model, steps_per_folder)
    free = shutil.disk_usage(training_args.output_dir).free
    if free < needed:
        raise ScriptError(
            f"--output_dir {training_args.output_dir} has {free / 2**20:.1f} MiB free, but this run writes about "
            f"{needed / 2**20:.1f} MiB ({parts}): free some space, lower --save_total_limit or choose another "
            "--output_dir."
        )


def bytes_to_write(
    training_args: TrainingArguments, model: torch.nn.Module, steps_per_folder: Sequence[int | None] = (None,)
) -> tuple[int, str]:
    """
    The bytes a run writes at its peak and what they are, in words: the final model (twice while it replaces an earlier
    one), and every checkpoint kept at once, each the weights and Adam's two moments (3 x the parameter bytes):
    `--save_total_limit` per folder plus the one being written before the oldest is deleted, or every checkpoint
    without a limit (one where the number of steps is unknown: then it is a lower bound).
    """
    weights = sum(parameter.numel() * parameter.element_size() for parameter in model.parameters())
    final_copies = 2 if (Path(training_args.output_dir) / "model.safetensors").exists() else 1
    checkpoints = 0
    if training_args.save_strategy != "no":
        limit = training_args.save_total_limit
        for steps in steps_per_folder:
            saves = 1 if steps is None or steps <= 0 else math.ceil(steps / max(training_args.save_steps, 1))
            checkpoints += min(saves, limit + 1) if limit else saves
    needed = weights * (final_copies + 3 * checkpoints)
    parts = f"the final model, {weights / 2**20:.1f} MiB" + (
        " twice while it replaces the earlier one" * (final_copies > 1)
    )
    if checkpoints:
        parts += f", and {checkpoints} checkpoint{'s' * (checkpoints > 1)} of weights and optimizer state kept at once"
    return needed, parts


def save_metrics(trainer: Trainer, split: str, metrics: dict[str, Any], combined: bool = True) -> None:
    """`Trainer.save_metrics` with every file written through `atomic_path` (on the main process only)."""
    if not trainer.is_world_process_zero():
        return
    output_dir = Path(trainer.args.output_dir)
    write_json_atomically(output_dir / f"{split}_results.json", metrics, indent=4, sort_keys=True)
    if combined:
        all_results = output_dir / "all_results.json"
        # a link in its place is another run's results, not this folder's earlier ones
        earlier = {}
        if all_results.is_file() and not all_results.is_symlink():
            earlier = json.loads(all_results.read_text(encoding="utf-8"))
        write_json_atomically(all_results, {**earlier, **metrics}, indent=4, sort_keys=True)


def save_state(trainer: Trainer) -> None:
    """`Trainer.save_state` (trainer_state.json, with the log history) written through `atomic_path`."""
    if trainer.is_world_process_zero():
        with atomic_path(Path(trainer.args.output_dir) / "trainer_state.json") as temporary:
            trainer.state.save_to_json(str(temporary))


def save_model_atomically(trainer: Trainer, output_dir: str | Path | None = None) -> None:
    """
    `trainer.save_model` into a staging folder of its own inside `output_dir` (`.partial-model-<unique>`), whose files
    are then renamed into place one by one, weights last (each is the old or the new one, never half written); a
    stop signal waits until the renames are done. The staging folder is deleted whatever happens; when the disk is
    full the model is saved elsewhere (`rescue_final_model`) and a `ScriptError` says where. Every process
    calls it, as `save_model` needs.
    """
    output_dir = Path(output_dir or trainer.args.output_dir)
    if trainer.args.should_save:
        check_folder_held(output_dir)
    staging = output_dir / f"{STAGING_PREFIX}{_shared_unique_name()}"
    try:
        try:
            trainer.save_model(str(staging))
        except Exception as error:
            if not is_disk_full(error):
                raise
            shutil.rmtree(staging, ignore_errors=True)  # frees the space of what was written
            raise final_save_failed_error(output_dir, rescue_final_model(trainer, output_dir), error) from error
        if trainer.args.should_save:
            give_plain_modes(staging)
            with deferred_stops():
                for path in sorted(staging.iterdir(), key=lambda path: path.suffix == ".safetensors"):
                    os.replace(path, output_dir / path.name)
    finally:
        if trainer.args.should_save:
            shutil.rmtree(staging, ignore_errors=True)


# Staging folders of the final model; one left by a killed process is deleted by the next run holding the lock.
STAGING_PREFIX = ".partial-model-"


def _shared_unique_name() -> str:
    """A name unique to this save, the same on every process of a distributed run (they save into one folder)."""
    names = [f"{os.getpid()}-{os.urandom(4).hex()}"]
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.broadcast_object_list(names, src=0)
    return names[0]


def remove_stale_staging(output_dir: str | Path) -> None:
    """Delete staging folders that killed runs left in `output_dir` (call it only while holding its lock)."""
    for staging in Path(output_dir).glob(f"{STAGING_PREFIX}*"):
        if staging.is_symlink():
            staging.unlink()  # the link, not what it points to
        else:
            shutil.rmtree(staging, ignore_errors=True)


DISK_FULL_ERRORS = (errno.ENOSPC, errno.EDQUOT)


def is_disk_full(error: BaseException) -> bool:
    """Whether `error` says the disk (or the user's quota) is full; safetensors reports it in its message only."""
    if isinstance(error, OSError) and error.errno in DISK_FULL_ERRORS:
        return True
    return type(error).__name__ == "SafetensorError" and "No space left on device" in str(error)


def rescue_final_model(trainer: Trainer, output_dir: Path) -> Path | None:
    """
    Save the final model into a folder of the temporary directory (`TMPDIR`), else of the home folder, when
    `output_dir` is full: with `--save_strategy no` it is the only copy of the training. Returns the folder, or `None`
    when neither could hold it (or the run is distributed, whose processes would all have to join the save).
    """
    if trainer.args.world_size > 1:
        return None
    name = f"roformer_hf-rescued-{output_dir.resolve().name}-{time.strftime('%Y%m%d-%H%M%S')}"
    for parent in (Path(tempfile.gettempdir()), Path.home()):
        try:
            trainer.save_model(str(parent / name))
            return parent / name
        except Exception as error:
            logger.warning(f"could not save the final model to {parent / name} either: {error}")
    return None


def final_save_failed_error(output_dir: Path, rescued: Path | None, error: BaseException) -> ScriptError:
    """The one line for a final save that ran out of space; what was in output_dir before is unchanged."""
    if rescued is not None:
        saved = f"the trained model was saved to {rescued} instead"
    else:
        saved = "the trained model could not be saved anywhere else either"
    return ScriptError(
        f"no space left on device while saving the final model to {output_dir} ({error}); {saved}, and what "
        f"{output_dir} held before is unchanged: free some space and copy it there."
    )


# --- checkpoints written whole (what makes one complete: `checkpoints`) ---


def save_checkpoints_whole(trainer: Trainer, extra_files: Mapping[str, Any] | None = None) -> None:
    """
    Make `trainer` write every checkpoint into a folder of its own and verifiably: an earlier folder of its step is
    deleted first (`clear_checkpoint_folder`), `extra_files` (name -> JSON content) are written right after the weights,
    and the manifest last (`ManifestCallback`).
    """
    extra_files = dict(extra_files or {})

    def before(folder: Path) -> None:
        if run_folder_number(folder.name, "checkpoint") is not None:
            clear_checkpoint_folder(folder, trainer.args)

    def after(folder: Path) -> None:
        if run_folder_number(folder.name, "checkpoint") is not None and trainer.args.should_save:
            give_plain_modes(folder)
            for name, content in extra_files.items():
                write_json_atomically(folder / name, content, indent=2)

    around_checkpoint_weights(trainer, before, after)
    trainer.add_callback(ManifestCallback())


def clear_checkpoint_folder(checkpoint: Path, args: TrainingArguments) -> None:
    """
    Before the Trainer writes `checkpoint`: stop if the run lost its output folder, then delete an earlier folder of
    that name (its manifest first, so that no part of it passes for complete) or remove a symbolic link in its place
    without following it. Every process waits until this is done, since each writes its RNG state into the folder.
    """
    if args.should_save:
        check_folder_held(checkpoint)
        if checkpoint.is_symlink():
            logger.warning(
                f"removing the symbolic link {checkpoint} (to {os.readlink(checkpoint)}, which stays as it is) to "
                "write this run's checkpoint in its place"
            )
            checkpoint.unlink()
        elif checkpoint.is_dir():
            logger.info(f"replacing {checkpoint}, left from before this resume, with this run's checkpoint")
            (checkpoint / MANIFEST_NAME).unlink(missing_ok=True)
            shutil.rmtree(checkpoint)
        elif checkpoint.exists():
            checkpoint.unlink()
    _wait_for_every_process(args)


class ManifestCallback(TrainerCallback):
    """Writes the manifest of each checkpoint once all its files are written (`on_save` follows the Trainer's save)."""

    def on_save(self, args, state, control, **kwargs):
        _wait_for_every_process(args)  # each process writes its own rng_state_<rank>.pth
        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if args.should_save and checkpoint.is_dir():
            write_manifest(checkpoint, state.global_step)


def _wait_for_every_process(args: TrainingArguments) -> None:
    if args.world_size > 1 and torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()
