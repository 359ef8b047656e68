"""The attention functions RoFormer adds to transformers' backends, by name beside them in `modeling.py`'s
`ROFORMER_ATTENTION_FUNCTIONS` (`RoFormerSelfAttention.attention_function` chooses among them in one place):

- `"roformer_blockwise"`: softmax attention in blocks, which "sdpa" hands CPU training with dropout and bf16 on a CPU
  where bf16 pays (`prefers_blockwise_attention`);
- `"roformer_linear"`: linear attention with RoPE (`attention_type="linear"`), the RoFormer paper's section 3.3.

## Blockwise attention

torch's SDPA has a fused CPU kernel only without dropout. With dropout (RoFormer trains with 0.1 on the attention
probabilities) it falls back to its "math" kernel, which is slower than eager attention and, like eager, keeps several
(seq_len x seq_len) tensors per head for the backward pass: about 1 GB per layer at 2,048 tokens and 12 heads. Its
fused kernel, for its part, computes in float32 whatever the dtype of its inputs, so bf16 gains nothing there.

`blockwise_attention_forward` computes the same function, softmax(q k^T * scaling + mask) with dropout, times v, a
block of scores at a time (some heads of one sequence, or some queries of one head), and recomputes the probabilities
of each block in the backward pass (the FlashAttention recipe). Memory is linear in the length (one block of scores
at a time). It computes in the dtype of its inputs: under bf16 autocast its matrix products run in bf16, the softmax
of each row in float32 (torch's CPU softmax widens bf16 rows) with its probabilities stored in bf16, as eager attention
does. What makes it fast on the CPU (timings in docs/benchmarks.md):

- one buffer per role (scores, their gradients, the dropout mask) reused by every block, so the large tensors are
  not allocated afresh (glibc maps them from the kernel, and the page faults cost as much as the matrix products);
- every slice a block reads or writes is contiguous, so the matrix products work in place, without copies;
- padding: with the encoder's mask of one row per sequence (`masks.py`), each sequence reads its keys only up to its
  last visible one, and a right-padded sequence needs no mask at all (4 x 512 tokens padded to 512, 384, 256 and 128
  real tokens: 5/8 of the scores);
- softmax in place, the scaling applied to the queries rather than to every score, the gradient of the scores in
  two fused passes;
- dropout masks from `draw_keep_mask` (`dropout.py`) (16 random bits per element from numpy's PCG64, compared with the
  threshold into a reused byte buffer), widened by torch into the reused mask of the scores' dtype. torch's CPU
  generator and its boolean kernels (`bernoulli_`, `masked_fill`, converting from bool) take most of the time of
  eager attention's dropout.

The dropout masks are redrawn from the same seed in the backward pass instead of being stored; as below, the drop
probability is rounded to a multiple of 1/65536 and the kept probabilities are rescaled by the rounded value.

## Linear attention with RoPE, as proposed in the RoFormer paper (section 3.3)

`linear_attention_forward` (registered as `"roformer_linear"` through `linear_attention_function`), what
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

import functools
import math
from typing import NamedTuple

import torch
from torch.nn import functional as F
from transformers import PreTrainedConfig

from .dropout import draw_keep_mask, kept_scale, random_seed, rounded_probability
from .rope import apply_rotary

# Elements of one block of scores, (heads, rows, keys): 16 MiB of float32, the fastest size measured (smaller blocks
# make smaller matrix products, larger ones more cache misses; docs/benchmarks.md).
BLOCK_ELEMENTS = 2**22


def prefers_blockwise_attention(config: PreTrainedConfig, query: torch.Tensor, dropout: float) -> bool:
    """Whether the SDPA backend should hand this call to `blockwise_attention_forward`. Only on the CPU, in two cases:

    - with attention dropout (training), where torch's SDPA has no fused kernel and its fallback is slower than eager
      attention. Blockwise attention is then faster than eager at every length measured (its dropout masks cost a
      fraction of `F.dropout`'s, and its buffers are reused; docs/benchmarks.md), and its memory is linear in the
      length;
    - with bf16 queries on a CPU that multiplies bf16 natively (`cpu_multiplies_bf16`): SDPA's fused CPU kernel
      computes in float32 whatever the inputs, so bf16 gains nothing there, while the matrix products of blockwise
      attention run in bf16 (docs/benchmarks.md).

    Not under `torch.compile`: numpy's generator cannot be traced, so `fullgraph=True` would fail; the compiled
    graph keeps SDPA, whose dropout the compiler traces like any other operation.
    """
    if torch.compiler.is_compiling() or config._attn_implementation != "sdpa" or query.device.type != "cpu":
        return False
    return dropout > 0 or (query.dtype == torch.bfloat16 and cpu_multiplies_bf16())


@functools.cache
def cpu_multiplies_bf16() -> bool:
    """Whether this CPU has instructions that multiply bf16 numbers (AVX-512 BF16, AMX, Arm's BF16), as torch reads
    them. Whether bf16 is worth choosing is the caller's question (the scripts:
    `roformer_hf.training.machine.cpu_arithmetic`); this only asks, for bf16 inputs already chosen, which attention
    computes them in bf16."""
    get_capabilities = getattr(torch.cpu, "get_capabilities", None)  # recent torch only; older ones keep SDPA
    capabilities = get_capabilities() if get_capabilities is not None else {}
    return any(capabilities.get(flag) for flag in ("avx512_bf16", "amx_bf16", "bf16"))


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
        attention_mask (`torch.Tensor` of shape `(batch_size, 1, query_len or 1, key_len)`, *optional*):
            Boolean (True where a query may look, as transformers builds for SDPA) or additive float. A boolean mask
            with one row for every query (`roformer_hf.masks` gives padding so) lets each sequence skip the keys
            after its last visible one.
        scaling (`float`):
            Multiplies the scores, usually head_dim ** -0.5.
        dropout (`float`):
            Probability of dropping each attention probability (ignored outside training).

    Returns:
        `(attention_output, None)`, the output of shape `(batch_size, query_len, num_heads, head_dim)`.
    """
    is_causal = attention_mask is None and getattr(module, "is_causal", False) and query.shape[2] > 1
    # 16 random bits decide each drop: the probability is rounded to a multiple of 1/65536, and rescaling uses it.
    dropout = rounded_probability(dropout) if module.training else 0.0
    seed = random_seed() if dropout > 0 else 0
    attention_output = _BlockwiseAttention.apply(query, key, value, attention_mask, is_causal, scaling, dropout, seed)
    return attention_output.transpose(1, 2).contiguous(), None


class _BlockBuffers:
    """One buffer per role (scores, gradients of scores, random bits, ...), reused by every block of a call.

    A fresh block of scores is tens of MB: glibc serves it with mmap, and every 4 KiB page then costs a page fault
    and zeroing on first touch, which for one block takes as long as the matrix product that fills it. Reusing the
    buffers pays that once per call instead of once per block and tensor.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self._buffers: dict[str, torch.Tensor] = {}

    def get(self, role: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        numel = math.prod(shape)
        buffer = self._buffers.get(role)
        if buffer is None or buffer.numel() < numel:  # the first block is the largest: one allocation per role
            buffer = self._buffers[role] = torch.empty(numel, dtype=dtype, device=self.device)
        return buffer[:numel].view(shape)


class _Block(NamedTuple):
    """The scores computed together: some heads of one sequence (a slice of the folded batch * heads dimension), some
    of their queries (`rows`) and the first `key_len` keys of the sequence. Every slice of a block is contiguous, so
    matrix products read and write it in place."""

    sequence: int
    heads: slice
    rows: slice
    key_len: int


class _Masking:
    """The mask of one call as the blocks apply it: how many keys each sequence reads, and each block's additive mask.

    A boolean mask with one row for all queries, (batch_size, 1, 1, key_len), hides keys only (padding): a sequence
    then reads its keys up to its last visible one, and needs no mask at all when those are all visible (a
    right-padded batch). Any other mask is added to the scores of each block, rows by rows.
    """

    def __init__(
        self, attention_mask: torch.Tensor | None, is_causal: bool, batch_size: int, query_len: int, key_len: int
    ):
        self.attention_mask, self.is_causal, self.query_len = attention_mask, is_causal, query_len
        self.key_lens, self.hidden_keys = [key_len] * batch_size, [False] * batch_size
        self.hides_keys_only = (
            attention_mask is not None and attention_mask.dtype == torch.bool and attention_mask.shape[2] == 1
        )
        if self.hides_keys_only:
            visible = attention_mask[:, 0, 0].expand(batch_size, key_len)  # (B, Tk)
            last_visible = (visible * torch.arange(1, key_len + 1, device=visible.device)).amax(dim=-1)  # (B,)
            # A sequence that sees no key reads them all (each then gets the same weight, as in eager attention).
            self.key_lens = [length or key_len for length in last_visible.tolist()]
            visible_counts = visible.sum(dim=-1).tolist()
            self.hidden_keys = [count < length for count, length in zip(visible_counts, self.key_lens, strict=True)]

    def block_mask(self, block: _Block, buffers: _BlockBuffers, dtype: torch.dtype) -> torch.Tensor | None:
        """The term to add to the block's scores, broadcast over its heads: (1, rows or 1, key_len), or None."""
        keys = slice(0, block.key_len)
        sequence = block.sequence if self.attention_mask is not None and self.attention_mask.shape[0] > 1 else 0
        if self.hides_keys_only:
            if not self.hidden_keys[block.sequence]:
                return None
            allowed = self.attention_mask[sequence, :, :, keys]  # (1, 1, key_len)
        elif self.attention_mask is not None:
            allowed = self.attention_mask[sequence, :, block.rows, keys]  # (1, rows, key_len)
            if allowed.dtype != torch.bool:
                return allowed  # already additive (the "eager" form)
        elif self.is_causal:
            # The queries are the last query_len positions: query i sees keys up to i + (key_len - query_len).
            positions = torch.arange(block.rows.start, block.rows.stop)[:, None] + (block.key_len - self.query_len)
            allowed = (torch.arange(block.key_len) <= positions)[None]  # (1, rows, key_len)
        else:
            return None
        additive = buffers.get("mask", allowed.shape, dtype).zero_()
        return additive.masked_fill_(~allowed.to(additive.device), torch.finfo(dtype).min)


def _blocks(num_heads: int, query_len: int, key_lens: list[int]) -> list[_Block]:
    """The blocks of a call, sequence by sequence: as many heads with all their queries as fit in `BLOCK_ELEMENTS`
    scores, or one head and as many queries as fit."""
    blocks = []
    for sequence, key_len in enumerate(key_lens):
        heads_per_block = max(1, min(num_heads, BLOCK_ELEMENTS // (query_len * key_len)))
        rows_per_block = query_len if heads_per_block > 1 else max(1, min(query_len, BLOCK_ELEMENTS // key_len))
        first_head, end_head = sequence * num_heads, (sequence + 1) * num_heads
        for head in range(first_head, end_head, heads_per_block):
            heads = slice(head, min(head + heads_per_block, end_head))
            for row in range(0, query_len, rows_per_block):
                blocks.append(_Block(sequence, heads, slice(row, min(row + rows_per_block, query_len)), key_len))
    return blocks


def _block_probabilities(
    scaled_query: torch.Tensor, key: torch.Tensor, masking: _Masking, block: _Block, buffers: _BlockBuffers
) -> torch.Tensor:
    """softmax(q k^T * scaling + mask) of the block (queries come scaled), in the reused "scores" buffer.

    Shapes: `scaled_query` (B * nh, Tq, hs), `key` (B * nh, Tk, hs); returns (heads, rows, key_len).
    """
    block_query, block_key = scaled_query[block.heads, block.rows], key[block.heads, : block.key_len]
    scores = buffers.get("scores", (block_query.shape[0], block_query.shape[1], block.key_len), scaled_query.dtype)
    torch.bmm(block_query, block_key.transpose(1, 2), out=scores)
    additive_mask = masking.block_mask(block, buffers, scores.dtype)
    if additive_mask is not None:
        scores.add_(additive_mask)
    return torch.softmax(scores, dim=-1, out=scores)


def _keep_mask(
    buffers: _BlockBuffers, shape: torch.Size, dropout: float, seed: int, block_index: int, dtype: torch.dtype
) -> torch.Tensor:
    """A 0/1 tensor of `shape` and `dtype`, 0 with probability `dropout`; the same for the same (seed, block_index).

    The byte mask is drawn into a reused buffer and widened by torch into the reused buffer of `dtype`: two passes, no
    allocation of the block's size but numpy's random words.
    """
    numel = math.prod(shape)
    kept = draw_keep_mask(numel, dropout, seed + block_index, out=buffers.get("kept", (numel,), torch.uint8))
    return buffers.get("keep", shape, dtype).copy_(kept.view(shape))


class _BlockwiseAttention(torch.autograd.Function):
    """Attention over (batch * heads)-folded tensors, a block at a time (FlashAttention's recipe)."""

    @staticmethod
    def forward(ctx, query, key, value, attention_mask, is_causal, scaling, dropout, seed):
        batch_size, num_heads, query_len, head_dim = query.shape
        key_len = key.shape[2]
        # Scaling the (B, nh, Tq, hs) queries is cheaper than scaling every block of scores.
        scaled_query = (query * scaling).reshape(-1, query_len, head_dim)  # (B * nh, Tq, hs)
        key, value = key.reshape(-1, key_len, head_dim), value.reshape(-1, key_len, head_dim)  # (B * nh, Tk, hs)
        masking = _Masking(attention_mask, is_causal, batch_size, query_len, key_len)
        buffers, output = _BlockBuffers(query.device), torch.empty_like(scaled_query)
        for block_index, block in enumerate(_blocks(num_heads, query_len, masking.key_lens)):
            probabilities = _block_probabilities(scaled_query, key, masking, block, buffers)
            if dropout > 0:
                probabilities.mul_(_keep_mask(buffers, probabilities.shape, dropout, seed, block_index, query.dtype))
            block_value = value[block.heads, : block.key_len]
            torch.bmm(probabilities, block_value, out=output[block.heads, block.rows])
        if dropout > 0:
            output.mul_(kept_scale(dropout))  # the rescaling of dropout, applied to the (smaller) output
        ctx.save_for_backward(scaled_query, key, value, attention_mask, output)
        ctx.settings = (query.shape, key_len, is_causal, scaling, dropout, seed)
        return output.view(query.shape)

    @staticmethod
    def backward(ctx, grad_output):
        scaled_query, key, value, attention_mask, output = ctx.saved_tensors
        query_shape, key_len, is_causal, scaling, dropout, seed = ctx.settings
        batch_size, num_heads, query_len, _ = query_shape
        grad_output = grad_output.reshape(output.shape)  # (B * nh, Tq, hs)
        # softmax backward needs sum_j P_ij dP_ij per query, which equals dO_i . O_i (dropout included).
        output_dot_grad = (grad_output * output).sum(dim=-1, keepdim=True)  # (B * nh, Tq, 1)
        if dropout > 0:
            grad_output = grad_output * kept_scale(dropout)
        grad_query, grad_key, grad_value = (
            torch.empty_like(scaled_query),
            torch.zeros_like(key),  # keys no query reads keep a zero gradient
            torch.zeros_like(value),
        )
        masking = _Masking(attention_mask, is_causal, batch_size, query_len, key_len)
        buffers = _BlockBuffers(scaled_query.device)
        for block_index, block in enumerate(_blocks(num_heads, query_len, masking.key_lens)):
            heads, rows, keys = block.heads, block.rows, slice(0, block.key_len)
            probabilities = _block_probabilities(scaled_query, key, masking, block, buffers)
            block_grad_output = grad_output[heads, rows]  # (heads, rows, hs)
            grad_dropped = buffers.get("grad_scores", probabilities.shape, probabilities.dtype)
            torch.bmm(block_grad_output, value[heads, keys].transpose(1, 2), out=grad_dropped)  # d(dropped probs)
            dropped = probabilities
            if dropout > 0:
                keep = _keep_mask(buffers, probabilities.shape, dropout, seed, block_index, probabilities.dtype)
                dropped = keep.mul_(probabilities)
            grad_value[heads, keys].baddbmm_(dropped.transpose(1, 2), block_grad_output)
            # dS = P * (keep * dP_dropped - D) = dropped * dP_dropped - P * D
            grad_scores = grad_dropped.mul_(dropped).addcmul_(probabilities, output_dot_grad[heads, rows], value=-1)
            torch.bmm(grad_scores, key[heads, keys], out=grad_query[heads, rows])
            grad_key[heads, keys].baddbmm_(grad_scores.transpose(1, 2), scaled_query[heads, rows])
        grads = (grad_query.mul_(scaling), grad_key, grad_value)
        shapes = (query_shape, (*query_shape[:2], key_len, query_shape[3]), (*query_shape[:2], key_len, -1))
        return *(grad.view(shape) for grad, shape in zip(grads, shapes, strict=True)), None, None, None, None, None


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


def linear_attention_function(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    position_embeddings: tuple[torch.Tensor, torch.Tensor],
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """`linear_attention_forward` behind transformers' attention-function call: unrotated queries and keys (it
    rotates their features itself), the `(cos, sin)` of every key, and `attention_mask` in the form linear attention
    takes, `(batch_size, seq_len)` (`masks.layer_attention_mask`); a decoder's `module.is_causal`."""
    cos, sin = position_embeddings
    return linear_attention_forward(query, key, value, cos, sin, attention_mask, module.is_causal), None


__all__ = [
    "blockwise_attention_forward",
    "linear_attention_forward",
    "linear_attention_function",
    "prefers_blockwise_attention",
]
