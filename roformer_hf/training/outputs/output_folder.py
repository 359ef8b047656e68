"""What an output folder may hold when a run starts: the refusals made before anything is written, reading the folder
only (an earlier run, a file of the user's a run would write over or delete, links and files where a run keeps its
folders, a record broken by hand). The scripts make them before torch loads (`training/first_answers.py`) and again
when the run takes the folder (`run_outputs.check_output_dir`)."""

import os
from pathlib import Path
from typing import Any

from ..errors import ScriptError
from .checkpoints import last_complete_checkpoint
from .locks import refuse_unusable_output_dir
from .output_record import (
    RUN_ONLY_PREFIXES,
    foreign_entries_refusal,
    refuse_untrusted_record,
    run_entries,
    user_file_clashes,
    user_files_in_run_folders,
    user_files_refusal,
)
from .written_files import run_folder_number


def refuse_output_dir(
    output_dir: str | Path, trains: bool = True, overwrite: bool = False, resume_from_checkpoint: Any = None
) -> None:
    """
    Refuse an output folder a run may not write into: one that cannot be a folder or whose record cannot be trusted
    (`refuse_untrusted_output_dir`), or one holding what the run may not write over (`refuse_what_output_dir_holds`).

    Args:
        output_dir (`str` or `Path`): `--output_dir`.
        trains (`bool`): whether the run trains (writes a model and checkpoints).
        overwrite (`bool`): `--overwrite_output_dir`.
        resume_from_checkpoint: `--resume_from_checkpoint`, as given.

    Raises `ScriptError` naming the options that allow it.
    """
    refuse_untrusted_output_dir(output_dir)
    refuse_what_output_dir_holds(output_dir, trains, overwrite, resume_from_checkpoint)


def refuse_untrusted_output_dir(output_dir: str | Path) -> None:
    """Refuse an output folder that cannot be one (`locks.refuse_unusable_output_dir`) or whose record is a link or
    broken by hand (`output_record.refuse_untrusted_record`): what it holds cannot be told apart then."""
    refuse_unusable_output_dir(output_dir)
    refuse_untrusted_record(output_dir)


def refuse_what_output_dir_holds(
    output_dir: str | Path, trains: bool = True, overwrite: bool = False, resume_from_checkpoint: Any = None
) -> None:
    """
    Refuse an output folder (whose record can be trusted: `refuse_untrusted_output_dir`) that holds a file of the
    user's the run would write over (`output_record.user_file_clashes`, whatever the options) or delete inside a
    checkpoint, stage or runs/ folder of an earlier run (`output_record.user_files_in_run_folders`), an earlier run
    (unless `overwrite` or a resume), or checkpoint or stage folders that are links or files
    (`refuse_foreign_run_folders`). A run that does not train (`trains=False`: it only evaluates or predicts) is refused
    only a file of the user's with the name of a result, picture or predictions file it writes
    (`written_files.EVALUATION_FILES`): it may write beside a model or an earlier run, never over a user's file.
    Arguments as for `refuse_output_dir`.
    """
    output_dir = Path(output_dir)
    if trains and not overwrite:
        refuse_foreign_run_folders(output_dir)
    clashes = [name for name in user_file_clashes(output_dir, trains) if not _misnamed_run_folder(output_dir / name)]
    if clashes:
        raise user_files_refusal(output_dir, clashes)
    inside = user_files_in_run_folders(output_dir) if trains else []
    if inside:
        raise foreign_entries_refusal(output_dir, inside)
    earlier = earlier_run_outputs(output_dir) if trains else []
    if earlier and not overwrite and not is_resuming(resume_from_checkpoint):
        raise earlier_run_error(output_dir, earlier)


def earlier_run_outputs(output_dir: str | Path) -> list[Path]:
    """The files and folders that earlier runs wrote in `output_dir` (`output_record.run_entries`; empty when it does
    not exist), but for the lock, the record and staging folders, and with the links and files named as a run's
    checkpoint or stage folders (`refuse_foreign_run_folders`)."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    ours = {output_dir / name for name in run_entries(output_dir) if not name.startswith(RUN_ONLY_PREFIXES)}
    misplaced = {path for path in _run_folders(output_dir) if path.parent == output_dir and not _is_plain_dir(path)}
    return sorted(ours | misplaced)


def _is_plain_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def is_resuming(resume_from_checkpoint: Any) -> bool:
    """Whether `--resume_from_checkpoint` (as given: a path, True, "true", "false", None) asks to continue a run."""
    return resume_from_checkpoint is not None and str(resume_from_checkpoint).lower() != "false"


def _misnamed_run_folder(path: Path) -> bool:
    """A link or a file named as a run's checkpoint or stage folder: `refuse_foreign_run_folders` refuses it, and
    `--overwrite_output_dir` deletes the link (never what it points to) or the file."""
    return run_folder_number(path.name) is not None and not _is_plain_dir(path)


def earlier_run_error(output_dir: Path, earlier: list[Path]) -> ScriptError:
    """The refusal of an earlier run's folder, offering `--resume_from_checkpoint true` only where a complete
    checkpoint makes it work (a run killed before its first checkpoint has none)."""
    names = ", ".join(path.name for path in earlier[:3]) + (", ..." if len(earlier) > 3 else "")
    folders = [output_dir, *(path for path in output_dir.glob("stage-*") if _is_plain_dir(path))]
    if last_complete_checkpoint(*folders, announce=False) is None:
        return ScriptError(
            f"--output_dir {output_dir} holds an earlier run ({names}) without a complete checkpoint to resume from: "
            "add --overwrite_output_dir to replace it, or choose another --output_dir."
        )
    return ScriptError(
        f"--output_dir {output_dir} holds an earlier run ({names}): add --overwrite_output_dir to replace it, "
        "--resume_from_checkpoint true to continue it, or choose another --output_dir."
    )


def refuse_foreign_run_folders(output_dir: Path) -> None:
    """
    Refuse (`ScriptError`) an output folder whose `checkpoint-<n>` or `stage-<n>` folder is a symbolic link or a file:
    the Trainer would write the run's checkpoints through the link, into a folder that is not the run's own (another
    model's, whose files it would overwrite), or fail on the file. `--overwrite_output_dir` deletes such a link or
    file instead, never what a link points to.
    """
    for path in _run_folders(output_dir):
        name = path.relative_to(output_dir)
        if path.is_symlink():
            raise ScriptError(
                f"--output_dir {output_dir} holds {name}, a symbolic link to {os.readlink(path)}: a run writes only "
                f"into folders of its own, and would write its checkpoints through the link; remove the link (rm "
                f"{path}, which leaves what it points to as it is), or add --overwrite_output_dir, which deletes the "
                "link and nothing it points to (to resume from the checkpoint it points to, give that folder to "
                "--resume_from_checkpoint)."
            )
        if not path.is_dir():
            raise ScriptError(
                f"--output_dir {output_dir} holds {name}, a file where a run keeps a folder of its own: move it "
                "away, or add --overwrite_output_dir, which deletes it."
            )


def _run_folders(output_dir: Path) -> list[Path]:
    """The paths of output_dir named as a run's checkpoint and stage folders, and those of its stage folders."""
    top = sorted(path for path in output_dir.glob("*-*") if run_folder_number(path.name) is not None)
    stages = [path for path in top if run_folder_number(path.name, "stage") is not None and _is_plain_dir(path)]
    inside = [path for stage in stages for path in sorted(stage.glob("checkpoint-*"))]
    return [*top, *(path for path in inside if run_folder_number(path.name, "checkpoint") is not None)]
