"""What RoFormer adds to transformers' `from_pretrained`, `save_pretrained` and `push_to_hub`, for every model class
of `modeling.py` (`RoFormerPretrainedMixin`), and the checks behind the first. One module, since the mixin is the
checks' only caller. The mixin also checks, when a model is built, that the config's heads fit its hidden size.

No silent random weights, no silent wrong attention: transformers initialises any weight a checkpoint lacks (or holds
in another shape, with `ignore_mismatched_sizes`) at random and reports it in a log table. For a new task head that is
what the user wants; for the encoder it means a config that does not describe the checkpoint, e.g. a RoFormer-V2
checkpoint read with a V1 config (its `norm_type`/`use_bias` lost), whose outputs are then garbage. `from_pretrained`
turns that case into a ValueError naming the likely cause, and reads a published RoFormer-Sim checkpoint and IDEA's
Zhouwenwang as fengshen saved it as what they are (`published_layouts.py`).

Reading the published layouts (`roformer_hf.published_layouts`) and publishing (the model card of `push_to_hub`, the
sentence-transformers files of `save_pretrained`: `roformer_hf.model_card`, `roformer_hf.sentence_transformers_files`)
are imported when used: they are not part of what a checkpoint carries (a roformer_hf checkpoint is in roformer_hf's
layout), so a checkpoint's code loaded with `trust_remote_code=True` where roformer_hf is not installed
saves and uploads as plain transformers does.
"""

import importlib
import os
import re
import shutil
import warnings
from pathlib import Path
from types import ModuleType

from huggingface_hub import hf_hub_download
from huggingface_hub.errors import EntryNotFoundError
from safetensors import safe_open
from transformers import PreTrainedModel
from transformers.utils import logging

from .configuration import RECIPE_PIPELINE_FILES, RoFormerConfig

logger = logging.get_logger(__name__)

# The query weight exists in every variant: when it is missing, the checkpoint lacks the whole layer.
ABSENT_LAYER = re.compile(r"encoder\.layer\.(\d+)\.attention\.self\.query\.weight$")
# The weight files transformers reads, in the order it prefers them.
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
HUB_ARGUMENTS = ("cache_dir", "revision", "token", "local_files_only", "subfolder")


