"""The files a run of the scripts writes or deletes in its output folder, by name, and the refusal of an input file
that is one of them, before anything is read: `--test_file out/predictions.jsonl --output_dir out` would read the
test documents, then replace them with their predictions.

Compared by resolved path (a symlink to such a file, or an `--output_dir` that is a symlink, is the same file) and,
for the files already in the output folder, by `os.path.samefile` (a hard link). A tokenizer's `vocab.txt` or a
checkpoint given as the model are not data files: a run that saves into the folder it loaded from writes the same
vocabulary back, and replaces the model only with `--overwrite_output_dir`, which says so.
"""

import os
from fnmatch import fnmatchcase
from pathlib import Path, PurePath

from ..sentence_transformers_files import SENTENCE_TRANSFORMERS_FILES
from .errors import ScriptError
from .locks import LOCK_FILE_NAME
from .run_outputs import RUN_OUTPUT_PATTERNS

# Files of the output folder a run writes: the model, its code (saved beside it for trust_remote_code), tokenizer,
# card, results, pictures and predictions of either script, and the lock; and what --overwrite_output_dir deletes.
WRITTEN_FILES = (
    *("config.json", "generation_config.json", "*.safetensors", "model.safetensors.index.json", "*.py"),
    *("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "tokenizer.json"),
    *("README.md", "*_results.json", "trainer_state.json", "training_args.bin", "predictions.jsonl"),
    *("confusion_matrix_*", "loss_curve.png", *SENTENCE_TRANSFORMERS_FILES, LOCK_FILE_NAME),
    *RUN_OUTPUT_PATTERNS,
)

# Folders of the output folder a run writes (or deletes) whole: checkpoints, stages, TensorBoard logs, staging.
WRITTEN_FOLDERS = ("checkpoint-*", "stage-*", "runs", ".partial-model-*")


def is_written(relative_path: PurePath) -> bool:
    """Whether a run writes or deletes the file at `relative_path` inside its output folder."""
    top = relative_path.parts[0] if relative_path.parts else ""
    if any(fnmatchcase(top, pattern) for pattern in WRITTEN_FOLDERS):
        return True
    return len(relative_path.parts) == 1 and any(fnmatchcase(top, pattern) for pattern in WRITTEN_FILES)


def written_file_clash(input_file: str | Path, output_dir: str | Path) -> Path | None:
    """
    The file of `output_dir` that a run writes or deletes and that is `input_file` (by path once links are resolved,
    or by `os.path.samefile` for the files already there), relative to `output_dir`; `None` when there is none.
    """
    output_dir = Path(output_dir).resolve()
    resolved = Path(input_file).resolve()
    if resolved.is_relative_to(output_dir) and is_written(resolved.relative_to(output_dir)):
        return resolved.relative_to(output_dir)
    if not (output_dir.is_dir() and resolved.is_file()):
        return None
    for entry in output_dir.iterdir():
        relative = entry.relative_to(output_dir)
        if entry.is_file() and is_written(relative) and os.path.samefile(entry, resolved):
            return relative
    return None


def check_inputs_are_not_outputs(input_files: dict[str, str | None], output_dir: str | Path) -> None:
    """
    Refuse an input file that the run would overwrite or delete in `output_dir`, in one line naming both.

    Args:
        input_files (`dict`): each input file by the option that named it (`{"--test_file": "out/test.jsonl"}`);
            `None` for an option not given.
        output_dir (`str` or `Path`): the run's `--output_dir`.
    """
    for option, path in input_files.items():
        clash = None if path is None else written_file_clash(path, output_dir)
        if clash is None:
            continue
        where = Path(output_dir) / clash
        alias = "" if Path(path) == where else f" (the same file as {where})"
        raise ScriptError(
            f"{option} {path}{alias} is one of the files a run writes in --output_dir {output_dir} ({clash}), so this "
            f"run would replace or delete it: move the file out of {output_dir}, or give another --output_dir."
        )
