"""Resuming a run: the checkpoint `--resume_from_checkpoint` names (a path, or the newest complete one: what makes one
complete is `checkpoints`' business), and the refusal of a resume with other settings than the checkpoint was trained
with, before any training, in one line naming the setting, its value in the checkpoint and in this run, and the fix.

A resumed Trainer takes the weights, optimizer, schedule and data position from the checkpoint: a model of another
shape cannot load them, a new `--learning_rate` would be ignored (the schedule is the checkpoint's), and a new
`--train_file` would be skipped into by the number of batches already trained on. So every checkpoint the scripts
write records the settings that decide its training (`RUN_SETTINGS_FILE`, written after the weights, and listed in
the checkpoint's manifest like every file of it), and a resume compares them with its own, each as `RESUME_RULES`
says: refused or applied with a warning, compared as parsed values. The model (its config) and the vocabulary are
compared for every checkpoint, also one without that record (transformers' own Trainer's).

A resume of a run that already trained to its end (its checkpoint at `--max_steps`, or at the end of its epochs)
changes nothing: `RunFinished` says so in one line, and the script ends with exit status 0. A run stopped between that
checkpoint and its final save is not finished: its resume trains no step (`train_from`) and saves what is missing.
"""

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors.torch import load_file
from transformers import PreTrainedModel, Trainer, TrainerState, TrainingArguments

from ...tokenization import load_vocab
from ..data.folders import files_datasets_reads
from ..errors import ScriptError
from ..machine.precisions import mixed_precision
from .checkpoints import check_given_checkpoint, last_complete_checkpoint
from .run_outputs import save_checkpoints_whole
from .written_files import run_folder_number

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
        check_not_finished(last, training_args)
        return last
    if not Path(resume).exists():
        raise ScriptError(f"--resume_from_checkpoint {resume}: no such folder.")
    check_given_checkpoint(resume)
    check_not_finished(resume, training_args)
    return str(resume)


class RunFinished(Exception):
    """A resume of a run that already trained to its end: nothing was done, and the message says so; the script ends
    with exit status 0 (`script_runner.run_script`), so that a job rerun after its end succeeds as it did."""

    def __init__(self, message: str, announce: bool = True):
        super().__init__(message)
        self.announce = announce  # False on every process of a distributed run but the first: one line, not one each


def check_not_finished(checkpoint: str | Path, training_args: TrainingArguments) -> None:
    """
    Raise `RunFinished` when `checkpoint` is at the end of the training `training_args` ask for (`is_at_end`) and the
    run ended there: its output folder's own trainer_state.json, saved after the final model, is of that step too.
    Resumed, the Trainer would train one step past the end, and the scripts rewrite the results and the card. A run
    stopped between its last checkpoint and its final save is not finished: resumed, it saves what is missing
    (`train_from`).
    """
    step, (end, length) = _state_step(Path(checkpoint)), _run_end(Path(checkpoint), training_args)
    if not is_at_end(checkpoint, training_args) or (_state_step(Path(training_args.output_dir)) or -1) < step:
        return
    raise RunFinished(
        f"the run is finished: {checkpoint} is at step {step}, {'the end' if step == end else 'past the end'} of "
        f"{length}, so there is nothing to resume and nothing was changed (no checkpoint, results or card written); "
        "to train on, resume with a larger --max_steps or --num_train_epochs.",
        announce=training_args.process_index == 0,
    )


def is_at_end(checkpoint: str | Path, training_args: TrainingArguments) -> bool:
    """Whether `checkpoint` is at (or past) the step the training `training_args` ask for ends at (`_run_end`)."""
    step, (end, _) = _state_step(Path(checkpoint)), _run_end(Path(checkpoint), training_args)
    return step is not None and end is not None and 0 < end <= step


