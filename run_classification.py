#!/usr/bin/env python
"""Fine-tune a RoFormer for text classification or regression on long Chinese documents.

RoFormer has no position table, so `--max_seq_length` may go past the length the model was pretrained on (the
default is 1,024 tokens). For documents longer than memory allows, `--long_doc_strategy chunk` cuts every document
into overlapping windows, classifies each window and pools the window logits per document.

Examples:

```bash
python run_classification.py    # fine-tunes a small model on the shipped CAIL court-text sample, prints accuracy
python run_classification.py --model_name_or_path path/to/roformer --train_file train.jsonl \
    --validation_file dev.jsonl --test_file test.jsonl --do_train --do_eval --do_predict --output_dir outputs/cls
python run_classification.py args.yaml    # every argument from a file
```

A fine-tuned classifier remembers how it read its documents (`--max_seq_length`, `--truncation_side`,
`--long_doc_strategy`, `--chunk_stride`, `--chunk_pooling`, in its config's `classification_inputs`): evaluating or
predicting with it reads them the same way, unless the command line says otherwise (with a warning), and so does
`pipeline("text-classification", model=output_dir)` (`roformer_hf.text_classification_pipeline`).

The data are files (CSV, JSON lines, JSON, Parquet, Arrow, a `save_to_disk` folder) or a dataset named by
`--dataset_name` (a Hub id, or a local folder in the Hub's layout), with a text column and a label column (nested
fields named with dots: `meta.label`). A label is a name or an id
(single-label), a list of them (multi-label) or a float (regression). Metrics are computed offline by the
`evaluate` modules of `roformer_hf.metrics` (scikit-learn underneath).
"""

import os

# torch's idle OpenMP threads sleep rather than spin on cores other processes need (read once, when torch loads;
# roformer_hf/training/machine/threads.py says why)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets
import torch
from torch.utils.data import SequentialSampler
from transformers import (
    DataCollatorWithPadding,
    EarlyStoppingCallback,
    PreTrainedTokenizerBase,
    Trainer,
    TrainingArguments,
)

from roformer_hf import RoFormerForSequenceClassification
from roformer_hf.document_inputs import INPUT_SETTINGS, MIN_SEQ_LENGTH
from roformer_hf.model_card import TrainingSummary
from roformer_hf.training.building import build_config, build_model, build_tokenizer, check_vocabulary_fits
from roformer_hf.training.classification.classification_scores import (
    make_compute_metrics,
    prediction_records,
    report_split,
    run_inference,
)
from roformer_hf.training.classification.documents import HELD_OUT, load_labelled_documents, wanted_splits
from roformer_hf.training.classification.labels import (
    MULTI_LABEL,
    REGRESSION,
    SINGLE_LABEL,
    LabelInfo,
    check_label_change,
)
from roformer_hf.training.classification.long_documents import INPUT_DEFAULTS, encode_batch, resolve_input_settings
from roformer_hf.training.cli import (
    ModelArguments,
    ScriptTrainingArguments,
    command_line,
    demo_or_given_arguments,
    parse_arguments,
)
from roformer_hf.training.console import loading_instructions
from roformer_hf.training.data_sources import FILE_KINDS, DatasetArguments
from roformer_hf.training.errors import ScriptError
from roformer_hf.training.machine.cpu_precision import settle_cpu_precision, training_arithmetic
from roformer_hf.training.machine.launch import compiled_for_every_length
from roformer_hf.training.outputs.divergence import StopOnNonFiniteWeights
from roformer_hf.training.outputs.interrupts import StopAtStepBoundary, raise_if_stopped
from roformer_hf.training.outputs.resume import (
    check_resume,
    data_run_settings,
    find_resume_checkpoint,
    record_run_settings,
)
from roformer_hf.training.outputs.run_outputs import (
    atomic_path,
    prepare_output_dir,
    save_metrics,
    save_model_atomically,
    save_state,
)
from roformer_hf.training.outputs.written_files import check_inputs_are_not_outputs, run_inputs
from roformer_hf.training.publishing import evaluation_origins, publish_run, trainer_arguments
from roformer_hf.training.script_runner import run_script, script_run
from roformer_hf.training.static_shapes import (
    StaticShapes,
    StaticShapeTrainer,
    announce_static_shapes,
    compiled_once_per_shape,
    length_buckets,
    uses_static_shapes,
)
from roformer_hf.training.vocabulary_coverage import tokenizer_source, warn_if_many_unknown

logger = logging.getLogger(__name__)

SAMPLE_FILE = Path(__file__).resolve().parent / "data" / "cail_sample.jsonl"

