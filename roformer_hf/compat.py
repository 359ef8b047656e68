"""What differs between the transformers releases roformer_hf supports (README, "Supported transformers"), in one
place, so that the model code reads the same on all of them.

transformers 5.24 renamed the key/value cache from `past_key_values` to `cache`: the argument `generate` passes to
`forward`, the field of the model outputs (`CausalLMOutputWithPast.cache`), the argument of the mask helpers and the
name the gradient-checkpointing layers look for. Earlier 5.x releases know only `past_key_values`; 5.24 still reads
it, with a deprecation warning, and announces its removal. Our models take the cache under both names and hand it to
transformers under the installed release's own name, so no release warns and none misses the cache.

`Trainer` offers no public way to choose the sampler of its evaluation and test batches: `InputOrderEvaluation`
overrides the private method that does, here, where a release that changes it is seen first.
"""

from dataclasses import fields

from torch.utils.data import Dataset, Sampler, SequentialSampler
from transformers.cache_utils import Cache
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.utils import ModelOutput

# "cache" from transformers 5.24 on, "past_key_values" before.
CACHE_NAME = "cache" if "cache" in {field.name for field in fields(CausalLMOutputWithPast)} else "past_key_values"


def cache_argument(cache: Cache | None) -> dict[str, Cache | None]:
    """`{name: cache}` under the installed release's name, for transformers' output classes and mask helpers."""
    return {CACHE_NAME: cache}


def cache_of(outputs: ModelOutput) -> Cache | None:
    """The cache a model output holds, read under the installed release's name (the old name warns on 5.24+)."""
    return outputs.get(CACHE_NAME)


def given_cache(cache: Cache | None, past_key_values: Cache | None) -> Cache | None:
    """The cache passed to `forward` under either name: `cache` (transformers 5.24+) or `past_key_values` (earlier
    releases' `generate`, and code written for them).

    Raises:
        ValueError: when both names are given.
    """
    if past_key_values is None:
        return cache
    if cache is not None:
        raise ValueError(
            "Both cache and past_key_values were given: they name the same key/value cache (transformers 5.24 renamed "
            "past_key_values to cache), so pass it once, as cache."
        )
    return past_key_values


# The logger transformers' `from_pretrained` prints its LOAD REPORT table on (missing, unexpected and mismatched
# weights, as a warning): modeling_utils' own, handed to `log_state_dict_report`, from 5.10.1 through 5.24. Its level
# decides whether the table shows; the same numbers come from `from_pretrained(..., output_loading_info=True)`.
LOAD_REPORT_LOGGER = "transformers.modeling_utils"
# Where transformers checks a model's tensor-parallel plan while it loads: whenever LOAD_REPORT_LOGGER's own level is
# WARNING or above (as it is while the scripts keep the load report off), the check runs and warns on this logger that
# "the following layers were not sharded", naming every layer, although no tensor parallelism was asked (a RoFormer's
# plan is empty). `transformers.distributed.tensor_parallel` on 5.24; `transformers.integrations.tensor_parallel`, which
# re-exports it there, held it in earlier releases.
TENSOR_PARALLEL_LOGGERS = ("transformers.distributed.tensor_parallel", "transformers.integrations.tensor_parallel")


class InputOrderEvaluation:
    """
    A mixin for a `Trainer` that evaluates and predicts in input order, on one process. Under
    `--train_sampling_strategy group_by_length`, transformers groups evaluation batches by length as well, which
    reorders the rows: a caller that pools rows per document, or writes predictions beside its input file, needs them
    in input order. Under torchrun, transformers' own sampler is kept (it shards the rows over the processes).

    The order is chosen by `Trainer._get_eval_sampler(eval_dataset)`, a private method that `get_eval_dataloader` and
    `get_test_dataloader` call with the dataset and whose `None` means "no sampler": the same in every release from
    5.10.1 through 5.24 (transformers offers no public option for it). A release that renames it would leave this
    override unused and the rows grouped again: `tests/test_compat.py` fails then.
    """

    def _get_eval_sampler(self, eval_dataset: Dataset) -> Sampler | None:
        if eval_dataset is None or self.args.world_size > 1:
            return super()._get_eval_sampler(eval_dataset)
        return SequentialSampler(eval_dataset)