class RoFormerPretrainedMixin:
    """Placed before `PreTrainedModel` among the bases of `RoFormerPreTrainedModel`; each method keeps the arguments
    of the transformers method it extends."""

    def __init__(self, config: RoFormerConfig, *inputs, **kwargs):
        """As `PreTrainedModel.__init__`, once the config's heads fit its hidden size (`check_attention_heads`): where
        transformers' models check it, so that the config itself accepts any sizes, as transformers' configs do."""
        config.check_attention_heads()
        super().__init__(config, *inputs, **kwargs)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        """As transformers' `from_pretrained` (same arguments), but encoder weights (everything under `roformer.`
        except the pooler) that the checkpoint lacks, or holds in another shape, raise a ValueError naming the likely
        cause instead of being initialised at random: a config that does not describe the checkpoint. New task heads
        and a new pooler are initialised as usual; `ignore_mismatched_sizes=True` initialises weights of another
        shape anew, as in transformers (with a warning naming those of the encoder). One exception: a
        caller who asks for the report (`output_loading_info=True`) of a file holding no weight of the model at all
        gets the model, every weight listed in `missing_keys`, and a warning (see `holds_no_weight_of`).

        A RoFormer-Sim checkpoint in the published layout (model_type "roformer") loads as a UniLM with its pooler,
        and IDEA's Zhouwenwang in fengshen's layout as a pre-norm UniLM, its weights renamed, unless the arguments or
        a `config` say otherwise (`published_layouts.py`, where roformer_hf is installed)."""
        source, layouts = pretrained_model_name_or_path, roformer_hf_module("published_layouts")
        if layouts is not None and kwargs.get("config") is None and isinstance(source, (str, os.PathLike)):
            pretrained_model_name_or_path, kwargs = layouts.published_layout_inputs(source, kwargs, cls)
        if isinstance(pretrained_model_name_or_path, (str, os.PathLike)):
            check_floating_weights(pretrained_model_name_or_path, kwargs)
        output_loading_info = kwargs.pop("output_loading_info", False)
        ignore_mismatched_sizes = kwargs.pop("ignore_mismatched_sizes", False)
        # Mismatched shapes are collected rather than raised, so that the encoder's can be explained below.
        model, loading_info = super().from_pretrained(
            pretrained_model_name_or_path,
            *model_args,
            output_loading_info=True,
            ignore_mismatched_sizes=True,
            **kwargs,
        )
        if pretrained_model_name_or_path is None:  # loaded from weights: the model still says where they came from
            model.name_or_path = model.config.name_or_path = str(source)
        if output_loading_info and holds_no_weight_of(model, loading_info):
            logger.warning(
                f"The checkpoint holds no weight of {type(model).__name__}, so all its weights are random "
                "(loading_info['missing_keys'] lists them): load a checkpoint saved from this model."
            )
        else:
            check_encoder_weights_loaded(model, loading_info, ignore_mismatched_sizes)
        if not ignore_mismatched_sizes:
            check_head_shapes(model, loading_info)
        return (model, loading_info) if output_loading_info else model

    def push_to_hub(self, repo_id: str, **kwargs):
        """As transformers' `push_to_hub` (same arguments), but the README.md uploaded is a RoFormer model card, to
        which the optional `training_summary` (a `model_card.TrainingSummary`) and `base_model` add. Without
        roformer_hf installed (remote code), transformers' own upload and card."""
        model_card = roformer_hf_module("model_card")
        if model_card is None:
            return super().push_to_hub(repo_id, **kwargs)
        return model_card.push_to_hub_with_model_card(self, repo_id, **kwargs)

    def save_pretrained(self, save_directory: str | os.PathLike, *args, **kwargs) -> None:
        """As transformers' `save_pretrained` (same arguments); with `config.add_pooling_layer`, also the files that
        make `SentenceTransformer(save_directory)` encode texts as `pooler_output` (see
        `sentence_transformers_files`; not written by remote code where roformer_hf is not installed). A model
        quantized in memory (`int8_serving.quantize_int8`) is refused in one line before anything is written."""
        refuse_int8_quantized_in_memory(self)
        super().save_pretrained(save_directory, *args, **kwargs)
        files = roformer_hf_module("sentence_transformers_files") if self.config.add_pooling_layer else None
        if files is not None:
            files.write_sentence_transformers_files(save_directory)
        if self.config.classification_inputs:
            copy_recipe_pipeline_code(save_directory, loaded_from=self.name_or_path)


def refuse_int8_quantized_in_memory(model: PreTrainedModel) -> None:
    """Raise `ValueError` for a model whose Linear layers were made int8 in memory (torchao's `quantize_`, or torch's
    `quantize_dynamic`) rather than loaded so (transformers' `TorchAoConfig`, which records it in the config): its
    weights are tensors safetensors cannot write, and it would die inside safetensors with half a folder written."""
    if getattr(model, "hf_quantizer", None) is not None:
        return
    if any(type(weight).__module__.startswith("torchao") for weight in model.parameters()):
        raise ValueError(
            "this model's Linear layers were made int8 in memory (roformer_hf.int8_serving.quantize_int8), which "
            "save_pretrained cannot write: save the float32 model, or load it with "
            "roformer_hf.int8_serving.load_int8(path) (transformers' TorchAoConfig), whose int8 model saves and reloads."
        )
    if any(type(module).__module__.startswith("torch.ao.nn.quantized") for module in model.modules()):
        # int8_serving's fallback without torchao, load_int8's too: naming load_int8 would send the user in a circle
        raise ValueError(
            "this model's Linear layers were made int8 by torch's quantize_dynamic (roformer_hf.int8_serving's route "
            "where torchao is not installed), which save_pretrained cannot write: save the float32 model and quantize "
            "it where it is served, or install torchao (pip install 'roformer_hf[int8]') and load it with "
            "roformer_hf.int8_serving.load_int8(path), whose int8 model saves and reloads."
        )


