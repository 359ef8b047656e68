"""
Pretraining a masked language model, run_mlm.py's training phases: the tokenizer and masked LM of a run
(`build_tokenizer_and_masked_lm`), the Trainer of one stage (`build_stage_trainer`), the settings a resume must repeat
(`mlm_run_settings`), the shapes of each stage's batches under `--torch_compile`, and `pretrain`, which walks the
stages from where `--resume_from_checkpoint` says.

`data_args` and `masking_args` are the script's argument dataclasses (run_mlm.py's `DataArguments`, a
`DatasetArguments`, and `MaskingArguments`: `mlm_probability`, `whole_word_mask`, `stages`, `sparse_prediction`).
"""

from collections.abc import Callable
from typing import Any

import datasets
from transformers import PreTrainedTokenizerBase, TrainingArguments

from ...modeling import RoFormerForMaskedLM, slot_count
from ..building import build_config, build_model, build_tokenizer, check_vocabulary_fits
from ..cli import ModelArguments
from ..console import ReportSpeed
from ..errors import ScriptError
from ..machine.launch import compiled_for_every_length
from ..outputs.divergence import StopOnNonFiniteWeights
from ..outputs.interrupts import StopAtStepBoundary
from ..outputs.resume import check_resume, data_run_settings, record_run_settings
from ..static_shapes import (
    StaticShapes,
    announce_static_shapes,
    compiled_once_per_shape,
    length_buckets,
    uses_static_shapes,
)
from .stages import SaveAtEndCallback, Stage, StagedTrainer, find_starting_point, walk_stages
from .whole_word_masking import EpochCallback, WholeWordMaskCollator, masked_token_accuracy, predicted_token_ids


def build_tokenizer_and_masked_lm(
    model_args: ModelArguments, sparse_prediction: bool = True, longest_trained_length: int | None = None
) -> tuple[PreTrainedTokenizerBase, RoFormerForMaskedLM]:
    """
    Load the tokenizer (which must have `[MASK]`) and the model, from a checkpoint or from scratch, with
    `sparse_prediction` set in its config for this run (`--config_overrides` still wins; the field is never saved).
    The tokenizer's `model_max_length` becomes `longest_trained_length` when given, so that the saved tokenizer's
    `truncation=True` cuts there.
    """
    tokenizer = build_tokenizer(model_args)
    mask_token_id = tokenizer.convert_tokens_to_ids(tokenizer.mask_token) if tokenizer.mask_token else None
    if mask_token_id is None or mask_token_id == tokenizer.unk_token_id:
        raise ScriptError(
            f"the vocabulary has no mask token {tokenizer.mask_token!r}: masked language modelling needs one; "
            "add [MASK] to the vocab.txt."
        )
    defaults = {} if model_args.model_name_or_path else {"vocab_size": len(tokenizer)}
    # the script owns the labels and reads logits of either shape (predicted_token_ids), so sparse is safe here; the
    # config.json it saves leaves the field out, so whoever loads the model gets logits at every position
    defaults["sparse_prediction"] = sparse_prediction
    config = build_config(model_args, pad_token_id=tokenizer.pad_token_id, **defaults)
    check_vocabulary_fits(tokenizer, config)
    if longest_trained_length is not None:
        tokenizer.model_max_length = longest_trained_length
    return tokenizer, build_model(model_args, config, RoFormerForMaskedLM)


def build_stage_trainer(
    model: RoFormerForMaskedLM,
    tokenizer: PreTrainedTokenizerBase,
    examples: datasets.DatasetDict,
    args: TrainingArguments,
    masking_args: Any,
    schedule_steps: int | None = None,
    start_state: dict | None = None,
    static_shapes: StaticShapes | None = None,
) -> StagedTrainer:
    """
    The Trainer of one stage, with the masking collator, masked-token accuracy and stage-end checkpoints; batches
    padded to `static_shapes` where given.
    """
    evaluate = args.do_eval and "validation" in examples
    collator = WholeWordMaskCollator(
        tokenizer,
        masking_args.mlm_probability,
        masking_args.whole_word_mask,
        seed=args.seed,
        prediction_slot_rate=model.config.prediction_slot_rate,
    )
    trainer = StagedTrainer(
        model=model,
        args=args,
        train_dataset=examples["train"] if args.do_train else None,
        eval_dataset=examples["validation"] if evaluate else None,
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=masked_token_accuracy if evaluate else None,
        preprocess_logits_for_metrics=predicted_token_ids if evaluate else None,
        schedule_steps=schedule_steps,
        start_state=start_state,
        static_shapes=static_shapes,
    )
    trainer.add_callback(EpochCallback(collator))
    trainer.add_callback(SaveAtEndCallback())
    trainer.add_callback(StopAtStepBoundary())
    trainer.add_callback(ReportSpeed())
    return trainer


