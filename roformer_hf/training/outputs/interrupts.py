"""Ctrl-C and SIGTERM during a training run: stop at the next step boundary with a complete checkpoint, and say how to
resume.

Clusters send SIGTERM some time before they kill a job, and a user stops a run with Ctrl-C; both used to end in a
`KeyboardInterrupt` traceback that did not say whether the folder could be resumed. Within `handle_stop_signals()`:

- the first SIGINT or SIGTERM during training is noted; `StopAtStepBoundary` (a callback of every trainer of the
  scripts) ends the current optimizer step, writes a checkpoint, and stops; `raise_if_stopped` (called after
  `train()`) then raises `TrainingInterrupted`, which carries the one-line message (checkpoint and resume command) and the exit status 128 + the signal (130 for Ctrl-C);
- a second signal, or one outside the training loop (loading data, tokenizing, evaluating), stops at once with
  `StoppedAtOnce`, a `KeyboardInterrupt`;
- in `deferred_stops()` (the renames of a final save) a signal waits until the block ends.

Under torchrun the processes agree on the step to stop at (an all-reduce of the stop request at every step), so they
write one checkpoint together whether one process or all got the signal; the first process prints the line, and the
resume command starts torchrun with as many processes.
"""

import logging
import os
import shlex
import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import TrainerCallback

from .checkpoints import is_complete_checkpoint, last_complete_checkpoint

logger = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped at a step boundary after a signal; the message says what was saved and how to resume. A
    `KeyboardInterrupt`, so that a caller of a script's `main()` (pytest, a notebook) stops as well."""

    def __init__(self, message: str, signal_number: int, announce: bool = True):
        super().__init__(message)
        self.exit_status = 128 + signal_number
        self.announce = announce  # False on all processes of a distributed run but the first: one line, not one each


class StoppedAtOnce(KeyboardInterrupt):
    """A signal that stops the run at once (a second one, or one outside the training loop)."""

    def __init__(self, signal_number: int):
        super().__init__(signal.Signals(signal_number).name)
        self.exit_status = 128 + signal_number


@dataclass
class _StopState:
    """What the signal handler and the callback share (one run per process at a time)."""

    signal_number: int | None = None
    in_training: bool = False
    deferred: bool = False
    output_dir: str | None = None
    command: str | None = None


_state = _StopState()


def _on_signal(signal_number: int, frame) -> None:
    if _state.deferred and _state.signal_number is None:
        _state.signal_number = signal_number
        return
    if _state.signal_number is not None or not _state.in_training:
        raise StoppedAtOnce(signal_number)
    _state.signal_number = signal_number
    logger.warning(
        f"{signal.Signals(signal_number).name}: stopping at the end of this step and saving a checkpoint "
        "(Ctrl-C again to stop at once, without one)."
    )


@contextmanager
def handle_stop_signals(output_dir: str | Path, command: str) -> Iterator[None]:
    """
    Within the block, SIGINT and SIGTERM stop training at a step boundary (see the module docstring).

    Args:
        output_dir (`str` or `Path`): the run's output folder, where the checkpoints to resume from are.
        command (`str`): the command that resumes the run (see `resume_command`), for the messages.
    """
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    previous = {number: signal.getsignal(number) for number in STOP_SIGNALS}
    _state.__init__(output_dir=str(output_dir), command=command)
    for number in STOP_SIGNALS:
        signal.signal(number, _on_signal)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        _state.__init__()


@contextmanager
def deferred_stops() -> Iterator[None]:
    """Hold back a stop signal until the block ends (for work that must not be cut in half, such as renames)."""
    was_deferred, _state.deferred = _state.deferred, True
    try:
        yield
    finally:
        _state.deferred = was_deferred
    if not was_deferred and _state.signal_number is not None and not _state.in_training:
        raise StoppedAtOnce(_state.signal_number)


class StopAtStepBoundary(TrainerCallback):
    """Ends training after the step during which a stop signal came, with a checkpoint (see the module docstring)."""

    def on_train_begin(self, args, state, control, **kwargs):
        _state.in_training = True

    def on_step_end(self, args, state, control, **kwargs):
        if _stop_requested_anywhere(args):
            control.should_save = True
            control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, **kwargs):
        _state.in_training = False


