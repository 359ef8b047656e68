"""Resuming a run: the checkpoint `--resume_from_checkpoint` names (a path, or the newest complete one: what makes one
complete is `checkpoints`' business), and the refusal of a resume with other settings than the checkpoint was trained
with, before any training, in one line naming the setting, its value in the checkpoint and in this run, and the fix.

A resumed Trainer takes the weights, optimizer, schedule and data position from the checkpoint: a model of another
shape cannot load them, a new `--learning_rate` would be ignored (the schedule is the checkpoint's), and a new
`--train_file` would be skipped into by the number of batches already trained on. So every checkpoint the scripts
write records the settings that decide its training (`RUN_SETTINGS_FILE`, written after the weights, and listed in
the checkpoint's manifest like every file of it), and a resume compares them with its own. The model (its config)
and the vocabulary are compared for every checkpoint, also those written before the record existed.
"""

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from transformers import PreTrainedModel, Trainer, TrainingArguments

from ...model_card import mixed_precision
from ...text_rules import load_vocab
from ..data.folders import files_datasets_reads
from ..errors import ScriptError
from .checkpoints import check_given_checkpoint, last_complete_checkpoint, save_checkpoints_whole

logger = logging.getLogger(__name__)


def find_resume_checkpoint(training_args: TrainingArguments) -> str | None:
    """
    The checkpoint that `--resume_from_checkpoint` names: a path, checked (`checkpoints.check_given_checkpoint`), or
    for `True` the newest complete one in output_dir (`checkpoints.last_complete_checkpoint`, which names each newer
    one it skips).

    Raises `ScriptError` when the path does not exist or cannot be resumed from, or output_dir holds no complete
    checkpoint.
    """
    resume = training_args.resume_from_checkpoint
    if resume is None or str(resume).lower() == "false":
        return None
    if str(resume).lower() == "true":
        last = last_complete_checkpoint(training_args.output_dir)
        if last is None:
            raise ScriptError(
                f"--resume_from_checkpoint true, but {training_args.output_dir} holds no complete checkpoint: "
                f"{RESTART_ADVICE}."
            )
        return last
    if not Path(resume).exists():
        raise ScriptError(f"--resume_from_checkpoint {resume}: no such folder.")
    check_given_checkpoint(resume)
    return str(resume)


# The way out of `--resume_from_checkpoint true` in a folder without a checkpoint to resume from (a run killed before
# its first checkpoint, or every checkpoint damaged).
RESTART_ADVICE = (
    "start the run again with --overwrite_output_dir in place of --resume_from_checkpoint (a checkpoint skipped as "
    "damaged is named above), or give the path of a checkpoint"
)


RUN_SETTINGS_FILE = "run_settings.json"
# TrainingArguments that decide what a resumed run trains, shared by both scripts.
TRAINING_SETTINGS = (
    "learning_rate",
    "weight_decay",
    "lr_scheduler_type",
    "warmup_steps",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "seed",
)
# TrainingArguments a resume applies (as transformers does): they say where training ends, which is what a longer
# resumed run changes; the learning-rate schedule then runs to the new end from the step reached.
APPLIED_SETTINGS = ("max_steps", "num_train_epochs")
# The arithmetic ("bf16", "fp16" or "no"), applied with a warning: the weights, the optimizer state and the
# checkpoints are float32 either way, and on a CPU an unset --bf16 follows the machine (cpu_precision.py), so a run
# resumed elsewhere may differ here without being told to.
PRECISION_SETTING = "mixed_precision"
# Config fields that do not describe the model's weights or computation (bookkeeping, or settings the scripts
# derive and check on their own: `classification_inputs` is compared as the run's settings, `custom_pipelines`
# follows from it).
IGNORED_CONFIG_FIELDS = {
    "transformers_version",
    "architectures",
    "dtype",
    "torch_dtype",
    "problem_type",
    "classification_inputs",
    "custom_pipelines",
    "output_attentions",
    "output_hidden_states",
    "return_dict",
    "use_cache",
}
NEW_RUN_ADVICE = "or start a new run (another --output_dir, or --overwrite_output_dir)"


