"""The output folder's lock holds for the whole run whatever happens to its files
(`roformer_hf.training.outputs.locks`): a deleted lock file does not let a second run in, and a run whose folder was
deleted, moved or replaced stops at its next save with one line instead of writing on without a lock. A file system
that cannot lock a directory gets the lock on the record file, and a run whose record was deleted stops the same
way."""

import errno
import json
import os
import shutil
import stat

import pytest
from distributed_worker import files_sha256, trainer_builder
from test_output_safety import (
    classification_arguments,
    classification_files,  # noqa: F401 (a fixture)
    exit_line,
    mlm_arguments,
    news_file,  # noqa: F401 (a fixture)
)
from transformers import TrainerCallback

import run_classification
import run_mlm
from roformer_hf.training.outputs import locks
from roformer_hf.training.outputs.locks import (
    LOCK_FILE_NAME,
    FolderLock,
    FolderLockedError,
    FolderLostError,
    check_folder_held,
)


def test_deleting_the_lock_file_does_not_release_the_lock(tmp_path):
    with FolderLock(tmp_path / "out") as lock:
        (tmp_path / "out" / LOCK_FILE_NAME).unlink()  # a cleanup of hidden or *.lock files
        with pytest.raises(FolderLockedError, match=r"is in use by another run \(another process; "):
            FolderLock(tmp_path / "out").acquire()
        check_folder_held(tmp_path / "out" / "checkpoint-2")  # the run's next save: the record is written again
        assert json.loads(lock.path.read_text())["pid"] == os.getpid()
        with pytest.raises(FolderLockedError, match=f"is in use by another run \\(process {os.getpid()} on "):
            FolderLock(tmp_path / "out").acquire()
    assert not (tmp_path / "out" / LOCK_FILE_NAME).exists()
    FolderLock(tmp_path / "out").acquire().release()  # released at the end


@pytest.mark.parametrize("fate", ["deleted", "moved", "replaced"])
def test_a_folder_deleted_moved_or_replaced_under_its_lock_stops_the_next_write(fate, tmp_path):
    lock = FolderLock(tmp_path / "out").acquire()
    try:
        check_folder_held(tmp_path / "out" / "checkpoint-2" / "optimizer.pt")  # held: passes
        if fate == "moved":
            (tmp_path / "out").rename(tmp_path / "moved")
        else:
            shutil.rmtree(tmp_path / "out")
        if fate == "replaced":
            (tmp_path / "out").mkdir()  # as another run, or the Trainer's next save, would make it again
            FolderLock(tmp_path / "out").acquire().release()  # nothing holds the new folder
        with pytest.raises(FolderLostError) as error_info:
            check_folder_held(tmp_path / "out" / "checkpoint-2" / "optimizer.pt")
        assert str(error_info.value).startswith(
            f"--output_dir {tmp_path / 'out'} was deleted, moved or replaced while this run was writing to it: the run "
            "stops here rather than write into a folder it holds no lock on; start it again"
        )
        check_folder_held(tmp_path / "elsewhere" / "file")  # outside the folder: not this lock's business
    finally:
        lock.release()


@pytest.fixture
def no_directory_locks(monkeypatch):
    """A file system whose flock cannot lock a directory, as NFS (EBADF for a descriptor not open for writing)."""
    lock = locks._lock

    def lock_files_only(descriptor: int) -> None:
        if stat.S_ISDIR(os.fstat(descriptor).st_mode):
            raise OSError(errno.EBADF, "Bad file descriptor")
        lock(descriptor)

    monkeypatch.setattr(locks, "_lock", lock_files_only)


def test_where_a_folder_cannot_be_locked_the_record_file_is_and_losing_it_stops_the_run(tmp_path, no_directory_locks):
    lock = FolderLock(tmp_path / "out").acquire()
    try:
        with pytest.raises(FolderLockedError, match=f"is in use by another run \\(process {os.getpid()} on "):
            FolderLock(tmp_path / "out").acquire()
        (tmp_path / "out" / LOCK_FILE_NAME).unlink()  # here this does release the lock: the run must not write on
        with pytest.raises(FolderLostError) as error_info:
            check_folder_held(tmp_path / "out" / "trainer_state.json")
        assert str(error_info.value).startswith(
            f"the lock file {tmp_path / 'out' / LOCK_FILE_NAME} of --output_dir {tmp_path / 'out'} was deleted or "
            "replaced while this run held it"
        )
    finally:
        lock.release()


def test_a_second_run_with_overwrite_output_dir_is_refused_after_the_lock_file_was_deleted(
    tmp_path,
    classification_files,  # noqa: F811
    capsys,
):
    output_dir = tmp_path / "out"
    arguments = classification_arguments(classification_files, output_dir)
    run_classification.main(arguments)
    running = FolderLock(output_dir).acquire()  # run A, still training (as a process of its own would hold it)
    try:
        (output_dir / LOCK_FILE_NAME).unlink()
        before = files_sha256(output_dir)
        line = exit_line(run_classification.main, [*arguments, "--overwrite_output_dir"], capsys)
        assert line.startswith(f"error: --output_dir {output_dir} is in use by another run (")
        assert files_sha256(output_dir) == before  # A's checkpoints and model: nothing deleted, nothing written
    finally:
        running.release()


class DeleteFolderAfterStep(TrainerCallback):
    """`rm -rf OUT` during the run, after optimizer step 1."""

    def __init__(self, output_dir):
        self.output_dir = output_dir

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 1 and self.output_dir.exists():
            shutil.rmtree(self.output_dir)


@pytest.mark.parametrize("script", ["run_mlm", "run_classification"])
def test_a_run_whose_folder_was_deleted_stops_at_its_next_save(
    script,
    tmp_path,
    news_file,  # noqa: F811
    classification_files,  # noqa: F811
    capsys,
    monkeypatch,
):
    output_dir = tmp_path / "out"
    module, arguments = {
        "run_mlm": (run_mlm, mlm_arguments(news_file, output_dir, "--stages", "32:4:3")),
        "run_classification": (run_classification, classification_arguments(classification_files, output_dir)),
    }[script]
    owner, builder_name = trainer_builder(script)
    build_trainer = getattr(owner, builder_name)

    def build_trainer_that_loses_its_folder(*args, **kwargs):
        trainer = build_trainer(*args, **kwargs)
        trainer.add_callback(DeleteFolderAfterStep(output_dir))
        return trainer

    monkeypatch.setattr(owner, builder_name, build_trainer_that_loses_its_folder)
    line = exit_line(module.main, arguments, capsys)  # was: exit 0, the folder made again, no lock held
    assert line.startswith(f"error: --output_dir {output_dir} was deleted, moved or replaced while this run was ")
    assert not output_dir.exists()
