"""The sources of a conversion (`roformer_hf.conversion.convert`): where the checkpoint is (a local folder, or a Hub
model id downloaded into the Hub cache), which layout it has (transformers or bert4keras), and the bert4keras side: the pure,
mutually inverse name mappings between bert4keras variables and roformer_hf parameters, and the reading of an
original TensorFlow checkpoint (which needs tensorflow: `pip install "roformer_hf[tf]"`). A transformers checkpoint
needs no renaming, but for IDEA's Zhouwenwang in fengshen's layout (`fengshen_checkpoint`); `convert.py` reads its
weights.
"""

import json
import os
import re
from pathlib import Path

import huggingface_hub
import numpy as np
import torch
from huggingface_hub.errors import HfHubHTTPError, HFValidationError, LocalEntryNotFoundError
from transformers.utils import logging

from ..configuration import RoFormerConfig
from .fengshen_layout import fengshen_settings, fengshen_state_dict_to_roformer_hf

logger = logging.get_logger(__name__)


class ConversionError(ValueError):
    """A source that cannot be converted; the message names the problem and the fix."""


# ----------------------------------------------------------------------------------------------------------------
# Names: bert4keras variable <-> roformer_hf parameter
# ----------------------------------------------------------------------------------------------------------------

# Variables that are a whole tensor, with no kernel/bias leaf.
BERT4KERAS_TABLES = {
    "bert/embeddings/word_embeddings": "roformer.embeddings.word_embeddings.weight",
    "bert/embeddings/token_type_embeddings": "roformer.embeddings.token_type_embeddings.weight",
    "cls/predictions/output_bias": "cls.predictions.bias",
}
# Modules outside the encoder layers.
BERT4KERAS_MODULES = {
    "bert/embeddings/LayerNorm": "roformer.embeddings.LayerNorm",
    "bert/encoder/embedding_hidden_mapping_in": "roformer.embeddings_project",
    "cls/predictions/transform/dense": "cls.predictions.transform.dense",
    "cls/predictions/transform/LayerNorm": "cls.predictions.transform.LayerNorm",
}
# Modules of encoder layer i: the part after `bert/encoder/layer_{i}/`, the same path with dots in ours.
BERT4KERAS_LAYER = re.compile(
    r"bert/encoder/layer_(\d+)/"
    r"(attention/self/(?:query|key|value)|attention/output/(?:dense|LayerNorm)|intermediate/dense|output/(?:dense|LayerNorm))"
)
OUR_LAYER = re.compile(
    r"roformer\.encoder\.layer\.(\d+)\."
    r"(attention\.self\.(?:query|key|value)|attention\.output\.(?:dense|LayerNorm)|intermediate\.dense|output\.(?:dense|LayerNorm))"
)
# Linear layers have kernel/bias, layer norms gamma/beta; ours have weight/bias for both.
LINEAR_LEAVES = {"kernel": "weight", "bias": "bias"}
NORM_LEAVES = {"gamma": "weight", "beta": "bias"}
# The same tables read the other way, for `roformer_hf_to_bert4keras`.
OUR_TABLES = {ours: theirs for theirs, ours in BERT4KERAS_TABLES.items()}
OUR_MODULES = {ours: theirs for theirs, ours in BERT4KERAS_MODULES.items()}
OUR_LINEAR_LEAVES = {ours: theirs for theirs, ours in LINEAR_LEAVES.items()}
OUR_NORM_LEAVES = {ours: theirs for theirs, ours in NORM_LEAVES.items()}
# Variables of the original checkpoints that no roformer_hf model has: the BERT pooler and next-sentence head.
BERT4KERAS_UNUSED = re.compile(r"bert/pooler/dense/(kernel|bias)|cls/seq_relationship/(output_weights|output_bias)")
# Training bookkeeping that some TF checkpoints carry beside the weights.
BERT4KERAS_BOOKKEEPING = re.compile(r"global_step|.*/adam_[mv]|bad_steps|good_steps|loss_scale")
# The decoder of the MLM head is tied to the word embeddings and its bias is `cls.predictions.bias`.
TIED_PARAMETERS = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias")


def bert4keras_to_roformer_hf(name: str) -> str | None:
    """The roformer_hf parameter name of a bert4keras variable, `None` when it has none.

    `"bert/encoder/layer_0/attention/self/query/kernel"` -> `"roformer.encoder.layer.0.attention.self.query.weight"`.
    The inverse of `roformer_hf_to_bert4keras`.
    """
    if name in BERT4KERAS_TABLES:
        return BERT4KERAS_TABLES[name]
    module, _, leaf = name.rpartition("/")
    if layer := BERT4KERAS_LAYER.fullmatch(module):
        our_module = f"roformer.encoder.layer.{layer[1]}.{layer[2].replace('/', '.')}"
    elif module in BERT4KERAS_MODULES:
        our_module = BERT4KERAS_MODULES[module]
    else:
        return None
    leaves = NORM_LEAVES if module.endswith("LayerNorm") else LINEAR_LEAVES
    return f"{our_module}.{leaves[leaf]}" if leaf in leaves else None