def _run_end(checkpoint: Path, training_args: TrainingArguments) -> tuple[int | None, str]:
    """
    The step the run ends at, and its length in words: `--max_steps`, or, where the run's epochs are those the
    checkpoint was trained for, the last step of its epochs (`None` where they are not).
    """
    end = training_args.max_steps
    if end <= 0:
        settings_file = checkpoint / RUN_SETTINGS_FILE
        recorded = json.loads(settings_file.read_text(encoding="utf-8")) if settings_file.is_file() else {}
        same_epochs = recorded.get("num_train_epochs") == training_args.num_train_epochs
        end = _state_step(checkpoint, "max_steps") if same_epochs and recorded.get("max_steps") == end else None
        return end, f"--num_train_epochs {training_args.num_train_epochs:g} ({end} steps)"
    if run_folder_number(Path(training_args.output_dir).name, "stage") is not None:  # run_mlm.py's last stage
        return end, f"the last of --stages ({end} steps)"
    return end, f"--max_steps {end}"


def train_from(trainer: Trainer, checkpoint: str | None) -> dict[str, float]:
    """
    `trainer.train(resume_from_checkpoint=checkpoint)`, and its metrics. From a checkpoint at the end of the run
    (`is_at_end`: a run stopped between its last checkpoint and its final save), which the Trainer would train one step
    past (it checks the end after a step, not before the first), no step is trained: the trainer takes the
    checkpoint's state and weights (the best checkpoint's under `--load_best_model_at_end`, as training's end does),
    and the metrics are only the epoch reached; the script then saves the final model and evaluates as after
    training.
    """
    if checkpoint is None or not is_at_end(checkpoint, trainer.args):
        return trainer.train(resume_from_checkpoint=checkpoint).metrics
    trainer.state = TrainerState.load_from_json(str(Path(checkpoint) / "trainer_state.json"))
    best = trainer.state.best_model_checkpoint  # the path as the run gave it: found by its name beside `checkpoint`
    best = Path(checkpoint).parent / Path(best).name if best and trainer.args.load_best_model_at_end else None
    weights = best if best is not None and best.is_dir() else checkpoint
    load_checkpoint_weights(trainer.model, weights)
    if trainer.is_world_process_zero():
        length = _run_end(Path(checkpoint), trainer.args)[1]
        logger.warning(
            f"{checkpoint} is at step {trainer.state.global_step}, the end of {length}, and the run stopped before its "
            f"final save: no step is trained, the final model is saved from {weights}."
        )
    return {"epoch": trainer.state.epoch}


def load_checkpoint_weights(model: PreTrainedModel, checkpoint: str | Path) -> None:
    """Load the weights of `checkpoint` (its safetensors files) into `model`; a weight they leave out (a tied decoder)
    keeps the model's. Raises `ScriptError` for weights of another model."""
    for weights_file in sorted(Path(checkpoint).glob("*.safetensors")):
        unexpected = model.load_state_dict(load_file(weights_file), strict=False).unexpected_keys
        if unexpected:
            raise ScriptError(f"{checkpoint} holds weights of another model ({unexpected[0]}, ...).")


def _state_step(folder: Path, field: str = "global_step") -> int | None:
    """A whole number of `folder/trainer_state.json` (its step, by default), or `None` where it has none."""
    try:
        value = json.loads((folder / "trainer_state.json").read_text(encoding="utf-8")).get(field)
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None


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
    "columns",
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
    and each checkpoint whole and verifiable (`run_outputs.save_checkpoints_whole`): a complete checkpoint always
    holds the file, listed in its manifest.
    """
    save_checkpoints_whole(trainer, {RUN_SETTINGS_FILE: dict(settings)})


def check_resume(
    checkpoint: str | Path,
    model: PreTrainedModel,
    tokenizer: Any,
    settings: Mapping[str, Any],
) -> None:
    """
    Raise `ScriptError` if this run differs from the one that wrote `checkpoint`: the model's config, the
    vocabulary, or a recorded setting (`RUN_SETTINGS_FILE`, each as `RESUME_RULES` says; a checkpoint without one has
    only the first two checked).
    """
    checkpoint = Path(checkpoint)
    check_same_model(checkpoint, model)
    check_same_vocabulary(checkpoint, tokenizer)
    settings_file = checkpoint / RUN_SETTINGS_FILE
    if not settings_file.is_file():
        logger.warning(f"{checkpoint} records no run settings ({RUN_SETTINGS_FILE}): only the model is checked.")
        return
    recorded = json.loads(settings_file.read_text(encoding="utf-8"))
    differences = []
    for name, value in settings.items():
        rule = RESUME_RULES.get(name, REFUSED_SETTING)
        if name not in recorded or rule.parse(recorded[name]) == rule.parse(value):
            continue
        if rule.same_data_suffices and _same_data(recorded, settings):  # the same content at another path
            continue
        differences.append((rule, name))
    for rule, name in sorted(differences, key=lambda difference: not difference[0].refused):  # refusals first
        line = rule.message.format(
            checkpoint=checkpoint, name=name, old=_shown(recorded[name]), new=_shown(settings[name])
        )
        if rule.refused:
            raise ScriptError(line)
        logger.warning(line)


@dataclass(frozen=True)
class ResumeRule:
    """What a resume does with a recorded setting this run gives otherwise: refuse it or apply it with a warning
    (`refused`), in words (`message`, formatted with `checkpoint`, `name`, `old` and `new`), comparing the values as
    `parse` reads them; `same_data_suffices`: a path to data that is no change where the data's digest is the same."""

    refused: bool
    message: str
    parse: Callable[[Any], Any] = lambda value: value
    same_data_suffices: bool = False


