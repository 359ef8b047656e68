"""The names of transformers' loggers that the training scripts quiet while a model loads, which moved between the
releases roformer_hf supports (README, "Supported transformers"). The model's own difference between releases, the
key/value cache's name, is in `modeling.py`, which a checkpoint carries."""

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
