"""Rotary position embedding (RoPE) with the original RoFormer's interleaved pairs.

RoFormer rotates each pair of dimensions (2i, 2i + 1) of a query or key at position m by the angle m * theta_i,
theta_i = base ** (-2i / head_dim). This is the layout of the original checkpoints (bert4keras and transformers'
RoFormer), not the "rotate half" layout of LLaMA, so weights load as they are.

The work is split in two, as in transformers' LLaMA: `RoFormerRotaryEmbedding` turns `position_ids` into
`(cos, sin)` once per forward, in float32, and the pure function `apply_rotary` rotates any number of tensors with
them in every layer.

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

## Linear attention with RoPE, as proposed in the RoFormer paper (section 3.3)

`linear_attention_forward`, the attention function `RoFormerSelfAttention` runs for `attention_type="linear"`.

Softmax attention compares every query with every key: O(n^2) time and memory. Linear attention replaces
exp(q . k) by phi(q) . phi(k) with positive features phi(x) = elu(x) + 1, so the sum over keys can be computed
once, as a (head_dim x head_dim) key-value summary, and reused by every query: O(n d^2). RoPE is applied to the
features in the numerator only; the denominator stays unrotated, because a rotated dot product can be negative and
would no longer normalise:

    o_i = sum_j [R_i phi(q_i)]^T [R_j phi(k_j)] v_j / sum_j phi(q_i)^T phi(k_j)

Bidirectional (encoder): the sums run over all non-padding keys. Causal (decoder): over keys j <= i, computed chunk by
chunk with a running summary, so memory stays O(chunk_size^2 + d^2) per head whatever the length.
"""

import copy

import torch
from torch import nn
from torch.nn import functional as F
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


def _pair_layout(hidden_states: torch.Tensor) -> torch.Tensor:
    """`hidden_states`, copied only if its pairs cannot be viewed as complex numbers (view_as_complex's rule)."""
    strides_even = all(stride % 2 == 0 for stride in hidden_states.stride()[:-1])
    if hidden_states.stride(-1) == 1 and strides_even and hidden_states.storage_offset() % 2 == 0:
        return hidden_states
    return hidden_states.contiguous()


# Keeps 0 / 0 (a query that sees no key, e.g. causal left padding) at 0 instead of NaN.
DENOMINATOR_EPSILON = 1e-6


def feature_map(hidden_states: torch.Tensor) -> torch.Tensor:
    """phi(x) = elu(x) + 1: positive, so that every denominator is a sum of positive terms."""
    return F.elu(hidden_states) + 1.0


def linear_attention_forward(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    chunk_size: int = 64,
) -> torch.Tensor:
    """Linear attention with RoPE on the feature-mapped queries and keys.

    Args:
        query (`torch.Tensor` of shape `(batch_size, num_heads, query_len, head_dim)`):
            Queries, not yet rotated.
        key, value (`torch.Tensor` of shape `(batch_size, num_heads, key_len, head_dim)`):
            Keys, not yet rotated, and values (already rotated when the model uses `rotary_value`).
        cos, sin (`torch.Tensor` of shape `(batch_size, key_len, head_dim)`):
            From `RoFormerRotaryEmbedding`, for the positions of the keys; the queries take the last `query_len`
            of them (`query_len == key_len` unless earlier keys are passed in as well).
        attention_mask (`torch.Tensor` of shape `(batch_size, key_len)`, *optional*):
            1 for tokens, 0 for padding. Padding keys are left out of numerator and denominator.
        is_causal (`bool`):
            Whether query i sees only the keys up to its own position.
        chunk_size (`int`, defaults to 64):
            Block length of the causal computation (memory per head is O(chunk_size^2 + head_dim^2)).

    Returns:
        `torch.Tensor` of shape `(batch_size, query_len, num_heads, head_dim)`, in the dtype of `query`, the layout
        of transformers' attention functions.
    """
    query_len, key_len = query.shape[2], key.shape[2]
    _check_shapes(query_len, key_len, cos, attention_mask)
    # Sums over thousands of keys: accumulate in float32 (at least) whatever the model's dtype.
    compute_dtype = torch.promote_types(query.dtype, torch.float32)
    query_features = feature_map(query.to(compute_dtype))  # (B, H, Tq, D)
    key_features = feature_map(key.to(compute_dtype))  # (B, H, Tk, D)
    value = value.to(compute_dtype)
    if attention_mask is not None:
        key_features = key_features * attention_mask[:, None, :, None].to(key_features.dtype)  # out of both sums
    cos, sin = cos[:, -key_len:], sin[:, -key_len:]  # (B, Tk, D): the keys' positions, the queries' are the last Tq
    if is_causal:
        numerator, denominator = _causal_sums(query_features, key_features, value, cos, sin, chunk_size)
    else:
        numerator, denominator = _bidirectional_sums(query_features, key_features, value, cos, sin)
    attention_output = numerator / denominator.clamp_min(DENOMINATOR_EPSILON)
    return attention_output.transpose(1, 2).to(query.dtype)  # (B, Tq, H, Dv)


