"""One writer per output folder, for the whole run whatever happens to the files in it: the lock that the scripts (and
the converter) take before they read data or write anything, so that a second run into the same folder is refused at
once instead of mixing its outputs with the first's, or deleting them (`--overwrite_output_dir`).

The lock is `fcntl.flock` on the output folder itself, a descriptor of the directory held open: deleting or replacing a
file in the folder (a cleanup of hidden or `*.lock` files) does not release it. Beside it, `<folder>/.roformer_hf.lock`
records who holds it (process id, machine, start time, command) for the refusal message; it is written again if a
cleanup takes it, and deleted when the lock is released. The kernel drops the lock when its process ends, however it
ends (a crash, SIGKILL, an out-of-memory kill), so nothing left behind blocks the next run: no process ids are guessed
at.

A folder deleted, moved or replaced while its run holds it (`rm -rf OUT` mid-run: the run would create a new one and
write on in it without a lock) is noticed at the run's next write: the writers call `check_folder_held`, which stops
the run with a `FolderLostError` before anything is written.

A file system that cannot lock a directory (NFS, whose `flock` needs a file open for writing) gets the lock on the
record file instead: there, deleting the record releases the lock, and `check_folder_held` stops the run at its next
write as it does for a deleted folder. The converter's lock is such a lock on a file beside its output folder, which
may not exist yet. On a network file system the lock is as good as its `flock`: NFSv4 and Lustre pass it between
machines, some older NFS mounts keep it per machine. There a run on another machine is not seen; the record still names
it.

Why not `filelock.FileLock` (installed with huggingface_hub): it locks a file, never a folder (a directory cannot be
opened for writing), so a cleanup that deletes `.roformer_hf.lock` (or `*.lock`) releases it and lets a second run in,
which is what locking the folder itself prevents (`tests/test_folder_lock.py`); and it does not notice that the folder
it guards was deleted or replaced (`check_folder_held`). What it would replace, the record-file lock of the converter
and of file systems without directory locks, is the loop of `_lock_record_file`: kept beside the folder lock so that
both share the record and its checks.
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

from ..errors import ScriptError

LOCK_FILE_NAME = ".roformer_hf.lock"

# The errors of a `flock` that another process holds; any other error of a directory's `flock` means that its file
# system cannot lock directories (NFS: EBADF; others: ENOLCK, EOPNOTSUPP, EINVAL).
HELD_ELSEWHERE = (errno.EWOULDBLOCK, errno.EACCES)


class FolderLockedError(ScriptError):
    """Another process holds the lock of the folder; the message names it."""


class FolderLostError(ScriptError):
    """The folder of a held lock was deleted or replaced, or (a lock on the record file) the record was."""


class FolderLock:
    """
    An exclusive lock on a folder, held from `acquire()` (or entering the `with` block) until `release()`.

    Args:
        folder (`str` or `Path`):
            The folder to lock; created if missing.
        option (`str`, defaults to `"--output_dir"`):
            How the folder was named to the user, for the messages.
        lock_file (`str` or `Path`, *optional*):
            A file beside the folder to lock instead of the folder itself, for a folder that need not exist yet (the
            converter's output). By default the folder is locked, and `<folder>/.roformer_hf.lock` records the holder.
    """

    def __init__(self, folder: str | Path, option: str = "--output_dir", lock_file: str | Path | None = None):
        self.folder, self.option = Path(folder), option
        self.path = Path(lock_file) if lock_file is not None else self.folder / LOCK_FILE_NAME
        self._locks_folder = lock_file is None
        # Descriptors held open while locked: the folder's (flocked where its file system can; open in any case, so
        # that a folder made again in its place, even with its inode number, is told apart) and the record file's.
        self._folder: int | None = None
        self._record: int | None = None
        self._folder_locked = False

    def acquire(self) -> "FolderLock":
        """Take the lock, or raise `FolderLockedError` naming the process that holds it."""
        refuse_dangling_link(self.path.parent, self.option)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            if self._locks_folder:
                self._folder = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                self._folder_locked = self._lock_folder()
            if self._folder_locked:
                self._record = _open_record(self.path)
            else:  # the converter's lock, or a file system that cannot lock a folder
                self._record = self._lock_record_file()
            self._record_holder()
        except BaseException:
            self._close()
            raise
        _held_locks.append(self)
        return self

    def release(self) -> None:
        """Delete the record and drop the lock (deleting first, so nobody locks a record about to vanish)."""
        if self._record is None:
            return
        _held_locks.remove(self)
        if _same_file(self._record, self.path):  # ours, not one that replaced it
            self.path.unlink(missing_ok=True)
        self._close()

    def check_held(self) -> None:
        """
        Raise `FolderLostError` if the folder was deleted, moved or replaced since the lock was taken, or (a lock on
        the record file) the record was; write the record again where only the record of a folder lock is gone.
        """
        if self._record is None:
            return
        if self._folder is not None and not _same_file(self._folder, self.folder):
            raise FolderLostError(self._lost_message(folder_lost=True))
        if _same_file(self._record, self.path):
            return
        if not self._folder_locked:
            raise FolderLostError(self._lost_message(folder_lost=False))
        with contextlib.suppress(OSError):  # the record only names the holder: the lock holds without it
            record = _open_record(self.path)
            os.close(self._record)
            self._record = record
            self._record_holder()

    def __enter__(self) -> "FolderLock":
        return self if self._record is not None else self.acquire()

    def __exit__(self, kind: type | None, error: BaseException | None, traceback: TracebackType | None) -> None:
        self.release()

    def _close(self) -> None:
        for descriptor in {self._record, self._folder} - {None}:
            os.close(descriptor)
        self._folder = self._record = None
        self._folder_locked = False

    def _lock_folder(self) -> bool:
        """flock the folder itself; `False` where its file system cannot lock a directory."""
        try:
            _lock(self._folder)
        except FolderLockedError:
            raise FolderLockedError(self._refusal()) from None
        except OSError:
            return False
        return True

    def _lock_record_file(self) -> int:
        while True:
            descriptor = _open_record(self.path)
            try:
                _lock(descriptor)
            except FolderLockedError:
                os.close(descriptor)
                raise FolderLockedError(self._refusal()) from None
            except OSError:
                os.close(descriptor)
                raise
            if _same_file(descriptor, self.path):
                return descriptor
            os.close(descriptor)  # the holder deleted the file as we opened it: lock the new one

    def _record_holder(self) -> None:
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "command": shlex.join(sys.argv),
        }
        os.ftruncate(self._record, 0)
        os.pwrite(self._record, (json.dumps(holder) + "\n").encode("utf-8"), 0)

    def _refusal(self) -> str:
        try:
            holder = json.loads(self.path.read_text(encoding="utf-8"))
            who = f"process {holder['pid']} on {holder['host']}, started {holder['started']}"
        except (OSError, ValueError, KeyError, TypeError):
            who = "another process"
        return (
            f"{self.option} {self.folder} is in use by another run ({who}; lock file {self.path}): wait for it to "
            f"finish or choose another {self.option}."
        )

    def _lost_message(self, folder_lost: bool) -> str:
        if folder_lost:
            return (
                f"{self.option} {self.folder} was deleted, moved or replaced while this run was writing to it: the run "
                "stops here rather than write into a folder it holds no lock on; start it again (if you moved the "
                "folder, resume from a checkpoint at its new place with --resume_from_checkpoint <its path>)."
            )
        return (
            f"the lock file {self.path} of {self.option} {self.folder} was deleted or replaced while this run held it "
            "(on this file system the lock is on that file), so another run may be writing the folder: the run stops "
            "here rather than mix its files with another's; check what else writes the folder, then resume "
            "(--resume_from_checkpoint true) or start again."
        )


# The locks this process holds, for `check_folder_held`.
_held_locks: list[FolderLock] = []


def check_folder_held(path: str | Path) -> None:
    """
    Before writing `path`: raise `FolderLostError` (one line, naming the folder and the way out) when it lies in a
    folder this process locked that has been deleted, moved or replaced since. Paths outside every held lock pass.
    """
    path = _absolute(path)
    for lock in list(_held_locks):
        folder = _absolute(lock.folder)  # symbolic links as named, as the run names the paths it writes
        if path == folder or folder in path.parents:
            lock.check_held()


def refuse_dangling_link(folder: str | Path, option: str) -> None:
    """Raise `ScriptError` when `folder`, or a folder above it, is a symbolic link to nothing: creating the folder
    would fail with a bare "File exists"."""
    folder = Path(folder)
    for candidate in reversed([folder, *folder.parents]):
        if candidate.is_symlink() and not candidate.exists():
            raise ScriptError(
                f"{option} {folder}: {candidate} is a symbolic link to {os.readlink(candidate)}, which does not "
                f"exist: create that folder, or remove the link (rm {candidate}) to have a folder made in its place."
            )


def refuse_unusable_output_dir(output_dir: str | Path) -> None:
    """
    Refuse, before anything is created, an `--output_dir` that cannot be one: a file, a link to nothing
    (`refuse_dangling_link`), or a path whose nearest existing folder is a file or cannot be written (no permission, a
    read-only file system). Reads the file system only: the scripts call it before torch loads
    (`training/first_answers.py`) and again when the run takes the folder.
    """
    folder = Path(output_dir)
    refuse_dangling_link(folder, "--output_dir")
    if folder.exists() and not folder.is_dir():
        raise ScriptError(f"--output_dir {folder} is a file, not a folder: choose a folder (a new one is made).")
    existing = next(path for path in (folder, *folder.parents) if path.exists())
    if not existing.is_dir():
        cause = errno.ENOTDIR
    elif not os.access(existing, os.W_OK | os.X_OK):
        cause = errno.EROFS if os.statvfs(existing).f_flag & os.ST_RDONLY else errno.EACCES
    else:
        return
    raise output_dir_not_writable(folder, OSError(cause, os.strerror(cause), str(existing)))


def lock_output_dir(training_args) -> FolderLock | contextlib.nullcontext:
    """
    The lock of a script's `--output_dir`, taken now by the process that saves (`training_args.should_save`; the
    other processes of a distributed run share it). Use it as `with lock_output_dir(training_args): ...`.

    Raises `FolderLockedError` when another run holds it, `ScriptError` when the folder cannot be written.
    """
    if not training_args.should_save:
        return contextlib.nullcontext()
    refuse_unusable_output_dir(training_args.output_dir)
    lock = FolderLock(training_args.output_dir)
    try:
        return lock.acquire()
    except OSError as error:
        if error.filename is not None and Path(error.filename) == lock.path:
            raise ScriptError(
                f"cannot write the lock file {lock.path} of --output_dir: {error.strerror or error}; remove it (it "
                "only records which run writes the folder)."
            ) from error
        raise output_dir_not_writable(training_args.output_dir, error) from error


def output_dir_not_writable(output_dir: str | Path, error: OSError) -> ScriptError:
    """The one line for an output folder that cannot be created or written (checked, or locked, before a run)."""
    return ScriptError(
        f"cannot write to --output_dir {output_dir}: {error.strerror or error}; choose a folder you can write to."
    )


def _lock(descriptor: int) -> None:
    """flock `descriptor` exclusively; `FolderLockedError` (without a message yet) when another process holds it."""
    import fcntl

    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in HELD_ELSEWHERE:
            raise FolderLockedError() from error
        raise


def _open_record(path: Path) -> int:
    """Open (create) the record file without following a symbolic link: a link in its place is removed, never written
    through (the record is truncated and rewritten)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(path, flags, 0o666)
    except OSError as error:
        if error.errno != errno.ELOOP:
            raise
    path.unlink()
    return os.open(path, flags | os.O_EXCL, 0o666)


def _same_file(descriptor: int | None, path: Path) -> bool:
    """Whether `path` (symbolic links followed) is the file or folder open as `descriptor`."""
    try:
        opened, named = os.fstat(descriptor), os.stat(path)
    except (OSError, TypeError):
        return False
    return (opened.st_dev, opened.st_ino) == (named.st_dev, named.st_ino)


def _absolute(path: str | Path) -> Path:
    return Path(os.path.abspath(path))


__all__ = [
    "LOCK_FILE_NAME",
    "FolderLock",
    "FolderLockedError",
    "FolderLostError",
    "check_folder_held",
    "lock_output_dir",
    "output_dir_not_writable",
    "refuse_dangling_link",
    "refuse_unusable_output_dir",
]
