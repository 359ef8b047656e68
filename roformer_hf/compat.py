"""What differs between the transformers releases roformer_hf supports (README, "Supported transformers"), in one
place, so that the model code reads the same on all of them.

transformers 5.24 renamed the key/value cache from `past_key_values` to `cache`: the argument `generate` passes to
`forward`, the field of the model outputs (`CausalLMOutputWithPast.cache`), the argument of the mask helpers and the
name the gradient-checkpointing layers look for. Earlier 5.x releases know only `past_key_values`; 5.24 still reads
it, with a deprecation warning, and announces its removal. Our models take the cache under both names and hand it to
transformers under the installed release's own name, so no release warns and none misses the cache.

The other transformers internals the package relies on outside the Trainer (`training/trainer_internals.py` holds
those) are named here too: the loggers of its loading report, and the modules `trust_remote_code` copies with a
checkpoint's code.
"""

import os
from dataclasses import fields

from transformers.cache_utils import Cache
from transformers.dynamic_module_utils import get_relative_import_files
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


def relative_import_files(module_file: str | os.PathLike) -> list[str]:
    """The files a checkpoint's code file imports relatively, followed recursively: what transformers copies with it
    for `trust_remote_code=True` (`dynamic_module_utils.get_relative_import_files`, which no public API exposes)."""
    return get_relative_import_files(module_file)
