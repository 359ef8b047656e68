"""
RoFormer's multi-stage length schedule (`run_mlm.py --stages`): one run walks stages of their own sequence length,
global batch and steps, each starting from the weights, optimizer and scheduler state the previous one ended with,
under one learning-rate schedule spanning them all.

Stage `n` keeps its checkpoints and results in `output_dir/stage-<n>`; without `--stages` the run is a single stage
as `TrainingArguments` say, kept in output_dir itself. A resumed run starts at the stage its checkpoint belongs to.
"""

import json
import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, TrainerCallback, TrainingArguments

from ...text_classification_pipeline import MIN_SEQ_LENGTH
from ..errors import ScriptError
from ..outputs.checkpoints import atomic_path, check_given_checkpoint, last_complete_checkpoint
from ..outputs.interrupts import raise_if_stopped
from ..outputs.resume import (
    RESTART_ADVICE,
    check_not_finished,
    find_resume_checkpoint,
    load_checkpoint_weights,
    train_from,
)
from ..outputs.run_outputs import save_metrics, save_model_atomically, save_state
from ..outputs.written_files import run_folder_number
from ..static_shapes import StaticShapeTrainer
from ..trainer_internals import TiedWeightsOnLoad

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stage:
    """One stage of a pretraining run; `None` batch and steps mean "as TrainingArguments say" (no --stages)."""

    max_seq_length: int
    global_batch_size: int | None = None
    steps: int | None = None


def parse_stages(text: str) -> list[Stage]:
    """
    Parse `--stages`: `"max_seq_length:global_batch:steps"` items separated by commas.

    Raises `ScriptError` naming the malformed item.
    """
    stages = []
    for item in text.split(","):
        numbers = item.strip().split(":")
        # ASCII digits only: str.isdigit() also accepts "²", which int() then refuses
        if len(numbers) != 3 or not all(re.fullmatch(r"[0-9]+", number.strip()) for number in numbers):
            raise ScriptError(
                f"--stages: {item.strip()!r} is not 'max_seq_length:global_batch:steps' with three positive integers "
                "in digits 0-9 (e.g. --stages 512:256:1000,1536:256:100)."
            )
        max_seq_length, global_batch_size, steps = (int(number) for number in numbers)
        if global_batch_size < 1 or steps < 1:
            raise ScriptError(f"--stages: {item.strip()!r} needs a global batch and a number of steps of at least 1.")
        stages.append(Stage(max_seq_length, global_batch_size, steps))
    return stages


def canonical_stages(text: str) -> str:
    """`--stages` as its parsed stages write it back (`512:256:1000,1536:256:100`): the one text for the same stages,
    whatever spaces or leading zeros were given, so that a resume compares stages, not spellings."""
    return ",".join(f"{stage.max_seq_length}:{stage.global_batch_size}:{stage.steps}" for stage in parse_stages(text))


def plan_stages(stages_text: str | None, max_seq_length: int, training_args: TrainingArguments) -> list[Stage]:
    """
    The stages to walk, all checked: those of `stages_text` (`--stages`), else one stage of `max_seq_length` tokens
    as `training_args` say.
    """
    stages = parse_stages(stages_text) if stages_text else [Stage(max_seq_length)]
    for index, stage in enumerate(stages):
        if stage.max_seq_length < MIN_SEQ_LENGTH:
            raise ScriptError(
                f"max_seq_length {stage.max_seq_length} is too short: use at least {MIN_SEQ_LENGTH} tokens "
                "([CLS], [SEP] and some text)."
            )
        if stage.global_batch_size is not None:
            gradient_accumulation_steps(stage, index, training_args)
    warn_if_no_training_loss_is_logged(stages, training_args)
    return stages


def main_stage(stages: list[Stage]) -> Stage:
    """The stage that trains on the most tokens: its length is the one the precision probe times."""
    return max(stages, key=lambda stage: (stage.steps or 1) * (stage.global_batch_size or 1) * stage.max_seq_length)


def warn_if_no_training_loss_is_logged(stages: list[Stage], training_args: TrainingArguments) -> None:
    """Warn when `--logging_steps` exceeds every stage: the Trainer would log no training loss, the curve no line."""
    longest = max(stage.steps or training_args.max_steps for stage in stages)
    logging_steps = training_args.logging_steps
    if training_args.logging_strategy == "steps" and 1 <= longest < logging_steps and training_args.do_train:
        logger.warning(
            f"--logging_steps {logging_steps:g} is more than the {longest} steps of the longest stage: no training "
            f"loss will be logged and the loss curve will show none; use e.g. --logging_steps {max(1, longest // 10)}."
        )