def raise_if_stopped(trainer) -> None:
    """
    Call after `trainer.train()`: raise `TrainingInterrupted` when training ended for a stop signal (raised here
    rather than in a callback, so that the other callbacks, the progress bar's included, have ended the training).
    """
    if _state.signal_number is not None:
        if trainer.args.world_size > 1 and torch.distributed.is_initialized():
            # torchrun kills the other processes when the first exits: all leave once the checkpoint is complete
            # (transformers' all-gather of the FLOP count at the end of train(), store_flos, orders that today; this keeps it so)
            torch.distributed.barrier()
        step = trainer.state.global_step
        checkpoint = Path(trainer.args.output_dir) / f"checkpoint-{step}"
        message = interrupted_message(checkpoint, step)
        raise TrainingInterrupted(message, _state.signal_number, announce=trainer.is_world_process_zero())


def _stop_requested_anywhere(args) -> bool:
    """Whether any process of the run got a stop signal (an all-reduce under torch.distributed)."""
    requested = _state.signal_number is not None
    if args.world_size > 1 and torch.distributed.is_available() and torch.distributed.is_initialized():
        flag = torch.tensor([_state.signal_number or 0], device=args.device)
        torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
        if int(flag.item()) and _state.signal_number is None:
            _state.signal_number = int(flag.item())
        requested = bool(flag.item())
    return requested


def interrupted_message(checkpoint: Path, step: int) -> str:
    """The line that closes a run stopped at a step boundary: the checkpoint written and the resume command."""
    name = signal.Signals(_state.signal_number).name
    if is_complete_checkpoint(checkpoint):
        return f"stopped by {name} after step {step}; the checkpoint {checkpoint} is complete: resume with {_state.command}"
    return f"stopped by {name} after step {step}, but no checkpoint could be written: {resume_advice()}"


def resume_advice() -> str:
    """Whether the run can be resumed, from which checkpoint and with which command."""
    if _state.output_dir is None:
        return "start the run again."
    folders = [Path(_state.output_dir), *sorted(Path(_state.output_dir).glob("stage-*"), reverse=True)]
    newest = last_complete_checkpoint(*folders, announce=False)
    if newest is None:
        return f"no complete checkpoint is saved in {_state.output_dir}; start the run again."
    return f"the newest complete checkpoint is {newest}: resume with {_state.command}"


def stopped_at_once_message(error: KeyboardInterrupt) -> str:
    """The line for a run stopped at once (a second Ctrl-C, or one outside training)."""
    return f"interrupted ({error or 'SIGINT'}) and stopped at once; {resume_advice()}"


def resume_command(script: str, argv: Sequence[str]) -> str:
    """
    The command that resumes a run started with `argv`: the same arguments with `--resume_from_checkpoint true`,
    launched as this run was (`python`, or `torchrun` with as many processes: a checkpoint of a data-parallel run
    resumed in one process would go on with another global batch).

    Args:
        script (`str`): the script's file name, e.g. `"run_mlm.py"`.
        argv (`Sequence[str]`): the run's arguments, without the program name.
    """
    argv = list(argv)
    if len(argv) == 1 and argv[0].endswith((".json", ".yaml", ".yml")):
        return f"{_launcher()} {shlex.join([script, argv[0]])} after setting resume_from_checkpoint: true in {argv[0]}"
    if "--resume_from_checkpoint" in argv:
        position = argv.index("--resume_from_checkpoint")
        del argv[position : position + 2]
    return f"{_launcher()} {shlex.join([script, *argv, '--resume_from_checkpoint', 'true'])}"


def _launcher() -> str:
    """How this process was launched, as the start of a command: `python`, or the torchrun command of as many
    processes (torchrun and `accelerate launch` set `WORLD_SIZE` and `LOCAL_WORLD_SIZE` in every process)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return "python"
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    if per_node == world_size:
        return f"torchrun --standalone --nproc_per_node {per_node}"
    return f"torchrun --nnodes {world_size // per_node} --nproc_per_node {per_node} --rdzv_endpoint <host:port>"


__all__ = [
    "StopAtStepBoundary",
    "StoppedAtOnce",
    "TrainingInterrupted",
    "deferred_stops",
    "handle_stop_signals",
    "raise_if_stopped",
    "resume_advice",
    "resume_command",
    "stopped_at_once_message",
]
