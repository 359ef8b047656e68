"""What roformer_hf relies on in transformers' `Trainer` beyond its documented API, in one place: a private method
the scripts override, and the order of the Trainer's own calls while it writes a checkpoint. Both hold from
transformers 5.10.1 (the oldest release setup.cfg allows) through 5.24; `tests/test_trainer_internals.py` fails where a
release changes either. What differs between releases in the model's own code is in `modeling.py` (the key/value
cache's name).
"""

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from torch.utils.data import Dataset, Sampler, SequentialSampler

if TYPE_CHECKING:
    from transformers import Trainer


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


__all__ = ["InputOrderEvaluation", "around_checkpoint_weights"]