def gradient_accumulation_steps(stage: Stage, index: int, training_args: TrainingArguments) -> int:
    """The gradient accumulation that gives the stage its global batch with this per-device batch and world size."""
    per_step = training_args.per_device_train_batch_size * training_args.world_size
    if stage.global_batch_size % per_step != 0:
        raise ScriptError(
            f"stage {index + 1}: the global batch {stage.global_batch_size} is not a multiple of "
            f"per_device_train_batch_size x processes = {training_args.per_device_train_batch_size} x "
            f"{training_args.world_size}: choose a per-device batch size that divides it."
        )
    return stage.global_batch_size // per_step


def stage_training_args(training_args: TrainingArguments, stages: list[Stage], index: int) -> TrainingArguments:
    """
    The TrainingArguments of stage `index`: its own folder, steps, derived gradient accumulation and seed. Pushing
    to the Hub happens once at the end of the run, and the collator needs the `word_ids` column.
    """
    common = {"remove_unused_columns": False, "push_to_hub": False}
    stage = stages[index]
    if stage.steps is None:
        return replace(training_args, **common)
    return replace(
        training_args,
        output_dir=str(stage_dir(training_args, stages, index)),
        max_steps=stage.steps,
        gradient_accumulation_steps=gradient_accumulation_steps(stage, index, training_args),
        seed=training_args.seed + index,
        **common,
    )


def stage_dir(training_args: TrainingArguments, stages: list[Stage], index: int) -> Path:
    """Where stage `index` keeps its checkpoints and results: `output_dir/stage-<n>`, or output_dir for one stage."""
    if stages[index].steps is None:
        return Path(training_args.output_dir)
    return Path(training_args.output_dir) / f"stage-{index + 1}"