# `python run_classification.py` with no arguments: a few minutes on a CPU, civil vs criminal court texts.
DEMO_ARGUMENTS = [
    "--train_file", str(SAMPLE_FILE),
    "--validation_split_percentage", "20",
    "--tokenizer_name", str(SAMPLE_FILE.parent / "demo_vocab.txt"),
    "--config_overrides", "hidden_size=128,num_hidden_layers=2,num_attention_heads=4,intermediate_size=256",
    "--max_seq_length", "128",
    "--do_train", "--do_eval",
    "--max_steps", "80",
    "--learning_rate", "1e-3",
    "--per_device_train_batch_size", "16",
    "--output_dir", "outputs/run_classification",
    "--save_strategy", "no",
]  # fmt: skip


@dataclass
class DataArguments(DatasetArguments):
    """What data to train, evaluate and predict on, and how to turn documents into model inputs."""

    test_split_name: str = field(default="test", metadata={"help": "The split of --dataset_name to predict."})
    train_file: str | None = field(
        default=None,
        metadata={"help": f"Training data: a {FILE_KINDS} file, or a folder a Dataset was saved to (save_to_disk)."},
    )
    validation_file: str | None = field(default=None, metadata={"help": "Validation data (same formats)."})
    test_file: str | None = field(
        default=None, metadata={"help": "Data for --do_predict; its label column is optional (metrics if present)."}
    )
    validation_split_percentage: int = field(
        default=10,
        metadata={
            "help": "Percentage of the training data held out for validation when there is no --validation_file."
        },
    )
    text_column_name: str = field(
        default="text",
        metadata={
            "help": "Column holding the document text (a nested field with dots: meta.text). Also "
            "--text_column_names, transformers' name: 'a,b' reads columns a and b as a text pair.",
            "aliases": ["--text_column_names"],
        },
    )
    text_pair_column_name: str | None = field(
        default=None, metadata={"help": "Column holding a second text, for sentence-pair tasks."}
    )
    label_column_name: str = field(
        default="label", metadata={"help": "Column holding the label(s) or the score (nested: meta.label)."}
    )
    problem_type: str = field(
        default="auto",
        metadata={
            "help": "'auto' infers it from the labels: a list of labels is multi-label, a float is regression, "
            "anything else single-label.",
            "choices": ["auto", SINGLE_LABEL, MULTI_LABEL, REGRESSION],
        },
    )
    max_seq_length: int = field(
        default=INPUT_DEFAULTS["max_seq_length"],
        metadata={
            "help": "Tokens per model input, special tokens included. May exceed the model's max_position_embeddings "
            "(RoPE has no length cap). With --long_doc_strategy chunk: the window length."
        },
    )
    truncation_side: str = field(
        default=INPUT_DEFAULTS["truncation_side"],
        metadata={
            "help": "Which part of a long document to keep: 'head' (the start), 'tail' (the end) or 'head_tail' "
            "(the first quarter of the budget from the start, the rest from the end).",
            "choices": ["head", "tail", "head_tail"],
        },
    )
    long_doc_strategy: str = field(
        default=INPUT_DEFAULTS["long_doc_strategy"],
        metadata={
            "help": "'truncate' keeps max_seq_length tokens of each document; 'chunk' classifies overlapping windows "
            "of the whole document and pools their logits.",
            "choices": ["truncate", "chunk"],
        },
    )
    chunk_stride: int = field(
        default=INPUT_DEFAULTS["chunk_stride"],
        metadata={"help": "Tokens shared by consecutive windows (chunk strategy)."},
    )
    chunk_pooling: str = field(
        default=INPUT_DEFAULTS["chunk_pooling"],
        metadata={"help": "How window logits become document logits.", "choices": ["mean", "max"]},
    )
    early_stopping_patience: int | None = field(
        default=None,
        metadata={"help": "Stop after this many evaluations without improvement (needs --eval_strategy steps|epoch)."},
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only this many training documents."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep only this many validation documents."})
    max_predict_samples: int | None = field(default=None, metadata={"help": "Keep only this many test documents."})
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "Processes for tokenization."})

    def __post_init__(self):
        self.split_text_column_names()
        # parse_classification_arguments leaves the input settings None when the command line does not give them (see INPUT_SETTINGS)
        if self.max_seq_length is not None and self.max_seq_length < MIN_SEQ_LENGTH:
            raise ValueError(f"--max_seq_length must be at least {MIN_SEQ_LENGTH}, got {self.max_seq_length}.")
        if None in (self.long_doc_strategy, self.chunk_stride, self.max_seq_length):
            return
        if self.long_doc_strategy == "chunk" and not 0 <= self.chunk_stride < self.max_seq_length // 2:
            raise ValueError(
                f"--chunk_stride ({self.chunk_stride}) must be at least 0 and less than half of --max_seq_length "
                f"({self.max_seq_length}), so that windows move forward."
            )
        if self.long_doc_strategy == "chunk" and self.text_pair_column_name is not None:
            raise ValueError("--long_doc_strategy chunk works on single texts: leave out --text_pair_column_name.")

    def split_text_column_names(self) -> None:
        """`--text_column_names a,b` (transformers' option) names a text pair: the text and the pair column."""
        names = self.text_column_name.split(",")
        if len(names) == 1:
            return
        if len(names) > 2 or self.text_pair_column_name is not None or not all(name.strip() for name in names):
            raise ValueError(
                f"--text_column_names {self.text_column_name}: give one text column, or two for a text pair (a,b), "
                "and no --text_pair_column_name beside them."
            )
        self.text_column_name, self.text_pair_column_name = (name.strip() for name in names)


