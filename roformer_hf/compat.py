"""What differs between the transformers releases roformer_hf supports (README, "Supported transformers"), outside
the model: the loggers the training scripts quiet while a model loads, and the modules `trust_remote_code` copies with
a checkpoint's code. The model's own difference between releases, the key/value cache's name, is in `modeling.py`,
which a checkpoint carries."""

import os

from transformers.dynamic_module_utils import get_relative_import_files

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
