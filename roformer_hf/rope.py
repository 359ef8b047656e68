"""Rotary position embedding (RoPE) with the original RoFormer's interleaved pairs.

RoFormer rotates each pair of dimensions (2i, 2i + 1) of a query or key at position m by the angle m * theta_i,
theta_i = base ** (-2i / head_dim). This is the layout of the original checkpoints (bert4keras and transformers'
RoFormer), not the "rotate half" layout of LLaMA, so weights load as they are.

The work is split in two, as in transformers' LLaMA: `RoFormerRotaryEmbedding` turns `position_ids` into
`(cos, sin)` once per forward, in float32, and `rotation_of` makes of them the one tensor every layer rotates with
(once per forward too); in every layer `rotate` turns queries and keys together, in one product. `apply_rotary`
rotates one `(batch, heads, seq, head_dim)` tensor with `(cos, sin)` (linear attention's features).

Beyond the original, all chosen in `config.rope_parameters` or by the shape of `position_ids`:

- `rope_type="ntk"`: NTK-aware scaling of the base, theta' = theta * factor ** (d / (d - 2)) for a rotated dimension
  d. The highest frequency (1 radian per position) is kept and the lowest is divided by `factor`, so a model sees
  familiar local angles and long distances interpolated rather than unseen.
- every type of transformers' `ROPE_INIT_FUNCTIONS` (`"linear"`, `"dynamic"`, `"yarn"`, `"llama3"`, ...), computed by
  transformers' own functions. `"dynamic"` recomputes the frequencies from the current length (largest position + 1)
  and is plain RoPE, bit for bit, up to `max_position_embeddings`. The attention scaling of `"yarn"` multiplies
  cos and sin.
- 2-D positions: `position_ids` of shape `(batch, seq, 2)` hold (x, y). The first half of every head's dimensions is
  rotated by x and the second half by y, each with the frequencies of a RoPE over head_dim / 2, so a query-key score
  depends on (delta x, delta y) only.

The frequencies are derived from the config in every forward (a few dozen numbers): no buffer to save, initialise
or move between devices, and a changed `config.rope_parameters` takes effect at once. `RoFormerRotaryEmbedding`
follows transformers' rotary modules otherwise: it is called with `(x, position_ids)` and has an `inv_freq`.
"""

import copy

import torch
from torch import nn
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from .configuration import RoFormerConfig

# The types whose frequencies depend on the current length; the others never read it (no device sync for them).
LENGTH_DEPENDENT_ROPE_TYPES = ("dynamic", "longrope")


def default_inverse_frequencies(head_dim: int, base: float) -> torch.Tensor:
    """theta_i = base ** (-2i / head_dim) for i in [0, head_dim / 2), in float32. Shape (head_dim / 2,)."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    return (1.0 / base**exponents).float()


def ntk_inverse_frequencies(head_dim: int, base: float, factor: float) -> torch.Tensor:
    """NTK-aware scaling: the default frequencies of the base theta * factor ** (head_dim / (head_dim - 2)).

    theta_0 = 1 is kept; the lowest frequency, base ** (-(head_dim - 2) / head_dim), is divided by exactly `factor`.
    """
    if head_dim < 4:
        raise ValueError(f'rope_type "ntk" needs at least 4 rotated dimensions per RoPE, got {head_dim}.')
    return default_inverse_frequencies(head_dim, base * factor ** (head_dim / (head_dim - 2)))


def inverse_frequencies(
    config: RoFormerConfig, rotary_dim: int, seq_len: int | None = None
) -> tuple[torch.Tensor, float]:
    """The inverse frequencies of `config.rope_parameters` for a RoPE over `rotary_dim` dimensions.

    Args:
        config ([`RoFormerConfig`]):
            Reads `rope_parameters` and `max_position_embeddings`.
        rotary_dim (`int`):
            Number of dimensions rotated together: `head_dim` for 1-D positions, `head_dim / 2` per axis for 2-D.
        seq_len (`int`, *optional*):
            Current length (largest position + 1), for the types that depend on it (`"dynamic"`, `"longrope"`);
            `None` means no longer than `max_position_embeddings`.

    Returns:
        `(inverse_frequencies, attention_scaling)`: a float32 tensor of shape `(rotary_dim / 2,)` on the CPU and the
        factor by which cos and sin are multiplied (1.0 except for types like `"yarn"`).
    """
    rope_parameters = config.rope_parameters
    rope_type = rope_parameters.get("rope_type", "default")
    base = rope_parameters["rope_theta"]
    if rope_type == "default" or (rope_type == "dynamic" and (seq_len or 0) <= config.max_position_embeddings):
        return default_inverse_frequencies(rotary_dim, base), 1.0
    if rope_type == "ntk":
        return ntk_inverse_frequencies(rotary_dim, base, rope_parameters["factor"]), 1.0
    rope_init_function = ROPE_INIT_FUNCTIONS[rope_type]
    frequencies, attention_scaling = rope_init_function(_config_rotating(config, rotary_dim), "cpu", seq_len=seq_len)
    if frequencies.shape != (rotary_dim // 2,):
        raise ValueError(
            f"rope_type {rope_type!r} gave {frequencies.numel()} frequencies for a RoPE over {rotary_dim} dimensions "
            f"(expected {rotary_dim // 2}): its rope_parameters do not fit this head size or 2-D positions."
        )
    return frequencies.float(), float(attention_scaling)


def _config_rotating(config: RoFormerConfig, rotary_dim: int) -> RoFormerConfig:
    """`config`, or a shallow copy whose `partial_rotary_factor` makes transformers' functions rotate `rotary_dim`."""
    if rotary_dim == config.head_dim:
        return config
    partial_config = copy.copy(config)
    partial_config.rope_parameters = {**config.rope_parameters, "partial_rotary_factor": rotary_dim / config.head_dim}
    return partial_config


