"""The one rule that keeps a run from destroying what it reads: before anything is written or deleted, every input of
the run (the model, config and tokenizer it starts from, its data files or saved dataset, the checkpoint it resumes
from) is compared with every path the run may write or delete, and any overlap is refused in one line naming both
options. `--model_name_or_path M --output_dir M` would replace the model being fine-tuned with its checkpoints and
final weights (and `--overwrite_output_dir` delete them); `--test_file out/predictions.jsonl --output_dir out` would
read the test documents, then replace them with their predictions.

What a run may write or delete: in `--output_dir`, the files of `WRITTEN_FILES` at its top and the folders of
`WRITTEN_FOLDERS` whole (a run that does not train: only its results, pictures, predictions and lock,
`EVALUATION_FILES`), and of those only what earlier runs wrote there (`output_record`): a file of the user's of
such a name (a README.md, a modeling.py, a vocab.txt) makes a training run refuse the folder
(`output_record.user_file_clashes`), with or without `--overwrite_output_dir`, and anything else of the user's (notes,
data files) is never touched. What a run reads: an input file, or an input folder whole but for files no loader
reads (results and predictions beside a model: an evaluation writes its results into the folder of the model it
evaluates). Folders are compared by identity (device and inode: a symbolic link, a bind mount or a relative path to
the same folder is the same folder), paths not made yet once resolved, and an input file also by `os.path.samefile`
with the written files already in the output folder (a hard link). So an output folder inside an input folder, or an
input inside a checkpoint folder of the output folder, overlaps too. The one exception is how resuming works: `--resume_from_checkpoint` naming a
checkpoint of the output folder, which the run reads before it writes any checkpoint (and never deletes while
resuming: `--overwrite_output_dir` clears nothing then).

A refusal never offers `--overwrite_output_dir`: it is one of the flags that would destroy the input.
"""

import os
import re
from fnmatch import fnmatchcase
from pathlib import Path, PurePath
from typing import Any

from ...hub.sentence_transformers_files import SENTENCE_TRANSFORMERS_FILES
from ..errors import ScriptError
from .locks import LOCK_FILE_NAME

# The code a saved model carries beside its weights (for trust_remote_code): copies of roformer_hf's own modules, and
# no other Python file (a user's script in the output folder is not one of them).
CODE_FILES = tuple(sorted(path.name for path in Path(__file__).resolve().parents[2].glob("*.py")))  # roformer_hf/*.py

