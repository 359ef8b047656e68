"""What roformer_hf relies on in transformers' `Trainer` and `TrainingArguments` beyond their documented API, in one
place: the private methods the scripts override, the order of the Trainer's own calls while it writes a checkpoint, the
precision the Trainer's accelerator is built with, and the logger and message of its end of training. Each holds from
transformers 5.10.1 (the oldest release setup.cfg allows) through 5.25; `tests/test_trainer_internals.py` fails where a
release changes one. The model's own difference between releases (the key/value cache's name) is in
`modeling.py`; the other transformers internals are in `compat.py`.
"""

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from torch.utils.data import Dataset, Sampler, SequentialSampler

from .machine.precisions import mixed_precision

if TYPE_CHECKING:
    import torch
    from transformers import Trainer, TrainingArguments

# The logger the Trainer logs on (its module's), and what it logs at the end of every `train()`: once per stage of a
# staged run, so the scripts show it once (`console.setup_logging`).
TRAINER_LOGGER = "transformers.trainer"
END_OF_TRAINING_MESSAGE = "Training completed. Do not forget to share your model"


class InputOrderEvaluation:
    """
    A `Trainer` mixin (put it before the Trainer class) that evaluates and predicts in input order, on one process.
    Under `--train_sampling_strategy group_by_length`, transformers groups evaluation batches by length as well, which
    reorders the rows: a caller that pools rows per document, or writes predictions beside its input file, needs them
    in input order. Under torchrun, transformers' own sampler is kept (it shards the rows over the processes).

    The order is chosen by `Trainer._get_eval_sampler(eval_dataset)`, a private method that `get_eval_dataloader` and
    `get_test_dataloader` call with the dataset and whose `None` means "no sampler" (transformers offers no public
    option for it).
    """

    def _get_eval_sampler(self, eval_dataset: Dataset | None) -> Sampler | None:
        if eval_dataset is None or self.args.world_size > 1:
            return super()._get_eval_sampler(eval_dataset)
        return SequentialSampler(eval_dataset)


class TiedWeightsOnLoad:
    """
    A `Trainer` mixin (put it before the Trainer class): loading a checkpoint (on resume, or the best model at the
    end) no longer calls the tied decoder of a masked LM "missing keys". `save_pretrained` leaves out a parameter's
    second name (the decoder is the word embeddings), and transformers' `_issue_warnings_after_load(load_result)`,
    which `_load_from_checkpoint` and `_load_best_model` call with `load_state_dict`'s result, warned of it, which
    reads like a broken checkpoint. A key stays named where no other name of its parameter was loaded.
    """

    def _issue_warnings_after_load(self, load_result):
        missing = set(load_result.missing_keys)
        loaded_through_another_name = {
            name for names in shared_parameter_names(self.model) if not set(names) <= missing for name in names
        }
        kept = [key for key in load_result.missing_keys if key not in loaded_through_another_name]
        return super()._issue_warnings_after_load(load_result._replace(missing_keys=kept))


def shared_parameter_names(model: "torch.nn.Module") -> list[list[str]]:
    """The names of each parameter that has more than one (tied weights), e.g. a decoder and the word embeddings."""
    names_of: dict[int, list[str]] = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        names_of.setdefault(id(parameter), []).append(name)
    return [names for names in names_of.values() if len(names) > 1]


def around_checkpoint_weights(
    trainer: "Trainer", before: Callable[[Path], None], after: Callable[[Path], None]
) -> None:
    """
    Call `before(folder)` and `after(folder)` around the first file the Trainer writes into a checkpoint folder: its
    private `_save_checkpoint` saves the weights first, through `save_model(folder, _internal_call=True)`, then the
    optimizer, scheduler, RNG states and `trainer_state.json`. Other calls of `save_model` (the final model) pass
    through unchanged.

    Args:
        trainer (`Trainer`): the trainer whose `save_model` is wrapped.
        before (`Callable[[Path], None]`): called with the checkpoint folder before its weights are written.
        after (`Callable[[Path], None]`): called with the checkpoint folder once they are.
    """
    save_model = trainer.save_model

    def save_model_of_checkpoint(output_dir: str | None = None, _internal_call: bool = False) -> None:
        folder = Path(output_dir) if _internal_call and output_dir is not None else None
        if folder is not None:
            before(folder)
        save_model(output_dir, _internal_call=_internal_call)
        if folder is not None:
            after(folder)

    trainer.save_model = save_model_of_checkpoint


def update_mixed_precision(training_args: "TrainingArguments") -> None:
    """
    Set `training_args.mixed_precision` from its `bf16` and `fp16` flags again. `TrainingArguments.__post_init__`
    derives it from the flags once, and the Trainer builds its accelerator from it, not from the flags: a precision
    decided after parsing (`cpu_precision.settle_cpu_precision`, once the model is built) must set it too.
    """
    training_args.mixed_precision = mixed_precision(training_args)


__all__ = [
    "END_OF_TRAINING_MESSAGE",
    "TRAINER_LOGGER",
    "InputOrderEvaluation",
    "TiedWeightsOnLoad",
    "around_checkpoint_weights",
    "shared_parameter_names",
    "update_mixed_precision",
]
