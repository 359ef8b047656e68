"""
What a pretraining run of run_mlm.py leaves and says at its end: its results beside the final model (results files,
the stage table, the loss curve, the model card and its training summary, `save_outputs`), and the report it prints
(the stages' results, a few fill-mask guesses and what to expect of them, how to load the model, `report`).

`data_args` and `masking_args` are the script's argument dataclasses (run_mlm.py's `DataArguments`, a
`DatasetArguments`, and `MaskingArguments`).
"""

import itertools
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase, TrainingArguments

from ...hub.model_card import TrainingSummary
from ...modeling import RoFormerForMaskedLM
from ..cli import ModelArguments, command_line
from ..console import loading_instructions
from ..machine.cpu_precision import evaluation_precision, training_arithmetic
from ..outputs.run_outputs import write_json_atomically
from ..publishing import evaluation_origins, publish_run
from .stages import Stage, StagedTrainer, format_stage_table, plot_loss_curve, read_stage_results

SCRIPT = "run_mlm.py"
# The closing fill-mask guesses: this many sentences of the run's own validation text (its training text where it has
# none), each the first sentence of a text, cut to PROBE_CHARACTERS, with its middle word masked.
PROBE_COUNT = 3
PROBE_CHARACTERS = 48
PROBE_WORDS = 4  # a sentence of fewer words gives no context to read
PROBE_TEXTS_READ = 1000  # texts looked at for sentences long enough, at most
SENTENCE_END = re.compile(r"(?<=[。！？!?；;])")
# Below this masked-token accuracy a model has learned how frequent tokens are, hardly yet what their context says.
FREQUENT_TOKENS_ACCURACY = 0.15


def save_outputs(
    trainer: StagedTrainer,
    stages: list[Stage],
    model_args: ModelArguments,
    data_args: Any,
    masking_args: Any,
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
    data_args: Any,
    masking_args: Any,
    argv: list[str] | None,
    held_out: str | None = None,
) -> TrainingSummary:
    """How this run trained the model, for its model card; `held_out` says what the validation text is when held
    out of train."""
    split_names, evaluation_data = evaluation_origins(data_args, held_out)
    masking = "whole-word masking over jieba words" if masking_args.whole_word_mask else "token masking"
    hyperparameters = {"seed": trainer.args.seed - (len(stages) - 1), "max_seq_length": data_args.max_seq_length}
    steps = {}
    if masking_args.stages:  # batch size, accumulation and steps vary by stage
        stage_steps = sum(stage.steps for stage in stages)
        hyperparameters = {"stages": masking_args.stages, "max_steps": stage_steps, "seed": hyperparameters["seed"]}
        hyperparameters.update(train_batch_size="per stage", gradient_accumulation_steps="per stage")
        best_in_last_stage = trainer.state.best_global_step if trainer.args.load_best_model_at_end else None
        steps = {"trained_steps": stage_steps, "published_step": None}  # each stage counts its steps from 0
        if best_in_last_stage not in (None, stages[-1].steps):
            steps["published_step"] = stage_steps - stages[-1].steps + best_in_last_stage
    return TrainingSummary.from_trainer(
        trainer,
        script=SCRIPT,
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
        command=command_line(SCRIPT, argv),
        **steps,
    )


def fill_mask_probes(raw_datasets: Any, tokenizer: PreTrainedTokenizerBase) -> list[str]:
    """
    `PROBE_COUNT` sentences of the run's validation text (of its training text where it has none), each with its
    middle word masked: the closing guesses read the run's own kind of text, whatever the corpus.

    Args:
        raw_datasets (`DatasetDict` or `IterableDatasetDict`): the corpus of `text_corpus.load_corpus` (a `text`
            column).
        tokenizer (`PreTrainedTokenizerBase`): the run's tokenizer (its words and mask token).
    """
    texts = raw_datasets["validation"] if "validation" in raw_datasets else raw_datasets["train"]
    probes = (masked_sentence(row["text"], tokenizer) for row in itertools.islice(texts, PROBE_TEXTS_READ))
    return list(itertools.islice(filter(None, probes), PROBE_COUNT))


def masked_sentence(text: str, tokenizer: PreTrainedTokenizerBase) -> str | None:
    """The first sentence of `text` (at most `PROBE_CHARACTERS`) with its middle word masked, or None where it has
    fewer than `PROBE_WORDS` words."""
    sentence = SENTENCE_END.split(text.strip(), maxsplit=1)[0][:PROBE_CHARACTERS]
    offsets = tokenizer(sentence, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    words = [(start, end) for start, end in offsets if any(character.isalnum() for character in sentence[start:end])]
    if len(words) < PROBE_WORDS:
        return None
    start, end = words[len(words) // 2]
    return sentence[:start] + tokenizer.mask_token + sentence[end:]


def show_fill_mask_examples(
    model: RoFormerForMaskedLM, tokenizer: PreTrainedTokenizerBase, probes: Iterable[str]
) -> None:
    """Print the model's top guesses for a few masked sentences (`fill_mask_probes`)."""
    from transformers import pipeline

    fill_mask = pipeline("fill-mask", model=model, tokenizer=tokenizer, device=model.device, top_k=3)
    for text in probes:
        guesses = ", ".join(f"{guess['token_str']} ({guess['score']:.2f})" for guess in fill_mask(text))
        print(f"fill-mask: {text} -> {guesses}")


def fill_mask_expectation(accuracy: float | None) -> str | None:
    """What the fill-mask guesses of a model this accurate show (a line to print under them), or None."""
    if accuracy is None or accuracy >= FREQUENT_TOKENS_ACCURACY:
        return None
    return (
        f"(masked-token accuracy {accuracy:.3f}: a model this briefly trained guesses the text's most frequent tokens, "
        "such as ， 的 。, whatever the context; guesses that read the context take more steps (the demo, "
        "`python run_mlm.py`, reaches 0.2 in 1,700 small ones)"
    )


def report(
    table: list[dict[str, Any]],
    model: RoFormerForMaskedLM,
    tokenizer: PreTrainedTokenizerBase,
    output_dir: str | Path,
    probes: Iterable[str],
) -> None:
    """Print the stages' results and the fill-mask guesses of `probes` (`fill_mask_probes`), with what to expect of
    them, then how to load the model saved in `output_dir`."""
    print(format_stage_table(table))
    show_fill_mask_examples(model, tokenizer, probes)
    expectation = fill_mask_expectation(table[-1].get("eval_accuracy"))
    if expectation:
        print(expectation)
    print(loading_instructions(output_dir, RoFormerForMaskedLM))


__all__ = [
    "PROBE_COUNT",
    "fill_mask_expectation",
    "fill_mask_probes",
    "masked_sentence",
    "mlm_training_summary",
    "report",
    "save_outputs",
    "show_fill_mask_examples",
]
