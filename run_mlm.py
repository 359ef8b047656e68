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

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import datasets
from transformers import PreTrainedTokenizerBase, TrainingArguments

from roformer_hf import RoFormerForMaskedLM
from roformer_hf.losses import slot_count
from roformer_hf.model_card import TrainingSummary
from roformer_hf.training.building import build_config, build_model, build_tokenizer, check_vocabulary_fits
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
from roformer_hf.training.machine.cpu_precision import evaluation_precision, settle_cpu_precision, training_arithmetic
from roformer_hf.training.machine.launch import compiled_for_every_length
from roformer_hf.training.mlm.stages import (
    SaveAtEndCallback,
    Stage,
    StagedTrainer,
    find_starting_point,
    format_stage_table,
    parse_stages,
    plan_stages,
    plot_loss_curve,
    read_stage_results,
    walk_stages,
)
from roformer_hf.training.mlm.text_corpus import (
    load_corpus,
    tokenize_corpus,
)
from roformer_hf.training.mlm.whole_word_masking import (
    EpochCallback,
    WholeWordMaskCollator,
    masked_token_accuracy,
    predicted_token_ids,
)
from roformer_hf.training.outputs.divergence import StopOnNonFiniteWeights
from roformer_hf.training.outputs.interrupts import StopAtStepBoundary
from roformer_hf.training.outputs.resume import (
    check_resume,
    data_run_settings,
    record_run_settings,
)
from roformer_hf.training.outputs.run_outputs import prepare_output_dir, write_json_atomically
from roformer_hf.training.outputs.written_files import check_inputs_are_not_outputs, run_inputs
from roformer_hf.training.publishing import evaluation_origins, publish_run
from roformer_hf.training.script_runner import run_script, script_run
from roformer_hf.training.static_shapes import (
    StaticShapes,
    announce_static_shapes,
    compiled_once_per_shape,
    length_buckets,
    uses_static_shapes,
)
from roformer_hf.training.vocabulary_coverage import tokenizer_source, warn_if_many_unknown

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
FILL_MASK_EXAMPLES = [
    "新华社北京一月一日[MASK]",
    "中国人民[MASK]继承邓小平同志的遗志。",
    "国民经济保持了良好的发展[MASK]。",
]
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


def parse_mlm_arguments(
    argv: list[str] | None = None,
) -> tuple[ModelArguments, DataArguments, MaskingArguments, TrainingArguments]:
    """Parse the arguments (no arguments at all: the demo) and check what the dataclasses cannot."""
    argv = demo_or_given_arguments(argv, DEMO_ARGUMENTS)
    model_args, data_args, masking_args, training_args = parse_arguments(
        (ModelArguments, DataArguments, MaskingArguments, ScriptTrainingArguments), argv, SCRIPT_DEFAULTS, __doc__
    )
    if masking_args.stages is not None:
        parse_stages(masking_args.stages)  # fail now rather than after loading the data
    if data_args.train_file is None and data_args.dataset_name is None:
        raise ScriptError(
            f"no training data: give --train_file (a {FILE_KINDS} file) or --dataset_name (a dataset folder or Hub id)."
        )
    data_files = {
        "--train_file": data_args.train_file,
        "--validation_file": data_args.validation_file,
        "--dataset_name": data_args.dataset_name,
    }
    # run_mlm.py saves a model even when it only evaluates
    check_inputs_are_not_outputs(run_inputs(model_args, data_files, training_args), training_args.output_dir)
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


def main_stage(stages: list[Stage]) -> Stage:
    """The stage that trains on the most tokens: its length is the one the precision probe times."""
    return max(stages, key=lambda stage: (stage.steps or 1) * (stage.global_batch_size or 1) * stage.max_seq_length)


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
    masking_args: MaskingArguments,
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
    return trainer