def roformer_hf_to_bert4keras(name: str) -> str | None:
    """The bert4keras variable name of a roformer_hf parameter, `None` when it has none (e.g. a task head).

    `"roformer.encoder.layer.0.attention.self.query.weight"` -> `"bert/encoder/layer_0/attention/self/query/kernel"`.
    The inverse of `bert4keras_to_roformer_hf`.
    """
    if name in OUR_TABLES:
        return OUR_TABLES[name]
    module, _, leaf = name.rpartition(".")
    if layer := OUR_LAYER.fullmatch(module):
        their_module = f"bert/encoder/layer_{layer[1]}/{layer[2].replace('.', '/')}"
    elif module in OUR_MODULES:
        their_module = OUR_MODULES[module]
    else:
        return None
    their_leaf = (OUR_NORM_LEAVES if module.endswith("LayerNorm") else OUR_LINEAR_LEAVES).get(leaf)
    return f"{their_module}/{their_leaf}" if their_leaf else None


def bert4keras_to_state_dict(variables: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """Renames bert4keras variables to roformer_hf parameters and transposes the kernels.

    Args:
        variables (`dict[str, np.ndarray]`):
            The model variables of a bert4keras checkpoint, every one with a roformer_hf name.

    Returns:
        The state dict; the inverse of `state_dict_to_bert4keras`.
    """
    state_dict = {}
    for name, array in variables.items():
        array = array.T if name.endswith("/kernel") else array
        state_dict[bert4keras_to_roformer_hf(name)] = torch.from_numpy(np.ascontiguousarray(array))
    return state_dict


def state_dict_to_bert4keras(state_dict: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Renames roformer_hf parameters to bert4keras variables and transposes the linear weights.

    The tied MLM decoder is left out (bert4keras ties it too). Parameters with no bert4keras name (task heads) raise
    a `ConversionError`. The inverse of `bert4keras_to_state_dict`.
    """
    unnamed = [name for name in state_dict if name not in TIED_PARAMETERS and roformer_hf_to_bert4keras(name) is None]
    if unnamed:
        raise ConversionError(f"These parameters have no bert4keras name: {', '.join(unnamed)}.")
    variables = {}
    for name, tensor in state_dict.items():
        if name in TIED_PARAMETERS:
            continue
        their_name = roformer_hf_to_bert4keras(name)
        array = tensor.detach().cpu().numpy()
        variables[their_name] = array.T if their_name.endswith("/kernel") else array
    return variables


# ----------------------------------------------------------------------------------------------------------------
# Reading the sources
# ----------------------------------------------------------------------------------------------------------------

# The weights of a transformers checkpoint: one file, or the index of a sharded one (`save_pretrained` cuts weights
# above `max_shard_size` into `model-00001-of-00002.safetensors`, ...).
TRANSFORMERS_WEIGHTS = (
    *("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json"),
)
POSITION_TABLE = "encoder.embed_positions.weight"
POOLER = "roformer.pooler."
LM_HEAD = "cls.predictions."
# What a conversion reads of a Hub repository (which also holds TF, Flax and ONNX weights that it does not need).
HUB_FILES = (
    *("config.json", *TRANSFORMERS_WEIGHTS, "model-*-of-*.safetensors", "pytorch_model-*-of-*.bin"),
    *("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"),
)


def locate_source(source: str | Path, revision: str | None = None) -> Path:
    """The local folder of `source`: the folder itself, or the download of a Hub model id (at `revision`)."""
    folder = Path(source)
    if folder.exists():
        if revision is not None:
            raise ConversionError(f"--revision applies to Hub model ids, not to the local folder {folder}.")
        return folder.resolve()
    try:
        huggingface_hub.utils.validate_repo_id(str(source))
    except HFValidationError:
        raise ConversionError(
            f"{folder} is not a folder: give the folder of the checkpoint to convert or a Hub model id."
        ) from None
    return download(str(source), revision)


def download(repo_id: str, revision: str | None) -> Path:
    """The snapshot folder of the files in `HUB_FILES` of the Hub model `repo_id`, from huggingface_hub's cache."""
    at_revision = f"{repo_id} (revision {revision or 'main'})"
    try:
        folder = huggingface_hub.snapshot_download(repo_id, revision=revision, allow_patterns=list(HUB_FILES))
    except LocalEntryNotFoundError:
        raise ConversionError(
            f"{at_revision} is not a local folder and not in the Hugging Face cache, and the Hub cannot be reached "
            "(HF_HUB_OFFLINE is set or there is no network): check the name, or download it once online."
        ) from None
    except HfHubHTTPError as error:
        reason = str(error).splitlines()[0]
        raise ConversionError(f"{at_revision} is not a local folder and cannot be downloaded: {reason}") from None
    return Path(folder)


def detect_source(folder: Path) -> str:
    """`"transformers"` or `"bert4keras"`, from the files in `folder`; a `ConversionError` for anything else."""
    if not folder.is_dir():
        raise ConversionError(f"{folder} is not a folder: give the folder of the checkpoint to convert.")
    has_vocab = (folder / "vocab.txt").is_file()
    if (folder / "config.json").is_file() and any((folder / name).is_file() for name in TRANSFORMERS_WEIGHTS):
        kind = "transformers"
    elif (folder / "bert_config.json").is_file() and any(folder.glob("*.index")):
        kind = "bert4keras"
    else:
        kind = None
    if kind is None or not has_vocab:
        raise ConversionError(
            f"{folder} is not a RoFormer checkpoint: expected either config.json, model.safetensors (or a sharded "
            "model.safetensors.index.json) or pytorch_model.bin and vocab.txt (a transformers RoFormer), or "
            "bert_config.json, a TF checkpoint "
            f"(bert_model.ckpt.index and .data-*) and vocab.txt (an original bert4keras RoFormer); found "
            f"{', '.join(sorted(path.name for path in folder.iterdir())) or 'nothing'}."
        )
    return kind


def fengshen_checkpoint(settings: dict, state_dict: dict[str, torch.Tensor]) -> tuple[dict, dict[str, torch.Tensor]]:
    """The settings and weights of IDEA's Zhouwenwang as fengshen saves it: `fengshen_layout.fengshen_settings`
    added to its config, its weights renamed without its buffers."""
    return {**settings, **fengshen_settings(state_dict)}, fengshen_state_dict_to_roformer_hf(state_dict)


def config_from_dict(settings: dict, source: Path) -> RoFormerConfig:
    """A `RoFormerConfig` from the settings of an original config, keeping only the fields RoFormerConfig has."""
    known = RoFormerConfig().to_dict().keys() - {"model_type", "transformers_version", "_name_or_path"}
    dropped = sorted(settings.keys() - known - {"model_type"})
    if dropped:
        logger.info(f"Ignoring settings of {source} that RoFormerConfig does not have: {', '.join(dropped)}")
    try:
        return RoFormerConfig(**{key: value for key, value in settings.items() if key in known})
    except ValueError as error:
        raise ConversionError(f"The config of {source} is not one roformer_hf can build: {error}") from None


def read_bert4keras_checkpoint(folder: Path) -> tuple[RoFormerConfig, dict[str, torch.Tensor]]:
    """The config and weights of an original TF checkpoint; a `ConversionError` lists variables it cannot place."""
    variables = read_tf_variables(folder)
    unplaced = [name for name in variables if bert4keras_to_roformer_hf(name) is None]
    unused = [name for name in unplaced if BERT4KERAS_UNUSED.fullmatch(name)]
    unexpected = sorted(set(unplaced) - set(unused))
    if unexpected:
        raise ConversionError(
            f"The TF checkpoint in {folder} has variables that are not those of a bert4keras RoFormer: "
            f"{', '.join(unexpected)}. Expected names such as bert/embeddings/word_embeddings and "
            "bert/encoder/layer_0/attention/self/query/kernel (a BERT checkpoint with position embeddings is not a "
            "RoFormer)."
        )
    if unused:
        logger.info(f"Leaving out variables no roformer_hf model has: {', '.join(sorted(unused))}")
    variables = {name: array for name, array in variables.items() if bert4keras_to_roformer_hf(name) is not None}
    settings = json.loads((folder / "bert_config.json").read_text(encoding="utf-8"))
    if "bert/embeddings/word_embeddings" in variables:
        settings.setdefault("embedding_size", variables["bert/embeddings/word_embeddings"].shape[1])
    has_mlm_head = any(name.startswith("cls/predictions/") for name in variables)
    settings["architectures"] = ["RoFormerForMaskedLM" if has_mlm_head else "RoFormerModel"]
    return config_from_dict(settings, folder), bert4keras_to_state_dict(variables)


def read_tf_variables(folder: Path) -> dict[str, np.ndarray]:
    """The variables of the name-based TF checkpoint in `folder` by name, without training bookkeeping."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TF's C++ start-up messages are noise here
    try:
        import tensorflow as tf
    except ImportError as error:
        raise ConversionError(
            'Reading an original TensorFlow checkpoint needs tensorflow: pip install "roformer_hf[tf]".'
        ) from error
    prefixes = sorted(path.with_suffix("") for path in folder.glob("*.index"))
    if len(prefixes) > 1:
        raise ConversionError(f"{folder} holds several TF checkpoints ({', '.join(map(str, prefixes))}): keep one.")
    reader = tf.train.load_checkpoint(str(prefixes[0]))
    names = [name for name in reader.get_variable_to_shape_map() if not BERT4KERAS_BOOKKEEPING.fullmatch(name)]
    return {name: reader.get_tensor(name) for name in names}