# Files of the output folder a run writes: the model, its code (saved beside it for trust_remote_code), tokenizer,
# card, results, pictures and predictions of either script, and the lock; and what --overwrite_output_dir deletes.
WRITTEN_FILES = (
    *("config.json", "generation_config.json", "*.safetensors", "model.safetensors.index.json", *CODE_FILES),
    *("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "tokenizer.json"),
    *("README.md", "*_results.json", "trainer_state.json", "training_args.bin", "predictions.jsonl"),
    *(
        "confusion_matrix_*",
        "loss_curve.png",
        *SENTENCE_TRANSFORMERS_FILES,
        LOCK_FILE_NAME,
        ".roformer_hf_outputs.json",
    ),
)

# Folders of the output folder a run writes (or deletes) whole: checkpoints, stages, TensorBoard logs, staging.
WRITTEN_FOLDERS = ("checkpoint-*", "stage-*", "runs", ".partial-model-*")

# The names of a run's numbered folders: the Trainer's `checkpoint-<step>`, run_mlm.py's `stage-<n>` (digits 0-9).
RUN_FOLDER_NAME = re.compile(r"(checkpoint|stage)-([0-9]+)")


def run_folder_number(name: str, kind: str | None = None) -> int | None:
    """The number in `name` when it names a run's `checkpoint-<step>` or `stage-<n>` folder (of `kind` only, when
    given: "checkpoint" or "stage"), else `None`. The one home of those names."""
    match = RUN_FOLDER_NAME.fullmatch(name)
    if match is None or kind not in (None, match.group(1)):
        return None
    return int(match.group(2))


# What a run that does not train writes into its output folder (and what a model folder may hold beside the model,
# since an evaluation writes its results there): no loader reads these.
EVALUATION_FILES = ("*_results.json", "predictions.jsonl", "confusion_matrix_*", LOCK_FILE_NAME)
EVALUATION_FOLDERS = ("runs",)

# What each input option gives the run, for the messages.
INPUT_KINDS = {
    "--model_name_or_path": "the model",
    "--config_name": "the config",
    "--tokenizer_name": "the tokenizer",
    "--dataset_name": "the dataset",
    "--resume_from_checkpoint": "the checkpoint",
}


def is_written(relative_path: PurePath, trains: bool = True) -> bool:
    """Whether a run writes or deletes the file at `relative_path` inside its output folder (`trains`: a run that
    trains, else one that only evaluates or predicts)."""
    folders, files = (WRITTEN_FOLDERS, WRITTEN_FILES) if trains else (EVALUATION_FOLDERS, EVALUATION_FILES)
    top = relative_path.parts[0] if relative_path.parts else ""
    if _matches(top, folders):
        return True
    return len(relative_path.parts) == 1 and _matches(top, files)


# What a checkpoint folder holds besides the files of a saved model: the Trainer's state, the optimizer's, the
# scheduler's, the random generators', the gradient scaler's, the run's settings and the manifest.
CHECKPOINT_FILES = (
    *("trainer_state.json", "optimizer.pt", "scheduler.pt", "rng_state*.pth", "scaler.pt", "training_args.bin"),
    *("run_settings.json", "checkpoint_manifest.json", ".*.partial-*"),  # and files cut off while written
)


def is_checkpoint_file(name: str) -> bool:
    """Whether a file named `name` is one a checkpoint of the scripts holds (`CHECKPOINT_FILES` or a saved model's)."""
    return _matches(name, CHECKPOINT_FILES) or (_matches(name, WRITTEN_FILES) and not _matches(name, EVALUATION_FILES))


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def written_file_clash(input_file: str | Path, output_dir: str | Path, trains: bool = True) -> Path | None:
    """
    The path of `output_dir` that a run writes or deletes and that is `input_file` or holds it (by path once links
    are resolved, or by `os.path.samefile` for the files already there), relative to `output_dir`; `None` when there
    is none.
    """
    output_dir = Path(output_dir).resolve()
    resolved = Path(input_file).resolve()
    relative = within(resolved, output_dir)
    if relative is not None and relative.parts and is_written(relative, trains):
        return relative if len(relative.parts) == 1 else Path(relative.parts[0])
    if not (output_dir.is_dir() and resolved.is_file()):
        return None
    for entry in output_dir.iterdir():
        relative = entry.relative_to(output_dir)
        if entry.is_file() and is_written(relative, trains) and os.path.samefile(entry, resolved):
            return relative
    return None


def within(path: Path, folder: Path) -> Path | None:
    """
    `path` relative to `folder` (`Path()` for the folder itself) when it is `folder` or lies in it, else `None`.
    Folders are compared by identity (device and inode, `os.path.samefile`), so that a second path to the same folder
    (a symbolic link, a bind mount, another mount of it) is seen; paths not made yet by their resolved spelling.
    """
    path, folder = Path(path).resolve(), Path(folder).resolve()
    if path.is_relative_to(folder):
        return path.relative_to(folder)
    if not folder.exists():
        return None
    for above in (path, *path.parents):
        try:
            if os.path.samefile(above, folder):
                return path.relative_to(above)
        except OSError:  # not made yet, or unreadable: no identity to compare
            continue
    return None


def run_inputs(model_args: Any, data_files: dict[str, str | None], training_args: Any) -> dict[str, str | None]:
    """
    Every path a run reads, by the option that named it: the model, config and tokenizer of `model_args`, the
    `data_files` (`{"--train_file": "train.jsonl", ...}`, or `--dataset_name`), and the checkpoint that
    `--resume_from_checkpoint` names (not `true`, whose checkpoint is the output folder's own).
    """
    resume = training_args.resume_from_checkpoint
    if resume is not None and str(resume).lower() in ("true", "false"):
        resume = None
    return {
        "--model_name_or_path": model_args.model_name_or_path,
        "--config_name": model_args.config_name,
        "--tokenizer_name": model_args.tokenizer_name,
        **data_files,
        "--resume_from_checkpoint": None if resume is None else str(resume),
    }


def check_inputs_are_not_outputs(
    inputs: dict[str, str | None], output_dir: str | Path, trains: bool = True, cache_dir: str | None = None
) -> None:
    """
    Refuse an input that the run would overwrite or delete, or write into (its outputs, or `--cache_dir`: the caches
    of datasets and the Hub), in one line naming both options.

    Args:
        inputs (`dict`): each input file or folder by the option that named it (`{"--test_file": "out/test.jsonl"}`,
            see `run_inputs`); `None` for an option not given. A Hub id is compared as the local path it spells.
        output_dir (`str` or `Path`): the run's `--output_dir`.
        trains (`bool`, defaults to `True`): whether the run trains (and so writes a model and checkpoints), or only
            evaluates or predicts.
        cache_dir (`str`, *optional*): the run's `--cache_dir`, which may lie anywhere but in an input folder.
    """
    for option, path in inputs.items():
        if path is not None:
            refusal = overlap_refusal(option, path, output_dir, trains)
            if refusal is None and cache_dir is not None:
                refusal = cache_refusal(option, path, cache_dir)
            if refusal is not None:
                raise ScriptError(refusal)


def cache_refusal(option: str, path: str, cache_dir: str) -> str | None:
    """The one line refusing a `--cache_dir` that is the input folder `path` of `option` or lies in it (datasets
    would write its caches and locks into the user's model or data, where a later run reads them as more data), or
    `None`."""
    inside = within(Path(cache_dir), Path(path)) if Path(path).is_dir() else None
    if inside is None:
        return None
    where = "is" if inside == Path() else "lies inside"
    return (
        f"--cache_dir {cache_dir} {where} {option} {path}: datasets and the Hub would write their caches and "
        f"locks into the folder this run reads {INPUT_KINDS.get(option, 'the data')} from: give a --cache_dir "
        f"outside {path} (or leave it out for the default caches)."
    )


def overlap_refusal(option: str, path: str, output_dir: str | Path, trains: bool = True) -> str | None:
    """The one line refusing the input `path` of `option` for what this run writes in `output_dir`, or `None`."""
    output, resolved = Path(output_dir).resolve(), Path(path).resolve()
    kind = INPUT_KINDS.get(option, "the data")
    same = within(resolved, output) == Path()
    shown = "" if Path(path).absolute() == resolved else f" (that is {resolved})"
    resuming = option == "--resume_from_checkpoint"
    if same:
        if not trains or (resuming and any(resolved.glob("checkpoint-*"))):  # a run's folder: no checkpoint (resume)
            return None
        if option == "--model_name_or_path":
            return (
                f"--model_name_or_path {path} and --output_dir {output_dir} are the same folder{shown}: training "
                "there would replace the model being trained with its checkpoints and final weights, so training it "
                f"in place is refused: train into another folder (e.g. --output_dir {resolved}-finetuned), which "
                f"leaves {path} as it is."
            )
        return (
            f"{option} {path} and --output_dir {output_dir} are the same folder{shown}: this run would write its "
            f"model, tokenizer and checkpoints over {kind} it reads there: give another --output_dir, which leaves "
            f"{path} as it is."
        )
    if within(output, resolved) not in (None, Path()):
        if not trains:
            return None
        return (
            f"--output_dir {output_dir} lies inside {option} {path}{shown}: this run would write its model and "
            f"checkpoints into the folder it reads {kind} from: give an --output_dir outside {path}."
        )
    clash = written_file_clash(path, output_dir, trains)
    if clash is None or (resuming and _is_run_folder(clash)):  # resuming from a checkpoint of the run: how it works
        return None
    return _written_path_refusal(option, path, output_dir, clash)


def _is_run_folder(relative: Path) -> bool:
    return run_folder_number(relative.parts[0]) is not None


def _written_path_refusal(option: str, path: str, output_dir: str | Path, clash: Path) -> str:
    where = Path(output_dir) / clash
    if _matches(clash.parts[0], WRITTEN_FOLDERS + EVALUATION_FOLDERS):
        alias = "" if Path(path).is_relative_to(where) else f" (that is {Path(path).resolve()})"
        return (
            f"{option} {path}{alias} lies in {clash}, a folder a run writes or deletes in --output_dir {output_dir}, "
            f"so this run could replace or delete it: copy it out of {output_dir} and give the copy, or give another "
            "--output_dir."
        )
    alias = "" if Path(path) == where else f" (the same file as {where})"
    return (
        f"{option} {path}{alias} is one of the files a run writes in --output_dir {output_dir} ({clash}), so this "
        f"run would replace or delete it: move the file out of {output_dir}, or give another --output_dir."
    )