# Data settings that choose which rows a run trains on, and in which order: changed, a resumed run would skip its
# batches into other rows (both scripts' DataArguments; a setting a script lacks is left out).
SAMPLING_SETTINGS = (
    "max_train_samples",
    "validation_split_percentage",
    "text_column_name",
    "text_pair_column_name",
    "label_column_name",
    "line_by_line",
    "json_field",
)
# The setting that records the content of the training data (`data_digest`), compared on resume.
DATA_DIGEST = "train_data_digest"
# And of the validation file, where its evaluations decide the training (early stopping, the best checkpoint kept).
VALIDATION_DIGEST = "validation_data_digest"
# Files larger than this are digested by their size, time and first and last `DIGEST_EDGE_BYTES` (hashing gigabytes
# of corpus at every start and resume would cost minutes); smaller ones whole.
WHOLE_DIGEST_MAX_BYTES = 64 * 2**20
DIGEST_EDGE_BYTES = 2**20


def sampling_settings(data_args: Any) -> dict[str, Any]:
    """The `SAMPLING_SETTINGS` of a script's `data_args`, to record with its run."""
    return {name: getattr(data_args, name) for name in SAMPLING_SETTINGS if hasattr(data_args, name)}


def data_digest(path: str | None) -> str | None:
    """
    The content of a training data file, or of every file of a data folder (`--dataset_name` or a save_to_disk
    folder, their names with them, but for the files datasets does not read: `files_datasets_reads`), as one SHA-256;
    a file over `WHOLE_DIGEST_MAX_BYTES` by its size, modification time and first and last megabyte. `None` for no path or a Hub id (whose revision the datasets cache keeps).
    """
    if path is None or not Path(path).exists():
        return None
    root = Path(path)
    files = [root] if root.is_file() else files_datasets_reads(root)
    digest = hashlib.sha256()
    for file in files:
        digest.update(f"{file.relative_to(root) if file != root else ''}\0".encode())
        digest.update(_file_digest(file))
    return digest.hexdigest()


def _file_digest(path: Path) -> bytes:
    size = path.stat().st_size
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        if size <= WHOLE_DIGEST_MAX_BYTES:
            for chunk in iter(lambda: file.read(2**20), b""):
                digest.update(chunk)
            return digest.digest()
        digest.update(f"{size}:{path.stat().st_mtime_ns}".encode())
        digest.update(file.read(DIGEST_EDGE_BYTES))
        file.seek(size - DIGEST_EDGE_BYTES)
        digest.update(file.read(DIGEST_EDGE_BYTES))
    return digest.digest()


def run_settings(training_args: Any, **script_settings: Any) -> dict[str, Any]:
    """
    The settings of this run a checkpoint records: `script_settings` (option name without dashes -> value; a data
    file as its absolute path), the `TRAINING_SETTINGS` and `APPLIED_SETTINGS` of `training_args` and its mixed
    precision, all as JSON values.
    """
    settings = {name: getattr(training_args, name, None) for name in (*TRAINING_SETTINGS, *APPLIED_SETTINGS)}
    settings[PRECISION_SETTING] = mixed_precision(training_args)
    settings.update(script_settings)
    return json.loads(json.dumps(settings, default=str))