def copy_recipe_pipeline_code(save_directory: str | os.PathLike, loaded_from: str | os.PathLike = "") -> None:
    """Copy the code of the text-classification pipeline that the saved `custom_pipelines` names (see
    `configuration.RECIPE_PIPELINE`) beside the model's: `trust_remote_code=True` loads it from there. The file sits
    beside this one in roformer_hf. In a checkpoint's code (remote code) it does only once that pipeline was loaded,
    so it is taken from the checkpoint the model was loaded from, `loaded_from` (a folder or a Hub repository)."""
    for name in RECIPE_PIPELINE_FILES:
        source = Path(__file__).with_name(name)
        if not source.is_file() and loaded_from:
            source = checkpoint_file(loaded_from, name, {})
        target = Path(save_directory) / name
        if source is None or not source.is_file():
            warnings.warn(
                f"{target} is not written: neither roformer_hf nor the checkpoint this model was loaded from "
                f"({loaded_from or 'none'}) has it, so pipeline(..., trust_remote_code=True) cannot read this "
                "classifier's documents as it was fine-tuned; save it where roformer_hf is installed",
                stacklevel=3,
            )
        elif not target.exists() or not target.samefile(source):  # saved into the folder it was loaded from
            shutil.copyfile(source, target)


def roformer_hf_module(name: str) -> ModuleType | None:
    """The module `roformer_hf.<name>`, or None where roformer_hf is not installed (a checkpoint's own code, loaded
    with `trust_remote_code=True`). Imported by name so that transformers neither copies it into checkpoints nor
    requires it: it follows `from .x import` lines and checks that every package imported plainly is installed."""
    try:
        return importlib.import_module(f"roformer_hf.{name}")
    except ModuleNotFoundError as error:
        if error.name is None or error.name.split(".")[0] != "roformer_hf":
            raise
        return None


def checkpoint_file(pretrained_model_name_or_path: str | os.PathLike, name: str, hub_kwargs: dict) -> Path | None:
    """The local path of a checkpoint's file (downloaded into the Hub cache as `from_pretrained` would), or None
    where there is none; transformers then reports any problem with the checkpoint itself."""
    folder = Path(pretrained_model_name_or_path, hub_kwargs.get("subfolder") or "")
    if folder.is_dir():
        return folder / name if (folder / name).is_file() else None
    if os.path.exists(pretrained_model_name_or_path):  # a single file: no config.json beside it to read
        return None
    try:
        return Path(hf_hub_download(str(pretrained_model_name_or_path), name, **hub_kwargs))
    except (OSError, ValueError, EntryNotFoundError):  # no such repository or file, offline without it, bad id
        return None


def check_floating_weights(pretrained_model_name_or_path: str | os.PathLike, kwargs: dict) -> None:
    """Raises a ValueError where a checkpoint's safetensors weights hold integer tensors (every RoFormer weight is
    floating-point): transformers would load their values cast to float, e.g. weights of about 0.02 saved as integers
    load as zeros. A quantized checkpoint (its config's `quantization_config`) is left to its quantizer."""
    hub_kwargs = {name: kwargs[name] for name in HUB_ARGUMENTS if kwargs.get(name) is not None}
    config_file = checkpoint_file(pretrained_model_name_or_path, "config.json", hub_kwargs)
    if config_file is None or "quantization_config" in config_file.read_text(encoding="utf-8"):
        return
    weights_file = checkpoint_file(pretrained_model_name_or_path, "model.safetensors", hub_kwargs)
    if weights_file is None:  # sharded or pickled weights: transformers' own checks
        return
    with safe_open(weights_file, framework="pt") as weights:
        saved_names = weights.keys()
        parameters = [name for name in saved_names if name.endswith((".weight", ".bias"))]  # not buffers of ids
        dtypes = {name: weights.get_slice(name).get_dtype() for name in parameters}
    integer = sorted(f"{name} ({dtype})" for name, dtype in dtypes.items() if not dtype.startswith(("F", "BF")))
    if integer:
        raise ValueError(
            f"{weights_file} holds integer weights, which would load as their values cast to float: "
            f"{abbreviated(integer)}. Load the checkpoint these weights were saved from (a RoFormer's weights are "
            "floating-point), or save the model again with its float weights."
        )