def _check_shapes(query_len: int, key_len: int, cos: torch.Tensor, attention_mask: torch.Tensor | None) -> None:
    if key_len < query_len:
        raise ValueError(f"linear attention got fewer keys ({key_len}) than queries ({query_len}).")
    if cos.shape[1] < key_len:
        raise ValueError(
            f"linear attention rotates every key, so cos/sin must cover all {key_len} key positions, but they cover "
            f"{cos.shape[1]}: pass the rotary embedding of the full sequence (or disable the cache, use_cache=False)."
        )
    if attention_mask is not None and attention_mask.dim() != 2:
        raise ValueError(
            f"linear attention takes a (batch_size, seq_len) padding mask of 1s and 0s, got shape "
            f"{tuple(attention_mask.shape)}."
        )


def _bidirectional_sums(
    query_features: torch.Tensor, key_features: torch.Tensor, value: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Numerator and denominator when every query sees every key: one key-value summary serves all queries."""
    query_len = query_features.shape[2]
    key_value_summary = apply_rotary(key_features, cos, sin).transpose(-1, -2) @ value  # (B, H, D, Dv)
    numerator = apply_rotary(query_features, cos[:, -query_len:], sin[:, -query_len:]) @ key_value_summary
    denominator = query_features @ key_features.sum(dim=2).unsqueeze(-1)  # (B, H, Tq, 1)
    return numerator, denominator


def _causal_sums(
    query_features: torch.Tensor,
    key_features: torch.Tensor,
    value: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    chunk_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Numerator and denominator of causal linear attention, block by block.

    The queries are aligned with the last keys. A block of queries sees the running summary of all earlier keys plus
    a lower-triangular slice of its own block: the prefix sum, without a (seq_len, head_dim, head_dim) cumulative
    tensor, and with only one block rotated at a time.
    """
    query_len, key_len = query_features.shape[2], key_features.shape[2]
    offset = key_len - query_len  # keys before the first query
    rotated_earlier_keys = apply_rotary(key_features[:, :, :offset], cos[:, :offset], sin[:, :offset])
    key_value_summary = rotated_earlier_keys.transpose(-1, -2) @ value[:, :, :offset]  # (B, H, D, Dv)
    key_summary = key_features[:, :, :offset].sum(dim=2, keepdim=True)  # (B, H, 1, D)
    numerators, denominators = [], []
    for start in range(offset, key_len, chunk_size):
        keys = slice(start, min(start + chunk_size, key_len))
        query_block = query_features[:, :, keys.start - offset : keys.stop - offset]  # (B, H, C, D)
        key_block, value_block = key_features[:, :, keys], value[:, :, keys]
        rotated_query = apply_rotary(query_block, cos[:, keys], sin[:, keys])
        rotated_key = apply_rotary(key_block, cos[:, keys], sin[:, keys])
        not_causal = torch.ones(key_block.shape[2], key_block.shape[2], dtype=torch.bool, device=value.device).triu(1)
        scores = (rotated_query @ rotated_key.transpose(-1, -2)).masked_fill(not_causal, 0.0)  # (B, H, C, C)
        weights = (query_block @ key_block.transpose(-1, -2)).masked_fill(not_causal, 0.0)
        numerators.append(scores @ value_block + rotated_query @ key_value_summary)
        denominators.append(weights.sum(dim=-1, keepdim=True) + query_block @ key_summary.transpose(-1, -2))
        key_value_summary = key_value_summary + rotated_key.transpose(-1, -2) @ value_block
        key_summary = key_summary + key_block.sum(dim=2, keepdim=True)
    return torch.cat(numerators, dim=2), torch.cat(denominators, dim=2)