def data_run_settings(training_args: Any, data_args: Any, **script_settings: Any) -> dict[str, Any]:
    """
    The settings a checkpoint of a script's run records, and a resume must repeat (`run_settings`): its training data
    (the file's absolute path and its content's digest, the dataset, its config and split; the validation file's
    digest where its evaluations decide the training: early stopping, `--load_best_model_at_end`), how it is sampled
    (`sampling_settings`), then the script's own `script_settings`.

    Args:
        training_args (`TrainingArguments`): the run's training arguments.
        data_args: the script's data arguments (`DatasetArguments`).
        script_settings: the script's own settings (option name without dashes -> value).
    """
    decides = training_args.load_best_model_at_end or getattr(data_args, "early_stopping_patience", None) is not None
    validation = {VALIDATION_DIGEST: data_digest(data_args.validation_file)} if decides else {}
    return run_settings(
        training_args,
        train_file=absolute_path(data_args.train_file),
        train_data_digest=data_digest(data_args.train_file or data_args.dataset_name),
        **validation,
        **sampling_settings(data_args),
        dataset_name=data_args.dataset_name,
        dataset_config_name=data_args.dataset_config_name,
        train_split_name=data_args.train_split_name,
        **script_settings,
    )


def absolute_path(path: str | None) -> str | None:
    return None if path is None else str(Path(path).resolve())


def record_run_settings(trainer: Trainer, settings: Mapping[str, Any]) -> None:
    """
    Make `trainer` write `settings` into every checkpoint it saves, as `RUN_SETTINGS_FILE` right after the weights,
    and each checkpoint whole and verifiable (`checkpoints.save_checkpoints_whole`): a complete checkpoint always
    holds the file, listed in its manifest.
    """
    save_checkpoints_whole(trainer, {RUN_SETTINGS_FILE: dict(settings)})


def check_resume(
    checkpoint: str | Path,
    model: PreTrainedModel,
    tokenizer: Any,
    settings: Mapping[str, Any],
    read_recorded: Mapping[str, Callable[[Any], Any]] | None = None,
) -> None:
    """
    Raise `ScriptError` if this run differs from the one that wrote `checkpoint`: the model's config, the
    vocabulary, or a recorded setting (`RUN_SETTINGS_FILE`; a checkpoint without one has only the first two checked).
    `read_recorded` parses a recorded setting the way this run's was parsed (`--stages` written with spaces by an
    earlier run), so that settings are compared as parsed.
    """
    checkpoint = Path(checkpoint)
    check_same_model(checkpoint, model)
    check_same_vocabulary(checkpoint, tokenizer)
    settings_file = checkpoint / RUN_SETTINGS_FILE
    if not settings_file.is_file():
        logger.warning(
            f"{checkpoint} records no run settings (older than {RUN_SETTINGS_FILE}): only the model is checked."
        )
        return
    recorded = _recorded_settings(settings_file, read_recorded or {})
    changed = [name for name, value in settings.items() if name in recorded and recorded[name] != value]
    if _same_data(recorded, settings):  # the same content at another path (moved, copied, spelled otherwise)
        changed = [name for name in changed if name not in DATA_PATH_SETTINGS]
    applied = (*APPLIED_SETTINGS, PRECISION_SETTING)
    for name in sorted(changed, key=lambda name: name in applied):  # refusals before the warnings
        old, new = _shown(recorded[name]), _shown(settings[name])
        if name == DATA_DIGEST:
            raise ScriptError(
                f"cannot resume from {checkpoint}: its training data has changed since it was trained on (SHA-256 "
                f"{old[:16]}... then, {new[:16]}... now), and a resumed run would skip its batches into other rows: "
                f"resume with the data it was trained on, or start a new run from its weights (--model_name_or_path "
                f"{checkpoint}, another --output_dir)."
            )
        if name == VALIDATION_DIGEST:
            raise ScriptError(
                f"cannot resume from {checkpoint}: its --validation_file has changed since it was trained (SHA-256 "
                f"{old[:16]}... then, {new[:16]}... now), and early stopping and --load_best_model_at_end would "
                f"compare evaluations on other rows: resume with the validation file it was trained with, or start a "
                f"new run from its weights (--model_name_or_path {checkpoint}, another --output_dir)."
            )
        if name == PRECISION_SETTING:
            logger.warning(
                f"{checkpoint} was trained with mixed precision {old}, this run uses {new} ('no': float32; --bf16 "
                "chooses): applied, the weights and the optimizer state stay float32 either way."
            )
            continue
        if name not in APPLIED_SETTINGS:
            raise ScriptError(
                f"cannot resume from {checkpoint}: it was trained with --{name} {old}, this run gives --{name} {new}, "
                "which a resumed run cannot apply (it continues the checkpoint's training): resume with "
                f"--{name} {old}, or start a new run from its weights (--model_name_or_path {checkpoint}, another "
                "--output_dir)."
            )
        logger.warning(
            f"--{name} {new} differs from the {old} of {checkpoint}: applied, the run now ends (and its "
            "learning-rate schedule with it) where this run's options say."
        )


