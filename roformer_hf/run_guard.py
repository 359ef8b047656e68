"""What stands around a training run of the scripts, so that nothing it saved is lost: the output folder's lock
(`run_lock`), stop signals handled at step boundaries (`interrupts`), and a full disk reported in one line that says
what is still there and how to resume, the final model saved elsewhere when it cannot be saved where asked.
"""

import errno
import logging
import signal
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from transformers import Trainer, TrainingArguments

from .interrupts import (
    TrainingInterrupted,
    handle_stop_signals,
    resume_advice,
    resume_command,
    stopped_at_once_message,
)
from .pickle_refusal import is_refused_pickle, refused_pickle_message
from .run_lock import lock_output_dir
from .script_utils import ScriptError, remove_stale_staging

logger = logging.getLogger(__name__)

DISK_FULL_ERRORS = (errno.ENOSPC, errno.EDQUOT)
REFUSED_PICKLE_FIX = (
    "resume from another checkpoint (--resume_from_checkpoint <folder>), or delete this one if you did not write it."
)


def is_disk_full(error: BaseException) -> bool:
    """Whether `error` says the disk (or the user's quota) is full; safetensors reports it in its message only."""
    if isinstance(error, OSError) and error.errno in DISK_FULL_ERRORS:
        return True
    return type(error).__name__ == "SafetensorError" and "No space left on device" in str(error)


@contextmanager
def guard_run(training_args: TrainingArguments, script: str, argv: Sequence[str]) -> Iterator[None]:
    """
    Hold the lock of `--output_dir` (deleting the staging folders of killed runs), turn SIGINT/SIGTERM into a stop at
    a step boundary, and a full disk into a `ScriptError` naming the newest complete checkpoint and the resume
    command.

    Args:
        training_args (`TrainingArguments`): the run's arguments.
        script (`str`): the script's file name, for the resume command.
        argv (`Sequence[str]`): the run's arguments without the program name, for the resume command.
    """
    with lock_output_dir(training_args):
        if training_args.should_save:
            remove_stale_staging(training_args.output_dir)
        with handle_stop_signals(training_args.output_dir, resume_command(script, argv)):
            try:
                yield
            except KeyboardInterrupt as error:  # stopped at once: say what is left while the run's folder is known
                status = getattr(error, "exit_status", 128 + signal.SIGINT)
                raise TrainingInterrupted(stopped_at_once_message(error), status - 128) from error
            except Exception as error:
                if is_refused_pickle(error):  # a checkpoint's optimizer, scheduler or RNG state, on resume
                    raise ScriptError(refused_pickle_message(error, fix=REFUSED_PICKLE_FIX)) from error
                if not is_disk_full(error):
                    raise
                where = getattr(error, "filename", None) or training_args.output_dir
                raise ScriptError(
                    f"no space left on device while writing {where}: free some space; {resume_advice()}"
                ) from error


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


__all__ = ["final_save_failed_error", "guard_run", "is_disk_full", "rescue_final_model"]
