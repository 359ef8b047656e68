"""One writer per output folder: a lock file that the scripts (and the converter) take before they read data or write
anything, so that a second run into the same folder is refused at once instead of mixing its outputs with the first's.

The lock is `fcntl.flock` on `<folder>/.roformer_hf.lock`, which records who holds it (process id, machine, start time,
command) for the refusal message. The kernel drops the lock when its process ends, however it ends (a crash, SIGKILL,
an out-of-memory kill), so a lock file left behind is stale by construction and the next run simply takes it over: no
process ids are guessed at. The file is deleted when the lock is released normally.

On a network file system the lock is as good as the file system's `flock`: NFSv4 and Lustre pass it between machines,
some older NFS mounts keep it per machine. There a run on another machine is not seen; the file still names it.
"""

import contextlib
import errno
import json
import os
import shlex
import socket
import sys
import time
from pathlib import Path
from types import TracebackType

from .errors import ScriptError
from .run_outputs import output_dir_not_writable

LOCK_FILE_NAME = ".roformer_hf.lock"


class FolderLockedError(ScriptError):
    """Another process holds the lock of the folder; the message names it."""


class FolderLock:
    """
    An exclusive lock on a folder, held from `acquire()` (or entering the `with` block) until `release()`.

    Args:
        folder (`str` or `Path`):
            The folder to lock; created if missing.
        option (`str`, defaults to `"--output_dir"`):
            How the folder was named to the user, for the refusal message.
        lock_file (`str` or `Path`, *optional*):
            The lock file; `<folder>/.roformer_hf.lock` by default. One beside the folder locks a folder that need not
            exist yet (the converter's output).
    """

    def __init__(self, folder: str | Path, option: str = "--output_dir", lock_file: str | Path | None = None):
        self.folder, self.option = Path(folder), option
        self.path = Path(lock_file) if lock_file is not None else self.folder / LOCK_FILE_NAME
        self._file = None

    def acquire(self) -> "FolderLock":
        """Take the lock, or raise `FolderLockedError` naming the process that holds it."""
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        while self._file is None:
            lock_file = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 (held open while locked)
            try:
                fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                lock_file.close()
                if error.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                    raise
                raise FolderLockedError(self._refusal()) from error
            if _same_file(lock_file, self.path):
                self._file = lock_file
            else:  # the holder deleted the file as we opened it: lock the new one
                lock_file.close()
        self._record_holder()
        return self

    def release(self) -> None:
        """Delete the lock file and drop the lock (deleting first, so nobody locks a file about to vanish)."""
        if self._file is None:
            return
        self.path.unlink(missing_ok=True)
        self._file.close()
        self._file = None

    def __enter__(self) -> "FolderLock":
        return self if self._file is not None else self.acquire()

    def __exit__(self, kind: type | None, error: BaseException | None, traceback: TracebackType | None) -> None:
        self.release()

    def _record_holder(self) -> None:
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "command": shlex.join(sys.argv),
        }
        self._file.seek(0)
        self._file.truncate()
        self._file.write(json.dumps(holder) + "\n")
        self._file.flush()

    def _refusal(self) -> str:
        try:
            holder = json.loads(self.path.read_text(encoding="utf-8"))
            who = f"process {holder['pid']} on {holder['host']}, started {holder['started']}"
        except (OSError, ValueError, KeyError):
            who = "another process"
        return (
            f"{self.option} {self.folder} is in use by another run ({who}; lock file {self.path}): wait for it to "
            f"finish or choose another {self.option}."
        )


def lock_output_dir(training_args) -> FolderLock | contextlib.nullcontext:
    """
    The lock of a script's `--output_dir`, taken now by the process that saves (`training_args.should_save`; the
    other processes of a distributed run share it). Use it as `with lock_output_dir(training_args): ...`.

    Raises `FolderLockedError` when another run holds it, `ScriptError` when the folder cannot be written.
    """
    if not training_args.should_save:
        return contextlib.nullcontext()
    try:
        return FolderLock(training_args.output_dir).acquire()
    except FolderLockedError:
        raise
    except OSError as error:
        raise output_dir_not_writable(training_args.output_dir, error) from error


def _same_file(opened, path: Path) -> bool:
    try:
        return os.fstat(opened.fileno()).st_ino == path.stat().st_ino
    except FileNotFoundError:
        return False


__all__ = ["LOCK_FILE_NAME", "FolderLock", "FolderLockedError", "lock_output_dir"]
