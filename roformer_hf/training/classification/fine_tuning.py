"""
The phases of run_classification.py after its documents are loaded: the tokenizer and the classifier, the documents
encoded as model inputs, the trainer, fine-tuning, evaluation and prediction (predictions.jsonl), then what the model
card says of the run and where its outputs are. `data_args` is the script's `DataArguments` throughout (its input
settings filled in by `long_documents.resolve_input_settings`).
"""

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import datasets
from transformers import (
    DataCollatorWithPadding,
    EarlyStoppingCallback,
    PreTrainedTokenizerBase,
    Trainer,
    TrainingArguments,
)

from ...hub.model_card import TrainingSummary
from ...modeling import RoFormerForSequenceClassification
from ..building import build_config, build_model, build_tokenizer, check_vocabulary_fits
from ..cli import ModelArguments, command_line
from ..console import ReportSpeed, loading_instructions
from ..machine.cpu_precision import training_arithmetic
from ..machine.launch import compiled_for_every_length
from ..machine.precisions import NO_MIXED_PRECISION, mixed_precision
from ..outputs.divergence import StopOnNonFiniteWeights
from ..outputs.interrupts import StopAtStepBoundary, raise_if_stopped
from ..outputs.resume import check_resume, find_resume_checkpoint, record_run_settings, train_from
from ..outputs.run_outputs import atomic_path, prepare_output_dir, save_metrics, save_model_atomically, save_state
from ..publishing import evaluation_origins, trainer_arguments
from ..static_shapes import (
    StaticShapes,
    StaticShapeTrainer,
    announce_static_shapes,
    compiled_once_per_shape,
    length_buckets,
    uses_static_shapes,
)
from ..trainer_internals import InputOrderEvaluation
from .classification_scores import make_compute_metrics, prediction_records, report_split, run_inference
from .documents import HELD_OUT
from .labels import SINGLE_LABEL, LabelInfo, check_label_change, check_overrides_keep_labels
from .long_documents import encode_batch
from .run_settings import classification_run_settings

__all__ = [
    "InputOrderTrainer",
    "build_classification_trainer",
    "build_tokenizer_and_classifier",
    "classification_shapes",
    "classification_training_summary",
    "encode_documents",
    "fine_tune",
    "fine_tune_evaluate_and_predict",
    "predict",
    "predictions_path",
    "print_where_outputs_are",
]

logger = logging.getLogger(__name__)

SCRIPT = "run_classification.py"


