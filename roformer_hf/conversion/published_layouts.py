"""The published RoFormers in their authors' layouts, read by `from_pretrained` as what they are: RoFormer-Sim as
JunnYu published it (`published_sim_settings`), IDEA's Zhouwenwang as fengshen saved it (`fengshen_checkpoint_inputs`).

`modeling.py` imports this module by name where roformer_hf is installed (`roformer_hf_module`), so checkpoints do
not carry it: a roformer_hf checkpoint is in roformer_hf's own layout, and its code loaded with
`trust_remote_code=True` reads that layout only.
"""

import inspect
import json
import os
import pickle

import torch
from safetensors import safe_open
from safetensors.torch import load_file
from transformers import GenerationMixin

from ..configuration import RoFormerConfig, check_config_object
from ..modeling import HUB_ARGUMENTS, WEIGHT_FILES, checkpoint_file
from .fengshen_layout import fengshen_settings, fengshen_state_dict_to_roformer_hf, is_fengshen_layout


def published_layout_inputs(
    pretrained_model_name_or_path: str | os.PathLike, kwargs: dict, model_class: type
) -> tuple[str | os.PathLike | None, dict]:
    """What `from_pretrained` passes on to transformers for a checkpoint: a Zhouwenwang folder's renamed weights
    and config (with no path: they are read here), a published Sim checkpoint's path with the settings it does not
    say, any other checkpoint's path and arguments as they are. Both layouts say model_type "roformer", so any other
    checkpoint costs one read of its config.json."""
    hub_kwargs = {name: kwargs[name] for name in HUB_ARGUMENTS if kwargs.get(name) is not None}
    settings = checkpoint_settings(pretrained_model_name_or_path, hub_kwargs)
    if settings.get("model_type") != "roformer":
        return pretrained_model_name_or_path, kwargs
    names = weight_names(pretrained_model_name_or_path, hub_kwargs)
    if is_fengshen_layout(names):
        return None, fengshen_checkpoint_inputs(pretrained_model_name_or_path, kwargs, model_class, names)
    bare_model = "add_pooling_layer" in inspect.signature(model_class.__init__).parameters
    return pretrained_model_name_or_path, {**published_sim_settings(settings, names, bare_model), **kwargs}


def checkpoint_settings(pretrained_model_name_or_path: str | os.PathLike, hub_kwargs: dict) -> dict:
    """A checkpoint's config.json as a dict (empty where it has none); one that holds no JSON object is refused."""
    config_file = checkpoint_file(pretrained_model_name_or_path, "config.json", hub_kwargs)
    if config_file is None:
        return {}
    settings = json.loads(config_file.read_text(encoding="utf-8"))
    check_config_object(settings, pretrained_model_name_or_path)
    return settings


def published_sim_settings(settings: dict, names: set[str], bare_model: bool) -> dict:
    """The settings a RoFormer-Sim checkpoint in the published layout needs and does not say, for `from_pretrained`.

    Its config.json (model_type "roformer", written for JunnYu's `roformer`) says `is_decoder: true` and
    `pooler_activation`, and its weights hold a pooler and an LM head, but nothing says that it attends as a UniLM
    or that the pooler (its sentence vector) belongs to the model. Read as it is, it would drop the pooler and attend
    left to right: wrong outputs, without an error. Conversion (`roformer_hf.conversion.convert`) writes the same
    settings.

    Args:
        settings (`dict`): The checkpoint's config.json (model_type "roformer": `published_layout_inputs` has checked).
        names (`set[str]`): The names of its weights.
        bare_model (`bool`): Whether the class is the bare encoder, which has a pooler only when told.

    Returns:
        `dict`: `decoder_mask="unilm"` (and `add_pooling_layer=True` for the bare encoder) for a published Sim
        checkpoint; empty for every other checkpoint of model_type "roformer".
    """
    if not settings.get("is_decoder"):
        return {}
    if not any(name.startswith("roformer.pooler.") for name in names):
        return {}
    if not any(name.startswith("cls.predictions.") for name in names):
        return {}
    return {"decoder_mask": "unilm", "add_pooling_layer": True} if bare_model else {"decoder_mask": "unilm"}