def mlm_run_settings(data_args: Any, masking_args: Any, training_args: TrainingArguments) -> dict[str, Any]:
    """The settings a checkpoint of this run records, and a resume must repeat (`training.outputs.resume`)."""
    return data_run_settings(
        training_args,
        data_args,
        max_seq_length=None if masking_args.stages else data_args.max_seq_length,
        stages=masking_args.stages,
        mlm_probability=masking_args.mlm_probability,
        **({"max_steps": None, "num_train_epochs": None} if masking_args.stages else {}),  # the stages say instead
    )


def varying_shapes(stages: list[Stage], sparse_prediction: bool) -> str | None:
    """How the shapes of a run's batches change, in words (what `--torch_compile` compiles for), or None."""
    lengths = sorted({stage.max_seq_length for stage in stages})
    if len(lengths) > 1:
        return f"stages of {' and '.join(map(str, lengths))} tokens"
    if sparse_prediction:
        return "sparse prediction scores a different number of tokens in each batch"
    return None


def stage_shapes(
    model: RoFormerForMaskedLM,
    tokenizer: PreTrainedTokenizerBase,
    stage: Stage,
    data_args: Any,
    training_args: TrainingArguments,
) -> StaticShapes | None:
    """The static shapes of a stage's batches (None where static shapes are off): packed blocks have the stage's
    length, `--line_by_line` lines are padded to its buckets."""
    if not uses_static_shapes(training_args):
        return None
    lengths = length_buckets(stage.max_seq_length) if data_args.line_by_line else (stage.max_seq_length,)
    row_logits = model.config.prediction_slot_rate is None or not model.config.sparse_prediction
    return StaticShapes(lengths, tokenizer.pad_token_id, pads_rows=True, row_logits=row_logits)


def prepare_static_shapes(
    model: RoFormerForMaskedLM,
    stages: list[Stage],
    data_args: Any,
    masking_args: Any,
    training_args: TrainingArguments,
) -> int:
    """
    Where static shapes are on: fixed prediction slots for sparse prediction, and the run's shapes in one line.
    Returns the number of shapes the run compiles for (training and evaluation, every stage's lengths).
    """
    if not uses_static_shapes(training_args):
        return 0
    if masking_args.sparse_prediction:
        model.config.prediction_slot_rate = masking_args.mlm_probability
    lengths = sorted({stage.max_seq_length for stage in stages})
    buckets = sorted({bucket for length in lengths for bucket in length_buckets(length)})
    rows = training_args.per_device_train_batch_size
    slots = slot_count(rows * lengths[-1], masking_args.mlm_probability) if masking_args.sparse_prediction else None
    shapes = StaticShapes(tuple(buckets if data_args.line_by_line else lengths), 0)
    announce_static_shapes(training_args, shapes.describe(rows, slots))
    return 2 * len(shapes.lengths)


def pretrain(
    model: RoFormerForMaskedLM,
    tokenizer: PreTrainedTokenizerBase,
    tokenize_to_length: Callable[[int], datasets.DatasetDict],
    stages: list[Stage],
    data_args: Any,
    masking_args: Any,
    training_args: TrainingArguments,
) -> StagedTrainer:
    """
    Pretrain `model` through `stages` (`stages.walk_stages`), from where `--resume_from_checkpoint` says once a resume
    is checked to repeat the settings of the run it continues: each stage tokenizes the text to its length
    (`tokenize_to_length`), trains, then evaluates (loss, perplexity, masked-token accuracy) and saves its results in
    its folder; under `--torch_compile`, with the batches' static shapes (or compiled for every length where they
    vary). Returns the last stage's trainer.
    """
    static_shape_count = prepare_static_shapes(model, stages, data_args, masking_args, training_args)
    varying = None if static_shape_count else varying_shapes(stages, masking_args.sparse_prediction)
    first_index, checkpoint = find_starting_point(training_args, stages)
    settings = mlm_run_settings(data_args, masking_args, training_args)
    if checkpoint is not None:
        check_resume(checkpoint, model, tokenizer, settings)
    divergence_check = StopOnNonFiniteWeights()  # one for every stage: it names the newest checkpoint of the run

    def trainer_for_stage(index: int, args: TrainingArguments, schedule_steps: int | None, start_state: dict | None):
        examples = tokenize_to_length(stages[index].max_seq_length)
        shapes = stage_shapes(model, tokenizer, stages[index], data_args, args)
        trainer = build_stage_trainer(
            model, tokenizer, examples, args, masking_args, schedule_steps, start_state, shapes
        )
        # added last, after the progress bar's: no callback asks for a save after it, and it stops once the bar is closed
        trainer.add_callback(divergence_check)
        record_run_settings(trainer, settings)
        return trainer

    with (
        compiled_for_every_length(training_args, varying),
        compiled_once_per_shape(training_args, static_shape_count),
    ):
        return walk_stages(model, stages, training_args, trainer_for_stage, first_index, checkpoint)


__all__ = [
    "build_stage_trainer",
    "build_tokenizer_and_masked_lm",
    "mlm_run_settings",
    "prepare_static_shapes",
    "pretrain",
    "stage_shapes",
    "varying_shapes",
]