NEW_RUN_FROM_ITS_WEIGHTS = "start a new run from its weights (--model_name_or_path {checkpoint}, another --output_dir)"
REFUSED_SETTING = ResumeRule(
    True,
    "cannot resume from {checkpoint}: it was trained with --{name} {old}, this run gives --{name} {new}, which a "
    "resumed run cannot apply (it continues the checkpoint's training): resume with --{name} {old}, or "
    f"{NEW_RUN_FROM_ITS_WEIGHTS}.",
)
APPLIED_SETTING = ResumeRule(
    False,
    "--{name} {new} differs from the {old} of {checkpoint}: applied, the run now ends (and its learning-rate schedule "
    "with it) where this run's options say.",
)


def parsed_stages(value: Any) -> Any:
    """`--stages` as the lengths, batches and steps it names (`"16:2:2, 16:2:2"` is `"16:2:2,16:2:2"`), else as
    given."""
    items = value.split(",") if isinstance(value, str) else value
    try:
        return tuple(
            tuple(int(number) for number in (item.split(":") if isinstance(item, str) else item)) for item in items
        )
    except (TypeError, ValueError):
        return value


# The settings a resume does not refuse as `REFUSED_SETTING` does; any other recorded setting is refused so.
RESUME_RULES = {
    DATA_DIGEST: ResumeRule(
        True,
        "cannot resume from {checkpoint}: its training data has changed since it was trained on (SHA-256 {old:.16}... "
        "then, {new:.16}... now), and a resumed run would skip its batches into other rows: resume with the data it "
        f"was trained on, or {NEW_RUN_FROM_ITS_WEIGHTS}.",
    ),
    VALIDATION_DIGEST: ResumeRule(
        True,
        "cannot resume from {checkpoint}: its --validation_file has changed since it was trained (SHA-256 {old:.16}... "
        "then, {new:.16}... now), and early stopping and --load_best_model_at_end would compare evaluations on other "
        f"rows: resume with the validation file it was trained with, or {NEW_RUN_FROM_ITS_WEIGHTS}.",
    ),
    "train_file": ResumeRule(True, REFUSED_SETTING.message, same_data_suffices=True),
    "dataset_name": ResumeRule(True, REFUSED_SETTING.message, same_data_suffices=True),
    "stages": ResumeRule(True, REFUSED_SETTING.message, parse=parsed_stages),
    **dict.fromkeys(APPLIED_SETTINGS, APPLIED_SETTING),
    PRECISION_SETTING: ResumeRule(
        False,
        "{checkpoint} was trained with mixed precision {old}, this run uses {new} ('no': float32; --bf16 chooses): "
        "applied, the weights and the optimizer state stay float32 either way.",
    ),
}


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
    "RESUME_RULES",
    "RUN_SETTINGS_FILE",
    "RunFinished",
    "absolute_path",
    "check_not_finished",
    "check_resume",
    "data_digest",
    "find_resume_checkpoint",
    "is_at_end",
    "load_checkpoint_weights",
    "record_run_settings",
    "run_settings",
    "sampling_settings",
    "train_from",
]