def build_tokenizer_and_classifier(
    model_args: ModelArguments, label_info: LabelInfo
) -> tuple[PreTrainedTokenizerBase, RoFormerForSequenceClassification]:
    """The tokenizer, and the classifier with its label maps (a new head on a pretrained encoder, or from scratch)."""
    check_overrides_keep_labels(model_args, label_info)
    tokenizer = build_tokenizer(model_args)
    label_config = label_info.config_fields()
    if model_args.model_name_or_path is None:
        label_config.update(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    else:
        check_label_change(model_args, label_info)
    config = build_config(model_args, **label_config)
    check_vocabulary_fits(tokenizer, config)
    return tokenizer, build_model(model_args, config, RoFormerForSequenceClassification)


def encode_documents(
    raw_datasets: datasets.DatasetDict,
    tokenizer: PreTrainedTokenizerBase,
    label_info: LabelInfo,
    data_args: Any,
    training_args: TrainingArguments,
) -> datasets.DatasetDict:
    """Tokenize every split (see `long_documents.encode_batch`); the raw columns are dropped."""
    tokenized = datasets.DatasetDict()
    for split, dataset in raw_datasets.items():
        with training_args.main_process_first(desc=f"tokenizing the {split} data"):
            tokenized[split] = dataset.map(
                encode_batch,
                batched=True,
                with_indices=True,
                remove_columns=dataset.column_names,
                num_proc=data_args.preprocessing_num_workers,
                fn_kwargs={"tokenizer": tokenizer, "label_info": label_info, "data_args": data_args},
                desc=f"tokenizing the {split} data",
            )
        logger.info(f"{split}: {len(dataset)} documents -> {len(tokenized[split])} model inputs")
    return tokenized


class InputOrderTrainer(InputOrderEvaluation, StaticShapeTrainer):
    """
    A `Trainer` that evaluates and predicts in input order (`trainer_internals.InputOrderEvaluation`): window logits must stay
    in input order to be pooled per document, and predictions.jsonl must follow the test file.

    Its log names the validation split's pass "Evaluation on the validation data": `run_inference` runs it through
    `Trainer.predict`, which would call it "Prediction".
    """

    def evaluation_loop(self, dataloader, description: str, *args, metric_key_prefix: str = "eval", **kwargs):
        if description == "Prediction" and metric_key_prefix == "eval":
            description = "Evaluation on the validation data"
        return super().evaluation_loop(dataloader, description, *args, metric_key_prefix=metric_key_prefix, **kwargs)


def classification_shapes(
    tokenizer: PreTrainedTokenizerBase,
    label_info: LabelInfo,
    data_args: Any,
    training_args: TrainingArguments,
) -> StaticShapes | None:
    """The static shapes of the run's batches, said in one line (None where static shapes are off): lengths in
    buckets up to `--max_seq_length`; a partial batch padded where the loss ignores rows (single-label classes)."""
    if not uses_static_shapes(training_args):
        return None
    pads_rows = label_info.problem_type == SINGLE_LABEL
    shapes = StaticShapes(length_buckets(data_args.max_seq_length), tokenizer.pad_token_id, pads_rows=pads_rows)
    announce_static_shapes(training_args, shapes.describe(training_args.per_device_train_batch_size))
    return shapes


def build_classification_trainer(
    model: RoFormerForSequenceClassification,
    tokenizer: PreTrainedTokenizerBase,
    tokenized: datasets.DatasetDict,
    label_info: LabelInfo,
    data_args: Any,
    training_args: TrainingArguments,
) -> Trainer:
    """A Trainer with dynamic padding, document-level metrics and, if asked, early stopping."""
    half_precision = mixed_precision(training_args) != NO_MIXED_PRECISION
    eval_dataset = tokenized.get("validation")
    recipe = data_args.recipe()
    windows = recipe.reads_in_windows and eval_dataset is not None  # their logits pooled per document
    document_ids = list(eval_dataset["document_index"]) if windows else None
    callbacks = []
    if data_args.early_stopping_patience is not None:
        callbacks.append(EarlyStoppingCallback(early_stopping_patience=data_args.early_stopping_patience))
    shapes = classification_shapes(tokenizer, label_info, data_args, training_args)
    varying = None if shapes else "batches padded to their longest text"
    shape_count = 2 * len(shapes.lengths) + 2 if shapes else 0  # + 2: last batches kept short (float labels)
    with compiled_for_every_length(training_args, varying), compiled_once_per_shape(training_args, shape_count):
        trainer = InputOrderTrainer(
            model=model,
            args=trainer_arguments(training_args),  # the script pushes once, at the end (publish_run)
            train_dataset=tokenized.get("train"),
            eval_dataset=eval_dataset,
            processing_class=tokenizer,
            data_collator=DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8 if half_precision else None),
            compute_metrics=make_compute_metrics(label_info, document_ids, recipe.chunk_pooling),
            callbacks=[*callbacks, StopAtStepBoundary(), ReportSpeed()],
            static_shapes=shapes,
        )
    # added last, after the progress bar's: no callback asks for a save after it, and it stops once the bar is closed
    trainer.add_callback(StopOnNonFiniteWeights())
    return trainer


def fine_tune_evaluate_and_predict(
    trainer: Trainer,
    tokenized: datasets.DatasetDict,
    raw_datasets: datasets.DatasetDict,
    label_info: LabelInfo,
    data_args: Any,
) -> dict[str, float]:
    """Train (resuming if asked) and save the model, evaluate on the validation data, predict the test data."""
    args, metrics = trainer.args, {}
    if args.do_train:
        metrics.update(fine_tune(trainer, tokenized["train"], data_args))
    if args.do_eval:
        logits, labels, eval_metrics = run_inference(trainer, tokenized["validation"], label_info, data_args, "eval")
        report_split(trainer, logits, labels, eval_metrics, label_info, "eval")
        metrics.update(eval_metrics)
    if args.do_predict:
        metrics.update(predict(trainer, tokenized, raw_datasets["test"], label_info, data_args))
    return metrics