class CheckpointMismatchError(ValueError, RuntimeError):
    """A checkpoint that does not fit the encoder as configured: a ValueError, as every refusal of a bad checkpoint
    here, and a RuntimeError, what transformers raises for weights of another shape without `ignore_mismatched_sizes`
    (so code written for either catches it)."""


def check_encoder_weights_loaded(
    model: PreTrainedModel, loading_info: dict, ignore_mismatched_sizes: bool = False
) -> None:
    """Raises a ValueError naming the likely cause when a checkpoint does not fill the encoder of `model` (missing or
    mismatched weights), or holds norm or bias weights that the config leaves out (RoFormer-V1 read as V2).

    Args:
        model (`RoFormerPreTrainedModel`): The model `from_pretrained` built.
        loading_info (`dict`): Its `output_loading_info` (missing, unexpected and mismatched keys).
        ignore_mismatched_sizes (`bool`): the caller asked for weights of another shape to be initialised anew (as
            transformers does, e.g. to change the vocabulary): those are then warned about, not refused.
    """
    config = model.config
    missing = sorted(name for name in loading_info["missing_keys"] if is_encoder_weight(model, name))
    unexpected = sorted(name for name in loading_info["unexpected_keys"] if is_encoder_weight(model, name))
    mismatched = sorted(item for item in loading_info["mismatched_keys"] if is_encoder_weight(model, item[0]))
    if mismatched and ignore_mismatched_sizes:
        shapes = [f"{name} {tuple(saved)} vs {tuple(built)}" for name, saved, built in mismatched]
        logger.warning(
            f"{type(model).__name__}: these weights have another shape in the checkpoint, so they are random, as "
            f"ignore_mismatched_sizes=True asks: {abbreviated(shapes)}. Fine-tune them before use."
        )
        mismatched = []
    absent_layers = sorted(int(found.group(1)) for name in missing if (found := ABSENT_LAYER.search(name)))
    missing_in_layers = [name for name in missing if not in_layers(name, absent_layers)]
    encoder_size = sum(is_encoder_weight(model, name) for name in model.state_dict())
    # A checkpoint without any encoder weight says nothing of the variant (no norm weights to miss).
    loaded_some = len(missing) < encoder_size
    needed = variant_settings_of_weights(config, missing_in_layers, unexpected) if loaded_some else {}
    if not (missing or mismatched or needed):
        return
    causes = mismatch_causes(config, needed, missing_in_layers, absent_layers, mismatched)
    raise CheckpointMismatchError(
        f"The checkpoint does not fit the encoder of {type(model).__name__} as configured, so some of its weights "
        f"would be random: {'; '.join(causes)}. Load it with the config saved with these weights, or fix these "
        "settings."
    )


def mismatch_causes(
    config: RoFormerConfig,
    needed: dict[str, object],
    missing_in_layers: list[str],
    absent_layers: list[int],
    mismatched: list[tuple],
) -> list[str]:
    """The likely causes of a checkpoint that does not fit the encoder, each a clause of
    `check_encoder_weights_loaded`'s error: the variant its weights say, the norm or weights it lacks, its number of
    layers, and the weights of another shape."""
    causes = []
    if needed:
        is_v2 = needed.get("norm_type") == "rms_norm" or needed.get("use_bias") is False
        settings = ", ".join(f"{name}={value!r}" for name, value in needed.items())
        causes.append(
            f"this looks like a {'RoFormer-V2' if is_v2 else 'RoFormer (V1)'} checkpoint: its config needs {settings}"
        )
    elif missing_in_layers and config.final_layer_norm and all(map(is_final_norm, missing_in_layers)):
        causes.append(
            f"the checkpoint has no norm after the last layer ({abbreviated(missing_in_layers)}), which "
            "final_layer_norm=True asks for (Zhouwenwang's layout): its config needs final_layer_norm=False, or the "
            "checkpoint lost its final norm"
        )
    elif missing_in_layers:
        causes.append(f"the checkpoint lacks {abbreviated(missing_in_layers)}")
    if absent_layers and absent_layers == list(range(absent_layers[0], config.num_hidden_layers)):
        causes.append(
            f"the checkpoint has {absent_layers[0]} layers but config.num_hidden_layers is {config.num_hidden_layers}"
        )
    elif absent_layers:
        causes.append(f"the checkpoint lacks the layers {', '.join(map(str, absent_layers))}")
    if mismatched:
        shapes = [f"{name} {tuple(saved)} vs {tuple(built)}" for name, saved, built in mismatched]
        causes.append(
            f"these weights have another shape in the checkpoint than in the config: {abbreviated(shapes)} (compare "
            "hidden_size, intermediate_size, embedding_size, vocab_size and type_vocab_size)"
        )
    return causes