# ----------------------------------------------------------------------------------------------------------------
# The steps of main(), in its order
# ----------------------------------------------------------------------------------------------------------------


def parse_classification_arguments(
    argv: Sequence[str] | None = None,
) -> tuple[ModelArguments, DataArguments, TrainingArguments]:
    """Parse the command line (or one .json/.yaml file); no arguments at all runs the embedded CAIL demo."""
    model_args, data_args, training_args = parse_arguments(
        (ModelArguments, DataArguments, ScriptTrainingArguments),
        demo_or_given_arguments(argv, DEMO_ARGUMENTS),
        # None marks an input setting the user did not give: resolve_input_settings fills it in
        defaults={"output_dir": "outputs/run_classification", **dict.fromkeys(INPUT_SETTINGS)},
        description=__doc__,
    )
    if not (training_args.do_train or training_args.do_eval or training_args.do_predict):
        raise ScriptError("nothing to do: pass --do_train, --do_eval and/or --do_predict.")
    data_files = {option: path for _, option, path, _ in wanted_splits(data_args, training_args)}
    data_files["--dataset_name"] = data_args.dataset_name
    inputs = run_inputs(model_args, data_files, training_args)
    check_inputs_are_not_outputs(inputs, training_args.output_dir, trains=training_args.do_train)
    if data_args.early_stopping_patience is not None:
        if training_args.eval_strategy == "no":
            raise ScriptError(
                "--early_stopping_patience needs evaluations during training: add --eval_strategy epoch."
            )
        if training_args.metric_for_best_model is None:
            training_args.metric_for_best_model, training_args.greater_is_better = "loss", False
    return model_args, data_args, training_args


def build_tokenizer_and_classifier(
    model_args: ModelArguments, label_info: LabelInfo
) -> tuple[PreTrainedTokenizerBase, RoFormerForSequenceClassification]:
    """The tokenizer, and the classifier with its label maps (a new head on a pretrained encoder, or from scratch)."""
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
    data_args: DataArguments,
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


class InputOrderTrainer(StaticShapeTrainer):
    """
    A `Trainer` that evaluates and predicts in input order. Under `--train_sampling_strategy group_by_length`,
    transformers groups evaluation batches by length as well; window logits must stay in input order to be pooled
    per document, and predictions.jsonl must follow the test file.

    Its log names the validation split's pass "Evaluation on the validation data": `run_inference` runs it through
    `Trainer.predict`, which would call it "Prediction".
    """

    def evaluation_loop(self, dataloader, description: str, *args, metric_key_prefix: str = "eval", **kwargs):
        if description == "Prediction" and metric_key_prefix == "eval":
            description = "Evaluation on the validation data"
        return super().evaluation_loop(dataloader, description, *args, metric_key_prefix=metric_key_prefix, **kwargs)

    def _get_eval_sampler(self, eval_dataset: torch.utils.data.Dataset) -> torch.utils.data.Sampler | None:
        if eval_dataset is None or self.args.world_size > 1:
            return super()._get_eval_sampler(eval_dataset)
        return SequentialSampler(eval_dataset)


def classification_shapes(
    tokenizer: PreTrainedTokenizerBase,
    label_info: LabelInfo,
    data_args: DataArguments,
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
    data_args: DataArguments,
    training_args: TrainingArguments,
) -> Trainer:
    """A Trainer with dynamic padding, document-level metrics and, if asked, early stopping."""
    mixed_precision = training_args.fp16 or training_args.bf16
    eval_dataset = tokenized.get("validation")
    chunked = data_args.long_doc_strategy == "chunk"
    document_ids = list(eval_dataset["document_index"]) if chunked and eval_dataset is not None else None
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
            data_collator=DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8 if mixed_precision else None),
            compute_metrics=make_compute_metrics(label_info, document_ids, data_args.chunk_pooling),
            callbacks=[*callbacks, StopAtStepBoundary()],
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
    data_args: DataArguments,
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