def _recorded_settings(settings_file: Path, read_recorded: Mapping[str, Callable[[Any], Any]]) -> dict[str, Any]:
    """The settings a checkpoint recorded, those of `read_recorded` parsed as this run's were."""
    recorded = json.loads(settings_file.read_text(encoding="utf-8"))
    for name, parse in read_recorded.items():
        if recorded.get(name) is not None:
            recorded[name] = parse(recorded[name])
    return recorded


# The settings that name where the training data lies; where its digest is the same, a resume reads the same rows.
DATA_PATH_SETTINGS = ("train_file", "dataset_name")


def _same_data(recorded: Mapping[str, Any], settings: Mapping[str, Any]) -> bool:
    digest = recorded.get(DATA_DIGEST)
    return digest is not None and digest == settings.get(DATA_DIGEST)


def _shown(value: Any) -> str:
    return "(none)" if value is None else str(value)


def check_same_model(checkpoint: Path, model: PreTrainedModel) -> None:
    """Refuse a checkpoint whose config.json describes another model than `model` (shapes, vocabulary, labels)."""
    config_file = checkpoint / "config.json"
    if not config_file.is_file():
        return
    # both read in full (config.json leaves out the defaults)
    saved = _comparable(json.loads(type(model.config).from_pretrained(checkpoint).to_json_string(use_diff=False)))
    current = _comparable(json.loads(model.config.to_json_string(use_diff=False)))
    for name in sorted(set(saved) | set(current)):
        if saved.get(name) != current.get(name):
            raise ScriptError(
                f"cannot resume from {checkpoint}: its model has {name} {_shown(saved.get(name))}, the model of "
                f"this run {_shown(current.get(name))} (from --config_overrides, --model_name_or_path, the "
                f"tokenizer or the labels): resume with the settings the checkpoint was trained with, {NEW_RUN_ADVICE}."
            )


def _comparable(config: dict[str, Any]) -> dict[str, Any]:
    return {
        key: value for key, value in config.items() if key not in IGNORED_CONFIG_FIELDS and not key.startswith("_")
    }


def check_same_vocabulary(checkpoint: Path, tokenizer: Any) -> None:
    """Refuse a checkpoint whose saved vocab.txt is not the vocabulary of this run's tokenizer, token for token."""
    vocab_file = checkpoint / "vocab.txt"
    if not vocab_file.is_file() or not hasattr(tokenizer, "vocab"):
        return
    saved = list(load_vocab(vocab_file))
    current = sorted(tokenizer.vocab, key=tokenizer.vocab.get)
    if saved == current:
        return
    differing = next(
        (index for index, pair in enumerate(zip(saved, current, strict=False)) if pair[0] != pair[1]), None
    )
    difference = (
        f"{len(saved)} tokens where this run's tokenizer has {len(current)}"
        if differing is None
        else f"token {differing} {saved[differing]!r} where this run's tokenizer has {current[differing]!r}"
    )
    raise ScriptError(
        f"cannot resume from {checkpoint}: its vocabulary has {difference}: resume with the checkpoint's tokenizer "
        f"(--tokenizer_name {checkpoint}), {NEW_RUN_ADVICE}."
    )


__all__ = [
    "RUN_SETTINGS_FILE",
    "absolute_path",
    "check_resume",
    "data_digest",
    "find_resume_checkpoint",
    "record_run_settings",
    "run_settings",
    "sampling_settings",
]