class StagedTrainer(TiedWeightsOnLoad, StaticShapeTrainer):
    """
    A Trainer whose learning-rate schedule spans every stage of the run, and which can start from the optimizer and
    scheduler state the previous stage ended with (`create_optimizer` / `create_scheduler` are the overriding points
    transformers documents) Its checkpoints load without a word about the tied decoder
    (`TiedWeightsOnLoad`).

    Args:
        schedule_steps (`int`, *optional*): length of the whole schedule; `None` uses the Trainer's own.
        start_state (`dict`, *optional*): `{"optimizer": ..., "scheduler": ...}` state dicts to start from.
    """

    def __init__(self, *args, schedule_steps: int | None = None, start_state: dict | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.schedule_steps = schedule_steps
        self.start_state = start_state

    def create_optimizer(self, model=None) -> torch.optim.Optimizer:
        is_new = self.optimizer is None
        optimizer = super().create_optimizer(model)
        if is_new and self.start_state is not None:
            optimizer.load_state_dict(self.start_state["optimizer"])
        return optimizer

    def create_scheduler(self, num_training_steps: int, optimizer=None) -> torch.optim.lr_scheduler.LRScheduler:
        is_new = self.lr_scheduler is None
        scheduler = super().create_scheduler(self.schedule_steps or num_training_steps, optimizer)
        if is_new and self.start_state is not None:
            scheduler.load_state_dict(self.start_state["scheduler"])
            # a new scheduler sets the learning rate of its step 0; continue at the step the last stage reached
            for group, learning_rate in zip(scheduler.optimizer.param_groups, scheduler.get_last_lr(), strict=True):
                group["lr"] = learning_rate
        return scheduler


class SaveAtEndCallback(TrainerCallback):
    """Saves a checkpoint at the last step of a stage, so the next stage (or a resumed run) can start from it."""

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= state.max_steps and args.save_strategy != "no":
            control.should_save = True
        return control


def find_starting_point(training_args: TrainingArguments, stages: list[Stage]) -> tuple[int, str | None]:
    """
    Which stage to run first and the checkpoint to resume it from, as `--resume_from_checkpoint` says (a path, or
    `True` for the last checkpoint of the run).
    """
    if stages[0].steps is None or training_args.resume_from_checkpoint is None:
        return 0, find_resume_checkpoint(training_args)
    if str(training_args.resume_from_checkpoint).lower() == "true":
        folders = [stage_dir(training_args, stages, index) for index in reversed(range(len(stages)))]
        checkpoint = last_complete_checkpoint(*folders)
        if checkpoint is None:
            raise ScriptError(
                f"--resume_from_checkpoint true, but no stage of {training_args.output_dir} has a complete checkpoint: "
                f"{RESTART_ADVICE}."
            )
        index = len(stages) - 1 - folders.index(Path(checkpoint).parent)
    else:
        checkpoint = Path(training_args.resume_from_checkpoint)
        stage_number = run_folder_number(checkpoint.parent.name, "stage")
        if not checkpoint.is_dir() or stage_number is None or stage_number > len(stages):
            raise ScriptError(
                f"--resume_from_checkpoint {checkpoint}: with --stages, give a checkpoint-* folder inside "
                "output_dir/stage-<n>/ of a run with the same stages, or True for the last one."
            )
        check_given_checkpoint(checkpoint)
        index, checkpoint = stage_number - 1, str(checkpoint)
    if index == len(stages) - 1:  # the end of the last stage is the end of the run
        check_not_finished(checkpoint, stage_training_args(training_args, stages, index))
    return index, checkpoint


def checkpoint_step(checkpoint: str) -> int:
    """The optimizer step a checkpoint was saved at."""
    return json.loads((Path(checkpoint) / "trainer_state.json").read_text())["global_step"]


def load_stage_end(model: PreTrainedModel, checkpoint: str) -> dict:
    """Load the weights a finished stage ended with into `model`; return its optimizer and scheduler state."""
    load_checkpoint_weights(model, checkpoint)
    return {
        name: torch.load(Path(checkpoint) / f"{name}.pt", weights_only=True) for name in ("optimizer", "scheduler")
    }


def stage_end_state(trainer: StagedTrainer) -> dict | None:
    """The optimizer and scheduler state a stage ended with (None under FSDP/DeepSpeed, which shard them)."""
    if trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled:
        logger.warning("FSDP/DeepSpeed: the next stage starts a new optimizer (its state is sharded).")
        return None
    return {"optimizer": trainer.optimizer.state_dict(), "scheduler": trainer.lr_scheduler.state_dict()}


def evaluate_initial_model(trainer: StagedTrainer) -> None:
    """Evaluate the model before its first step and save the metrics as `initial_results.json`."""
    metrics = trainer.evaluate()
    trainer.log_metrics("initial", metrics)
    save_metrics(trainer, "initial", metrics, combined=False)


class InitialEvaluationCallback(TrainerCallback):
    """
    Evaluates the model before its first step, once `train()` has prepared it. Evaluating before `train()` would
    prepare the bare model for evaluation, and accelerate then leaves it unwrapped for training: without
    DistributedDataParallel every process would train its own model.
    """

    def __init__(self, trainer: StagedTrainer):
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        evaluate_initial_model(self.trainer)


# The trainer of stage `index` with these TrainingArguments, schedule length and optimizer/scheduler state to start
# from: the script builds it (its data, collator and metrics), the walk below decides when and with what.
StageTrainerBuilder = Callable[[int, TrainingArguments, int | None, dict | None], StagedTrainer]


def walk_stages(
    model: PreTrainedModel,
    stages: list[Stage],
    training_args: TrainingArguments,
    build_stage_trainer: StageTrainerBuilder,
    first_index: int = 0,
    checkpoint: str | None = None,
) -> StagedTrainer:
    """
    Train and evaluate the stages from `first_index` on (resuming the first from `checkpoint` if given), each from
    the weights, optimizer and schedule the previous one ended with; the last saves the final model into output_dir.
    A checkpoint at the end of a stage before the last starts the next stage; at the end of the last, the run saves
    what it had not (`resume.train_from`). Returns the last stage's trainer.
    """
    start_state, last = None, len(stages) - 1
    stage_steps = stages[first_index].steps
    if checkpoint is not None and first_index < last and checkpoint_step(checkpoint) >= stage_steps:
        start_state = load_stage_end(model, checkpoint)
        first_index, checkpoint = first_index + 1, None
    schedule_steps = sum(stage.steps for stage in stages) if stages[0].steps is not None else None
    output_dir = Path(training_args.output_dir)
    for index in range(first_index, len(stages)):
        args = stage_training_args(training_args, stages, index)
        trainer = build_stage_trainer(index, args, schedule_steps, start_state)
        final_model_dir = output_dir if index == last else None
        run_stage(trainer, stages, index, checkpoint, index == 0 and checkpoint is None, final_model_dir)
        start_state, checkpoint = stage_end_state(trainer) if args.do_train and index < last else None, None
    return trainer


def run_stage(
    trainer: StagedTrainer,
    stages: list[Stage],
    index: int,
    checkpoint: str | None,
    starts_run: bool,
    final_model_dir: Path | None = None,
) -> None:
    """
    Train one stage (resuming from `checkpoint` if given) and evaluate it; save its metrics and state. The last stage
    saves the final model into `final_model_dir` first, so that results never describe weights that were not saved.
    """
    if trainer.eval_dataset is not None and starts_run:
        if trainer.args.do_train:
            trainer.add_callback(InitialEvaluationCallback(trainer))
        else:
            evaluate_initial_model(trainer)
    if trainer.args.do_train:
        logger.info(f"*** Stage {index + 1}/{len(stages)}: {stages[index]} ***")
        metrics = train_from(trainer, checkpoint)
        raise_if_stopped(trainer)
    if final_model_dir is not None:
        save_model_atomically(trainer, final_model_dir)
    if trainer.args.do_train:
        trainer.log_metrics("train", metrics)
        save_metrics(trainer, "train", metrics)
    if trainer.eval_dataset is not None:
        metrics = trainer.evaluate()
        metrics["perplexity"] = math.exp(min(metrics["eval_loss"], 100.0))
        trainer.log_metrics("eval", metrics)
        save_metrics(trainer, "eval", metrics)
    if trainer.args.do_train:
        save_state(trainer)  # the log history, evaluations included, for the loss curve


def read_stage_results(training_args: TrainingArguments, stages: list[Stage]) -> list[dict[str, Any]]:
    """The results of every stage of the run as saved in the stage folders (also those finished before a resume)."""
    table = []
    for index, stage in enumerate(stages):
        row = {
            "stage": index + 1,
            "max_seq_length": stage.max_seq_length,
            "global_batch_size": stage.global_batch_size,
        }
        row["steps"] = stage.steps
        folder = stage_dir(training_args, stages, index)
        if (folder / "initial_results.json").is_file():
            initial = json.loads((folder / "initial_results.json").read_text())
            row.update({key.replace("eval_", "initial_eval_"): value for key, value in initial.items()})
        for split in ("train", "eval"):
            if (folder / f"{split}_results.json").is_file():
                row.update(json.loads((folder / f"{split}_results.json").read_text()))
        table.append(row)
    return table


def plot_loss_curve(training_args: TrainingArguments, stages: list[Stage], path: Path) -> None:
    """Draw the training (and evaluation) loss of every stage against the run's step count, stages marked."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(8, 4.5))
    offset, labelled = 0, set()
    for index in range(len(stages)):
        state_file = stage_dir(training_args, stages, index) / "trainer_state.json"
        if not state_file.is_file():
            continue
        state = json.loads(state_file.read_text())
        history = state["log_history"]
        for key, style in (("loss", ".-"), ("eval_loss", "o")):
            points = [(offset + entry["step"], entry[key]) for entry in history if key in entry]
            if points:  # each curve named once, in the first stage that logged it
                label = None if key in labelled else f"{'train' if key == 'loss' else 'eval'} loss"
                axes.plot(*zip(*points, strict=True), style, color="C0" if key == "loss" else "C1", label=label)
                labelled.add(key)
        offset += state["global_step"]
        if len(stages) > 1:
            axes.axvline(offset, color="grey", linestyle=":", linewidth=1)
    axes.set(xlabel="optimizer step", ylabel="MLM loss", title="run_mlm.py loss (dotted lines: ends of stages)")
    if labelled:  # a run too short to log a loss draws an empty chart, without matplotlib's warning of no legend
        axes.legend()
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=100, bbox_inches="tight")
    pyplot.close(figure)


def format_stage_table(table: list[dict[str, Any]]) -> str:
    """A Markdown table of the stages' results (the masked-token accuracy before training on the first line)."""
    columns = ["stage", "max_seq_length", "global_batch_size", "steps", "train_loss", "eval_loss", "perplexity"]
    columns.append("eval_accuracy")
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    if "initial_eval_accuracy" in table[0]:
        initial = {"stage": "before training", "eval_loss": table[0]["initial_eval_loss"]}
        initial["eval_accuracy"] = table[0]["initial_eval_accuracy"]
        table = [initial, *table]
    for row in table:
        cells = [row.get(column) for column in columns]
        lines.append("| " + " | ".join(_format_cell(cell) for cell in cells) + " |")
    return "\n".join(lines)


def _format_cell(value: Any) -> str:
    if value is None:
        return ""
    return f"{value:.4f}" if isinstance(value, float) else str(value)
