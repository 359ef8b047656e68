"""Pretrain a RoFormer masked language model, or continue pretraining a checkpoint on your own text.

Shaped like transformers' `run_mlm.py` (argument dataclasses, `HfArgumentParser`, every `TrainingArguments` option,
a single `.json`/`.yaml` file of arguments) with what RoFormer's pretraining adds:

- whole-word masking over jieba words (the tokenizer's `word_ids`), also on blocks packed from several texts;
- `--stages "512:256:200000,1536:256:12500,..."` (max_seq_length:global_batch:steps): one run walks the stages, each
  starting from the weights and optimizer state the previous one ended with; the learning-rate schedule spans them all;
- masked-token accuracy (computed offline by an `evaluate` module of `roformer_hf.metrics`), perplexity, a loss
  curve and a model card.

Run it without arguments for a demo: a tiny RoFormer pretrained in 1,700 small steps (a few minutes on a CPU) on the
People's Daily sample in `data/`, saved to `./outputs/run_mlm/`. Runs unchanged under `torchrun` and `accelerate launch`.

    python run_mlm.py --train_file corpus.txt --tokenizer_name vocab.txt \
        --config_overrides "hidden_size=256,num_hidden_layers=4,num_attention_heads=4,intermediate_size=1024" \
        --stages "128:64:2000,512:32:500" --per_device_train_batch_size 16 --output_dir my-roformer
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

import logging
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from transformers import TrainingArguments

from roformer_hf.training.cli import (
    ModelArguments,
    ScriptTrainingArguments,
    demo_or_given_arguments,
    parse_arguments,
)
from roformer_hf.training.data.sources import FILE_KINDS, DatasetArguments
from roformer_hf.training.errors import ScriptError
from roformer_hf.training.first_answers import check_request
from roformer_hf.training.machine.cpu_precision import settle_cpu_precision
from roformer_hf.training.machine.launch import choose_unused_parameter_search
from roformer_hf.training.mlm.pretraining import build_tokenizer_and_masked_lm, pretrain
from roformer_hf.training.mlm.results import fill_mask_probes, report, save_outputs
from roformer_hf.training.mlm.stages import canonical_stages, main_stage, plan_stages
from roformer_hf.training.mlm.text_corpus import load_corpus, tokenize_corpus
from roformer_hf.training.outputs.run_outputs import prepare_output_dir
from roformer_hf.training.outputs.written_files import check_inputs_are_not_outputs, run_inputs
from roformer_hf.training.script_runner import run_script, script_run, warn_if_vocabulary_misses_the_text

logger = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parent / "data"
DEMO_ARGUMENTS = [
    *("--train_file", str(DATA_DIR / "peoples_daily_sample.txt")),
    *("--tokenizer_name", str(DATA_DIR / "demo_vocab.txt")),
    *("--config_overrides", "hidden_size=128,num_hidden_layers=2,num_attention_heads=2,intermediate_size=512"),
    # 1,700 small steps: 190 left the model at the frequent-token stage (fill-mask guesses ， 的 。 whatever the context)
    *("--stages", "64:16:1500,128:16:200"),
    *("--per_device_train_batch_size", "16", "--per_device_eval_batch_size", "32"),
    *("--learning_rate", "2e-3", "--warmup_steps", "100", "--weight_decay", "0.01"),
    *("--logging_steps", "50", "--save_steps", "500", "--save_total_limit", "2", "--output_dir", "outputs/run_mlm"),
]
SCRIPT_DEFAULTS = {"do_train": True, "do_eval": True, "output_dir": "outputs/run_mlm", "report_to": "none"}
# Streamed validation text has no length: without --max_eval_samples, evaluate on this many of its blocks (the whole
# streamed share of a large corpus took 10 minutes before and after a 2-step run).
STREAMING_MAX_EVAL_SAMPLES = 1000


@dataclass
class DataArguments(DatasetArguments):
    """Which text to pretrain on and how to cut it into training examples."""

    train_file: str | None = field(
        default=None,
        metadata={
            "help": f"Training text: a {FILE_KINDS} file (.txt: one document or paragraph a line), or a folder a "
            "Dataset was saved to (save_to_disk)."
        },
    )
    validation_file: str | None = field(default=None, metadata={"help": "Validation text, same formats."})
    text_column_name: str = field(
        default="text", metadata={"help": "The column holding the text (a nested field with dots: meta.text)."}
    )
    validation_split_percentage: int = field(
        default=5, metadata={"help": "Percentage of the training text held out for validation when none is given."}
    )
    max_seq_length: int = field(
        default=512, metadata={"help": "Tokens per training example, special tokens included (without --stages)."}
    )
    line_by_line: bool = field(
        default=False,
        metadata={"help": "One example per line (truncated to max_seq_length) instead of packing text into blocks."},
    )
    streaming: bool = field(
        default=False, metadata={"help": "Stream the data instead of loading it (needs max_steps)."}
    )
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "Processes for tokenization."})
    overwrite_cache: bool = field(default=False, metadata={"help": "Tokenize again instead of using datasets' cache."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only this many training examples."})
    max_eval_samples: int | None = field(
        default=None,
        metadata={
            "help": "Keep only this many validation examples (with --streaming: "
            f"{STREAMING_MAX_EVAL_SAMPLES:,} unless given)."
        },
    )


@dataclass
class MaskingArguments:
    """How tokens are masked and how the run is staged."""

    mlm_probability: float = field(default=0.15, metadata={"help": "Share of words (or tokens) to predict."})
    whole_word_mask: bool = field(
        default=True,
        metadata={"help": "Mask every piece of a chosen jieba word together (--no_whole_word_mask: single tokens)."},
    )
    stages: str | None = field(
        default=None,
        metadata={
            "help": "Training stages as 'max_seq_length:global_batch:steps,...', e.g. RoFormer's "
            "'512:256:200000,1536:256:12500,256:256:120000,128:512:80000,1536:256:10000,512:512:30000'. The global "
            "batch is per_device_train_batch_size x gradient accumulation x processes; gradient accumulation is "
            "derived. Overrides max_seq_length, max_steps and gradient_accumulation_steps."
        },
    )
    sparse_prediction: bool = field(
        default=True,
        metadata={
            "help": "Run the MLM head at the masked positions only (the same loss and metrics, less arithmetic; "
            "speed in docs/scripts.md). A setting of this run, also on resume: the saved model and its checkpoints "
            "give logits at every position to every caller. --sparse_prediction false: the head at every position "
            "while training too."
        },
    )


ARGUMENT_TYPES = (ModelArguments, DataArguments, MaskingArguments, ScriptTrainingArguments)


def parse_mlm_arguments(
    argv: list[str] | None = None,
) -> tuple[ModelArguments, DataArguments, MaskingArguments, TrainingArguments]:
    """Parse the arguments (no arguments at all: the demo) and check what the dataclasses cannot."""
    argv = demo_or_given_arguments(argv, DEMO_ARGUMENTS)
    model_args, data_args, masking_args, training_args = parse_arguments(
        ARGUMENT_TYPES, argv, SCRIPT_DEFAULTS, __doc__
    )
    if masking_args.stages is not None:  # checked now rather than after loading the data; recorded as parsed
        masking_args.stages = canonical_stages(masking_args.stages)
    check_request("training data", vars(data_args))
    data_files = {
        "--train_file": data_args.train_file,
        "--validation_file": data_args.validation_file,
        "--dataset_name": data_args.dataset_name,
    }
    # run_mlm.py saves a model even when it only evaluates
    check_inputs_are_not_outputs(
        run_inputs(model_args, data_files, training_args), training_args.output_dir, cache_dir=model_args.cache_dir
    )
    if not 0.0 < masking_args.mlm_probability < 1.0:
        raise ScriptError(f"--mlm_probability must lie between 0 and 1, got {masking_args.mlm_probability}.")
    if data_args.streaming and masking_args.stages is None and training_args.max_steps <= 0:
        raise ScriptError("--streaming data has no length: give --max_steps (or --stages).")
    return model_args, data_args, masking_args, training_args


def bound_streamed_evaluation(data_args: DataArguments) -> None:
    """With `--streaming` and no `--max_eval_samples`, evaluate on the first `STREAMING_MAX_EVAL_SAMPLES` blocks."""
    if data_args.streaming and data_args.max_eval_samples is None:
        data_args.max_eval_samples = STREAMING_MAX_EVAL_SAMPLES
        logger.warning(
            f"--streaming: each evaluation reads the first {STREAMING_MAX_EVAL_SAMPLES:,} validation examples only "
            "(streamed text has no length); --max_eval_samples sets another number."
        )


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the script; returns the results of every stage (empty on processes other than the main one)."""
    model_args, data_args, masking_args, training_args = parse_mlm_arguments(argv)
    with script_run(training_args, model_args, "run_mlm.py", argv, DEMO_ARGUMENTS, evaluates=training_args.do_eval):
        bound_streamed_evaluation(data_args)
        stages = plan_stages(masking_args.stages, data_args.max_seq_length, training_args)
        raw_datasets, held_out = load_corpus(data_args, model_args)
        longest = max(stage.max_seq_length for stage in stages) if training_args.do_train else None
        tokenizer, model = build_tokenizer_and_masked_lm(model_args, masking_args.sparse_prediction, longest)
        warn_if_vocabulary_misses_the_text(tokenizer, raw_datasets, "text", model_args, training_args)
        settle_cpu_precision(training_args, model, main_stage(stages).max_seq_length)
        choose_unused_parameter_search(training_args, model)
        # each stage tokenizes the text to its own length when it starts
        tokenize_to_length = partial(
            tokenize_corpus, raw_datasets, tokenizer, data_args=data_args, training_args=training_args
        )
        prepare_output_dir(training_args, model, [stage.steps or training_args.max_steps for stage in stages])
        trainer = pretrain(model, tokenizer, tokenize_to_length, stages, data_args, masking_args, training_args)
        table = save_outputs(trainer, stages, model_args, data_args, masking_args, training_args, argv, held_out)
    if trainer.is_world_process_zero():
        report(table, model, tokenizer, training_args.output_dir, fill_mask_probes(raw_datasets, tokenizer))
    return table


if __name__ == "__main__":
    run_script(main)