def fine_tune(trainer: Trainer, train_dataset: datasets.Dataset, data_args: DataArguments) -> dict[str, float]:
    """Train (resuming if asked) and save the model; returns the training metrics."""
    args = trainer.args
    prepare_output_dir(args, trainer.model)
    checkpoint = find_resume_checkpoint(args)
    settings = classification_run_settings(data_args, args)
    if checkpoint is not None:
        check_resume(checkpoint, trainer.model, trainer.processing_class, settings)
    record_run_settings(trainer, settings)
    result = trainer.train(resume_from_checkpoint=checkpoint)
    raise_if_stopped(trainer)
    save_model_atomically(trainer)
    train_metrics = {**result.metrics, **training_arithmetic(args)}  # threads and precision: what reproduces it
    metrics = {**train_metrics, "train_samples": len(set(train_dataset["document_index"]))}
    trainer.log_metrics("train", train_metrics)
    save_metrics(trainer, "train", train_metrics)
    save_state(trainer)
    return metrics


def classification_run_settings(data_args: DataArguments, training_args: TrainingArguments) -> dict[str, Any]:
    """The settings a checkpoint of this run records, and a resume must repeat (`training.outputs.resume`)."""
    return data_run_settings(training_args, data_args, **{name: getattr(data_args, name) for name in INPUT_SETTINGS})


def predictions_path(training_args: TrainingArguments) -> Path:
    """Where `--do_predict` writes its predictions."""
    return Path(training_args.output_dir) / "predictions.jsonl"


def predict(
    trainer: Trainer,
    tokenized: datasets.DatasetDict,
    test_rows: datasets.Dataset,
    label_info: LabelInfo,
    data_args: DataArguments,
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
    data_args: DataArguments,
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
    return TrainingSummary.from_trainer(
        trainer,
        script="run_classification.py",
        task=f"text classification ({trainer.model.config.problem_type})",
        datasets=list(
            dict.fromkeys(
                filter(
                    None,
                    [data_args.dataset_name, data_args.train_file, data_args.validation_file, data_args.test_file],
                )
            )
        ),
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
        command=command_line(__file__, argv),
    )


def print_where_outputs_are(trainer: Trainer) -> None:
    """How to load the fine-tuned classifier, and where the predictions went (on the main process)."""
    args = trainer.args
    if args.do_train and trainer.is_world_process_zero():
        print(loading_instructions(args.output_dir, RoFormerForSequenceClassification))
    if args.do_predict and trainer.is_world_process_zero():
        print(f"predictions written to {predictions_path(args)} (a JSON line per test document)")


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Run the script; returns the metrics (train, eval, test) it logged."""
    model_args, data_args, training_args = parse_classification_arguments(argv)
    evaluates = training_args.do_eval or training_args.do_predict
    with script_run(
        training_args,
        model_args,
        "run_classification.py",
        argv,
        DEMO_ARGUMENTS,
        checks_output_dir=training_args.do_train,
        evaluates=evaluates,
    ):
        raw_datasets, label_info, sources = load_labelled_documents(model_args, data_args, training_args)
        tokenizer, model = build_tokenizer_and_classifier(model_args, label_info)
        if training_args.do_train:
            train_rows, text_column = raw_datasets["train"], data_args.text_column_name
            warn_if_many_unknown(tokenizer, train_rows, text_column, tokenizer_source(model_args))
        data_args = resolve_input_settings(data_args, model, model_args.model_name_or_path, training_args.do_train)
        settle_cpu_precision(training_args, model, data_args.max_seq_length)
        if training_args.do_train:  # the saved tokenizer's truncation=True cuts to the length fine-tuned with
            tokenizer.model_max_length = data_args.max_seq_length
        tokenized = encode_documents(raw_datasets, tokenizer, label_info, data_args, training_args)
        trainer = build_classification_trainer(model, tokenizer, tokenized, label_info, data_args, training_args)
        metrics = fine_tune_evaluate_and_predict(trainer, tokenized, raw_datasets, label_info, data_args)
        if training_args.do_train:
            summary = classification_training_summary(trainer, data_args, metrics, argv, sources)
            publish_run(trainer, training_args, summary, base_model=model_args.model_name_or_path)
    print_where_outputs_are(trainer)
    return metrics


if __name__ == "__main__":
    run_script(main)