def mlm_run_settings(
    data_args: DataArguments, masking_args: MaskingArguments, training_args: TrainingArguments
) -> dict[str, Any]:
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
    data_args: DataArguments,
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
    data_args: DataArguments,
    masking_args: MaskingArguments,
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
    data_args: DataArguments,
    masking_args: MaskingArguments,
    training_args: TrainingArguments,
) -> StagedTrainer:
    """
    Walk the stages (`stages.walk_stages`), from where `--resume_from_checkpoint` says: each tokenizes the text to its
    length, trains, then evaluates (loss, perplexity, masked-token accuracy) and saves its results in its folder.
    Returns the last stage's trainer.
    """
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

    return walk_stages(model, stages, training_args, trainer_for_stage, first_index, checkpoint)


def save_outputs(
    trainer: StagedTrainer,
    stages: list[Stage],
    model_args: ModelArguments,
    data_args: DataArguments,
    masking_args: MaskingArguments,
    training_args: TrainingArguments,
    argv: list[str] | None,
    held_out: str | None = None,
) -> list[dict[str, Any]]:
    """Save the results, loss curve and model card of the run beside its final model in output_dir (`held_out`: the
    validation text in words when held out of train, `load_corpus`)."""
    output_dir = Path(training_args.output_dir)  # the final model is in place already (`run_stage`)
    if not trainer.is_world_process_zero():
        return []
    table = read_stage_results(training_args, stages)
    final = {key: value for key, value in table[-1].items() if key.startswith(("train_", "eval_", "perplexity"))}
    if "eval_loss" in final:  # said beside the scores: another precision gives other ones (docs/scripts.md)
        final["eval_precision"] = evaluation_precision(trainer.args, trainer.model)
    if training_args.do_train:  # threads and precision: what reproduces the run (docs/scripts.md)
        final.update(training_arithmetic(trainer.args))
    write_json_atomically(
        output_dir / "eval_results.json", {k: v for k, v in final.items() if not k.startswith("train_")}, indent=2
    )
    write_json_atomically(
        output_dir / "train_results.json", {k: v for k, v in final.items() if k.startswith("train_")}, indent=2
    )
    write_json_atomically(output_dir / "all_results.json", final, indent=2)
    write_json_atomically(output_dir / "stage_results.json", table, indent=2)
    summary = None  # evaluated only: the card claims no training (the results are in eval_results.json)
    if training_args.do_train:
        plot_loss_curve(training_args, stages, output_dir / "loss_curve.png")
        summary = mlm_training_summary(trainer, stages, final, data_args, masking_args, argv, held_out)
    publish_run(trainer, training_args, summary, base_model=model_args.model_name_or_path)
    return table


def mlm_training_summary(
    trainer: StagedTrainer,
    stages: list[Stage],
    results: dict[str, float],
    data_args: DataArguments,
    masking_args: MaskingArguments,
    argv: list[str] | None,
    held_out: str | None = None,
) -> TrainingSummary:
    """How this run trained the model, for its model card; `held_out` says what the validation text is when held
    out of train."""
    split_names, evaluation_data = evaluation_origins(data_args, held_out)
    masking = "whole-word masking over jieba words" if masking_args.whole_word_mask else "token masking"
    hyperparameters = {"seed": trainer.args.seed - (len(stages) - 1), "max_seq_length": data_args.max_seq_length}
    if masking_args.stages:  # batch size, accumulation and steps vary by stage
        stage_steps = sum(stage.steps for stage in stages)
        hyperparameters = {"stages": masking_args.stages, "max_steps": stage_steps, "seed": hyperparameters["seed"]}
        hyperparameters.update(train_batch_size="per stage", gradient_accumulation_steps="per stage")
    return TrainingSummary.from_trainer(
        trainer,
        script="run_mlm.py",
        task=f"masked language modelling with {masking} (mlm_probability {masking_args.mlm_probability})",
        datasets=[data_args.dataset_name or data_args.train_file],
        dataset_name=data_args.dataset_name,
        dataset_config=data_args.dataset_config_name,
        split_names=split_names,
        evaluation_data=evaluation_data,
        precision=results.get("eval_precision"),
        hyperparameters=hyperparameters,
        results={key: results[key] for key in ("eval_loss", "perplexity", "eval_accuracy") if key in results},
        trained_lengths=[stage.max_seq_length for stage in stages],
        trained_steps=sum(stage.steps for stage in stages) if masking_args.stages else trainer.state.global_step,
        command=command_line(__file__, argv),
    )


