"""
The settings of a run_classification.py run seen together: the checks that need more than one group of arguments
(something to do, no input the run would write over, evaluations for early stopping), and the settings a checkpoint of
the run records and a resume must repeat.
"""

from dataclasses import asdict
from typing import Any

from transformers import TrainingArguments

from ..cli import ModelArguments
from ..errors import ScriptError
from ..first_answers import check_request
from ..outputs.resume import data_run_settings
from ..outputs.written_files import check_inputs_are_not_outputs, run_inputs
from .documents import wanted_splits

__all__ = ["check_classification_arguments", "classification_run_settings"]


def check_classification_arguments(
    model_args: ModelArguments, data_args: Any, training_args: TrainingArguments
) -> None:
    """
    Refuse a command line that has nothing to do or would write over one of its inputs; early stopping compares
    evaluation losses unless `--metric_for_best_model` names another metric.

    Args:
        model_args (`ModelArguments`): the model and tokenizer the run reads.
        data_args (`DataArguments`): run_classification.py's data arguments (the files the run reads).
        training_args (`TrainingArguments`): what the run does and where it writes; `metric_for_best_model` and
            `greater_is_better` are set here for `--early_stopping_patience` when not given.
    """
    check_request("something to do", vars(training_args))
    data_files = {option: path for _, option, path, _ in wanted_splits(data_args, training_args)}
    data_files["--dataset_name"] = data_args.dataset_name
    inputs = run_inputs(model_args, data_files, training_args)
    check_inputs_are_not_outputs(
        inputs, training_args.output_dir, trains=training_args.do_train, cache_dir=model_args.cache_dir
    )
    if data_args.early_stopping_patience is not None:
        if training_args.eval_strategy == "no":
            raise ScriptError(
                "--early_stopping_patience needs evaluations during training: add --eval_strategy epoch."
            )
        if training_args.metric_for_best_model is None:
            training_args.metric_for_best_model, training_args.greater_is_better = "loss", False


def classification_run_settings(data_args: Any, training_args: TrainingArguments) -> dict[str, Any]:
    """The settings a checkpoint of this run records, and a resume must repeat (`training.outputs.resume`): those of
    every script, and how the run reads its documents (its `DocumentRecipe`)."""
    return data_run_settings(training_args, data_args, **asdict(data_args.recipe()))
