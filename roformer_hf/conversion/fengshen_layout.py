"""IDEA-CCNL's Zhouwenwang-Unified as fengshen (Fengshenbang-LM's RoFormer port) saves it, and how it maps onto
roformer_hf: the settings its config.json does not say, and the pure, mutually inverse renaming of its weights.

Zhouwenwang is a RoFormer trained in Megatron: LayerNorm before attention and before the feed-forward of every layer
(`norm_position="pre"`), one after the last layer (`final_layer_norm`), none on the embeddings, and UniLM attention
over token types in every head (`encoder_mask` and `decoder_mask` "unilm"). fengshen writes `model_type "roformer"`
and `bert.*` names (none for its bare `RoFormerModel`), its norms `attention.ln` (before attention), `layer.<i>.ln`
(before the feed-forward) and `encoder.ln` (final), and saves two buffers, its position ids and each layer's RoPE
frequencies, which roformer_hf computes. Used by `from_pretrained` (`modeling.py`) and by conversion (`conversion_sources.py`).
"""

import re
from collections.abc import Iterable

import torch

ZHOUWENWANG_SETTINGS = {
    "norm_position": "pre",
    "final_layer_norm": True,
    "embedding_layer_norm": False,
    "encoder_mask": "unilm",
    "decoder_mask": "unilm",
}
# fengshen's names -> ours, substituted in this order; then ours -> fengshen's, its inverse. The encoder's names may
# come without the prefix of a head (`bert.` in fengshen's, `roformer.` in ours), as fengshen's bare model saves them.
FENGSHEN_NAMES = {
    r"\.attention\.ln\.": ".attention.input_norm.",
    r"(?<=\d)\.ln\.": ".intermediate.input_norm.",  # encoder.layer.<i>.ln
    r"^(bert\.)?encoder\.ln\.": r"\1encoder.final_norm.",
    r"^bert\.": "roformer.",
}
OUR_NAMES = {
    r"\.attention\.input_norm\.": ".attention.ln.",
    r"\.intermediate\.input_norm\.": ".ln.",
    r"^(roformer\.)?encoder\.final_norm\.": r"\1encoder.ln.",
    r"^roformer\.": "bert.",
}
# fengshen's pre-attention norm, found in its layout only.
FENGSHEN_ATTENTION_NORM = re.compile(r"(bert\.)?encoder\.layer\.\d+\.attention\.ln\.weight")
FENGSHEN_BUFFERS = re.compile(
    r"(bert\.)?(embeddings\.position_ids|encoder\.layer\.\d+\.attention\.self\.rope_emb\..*)"
)


def fengshen_to_roformer_hf(name: str) -> str:
    """Our parameter name of a fengshen weight: `"bert.encoder.layer.0.ln.weight"` ->
    `"roformer.encoder.layer.0.intermediate.input_norm.weight"`. The inverse of `roformer_hf_to_fengshen`."""
    for pattern, replacement in FENGSHEN_NAMES.items():
        name = re.sub(pattern, replacement, name)
    return name


def roformer_hf_to_fengshen(name: str) -> str:
    """fengshen's name of one of our parameters. The inverse of `fengshen_to_roformer_hf`."""
    for pattern, replacement in OUR_NAMES.items():
        name = re.sub(pattern, replacement, name)
    return name


def is_fengshen_layout(names: Iterable[str]) -> bool:
    """Whether weight names are fengshen's (norms before attention; `bert.*`, or the bare encoder's)."""
    return any(FENGSHEN_ATTENTION_NORM.fullmatch(name) for name in names)


def fengshen_state_dict_to_roformer_hf(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """fengshen's weights under our names, without its buffers (position ids, RoPE frequencies)."""
    return {
        fengshen_to_roformer_hf(name): tensor
        for name, tensor in state_dict.items()
        if not FENGSHEN_BUFFERS.fullmatch(name)
    }


def fengshen_settings(names: Iterable[str]) -> dict:
    """What a config of fengshen's layout needs beyond its fields: `ZHOUWENWANG_SETTINGS`, and `add_pooling_layer`
    where the weights (`names`, fengshen's) hold a pooler (fengshen's `RoFormerModel` has one by default)."""
    has_pooler = any(name.startswith(("bert.pooler.", "pooler.")) for name in names)
    return {**ZHOUWENWANG_SETTINGS, "add_pooling_layer": True} if has_pooler else dict(ZHOUWENWANG_SETTINGS)