def show_fill_mask_examples(model: RoFormerForMaskedLM, tokenizer: PreTrainedTokenizerBase) -> None:
    """Print the model's top guesses for a few masked sentences."""
    from transformers import pipeline

    fill_mask = pipeline("fill-mask", model=model, tokenizer=tokenizer, device=model.device, top_k=3)
    for text in FILL_MASK_EXAMPLES:
        guesses = ", ".join(f"{guess['token_str']} ({guess['score']:.2f})" for guess in fill_mask(text))
        print(f"fill-mask: {text} -> {guesses}")


# Below this masked-token accuracy a model has learned how frequent tokens are, hardly yet what their context says.
FREQUENT_TOKENS_ACCURACY = 0.15


def fill_mask_expectation(accuracy: float | None) -> str | None:
    """What the fill-mask guesses of a model this accurate show (a line to print under them), or None."""
    if accuracy is None or accuracy >= FREQUENT_TOKENS_ACCURACY:
        return None
    return (
        f"(masked-token accuracy {accuracy:.3f}: a model this briefly trained guesses the text's most frequent tokens, "
        "such as ， 的 。, whatever the context; guesses that read the context take more steps (the demo, "
        "`python run_mlm.py`, reaches 0.2 in 1,700 small ones)"
    )


def report(table: list[dict[str, Any]], model: RoFormerForMaskedLM, tokenizer: PreTrainedTokenizerBase) -> None:
    """Print the stages' results and a few fill-mask guesses, with what to expect of them."""
    print(format_stage_table(table))
    show_fill_mask_examples(model, tokenizer)
    expectation = fill_mask_expectation(table[-1].get("eval_accuracy"))
    if expectation:
        print(expectation)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the script; returns the results of every stage (empty on processes other than the main one)."""
    model_args, data_args, masking_args, training_args = parse_mlm_arguments(argv)
    with script_run(training_args, model_args, "run_mlm.py", argv, DEMO_ARGUMENTS, evaluates=training_args.do_eval):
        bound_streamed_evaluation(data_args)
        stages = plan_stages(masking_args.stages, data_args.max_seq_length, training_args)
        raw_datasets, held_out = load_corpus(data_args, model_args)
        longest = max(stage.max_seq_length for stage in stages) if training_args.do_train else None
        tokenizer, model = build_tokenizer_and_masked_lm(model_args, masking_args.sparse_prediction, longest)
        if training_args.do_train:
            warn_if_many_unknown(tokenizer, raw_datasets["train"], "text", tokenizer_source(model_args))
        settle_cpu_precision(training_args, model, main_stage(stages).max_seq_length)
        # each stage tokenizes the text to its own length when it starts
        tokenize_to_length = partial(
            tokenize_corpus, raw_datasets, tokenizer, data_args=data_args, training_args=training_args
        )
        prepare_output_dir(training_args, model, [stage.steps or training_args.max_steps for stage in stages])
        static_shape_count = prepare_static_shapes(model, stages, data_args, masking_args, training_args)
        varying = None if static_shape_count else varying_shapes(stages, masking_args.sparse_prediction)
        with (
            compiled_for_every_length(training_args, varying),
            compiled_once_per_shape(training_args, static_shape_count),
        ):
            trainer = pretrain(model, tokenizer, tokenize_to_length, stages, data_args, masking_args, training_args)
        table = save_outputs(trainer, stages, model_args, data_args, masking_args, training_args, argv, held_out)
    if trainer.is_world_process_zero():
        report(table, model, tokenizer)
        print(loading_instructions(training_args.output_dir, RoFormerForMaskedLM))
    return table


if __name__ == "__main__":
    run_script(main)
