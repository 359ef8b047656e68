"""The norms of RoFormer's variants and where they sit, read from the config by `modeling.py`.

Which norm: LayerNorm (RoFormer, Zhouwenwang) or RoFormer-V2's RMS norm without weights (`norm_type`). Where:
BERT's post-norm, after each residual sum (`norm_position="post"`: RoFormer V1, V2, Sim), or Megatron's pre-norm,
on the input of attention and of the feed-forward, with the residual around it and one norm after the last layer
(`norm_position="pre"`, `final_layer_norm`: IDEA's Zhouwenwang); and whether the embeddings are normalised
(`embedding_layer_norm`; Zhouwenwang's are not). A norm that a configuration leaves out is an `nn.Identity`, which
has no weights, so a checkpoint holds exactly the norms its configuration uses.
"""

import torch
from torch import nn
from torch.nn import functional as F

from .configuration import RoFormerConfig


class RoFormerRMSNorm(nn.Module):
    """RoFormer-V2's norm: x / sqrt(mean(x^2) + eps) over the last dimension, with no weight and no bias."""

    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(hidden_states, hidden_states.shape[-1:], eps=self.eps)

    def extra_repr(self) -> str:
        return f"eps={self.eps}"


def build_norm(config: RoFormerConfig, width: int) -> nn.Module:
    """The norm of `config.norm_type` over `width` features."""
    if config.norm_type == "rms_norm":
        return RoFormerRMSNorm(config.layer_norm_eps)
    return nn.LayerNorm(width, eps=config.layer_norm_eps)


def post_norm(config: RoFormerConfig) -> nn.Module:
    """The norm after a block's residual sum (`LayerNorm` of the attention output and of the feed-forward output in
    the checkpoints), or none for a pre-norm model."""
    return build_norm(config, config.hidden_size) if config.norm_position == "post" else nn.Identity()


def pre_norm(config: RoFormerConfig) -> nn.Module:
    """The norm of a block's input (attention or feed-forward; the residual bypasses it), or none for a post-norm
    model."""
    return build_norm(config, config.hidden_size) if config.norm_position == "pre" else nn.Identity()


def embedding_norm(config: RoFormerConfig) -> nn.Module:
    """The norm of the summed embeddings (`embeddings.LayerNorm`), or none (`embedding_layer_norm=False`)."""
    return build_norm(config, config.embedding_size) if config.embedding_layer_norm else nn.Identity()


def final_norm(config: RoFormerConfig) -> nn.Module:
    """The norm after the last layer (`encoder.final_norm`), which a pre-norm stack needs: its residual stream is
    never normalised otherwise."""
    return build_norm(config, config.hidden_size) if config.final_layer_norm else nn.Identity()
