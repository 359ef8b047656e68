"""Rotary position embedding (RoPE) with the original RoFormer's interleaved pairs.

RoFormer rotates each pair of dimensions (2i, 2i + 1) of a query or key at position m by the angle m * theta_i,
theta_i = base ** (-2i / head_dim). This is the layout of the original checkpoints (bert4keras and transformers'
RoFormer), not the "rotate half" layout of LLaMA, so weights load as they are.

The work is split in two, as in transformers' LLaMA: `RoFormerRotaryEmbedding` turns `position_ids` into
`(cos, sin)` once per forward, in float32, and the pure function `apply_rotary` rotates any number of tensors with
them in every layer.
"""

import torch
from torch import nn

from .configuration import RoFormerConfig


def default_inverse_frequencies(head_dim: int, base: float) -> torch.Tensor:
    """theta_i = base ** (-2i / head_dim) for i in [0, head_dim / 2), in float32. Shape (head_dim / 2,)."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    return (1.0 / base**exponents).float()


class RoFormerRotaryEmbedding(nn.Module):
    """Computes the cosines and sines of RoPE from position ids.

    The inverse frequencies are a non-persistent buffer: derived from the config, never saved in a checkpoint.
    """

    def __init__(self, config: RoFormerConfig):
        super().__init__()
        self.config = config
        inverse_frequencies = default_inverse_frequencies(config.head_dim, config.rope_parameters["rope_theta"])
        self.register_buffer("inv_freq", inverse_frequencies, persistent=False)
        self.attention_scaling = 1.0

    @torch.no_grad()
    def forward(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """
        Args:
            position_ids (`torch.LongTensor` of shape `(batch_size, seq_len)`):
                Position of every token.

        Returns:
            `(cos, sin)`, each a float32 tensor of shape `(batch_size, seq_len, head_dim)` in which every angle
            appears twice in a row, once for each member of its (2i, 2i + 1) pair.
        """
        angles = position_ids[..., None].float() * self.inv_freq.to(position_ids.device)  # (B, T, D/2)
        angles = angles.repeat_interleave(2, dim=-1)  # (B, T, D): [a0, a0, a1, a1, ...]
        return angles.cos() * self.attention_scaling, angles.sin() * self.attention_scaling


def rotate_pairs(hidden_states: torch.Tensor) -> torch.Tensor:
    """Maps every pair (x_2i, x_2i+1) to (-x_2i+1, x_2i), a rotation by 90 degrees. Shape is kept."""
    even, odd = hidden_states[..., 0::2], hidden_states[..., 1::2]
    return torch.stack((-odd, even), dim=-1).flatten(-2)


def apply_rotary(hidden_states: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotates the interleaved pairs of `hidden_states` by the angles behind `cos` and `sin`.

    Args:
        hidden_states (`torch.Tensor` of shape `(batch_size, num_heads, seq_len, head_dim)`):
            Queries, keys or values, one head per slice of dimension 1.
        cos, sin (`torch.Tensor` of shape `(batch_size, seq_len, head_dim)`):
            From `RoFormerRotaryEmbedding`; broadcast over the heads.

    Returns:
        A tensor of the shape and dtype of `hidden_states`.
    """
    cos, sin = cos.unsqueeze(1).to(hidden_states.dtype), sin.unsqueeze(1).to(hidden_states.dtype)
    return hidden_states * cos + rotate_pairs(hidden_states) * sin
