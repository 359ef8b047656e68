"""Linear attention with RoPE, as proposed in the RoFormer paper (section 3.3), the attention function
`RoFormerSelfAttention` runs for `attention_type="linear"`.

Softmax attention compares every query with every key: O(n^2) time and memory. Linear attention replaces
exp(q . k) by phi(q) . phi(k) with positive features phi(x) = elu(x) + 1, so the sum over keys can be computed
once, as a (head_dim x head_dim) key-value summary, and reused by every query: O(n d^2). RoPE is applied to the
features in the numerator only; the denominator stays unrotated, because a rotated dot product can be negative and
would no longer normalise:

    o_i = sum_j [R_i phi(q_i)]^T [R_j phi(k_j)] v_j / sum_j phi(q_i)^T phi(k_j)

Bidirectional (encoder): the sums run over all non-padding keys. Causal (decoder): over keys j <= i, computed chunk by
chunk with a running summary, so memory stays O(chunk_size^2 + d^2) per head whatever the length.
"""

import torch
from torch.nn import functional as F

from .rope import apply_rotary

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


__all__ = ["feature_map", "linear_attention_forward"]
