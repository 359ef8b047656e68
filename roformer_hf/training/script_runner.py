"""How a script runs and ends: `run_script` turns a user's mistake into one line on stderr and a non-zero exit (no
traceback unless `ROFORMER_HF_DEBUG=1`), and `guard_run` holds the output folder's lock and the stop-signal handling
around the work, and `script_run` takes the steps every script takes before its own (`guard_run` among them)."""

import logging
import signal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from transformers import TrainingArguments, set_seed

from .cli import ModelArguments, demo_or_given_arguments
from .console import setup_logging
from .data.files import check_caches_writable
from .data.vocabulary_coverage import tokenizer_source, warn_if_many_unknown
from .errors import ScriptError
from .first_answers import shows_tracebacks, writes_a_model
from .machine.launch import check_distributed_launch
from .machine.threads import choose_threads
from .outputs.interrupts import (
    TrainingInterrupted,
    handle_stop_signals,
    resume_advice,
    resume_command,
    stopped_at_once_message,
)
from .outputs.locks import lock_output_dir
from .outputs.output_record import RECORD_NAME, close_record
from .outputs.pickle_refusal import is_refused_pickle, refused_pickle_message
from .outputs.resume import RunFinished
from .outputs.run_outputs import check_output_dir, is_disk_full, remove_stale_staging
from .publishing import check_publishing

logger = logging.getLogger(__name__)


# Errors caused by what the user asked for; anything else is a bug and keeps its traceback.
USER_ERRORS = (FileNotFoundError, NotADirectoryError, IsADirectoryError)


def run_script(main: Callable[[], object]) -> None:
    """
    Run a script's `main()`; a `ScriptError` or a missing file becomes one line on stderr and exit status 1, a stop
    signal (`interrupts`) one line and 128 + the signal (130 for Ctrl-C), a resume of a finished run
    (`resume.RunFinished`) one line and exit status 0. With the environment variable
    `ROFORMER_HF_DEBUG=1` the error keeps its traceback.

    Args:
        main (`Callable`):
            The script's entry point, called without arguments (it reads `sys.argv`).
    """
    if shows_tracebacks():
        main()
    else:
        try:
            main()
        except ScriptError as error:
            _exit_with_message(str(error))
        except USER_ERRORS as error:
            _exit_with_message(f"{error.strerror or error}: {error.filename}" if error.filename else str(error))
        except TrainingInterrupted as error:
            if not error.announce:
                raise StoppedExit(error.exit_status) from None
            _exit_with_message(str(error), error.exit_status, StoppedExit)
        except KeyboardInterrupt as error:  # Ctrl-C outside training, or a second one: stopped at once
            _exit_with_message(stopped_at_once_message(error), getattr(error, "exit_status", 130), StoppedExit)
        except RunFinished as finished:  # nothing to do, and nothing done: exit status 0
            if finished.announce:
                print(finished, file=sys.stderr)
    _leave_process_group()


def _leave_process_group() -> None:
    """Close torch.distributed at the end of a run. Left to interpreter exit, the gloo group's threads were seen to
    abort a rank ("terminate called without an active exception"), which torchrun reports as a failed run."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


class StoppedExit(SystemExit, KeyboardInterrupt):
    """The exit of a run stopped by a signal: the process ends with its status, and a caller of `run_script` in the
    same process (pytest, a notebook) stops too, as it would on the Ctrl-C itself."""


def _exit_with_message(message: str, status: int = 1, exit_type: type[SystemExit] = SystemExit) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise exit_type(status) from None


REFUSED_PICKLE_FIX = (
    "resume from another checkpoint (--resume_from_checkpoint <folder>), or delete this one if you did not write it."
)


@contextmanager
def _closing_the_record(training_args: TrainingArguments) -> Iterator[None]:
    """However the run ends, what it wrote joins the record of its output folder (`output_record.close_record`)."""
    try:
        yield
    finally:
        if training_args.should_save and Path(training_args.output_dir).is_dir():
            try:
                close_record(training_args.output_dir)
            except (
                OSError,
                ScriptError,
            ) as error:  # the folder lost or unwritable: said, not raised over the run's end
                logger.warning(f"could not update {Path(training_args.output_dir) / RECORD_NAME}: {error}")


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
    with lock_output_dir(training_args), _closing_the_record(training_args):
        if training_args.should_save:
            remove_stale_staging(training_args.output_dir)
        with handle_stop_signals(training_args.output_dir, resume_command(script, argv)):
            try:
                yield
            except TrainingInterrupted:
                raise
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


@contextmanager
def script_run(
    training_args: TrainingArguments,
    model_args: ModelArguments,
    script: str,
    argv: Sequence[str] | None,
    demo_arguments: Sequence[str],
    *,
    evaluates: bool = True,
) -> Iterator[None]:
    """
    The steps every script takes, in this order, before its own: logging at `--log_level`, the thread count, the
    checks of a distributed launch, then, inside `guard_run` (the folder's lock, stops at step boundaries), the checks
    of publishing, of the output folder and of the caches, and the seed.

    Args:
        training_args (`TrainingArguments`): the run's arguments.
        model_args (`ModelArguments`): the model's arguments (their `cache_dir`).
        script (`str`): the script's file name, for the resume command.
        argv (`Sequence[str]`, *optional*): the arguments `main` was given (`None`: those of `sys.argv`).
        demo_arguments (`Sequence[str]`): the script's demo, which `argv` runs when it names no data and no model.
        evaluates (`bool`, defaults to `True`): whether the run evaluates (the metrics' cache is then checked too).
    """
    setup_logging(training_args)
    choose_threads(training_args.threads)
    check_distributed_launch(training_args)
    with guard_run(training_args, script, demo_or_given_arguments(argv, demo_arguments, announce=False)):
        check_publishing(training_args)
        # checked for what the run writes: a model (`first_answers.writes_a_model`), or only results
        check_output_dir(training_args, writes_a_model(script, vars(training_args)))
        check_caches_writable(model_args.cache_dir, evaluates=evaluates)
        set_seed(training_args.seed)
        yield


def warn_if_vocabulary_misses_the_text(
    tokenizer: Any, raw_datasets: Mapping[str, Any], text_column: str, model_args: ModelArguments, training_args: Any
) -> None:
    """Where the run trains, say in one line when the tokenizer's vocabulary misses much of the training text
    (`vocabulary_coverage.warn_if_many_unknown`, the `[UNK]` line), on the main process only: every process reads
    the same text."""
    if training_args.do_train and training_args.process_index == 0:
        source, checkpoint = tokenizer_source(model_args), model_args.model_name_or_path
        warn_if_many_unknown(tokenizer, raw_datasets["train"], text_column, source, checkpoint)