def holds_no_weight_of(model: PreTrainedModel, loading_info: dict) -> bool:
    """Whether the checkpoint filled no weight of `model` at all: every one is in `missing_keys` (tied weights
    included). Not the case `check_encoder_weights_loaded` is for, a checkpoint that a config fails to describe, where
    a few random weights hide among many loaded ones; here the report lists everything. transformers' common test of
    the missing-keys report (test_model_weights_reload_no_missing_tied_weights) saves such a file and reads the report;
    a plain `from_pretrained` still refuses it."""
    return set(model.state_dict()) <= set(loading_info["missing_keys"])


def check_head_shapes(model: PreTrainedModel, loading_info: dict) -> None:
    """Raises transformers' error for head weights of another shape (the encoder's are `check_encoder_weights_loaded`'s
    concern), for a caller that did not pass `ignore_mismatched_sizes=True`."""
    mismatched = [item for item in loading_info["mismatched_keys"] if not is_encoder_weight(model, item[0])]
    if mismatched:
        shapes = ", ".join(f"{name} {tuple(saved)} vs {tuple(built)}" for name, saved, built in sorted(mismatched))
        raise RuntimeError(
            f"Error(s) in loading state_dict for {type(model).__name__}: size mismatch (in the checkpoint vs in the "
            f"model) for {shapes}. You may consider adding `ignore_mismatched_sizes=True` to `from_pretrained(...)` "
            "to initialise these weights afresh."
        )


def is_encoder_weight(model: PreTrainedModel, name: str) -> bool:
    """Whether the parameter `name` (of `model` or of the checkpoint) belongs to the encoder, pooler excluded."""
    prefix = f"{model.base_model_prefix}."
    if model.base_model is not model and not name.startswith(prefix):  # a head: the encoder is under "roformer."
        return False
    name = name.removeprefix(prefix)  # a bare model reports unexpected keys with the checkpoint's prefix
    return name.startswith(("embeddings.", "embeddings_project.", "encoder."))


def in_layers(name: str, layers: list[int]) -> bool:
    return any(f"encoder.layer.{index}." in name for index in layers)


def variant_settings_of_weights(config: RoFormerConfig, missing: list[str], unexpected: list[str]) -> dict:
    """The `norm_type` / `use_bias` that the encoder weights call for, where they differ from `config`."""

    def is_norm(name: str) -> bool:
        return ".LayerNorm." in name

    def is_linear_bias(name: str) -> bool:  # the projection of the embeddings keeps its bias in V2
        return (
            name.endswith(".bias")
            and not is_norm(name)
            and not is_final_norm(name)
            and "embeddings_project" not in name
        )

    needed = {}
    if config.norm_type == "layer_norm" and any(map(is_norm, missing)):
        needed["norm_type"] = "rms_norm"
    if config.norm_type == "rms_norm" and any(map(is_norm, unexpected)):
        needed["norm_type"] = "layer_norm"
    if config.use_bias and any(map(is_linear_bias, missing)):
        needed["use_bias"] = False
    if not config.use_bias and any(map(is_linear_bias, unexpected)):
        needed["use_bias"] = True
    return needed


def is_final_norm(name: str) -> bool:
    """Whether `name` is a weight of the norm after the last layer (`final_layer_norm`: Zhouwenwang's layout)."""
    return ".final_norm." in f".{name}"


def abbreviated(names: list[str], shown: int = 4) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
