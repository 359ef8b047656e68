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

if __name__ == "__main__":  # --help, --help-all and the checks that need no model, before torch loads
    from importlib.util import find_spec
    from runpy import run_path

    if package := find_spec("roformer_hf"):
        run_path(f"{package.submodule_search_locations[0]}/training/first_answers.py")["answer_first"]()

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from roformer_hf.text_classification_pipeline import (
    CHUNK_POOLINGS,
    INPUT_SETTINGS,
    LONG_DOC_STRATEGIES,
    MIN_SEQ_LENGTH,
    TRUNCATION_SIDES,
    DocumentRecipe,
    windows_move_forward,
)
from roformer_hf.training.classification.documents import load_labelled_documents
from roformer_hf.training.classification.fine_tuning import (
    build_classification_trainer,
    build_tokenizer_and_classifier,
    classification_training_summary,
    encode_documents,
    fine_tune_evaluate_and_predict,
    print_where_outputs_are,
)
from roformer_hf.training.classification.labels import PROBLEM_TYPES
from roformer_hf.training.classification.long_documents import DEFAULT_RECIPE, resolve_input_settings
from roformer_hf.training.classification.run_settings import check_classification_arguments
from roformer_hf.training.cli import (
    ModelArguments,
    ParsedArguments,
    ScriptTrainingArguments,
    demo_or_given_arguments,
    parse_arguments,
)
from roformer_hf.training.data.sources import FILE_KINDS, DatasetArguments
from roformer_hf.training.machine.cpu_precision import settle_cpu_precision
from roformer_hf.training.machine.launch import choose_unused_parameter_search
from roformer_hf.training.publishing import publish_run
from roformer_hf.training.script_runner import run_script, script_run, warn_if_vocabulary_misses_the_text

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
            "choices": list(PROBLEM_TYPES),
        },
    )
    max_seq_length: int = field(
        default=DEFAULT_RECIPE.max_seq_length,
        metadata={
            "help": "Tokens per model input, special tokens included. May exceed the model's max_position_embeddings "
            "(RoPE has no length cap). With --long_doc_strategy chunk: the window length."
        },
    )
    truncation_side: str = field(
        default=DEFAULT_RECIPE.truncation_side,
        metadata={
            "help": "Which part of a long document to keep: 'head' (the start), 'tail' (the end) or 'head_tail' "
            "(the first quarter of the budget from the start, the rest from the end).",
            "choices": list(TRUNCATION_SIDES),
        },
    )
    long_doc_strategy: str = field(
        default=DEFAULT_RECIPE.long_doc_strategy,
        metadata={
            "help": "'truncate' keeps max_seq_length tokens of each document; 'chunk' classifies overlapping windows "
            "of the whole document and pools their logits.",
            "choices": list(LONG_DOC_STRATEGIES),
        },
    )
    chunk_stride: int = field(
        default=DEFAULT_RECIPE.chunk_stride,
        metadata={"help": "Tokens shared by consecutive windows (chunk strategy)."},
    )
    chunk_pooling: str = field(
        default=DEFAULT_RECIPE.chunk_pooling,
        metadata={"help": "How window logits become document logits.", "choices": list(CHUNK_POOLINGS)},
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
        if self.max_seq_length < MIN_SEQ_LENGTH:
            raise ValueError(f"--max_seq_length must be at least {MIN_SEQ_LENGTH}, got {self.max_seq_length}.")
        if self.long_doc_strategy == "chunk" and not windows_move_forward(self.chunk_stride, self.max_seq_length):
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

    def recipe(self) -> DocumentRecipe:
        """How this run reads its documents: its input settings (every one given once `resolve_input_settings` ran)."""
        return DocumentRecipe(**{name: getattr(self, name) for name in INPUT_SETTINGS})


# ----------------------------------------------------------------------------------------------------------------
# The steps of main(), in its order
# ----------------------------------------------------------------------------------------------------------------


ARGUMENT_TYPES = (ModelArguments, DataArguments, ScriptTrainingArguments)
SCRIPT_DEFAULTS = {"output_dir": "outputs/run_classification"}


def parse_classification_arguments(argv: Sequence[str] | None = None) -> ParsedArguments:
    """Parse the command line (or one .json/.yaml file) into `(ModelArguments, DataArguments, TrainingArguments)`, with
    the names of the options given; no arguments at all runs the embedded CAIL demo."""
    arguments = parse_arguments(
        ARGUMENT_TYPES,
        demo_or_given_arguments(argv, DEMO_ARGUMENTS),
        defaults=SCRIPT_DEFAULTS,
        description=__doc__,
    )
    check_classification_arguments(*arguments)
    return arguments


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Run the script; returns the metrics (train, eval, test) it logged."""
    arguments = parse_classification_arguments(argv)
    model_args, data_args, training_args = arguments
    evaluates = training_args.do_eval or training_args.do_predict
    with script_run(
        training_args,
        model_args,
        "run_classification.py",
        argv,
        DEMO_ARGUMENTS,
        evaluates=evaluates,
    ):
        raw_datasets, label_info, sources = load_labelled_documents(model_args, data_args, training_args)
        tokenizer, model = build_tokenizer_and_classifier(model_args, label_info)
        warn_if_vocabulary_misses_the_text(
            tokenizer, raw_datasets, data_args.text_column_name, model_args, training_args
        )
        given_settings = arguments.given & set(INPUT_SETTINGS)
        data_args = resolve_input_settings(
            data_args, given_settings, model, model_args.model_name_or_path, training_args.do_train
        )
        settle_cpu_precision(training_args, model, data_args.max_seq_length)
        choose_unused_parameter_search(training_args, model)
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