def fine_tune(trainer: Trainer, train_dataset: datasets.Dataset, data_args: Any) -> dict[str, float]:
    """Train (resuming if asked) and save the model; returns the training metrics."""
    args = trainer.args
    prepare_output_dir(args, trainer.model)
    checkpoint = find_resume_checkpoint(args)
    settings = classification_run_settings(data_args, args)
    if checkpoint is not None:
        check_resume(checkpoint, trainer.model, trainer.processing_class, settings)
    record_run_settings(trainer, settings)
    trained = train_from(trainer, checkpoint)  # no step from a checkpoint at the end: the final save is what's left
    raise_if_stopped(trainer)
    save_model_atomically(trainer)
    train_metrics = {**trained, **training_arithmetic(args)}  # threads and precision: what reproduces it
    metrics = {**train_metrics, "train_samples": len(set(train_dataset["document_index"]))}
    trainer.log_metrics("train", train_metrics)
    save_metrics(trainer, "train", train_metrics)
    save_state(trainer)
    return metrics


def predictions_path(training_args: TrainingArguments) -> Path:
    """Where `--do_predict` writes its predictions."""
    return Path(training_args.output_dir) / "predictions.jsonl"


def predict(
    trainer: Trainer,
    tokenized: datasets.DatasetDict,
    test_rows: datasets.Dataset,
    label_info: LabelInfo,
    data_args: Any,
) -> dict[str, float]:
    """
    Write predictions.jsonl (one line per test document, in file order, with the document's `id` column or its row
    number); metrics when the test data has labels.
    """
    logits, labels, metrics = run_inference(trainer, tokenized["test"], label_info, data_args, "test")
    if trainer.is_world_process_zero():
        ids = test_rows["id"] if "id" in test_rows.column_names else None
        has_labels = data_args.label_column_name in test_rows.column_names
        gold_labels = test_rows[data_args.label_column_name] if has_labels else None
        path = predictions_path(trainer.args)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as temporary, temporary.open("w", encoding="utf-8") as file:
            for record in prediction_records(logits, label_info, ids, gold_labels):
                file.write(json.dumps(record, ensure_ascii=False) + "\n")
    report_split(trainer, logits, labels, metrics, label_info, "test")
    return metrics


def classification_training_summary(
    trainer: Trainer,
    data_args: Any,
    metrics: dict[str, float],
    argv: Sequence[str] | None = None,
    sources: dict[str, str] | None = None,
) -> TrainingSummary:
    """
    How this run fine-tuned the model, for its model card: with the validation and test results, the precision
    they were computed in, where they were computed (the splits of `--dataset_name` and its configuration, files, or
    the part of train held out: `sources`, from `load_labelled_documents`), and `--dataset_name` (the card's
    metadata names it where it is a Hub id).
    """
    held_out = None
    if (sources or {}).get("validation", "").startswith(HELD_OUT):
        held_out = (
            f"{data_args.validation_split_percentage}% of the training data held out at random (seed "
            f"{trainer.args.seed}), not trained on"
        )
    split_names, evaluation_data = evaluation_origins(data_args, held_out)
    results = {name: value for name, value in metrics.items() if name.startswith(("eval_", "test_"))}
    precisions = {results.pop(f"{split}_precision", None) for split in ("eval", "test")} - {None}
    data_files = [data_args.dataset_name, data_args.train_file, data_args.validation_file, data_args.test_file]
    return TrainingSummary.from_trainer(
        trainer,
        script=SCRIPT,
        task=f"text classification ({trainer.model.config.problem_type})",
        datasets=list(dict.fromkeys(filter(None, data_files))),
        dataset_name=data_args.dataset_name,
        dataset_config=data_args.dataset_config_name,
        split_names=split_names,
        evaluation_data=evaluation_data,
        precision=" and ".join(sorted(precisions)) or None,
        results=results,
        trained_lengths=[data_args.max_seq_length],
        hyperparameters={
            "max_seq_length": data_args.max_seq_length,
            "truncation_side": data_args.truncation_side,
            "long_doc_strategy": data_args.long_doc_strategy,
        },
        command=command_line(SCRIPT, argv),
    )


def print_where_outputs_are(trainer: Trainer) -> None:
    """How to load the fine-tuned classifier, and where the predictions went (on the main process)."""
    args = trainer.args
    if args.do_train and trainer.is_world_process_zero():
        print(loading_instructions(args.output_dir, RoFormerForSequenceClassification))
    if args.do_predict and trainer.is_world_process_zero():
        print(f"predictions written to {predictions_path(args)} (a JSON line per test document)")