def fengshen_checkpoint_inputs(
    pretrained_model_name_or_path: str | os.PathLike, kwargs: dict, model_class: type, names: set[str]
) -> dict:
    """The arguments of transformers' `from_pretrained` for a Zhouwenwang checkpoint in fengshen's layout (see
    `fengshen_layout`), whose weights are named `names`. Its config.json (model_type "roformer") says nothing of its
    architecture and its weight names are fengshen's: read as a plain RoFormer, every norm weight would be missing
    (refused by `check_encoder_weights_loaded`). Its weights are read here (a `pytorch_model.bin` with
    `weights_only=True`) and renamed, so the model holds, and saves, roformer_hf's names.

    Args:
        pretrained_model_name_or_path (`str` or `os.PathLike`): What `from_pretrained` was given.
        kwargs (`dict`): The arguments of `from_pretrained`; they override the settings read here.
        model_class (`type`): The class loading it: one that generates (the causal LM) is also a decoder.
        names (`set[str]`): The names of its weights.

    Returns:
        `dict`: `kwargs` with `config` (the checkpoint's, with `fengshen_settings`) and `state_dict` (renamed),
        but the settings the config took.
    """
    hub_kwargs = {name: kwargs[name] for name in HUB_ARGUMENTS if kwargs.get(name) is not None}
    settings = fengshen_settings(names)
    if issubclass(model_class, GenerationMixin):
        settings["is_decoder"] = True
    config, model_kwargs = RoFormerConfig.from_pretrained(
        pretrained_model_name_or_path, return_unused_kwargs=True, **{**settings, **kwargs}
    )
    state_dict = fengshen_state_dict_to_roformer_hf(checkpoint_weights(pretrained_model_name_or_path, hub_kwargs))
    return {**model_kwargs, "config": config, "state_dict": state_dict}


def checkpoint_weights(pretrained_model_name_or_path: str | os.PathLike, hub_kwargs: dict) -> dict[str, torch.Tensor]:
    """The tensors of a checkpoint (see `WEIGHT_FILES`, shards joined); pickles are read with `weights_only=True`."""
    for name in WEIGHT_FILES:
        file = checkpoint_file(pretrained_model_name_or_path, name, hub_kwargs)
        if file is None:
            continue
        shards = [file]
        if name.endswith(".index.json"):
            shard_names = sorted(set(json.loads(file.read_text(encoding="utf-8"))["weight_map"].values()))
            shards = [checkpoint_file(pretrained_model_name_or_path, shard, hub_kwargs) for shard in shard_names]
        if None in shards:
            raise OSError(f"{file} names shards that {pretrained_model_name_or_path} lacks: download every shard.")
        state_dict = {}
        for shard in shards:
            is_safetensors = shard.suffix == ".safetensors"
            state_dict |= (
                load_file(shard) if is_safetensors else torch.load(shard, map_location="cpu", weights_only=True)
            )
        return state_dict
    return {}


def weight_names(pretrained_model_name_or_path: str | os.PathLike, hub_kwargs: dict) -> set[str]:
    """The parameter names of a checkpoint, read without its tensors (empty when it has no readable weights)."""
    for name in WEIGHT_FILES:
        file = checkpoint_file(pretrained_model_name_or_path, name, hub_kwargs)
        if file is None:
            continue
        if name.endswith(".index.json"):
            return set(json.loads(file.read_text(encoding="utf-8"))["weight_map"])
        if name.endswith(".safetensors"):
            with safe_open(file, framework="pt") as weights:
                return set(weights.keys())
        try:  # a pickle; tensors go to the meta device, so nothing is read but the names
            return set(torch.load(file, map_location="meta", weights_only=True, mmap=True))
        except (pickle.UnpicklingError, RuntimeError):  # refused or unreadable: transformers says so when it loads
            return set()
    return set()