def check_position_ids(position_ids: torch.Tensor, head_dim: int) -> torch.Tensor:
    """Returns `position_ids` as `(batch_size, seq_len, num_axes)`, num_axes 1 or 2, or raises a ValueError."""
    if position_ids.dim() == 2:
        return position_ids[..., None]
    if position_ids.dim() != 3 or position_ids.shape[-1] not in (1, 2):
        raise ValueError(
            f"position_ids must have shape (batch_size, seq_len) or (batch_size, seq_len, 2) for 2-D positions "
            f"(x, y), got shape {tuple(position_ids.shape)}."
        )
    if position_ids.shape[-1] == 2 and head_dim % 4 != 0:
        raise ValueError(
            f"2-D RoPE rotates pairs in each half of a head, so head_dim must be divisible by 4, got {head_dim}: "
            f"change hidden_size or num_attention_heads."
        )
    return position_ids


class RoFormerRotaryEmbedding(nn.Module):
    """Computes the cosines and sines of RoPE from 1-D or 2-D position ids, for the RoPE type of the config.

    Called as transformers' rotary modules are, `rotary_emb(x, position_ids)`; `inv_freq` holds the frequencies of
    1-D positions. Both are derived from `config.rope_parameters` when used, so there is no buffer to save or move
    and a changed config takes effect at once.
    """

    def __init__(self, config: RoFormerConfig):
        super().__init__()
        self.config = config

    @property
    def inv_freq(self) -> torch.Tensor:
        """theta_i of 1-D positions, float32 of shape `(head_dim / 2,)` on the CPU (for `"dynamic"`, at lengths up to
        `max_position_embeddings`)."""
        return inverse_frequencies(self.config, self.config.head_dim)[0]

    @torch.no_grad()
    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """
        Args:
            x (`torch.Tensor`):
                Any tensor on the device the model runs on (the hidden states); cos and sin are made there.
            position_ids (`torch.LongTensor` of shape `(batch_size, seq_len)` or `(batch_size, seq_len, 2)`):
                Position of every token: an index, or a pair (x, y) for 2-D RoPE.

        Returns:
            `(cos, sin)`, each a float32 tensor of shape `(batch_size, seq_len, head_dim)` in which every angle
            appears twice in a row, once for each member of its (2i, 2i + 1) pair. For 2-D positions the first
            half of the angles comes from x, the second half from y. They stay float32 whatever the dtype of `x`:
            the rotation is computed in float32 (angles of distant positions need its precision).
        """
        head_dim = self.config.head_dim
        position_ids = check_position_ids(position_ids, head_dim).to(x.device)  # (B, T, A), A = 1 or 2 axes
        num_axes = position_ids.shape[-1]
        reads_length = self.config.rope_parameters.get("rope_type") in LENGTH_DEPENDENT_ROPE_TYPES
        angles, attention_scaling = [], 1.0
        for axis in range(num_axes):
            axis_positions = position_ids[..., axis]  # (B, T)
            # The one data-dependent read (a graph break under torch.compile): "dynamic" and "longrope" only.
            seq_len = int(axis_positions.max()) + 1 if reads_length and axis_positions.numel() else None
            frequencies, attention_scaling = inverse_frequencies(self.config, head_dim // num_axes, seq_len)
            angles.append(axis_positions[..., None].float() * frequencies.to(x.device))  # (B, T, D/2A)
        angles = torch.cat(angles, dim=-1).repeat_interleave(2, dim=-1)  # (B, T, D): [a0, a0, a1, a1, ...]
        return angles.cos() * attention_scaling, angles.sin() * attention_scaling


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
    compute_dtype = torch.promote_types(hidden_states.dtype, torch.float32)
    if torch.compiler.is_compiling():
        # The compiler fuses the real form into one kernel; complex views and stride checks would break its graph.
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # (B, 1, T, D)
        rotated = hidden_states.to(compute_dtype) * cos + rotate_pairs(hidden_states.to(compute_dtype)) * sin
        return rotated.to(hidden_states.dtype)
    # Read every pair (x_2i, x_2i+1) as the complex number x_2i + i x_2i+1: the rotation is then one complex product,
    # a single pass over the tensor instead of five (the same numbers as x * cos + rotate_pairs(x) * sin). bf16 inputs
    # (autocast) are widened for it, there being no complex bf16: still cheaper than the real form computed in bf16,
    # and the result is rounded once (benchmarks/bench_attention.py, rows rope).
    rotation = torch.complex(cos[..., 0::2], sin[..., 0::2]).unsqueeze(1)  # (B, 1, T, D/2): each angle once
    pairs = torch.view_as_complex(_pair_layout(hidden_states.to(compute_dtype)).unflatten(-1, (-1, 2)))
    return torch.view_as_real(pairs * rotation.to(pairs.dtype)).flatten(-2).to(hidden_states.dtype)


def rotation_of(cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The rotation every layer applies, made once per forward from `RoFormerRotaryEmbedding`'s `(cos, sin)` of shape
    `(batch_size, seq_len, head_dim)`: each angle once, as the complex number cos + i sin, `(batch_size, seq_len,
    head_dim / 2)`; under `torch.compile`, `(cos, sin)` themselves (see `rotate`)."""
    if torch.compiler.is_compiling():
        return cos, sin
    return torch.complex(cos[..., 0::2], sin[..., 0::2])


def rotation_at(
    rotation: torch.Tensor | tuple[torch.Tensor, torch.Tensor], positions: slice
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """`rotation_of`'s rotation for `positions` of the sequence only."""
    if isinstance(rotation, tuple):
        return tuple(table[:, positions] for table in rotation)
    return rotation[:, positions]


def rotate(hidden_states: torch.Tensor, rotation: torch.Tensor | tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Rotates the interleaved pairs of `hidden_states`, laid out `(batch_size, seq_len, ..., head_dim)`: queries
    and keys stacked as `(batch_size, seq_len, 2, num_heads, head_dim)` turn together, in one product.

    Each pair (x_2i, x_2i+1) is read as the complex number x_2i + i x_2i+1, so the rotation is one complex product, a
    single pass instead of five (the same numbers as x * cos + rotate_pairs(x) * sin), computed in float32 at least
    (bf16 widened: there is no complex bf16) and rounded once to the input's dtype. Under `torch.compile` the real
    form, which the compiler fuses into one kernel (complex views would break its graph).

    Args:
        hidden_states (`torch.Tensor` of shape `(batch_size, seq_len, ..., head_dim)`): What to rotate.
        rotation: From `rotation_of`, for the same positions; broadcast over the dimensions after `seq_len`.

    Returns:
        A tensor of the shape and dtype of `hidden_states`.
    """
    compute_dtype = torch.promote_types(hidden_states.dtype, torch.float32)
    widened = hidden_states.to(compute_dtype)
    between = (1,) * (hidden_states.dim() - 3)  # the head dimensions the angles are shared by
    if isinstance(rotation, tuple):
        cos, sin = (table.view(*table.shape[:2], *between, table.shape[-1]) for table in rotation)
        return (widened * cos + rotate_pairs(widened) * sin).to(hidden_states.dtype)
    rotation = rotation.view(*rotation.shape[:2], *between, rotation.shape[-1])
    pairs = torch.view_as_complex(_pair_layout(widened).unflatten(-1, (-1, 2)))
    return torch.view_as_real(pairs * rotation.to(pairs.dtype)).flatten(-2).to(hidden_states.dtype)


def _pair_layout(hidden_states: torch.Tensor) -> torch.Tensor:
    """`hidden_states`, copied only if its pairs cannot be viewed as complex numbers (view_as_complex's rule)."""
    strides_even = all(stride % 2 == 0 for stride in hidden_states.stride()[:-1])
    if hidden_states.stride(-1) == 1 and strides_even and hidden_states.storage_offset() % 2 == 0:
        return hidden_states
    return hidden_states.contiguous()
