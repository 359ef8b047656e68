"""The RoFormer model family: a BERT encoder whose attention knows positions through rotations (RoPE).

What differs from BERT: no position embeddings (queries and keys are rotated by angles proportional to their
positions, so scores depend only on relative positions and no table caps the length); pairs (2i, 2i + 1) rotate
together, as in bert4keras and transformers' RoFormer, so checkpoints load without permutation; optionally rotated
values (`rotary_value`) and linear attention (`attention_type="linear"`). RoFormer-V2 is `norm_type="rms_norm"`,
`use_bias=False`, ReLU and an MLM head reduced to the tied decoder; RoFormer-Sim a `RoFormerForCausalLM` with UniLM
attention over token types (`decoder_mask="unilm"`) whose pooler gives sentence vectors; IDEA's Zhouwenwang a pre-norm
stack (`norm_position="pre"`, `final_layer_norm`, no embedding norm) that attends as a UniLM in every head
(`encoder_mask="unilm"`). Parameter names are those of transformers' RoFormer (its sinusoid table, `embed_positions`,
is left out).

One file, what a checkpoint carries beside `configuration.py`, in data-flow order: the cache's name across releases,
dropout and norms, embeddings, rotary, masks, attention, layer and encoder, the pretrained base with its loading
checks, the input checks, the bare model, the heads with their losses. Derivations and measurements:
docs/rope_research.md, docs/benchmarks.md, docs/development.md ("The model file").
"""

import copy
import functools
import importlib
import math
import os
import re
import shutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import numpy
import torch
from huggingface_hub import hf_hub_download
from huggingface_hub.errors import EntryNotFoundError
from safetensors import safe_open
from torch import nn
from torch.nn import functional as F
from transformers import GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, DynamicCache
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutputWithPoolingAndCrossAttentions,
    CausalLMOutputWithPast,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.modeling_utils import AttentionInterface
from transformers.processing_utils import Unpack
from transformers.utils import ModelOutput, TransformersKwargs, can_return_tuple, logging
from transformers.utils.output_capturing import capture_outputs

from .configuration import MODEL_FILES, RECIPE_PIPELINE_FILES, RoFormerConfig, check_model_files

logger = logging.get_logger(__name__)


# --- The key/value cache's name across transformers releases ---------------------------------------------------------
# transformers 5.24 renamed `past_key_values` to `cache` (and still reads the old name, with a warning): the model
# takes either and hands it on under the installed release's name, so no release warns and none misses the cache.

# "cache" from transformers 5.24 on, "past_key_values" before.
CACHE_NAME = "cache" if "cache" in {field.name for field in fields(CausalLMOutputWithPast)} else "past_key_values"


def cache_argument(cache: Cache | None) -> dict[str, Cache | None]:
    """`{name: cache}` under the installed release's name, for transformers' output classes and mask helpers."""
    return {CACHE_NAME: cache}


def cache_of(outputs: ModelOutput) -> Cache | None:
    """The cache a model output holds, read under the installed release's name (the old name warns on 5.24+)."""
    return outputs.get(CACHE_NAME)


def given_cache(cache: Cache | None, past_key_values: Cache | None) -> Cache | None:
    """The cache passed to `forward` under either name: `cache` (transformers 5.24+) or `past_key_values` (earlier
    releases' `generate`, and code written for them).

    Raises:
        ValueError: when both names are given.
    """
    if past_key_values is None:
        return cache
    if cache is not None:
        raise ValueError(
            "Both cache and past_key_values were given: they name the same key/value cache (transformers 5.24 renamed "
            "past_key_values to cache), so pass it once, as cache."
        )
    return past_key_values


# --- Dropout ---------------------------------------------------------------------------------------------------------
# torch's CPU dropout draws its masks one float at a time on one thread; these take 16 random bits per element from
# numpy's PCG64, seeded from torch's generator (so `torch.manual_seed` and gradient checkpointing replay them).
# Design and timings: docs/benchmarks.md ("The hidden dropout's masks").

RANDOM_BITS = 16  # per element: the drop probability is a multiple of 1 / 2**16


def rounded_probability(probability: float) -> float:
    """The drop probability 16 random bits realise: `probability` rounded to a multiple of 1/65536."""
    return round(probability * 2**RANDOM_BITS) / 2**RANDOM_BITS


def kept_scale(probability: float) -> float:
    """1 / (1 - probability), the factor of kept elements (0 when all are dropped)."""
    return 1.0 / (1.0 - probability) if probability < 1 else 0.0


def random_seed() -> int:
    """A seed for numpy's generator, drawn from torch's global one (so `torch.manual_seed` and checkpointing rule)."""
    return int(torch.randint(2**62, (1,)))


def draw_keep_mask(numel: int, probability: float, seed: int, out: torch.Tensor | None = None) -> torch.Tensor:
    """`numel` bytes, 0 with probability `probability` (a multiple of 1/65536) and 1 otherwise; the same for the same
    seed. Written into `out` (a uint8 tensor of at least `numel` elements) where given, so a caller can reuse one
    buffer."""
    random_bits = numpy.random.PCG64(seed).random_raw((numel + 3) // 4).view(numpy.int16)[:numel]
    kept = torch.empty(numel, dtype=torch.uint8) if out is None else out[:numel]
    threshold = round(probability * 2**RANDOM_BITS) - 2 ** (RANDOM_BITS - 1)  # dropped below it, as an int16
    numpy.greater_equal(random_bits, threshold, out=kept.numpy(), casting="unsafe")
    return kept


class _MaskedScale(torch.autograd.Function):
    """x * keep * scale, keeping only the byte mask for the backward pass (the gradient is masked the same way)."""

    @staticmethod
    def forward(ctx, hidden_states: torch.Tensor, probability: float, seed: int) -> torch.Tensor:
        keep = draw_keep_mask(hidden_states.numel(), probability, seed).view(hidden_states.shape)
        ctx.save_for_backward(keep)
        ctx.scale = kept_scale(probability)
        return torch.mul(hidden_states, keep).mul_(ctx.scale)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        (keep,) = ctx.saved_tensors
        return torch.mul(grad_output, keep).mul_(ctx.scale), None, None


class RoFormerDropout(nn.Dropout):
    """`nn.Dropout` (same arguments, no weights) whose masks come from `draw_keep_mask` when training on the CPU.
    Elsewhere (a GPU, under `torch.compile`, which cannot trace numpy's generator, or `inplace=True`) `nn.Dropout`."""

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        cheap = self.training and self.p > 0 and not self.inplace and hidden_states.device.type == "cpu"
        if not cheap or torch.compiler.is_compiling():
            return super().forward(hidden_states)
        return _MaskedScale.apply(hidden_states, rounded_probability(self.p), random_seed())


# --- Norms -----------------------------------------------------------------------------------------------------------
# Which norm (`norm_type`: LayerNorm, or RoFormer-V2's RMS norm without weights) and where (`norm_position`: BERT's
# post-norm, or Megatron's pre-norm with a norm after the last layer, Zhouwenwang's). A norm the config leaves out is
# an `nn.Identity`, so a checkpoint holds exactly the norms its config uses.


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


# --- Embeddings ------------------------------------------------------------------------------------------------------


class RoFormerEmbeddings(nn.Module):
    """Word and token-type embeddings, summed and normalised (but for Zhouwenwang). Positions enter attention."""

    def __init__(self, config: RoFormerConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.embedding_size, padding_idx=config.pad_token_id)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.embedding_size)
        self.LayerNorm = embedding_norm(config)
        self.dropout = RoFormerDropout(config.hidden_dropout_prob)

    def forward(self, inputs_embeds: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        if token_type_ids is None:
            embeddings = inputs_embeds + self.token_type_embeddings.weight[0]  # every token has type 0
        else:
            embeddings = inputs_embeds + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(embeddings))


# --- Rotary position embedding ---------------------------------------------------------------------------------------
# The pair (2i, 2i + 1) of a query or key at position m turns by m * theta_i, theta_i = base ** (-2i / head_dim): the
# original checkpoints' interleaved layout, not LLaMA's "rotate half". As in Llama, `RoFormerRotaryEmbedding` makes
# `(cos, sin)` once per forward and `rotate` applies them; the scaled types and 2-D positions: docs/rope_research.md.

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
    """The cosines and sines of RoPE from 1-D or 2-D position ids, called as transformers' rotary modules are
    (`rotary_emb(x, position_ids)`). Derived from `config.rope_parameters` in every forward: no buffer to save or
    move, and a changed config takes effect at once."""

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
    # Each pair (x_2i, x_2i+1) as the complex number x_2i + i x_2i+1: one product, one pass (bf16 widened, there is no
    # complex bf16; still cheaper than the real form: docs/rope_research.md).
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
    and keys stacked as `(batch_size, seq_len, 2, num_heads, head_dim)` turn together, in one complex product computed
    in float32 at least and rounded once; under `torch.compile` the real form, which the compiler fuses.

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


# --- Attention masks -------------------------------------------------------------------------------------------------
# Bidirectional for the encoder, causal for a decoder, and UniLM's sequence-to-sequence mask over token types for
# RoFormer-Sim (`decoder_mask="unilm"`) and every head of Zhouwenwang (`encoder_mask="unilm"` too).


def layer_attention_mask(
    config: RoFormerConfig,
    attention_mask: torch.Tensor | None,
    hidden_states: torch.Tensor,
    cache: Cache | None,
    token_type_ids: torch.Tensor | None,
) -> torch.Tensor | None:
    """The mask of every layer, built once per forward in the form `config._attn_implementation` wants (None when
    nothing is masked, where the backend allows). Linear attention takes the `(batch_size, seq_len)` padding mask as
    it is."""
    if config.attention_type == "linear":
        return attention_mask
    if config.attends_as_unilm:
        return unilm_layer_mask(config, attention_mask, hidden_states, cache, token_type_ids)
    if config.is_decoder:
        return create_causal_mask(
            config=config, inputs_embeds=hidden_states, attention_mask=attention_mask, **cache_argument(cache)
        )
    return bidirectional_layer_mask(config, attention_mask, hidden_states)


def bidirectional_layer_mask(
    config: RoFormerConfig, attention_mask: torch.Tensor | None, hidden_states: torch.Tensor
) -> torch.Tensor | None:
    """The encoder's mask: padding hides the same keys from every query. For "sdpa" it keeps that shape,
    `(batch_size, 1, 1, seq_len)`, True where a key may be seen, rather than one row per query: SDPA broadcasts it,
    and blockwise attention (CPU training) reads it as padding, skipping the keys after each sequence's last token."""
    mask = create_bidirectional_mask(config=config, inputs_embeds=hidden_states, attention_mask=attention_mask)
    spelled_out = config._attn_implementation == "sdpa" and mask is not None and mask.dtype == torch.bool
    if not spelled_out or attention_mask is None or attention_mask.dim() != 2:
        return mask  # no padding, another backend's form, or a prepared 4-D mask
    return attention_mask.to(device=mask.device, dtype=torch.bool)[:, None, None, :]  # (B, 1, 1, T)


def unilm_layer_mask(
    config: RoFormerConfig,
    attention_mask: torch.Tensor | None,
    hidden_states: torch.Tensor,
    cache: Cache | None,
    token_type_ids: torch.Tensor | None,
) -> torch.Tensor | None:
    """`decoder_mask="unilm"` or `encoder_mask="unilm"`: see `unilm_attention_mask`. A prepared 4-D mask is used as
    it is."""
    if config._attn_implementation not in ("eager", "sdpa"):
        raise ValueError(
            f"The UniLM mask (decoder_mask or encoder_mask 'unilm') needs an attention backend that takes an "
            f"arbitrary mask, but this model uses {config._attn_implementation!r}: load it with "
            "attn_implementation='sdpa' (or 'eager')."
        )
    if attention_mask is not None and attention_mask.dim() == 4:
        return attention_mask
    past_len = cache.get_seq_length() if cache is not None else 0
    if past_len > 0:
        check_unilm_continuation(token_type_ids)
    elif token_type_ids is None:  # one segment: both directions
        return bidirectional_layer_mask(config, attention_mask, hidden_states)
    return unilm_attention_mask(token_type_ids, attention_mask, past_len)


def unilm_attention_mask(
    token_type_ids: torch.Tensor, padding_mask: torch.Tensor | None, past_len: int = 0
) -> torch.Tensor:
    """UniLM's sequence-to-sequence mask (RoFormer-Sim's): query i sees key j when segments[j] <= segments[i], where
    segments = cumsum(token_type_ids), and key j is not padding.

    Type-0 tokens (the first segment) see each other in both directions; a type-1 token sees the first segment, and
    the type-1 tokens up to itself. `past_len` cached keys come first and are all visible: they are earlier and
    segments only grow. Within the new tokens the rule needs only their own types (a cached offset adds to both
    sides), so the cache keeps no token types; `check_unilm_continuation` makes sure the cached tokens needed none
    of the new ones.

    Args:
        token_type_ids (`torch.LongTensor` of shape `(batch_size, seq_len)`): Token types of the new tokens.
        padding_mask (`torch.Tensor` of shape `(batch_size, past_len + seq_len)`, *optional*): 1 for tokens, 0 for
            padding.
        past_len (`int`): Number of cached tokens.

    Returns:
        `torch.BoolTensor` of shape `(batch_size, 1, seq_len, past_len + seq_len)`, True where a query may look.
    """
    batch_size, seq_len = token_type_ids.shape
    segments = token_type_ids.cumsum(-1)  # (B, T)
    visible = segments[:, None, :] <= segments[:, :, None]  # (B, Tq, Tk): [b, i, j] = segments[j] <= segments[i]
    visible = torch.cat([visible.new_ones(batch_size, seq_len, past_len), visible], dim=-1)  # (B, Tq, past + Tk)
    if padding_mask is not None:
        visible = visible & padding_mask.bool()[:, None, :]
    # Every query sees itself, so that no row is empty (SDPA gives NaN for an empty row, and a NaN at a padding
    # position would reach the tokens through the values); a token sees itself anyway, so only padding changes.
    positions = torch.arange(seq_len, device=visible.device)
    visible[:, positions, positions + past_len] = True
    return visible[:, None]  # (B, 1, Tq, past + Tk)


def check_unilm_continuation(token_type_ids: torch.Tensor | None) -> None:
    """Raises a ValueError unless tokens fed after a cache start a new segment (type 1 first, as generated text): a
    cached token would otherwise have seen them, which its cached keys and values did not (read outside
    `torch.compile` only)."""
    missing = token_type_ids is None
    if missing or (not torch.compiler.is_compiling() and bool((token_type_ids[:, 0] == 0).any())):
        raise ValueError(
            "With decoder_mask='unilm', tokens fed after a cache must start a new segment: pass token_type_ids with "
            "1 for them (generate does so), or read the whole text again without a cache."
        )


# --- Attention: the eager reference, blockwise attention, linear attention -------------------------------------------
# RoFormer's two attention functions beside transformers' backends, chosen by name in one place
# (`RoFormerSelfAttention.attention_function`): "roformer_blockwise", softmax attention a block of scores at a time
# (FlashAttention's recipe), which "sdpa" hands CPU training with dropout and bf16 where the CPU pays; and
# "roformer_linear", linear attention with RoPE (the RoFormer paper's section 3.3). How and why: docs/benchmarks.md
# ("Blockwise attention") and docs/rope_research.md (section 2).


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference: softmax(q k^T * scaling + mask) v on rotated `(B, nh, T, hs)` tensors (keys may outnumber queries
    with a cache); `attention_mask` `(B, 1, Tq, Tk)` is additive ("eager") or boolean (True where a query may look:
    "sdpa"). Returns the output, `(B, Tq, nh, hs)`, and the weights, `(B, nh, Tq, Tk)`."""
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling  # (B, nh, Tq, Tk)
    if attention_mask is None and module.is_causal and query.shape[2] > 1:
        # The SDPA form of a plain causal mask is no mask at all (SDPA's is_causal); the CPU dispatch hands it here.
        query_len, key_len = query.shape[2], key.shape[2]
        attention_mask = torch.ones(query_len, key_len, dtype=torch.bool, device=query.device)
        attention_mask = attention_mask.tril(diagonal=key_len - query_len)  # queries are the last positions
    if attention_mask is not None and attention_mask.dtype == torch.bool:
        # The SDPA backend's mask form (True where a query may look), as the CPU dispatch passes it.
        scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
    elif attention_mask is not None:
        scores = scores + attention_mask
    weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    # Drops whole (query, key) links, as in BERT and the original RoFormer.
    weights = F.dropout(weights, p=dropout, training=module.training)
    attention_output = torch.matmul(weights, value).transpose(1, 2).contiguous()  # (B, Tq, nh, hs)
    return attention_output, weights


# Elements of one block of scores, (heads, rows, keys): 16 MiB of float32, the fastest size measured.
BLOCK_ELEMENTS = 2**22


def prefers_blockwise_attention(config: RoFormerConfig, query: torch.Tensor, dropout: float) -> bool:
    """Whether the SDPA backend should hand this call to `blockwise_attention_forward`: on the CPU, with attention
    dropout (SDPA has no fused CPU kernel with dropout) or with bf16 queries on a CPU that multiplies bf16 (SDPA's
    fused CPU kernel computes in float32). Not under `torch.compile`, which cannot trace numpy's generator."""
    if torch.compiler.is_compiling() or config._attn_implementation != "sdpa" or query.device.type != "cpu":
        return False
    return dropout > 0 or (query.dtype == torch.bfloat16 and cpu_multiplies_bf16())


@functools.cache
def cpu_multiplies_bf16() -> bool:
    """Whether this CPU has instructions that multiply bf16 numbers (AVX-512 BF16, AMX, Arm's BF16), as torch reads
    them: for bf16 inputs already chosen, which attention computes them in bf16 (whether bf16 pays is the scripts'
    question, `roformer_hf.training.machine.cpu_arithmetic`)."""
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
            with one row for every query (`layer_attention_mask` gives padding so) lets each sequence skip the keys
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
    """One buffer per role (scores, gradients of scores, random bits, ...), reused by every block of a call: a fresh
    block of scores costs page faults that take as long as the matrix product that fills it."""

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
    A padding mask, (batch_size, 1, 1, key_len), lets a sequence stop at its last visible key (and a right-padded one
    needs no mask); any other mask is added to the scores of each block."""

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
    """softmax(q k^T * scaling + mask) of the block (queries come scaled), in the reused "scores" buffer:
    `scaled_query` (B * nh, Tq, hs), `key` (B * nh, Tk, hs) -> (heads, rows, key_len)."""
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
    Drawn as bytes into a reused buffer, widened into the reused buffer of `dtype`."""
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


# Linear attention with RoPE: o_i = sum_j [R_i phi(q_i)]^T [R_j phi(k_j)] v_j / sum_j phi(q_i)^T phi(k_j), O(n d^2)
# with one (d x d) key-value summary; RoPE turns the numerator only (a rotated dot product may be negative).

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
    """Numerator and denominator of causal linear attention, block by block (the queries are the last keys): a block
    of queries reads the running summary of all earlier keys plus a lower-triangular slice of its own block, so no
    (seq_len, head_dim, head_dim) prefix sum is built and one block is rotated at a time."""
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
    takes, `(batch_size, seq_len)` (`layer_attention_mask`); a decoder's `module.is_causal`."""
    cos, sin = position_embeddings
    return linear_attention_forward(query, key, value, cos, sin, attention_mask, module.is_causal), None


# --- Attention, layer, encoder ---------------------------------------------------------------------------------------


class RoFormerAttentionFunctions(AttentionInterface):
    """transformers' attention functions by name (`config._attn_implementation`: "sdpa", "flash_attention_2", ...)
    and RoFormer's two, "roformer_blockwise" and "roformer_linear", read from this module when asked for, so that
    replacing `blockwise_attention_forward` here replaces what runs."""

    def __getitem__(self, key: str) -> Callable:
        own = {"roformer_blockwise": blockwise_attention_forward, "roformer_linear": linear_attention_function}
        return own[key] if key in own else super().__getitem__(key)


ROFORMER_ATTENTION_FUNCTIONS = RoFormerAttentionFunctions()
LOGGED_ATTENTION_CHOICES: set[str] = set()  # `attention_function` logs each choice once per process


class RoFormerSelfAttention(nn.Module):
    """Multi-head self-attention with RoPE on queries and keys (and values if `config.rotary_value`), through the one
    attention function `attention_function` chooses: transformers' backend (`config._attn_implementation`), or
    RoFormer's blockwise (`prefers_blockwise_attention`) or linear attention."""

    def __init__(self, config: RoFormerConfig, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.head_dim = config.head_dim
        self.scaling = self.head_dim**-0.5
        self.attention_dropout = config.attention_probs_dropout_prob
        # A UniLM decoder spells its mask out; is_causal would make SDPA (and eager, without a mask) causal.
        self.is_causal = config.is_decoder and config.decoder_mask == "causal"
        # What RoPE turns, of (query, key, value): linear attention rotates its queries' and keys' features itself.
        self.rotated = slice(0 if config.attention_type == "softmax" else 2, 3 if config.rotary_value else 2)
        self.rotated_sizes = (self.rotated.start, self.rotated.stop - self.rotated.start, 3 - self.rotated.stop)
        self.query = nn.Linear(config.hidden_size, config.hidden_size, bias=config.use_bias)
        self.key = nn.Linear(config.hidden_size, config.hidden_size, bias=config.use_bias)
        self.value = nn.Linear(config.hidden_size, config.hidden_size, bias=config.use_bias)

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        query_positions: slice | None = None,
        rotation: torch.Tensor | tuple[torch.Tensor, torch.Tensor] | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`position_embeddings`: `(cos, sin)` of every token, and `rotation` made of them once per forward
        (`rotation_of`; made here when not given). `query_positions` (the encoder's last layer): the outputs to
        compute, `attention_mask` already cut to them; keys and values cover every token."""
        rotation = rotation_of(*position_embeddings) if rotation is None else rotation
        query, key, value = self.projections(hidden_states, rotation, query_positions)  # (B, nh, T, hs) each
        if cache is not None:
            key, value = cache.update(key, value, self.layer_idx)
        dropout = self.attention_dropout if self.training else 0.0
        attention_interface = self.attention_function(query, dropout)
        attention_output, attention_weights = attention_interface(
            self, query, key, value, attention_mask, dropout=dropout, scaling=self.scaling,
            position_embeddings=position_embeddings, **kwargs,
        )  # fmt: skip
        return attention_output.reshape(*attention_output.shape[:2], -1), attention_weights  # (B, Tq, nh * hs)

    def attention_function(self, query: torch.Tensor, dropout: float) -> Callable:
        """The one place that chooses what computes attention, logged once per choice: "roformer_linear" for
        `attention_type="linear"`, "roformer_blockwise" where "sdpa" prefers it on the CPU, else
        `config._attn_implementation` ("eager": `eager_attention_forward`)."""
        implementation = self.config._attn_implementation
        if self.config.attention_type == "linear":
            implementation = "roformer_linear"
        elif prefers_blockwise_attention(self.config, query, dropout):
            implementation = "roformer_blockwise"
        message = f"RoFormer attention runs {implementation!r} (config: {self.config._attn_implementation})."
        if not torch.compiler.is_compiling() and message not in LOGGED_ATTENTION_CHOICES:
            LOGGED_ATTENTION_CHOICES.add(message)
            logger.info(message)
        return ROFORMER_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)

    def projections(
        self,
        hidden_states: torch.Tensor,
        rotation: torch.Tensor | tuple[torch.Tensor, torch.Tensor],
        query_positions: slice | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries (of `query_positions` only, when given), keys and values, each `(B, nh, T, hs)`, those of
        `self.rotated` rotated: in one product and one rotation where `fuses_projections` allows it."""
        if query_positions is None and self.fuses_projections():
            states = self.fused_projection(hidden_states)  # (B, T, 3, nh, hs): query, key, value
            before, turned, after = states.split(self.rotated_sizes, dim=2)
            turned = rotate(turned, rotation) if turned.shape[2] else turned  # together, in one product
            return tuple(member.transpose(1, 2) for part in (before, turned, after) for member in part.unbind(2))
        positions = slice(None) if query_positions is None else query_positions
        rotations = (rotation_at(rotation, positions), rotation, rotation)
        members = [self.query(hidden_states[:, positions]), self.key(hidden_states), self.value(hidden_states)]
        members = [member.view(*member.shape[:-1], -1, self.head_dim) for member in members]  # (B, T, nh, hs)
        for index in range(3)[self.rotated]:
            members[index] = rotate(members[index], rotations[index])
        return tuple(member.transpose(1, 2) for member in members)

    def fuses_projections(self) -> bool:
        """Whether query, key and value may be one product of their weights concatenated: plain `nn.Linear`s with
        plain weights and no hooks. PEFT's adapters, quantised layers and hooked modules run their own forward."""
        return all(
            type(projection) is nn.Linear
            and type(projection.weight) is nn.Parameter
            and not (projection._forward_hooks or projection._forward_pre_hooks)
            for projection in (self.query, self.key, self.value)
        )

    def fused_projection(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """The three projections in one product: `(B, T, 3, nh, hs)`, the same numbers as three."""
        projections = (self.query, self.key, self.value)
        weight = torch.cat([projection.weight for projection in projections])
        bias = None if self.query.bias is None else torch.cat([projection.bias for projection in projections])
        return F.linear(hidden_states, weight, bias).unflatten(-1, (3, -1, self.head_dim))


class RoFormerOutput(nn.Module):
    """The projection closing attention (from `hidden_size`) or the feed-forward (from `intermediate_size`), then
    dropout, residual and post-norm (BERT's order; a pre-norm model normalises the block's input instead)."""

    def __init__(self, config: RoFormerConfig, input_size: int):
        super().__init__()
        self.dense = nn.Linear(input_size, config.hidden_size, bias=config.use_bias)
        self.LayerNorm = post_norm(config)
        self.dropout = RoFormerDropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + residual)


class RoFormerAttention(nn.Module):
    """Self-attention and its output block; the names `self` and `output` are those of the checkpoints."""

    def __init__(self, config: RoFormerConfig, layer_idx: int):
        super().__init__()
        self.input_norm = pre_norm(config)
        self.self = RoFormerSelfAttention(config, layer_idx)
        self.output = RoFormerOutput(config, config.hidden_size)

    def forward(
        self, hidden_states: torch.Tensor, query_positions: slice | None = None, **kwargs: Unpack[TransformersKwargs]
    ) -> torch.Tensor:
        attention_output, _ = self.self(self.input_norm(hidden_states), query_positions=query_positions, **kwargs)
        residual = hidden_states if query_positions is None else hidden_states[:, query_positions]
        return self.output(attention_output, residual)


class RoFormerIntermediate(nn.Module):
    def __init__(self, config: RoFormerConfig):
        super().__init__()
        self.input_norm = pre_norm(config)
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size, bias=config.use_bias)
        self.intermediate_act_fn = ACT2FN[config.hidden_act]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.intermediate_act_fn(self.dense(self.input_norm(hidden_states)))


class RoFormerLayer(GradientCheckpointingLayer):
    """One encoder block: attention, then feed-forward, each with residual and norm (after the sum, or on the block's
    input with `norm_position="pre"`)."""

    def __init__(self, config: RoFormerConfig, layer_idx: int):
        super().__init__()
        self.attention = RoFormerAttention(config, layer_idx)
        self.intermediate = RoFormerIntermediate(config)
        self.output = RoFormerOutput(config, config.intermediate_size)

    def forward(self, hidden_states: torch.Tensor, **kwargs: Unpack[TransformersKwargs]) -> torch.Tensor:
        attention_output = self.attention(hidden_states, **kwargs)
        return self.output(self.intermediate(attention_output), attention_output)


class RoFormerEncoder(nn.Module):
    def __init__(self, config: RoFormerConfig):
        super().__init__()
        self.layer = nn.ModuleList([RoFormerLayer(config, layer_idx) for layer_idx in range(config.num_hidden_layers)])
        self.final_norm = final_norm(config)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        last_layer_positions: slice | None = None,
        **kwargs,
    ) -> torch.Tensor:
        """`attention_mask` and `kwargs` go to every layer; the last computes only `last_layer_positions` (see
        `RoFormerModel.forward`), its mask cut to those queries here (a padding mask has one row for all)."""
        last_layer_mask = attention_mask
        if last_layer_positions is not None and attention_mask is not None and attention_mask.shape[2] > 1:
            last_layer_mask = attention_mask[:, :, last_layer_positions]  # (B, 1, Tq, Tk)
        *layers, last_layer = self.layer
        for layer in layers:
            hidden_states = layer(hidden_states, attention_mask=attention_mask, **kwargs)
        hidden_states = last_layer(
            hidden_states, attention_mask=last_layer_mask, query_positions=last_layer_positions, **kwargs
        )
        return self.final_norm(hidden_states)


class RoFormerPooler(nn.Module):
    """The sequence vector: activation(dense(hidden state of the first token, [CLS])), BERT's pooler."""

    def __init__(self, config: RoFormerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = ACT2FN[config.pooler_activation]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(hidden_states[:, 0]))  # (B, hidden_size)


# --- PreTrainedModel and its loading checks --------------------------------------------------------------------------
# transformers initialises a weight a checkpoint lacks at random and logs it: for the encoder that means a config that
# does not describe the checkpoint (RoFormer-V2 read as V1), so `from_pretrained` refuses it in one line. The published
# layouts and the publishing writers are imported by name when used, where roformer_hf is installed
# (`roformer_hf_module`): a checkpoint carries none of them. More: docs/development.md ("The model file").


class RoFormerPreTrainedModel(PreTrainedModel):
    """Weights and capabilities shared by every RoFormer class, and what RoFormer adds to `from_pretrained`,
    `save_pretrained` and `push_to_hub` (each with the arguments of the transformers method it extends)."""

    config: RoFormerConfig
    base_model_prefix = "roformer"
    supports_gradient_checkpointing = True
    _no_split_modules = ["RoFormerLayer"]  # noqa: RUF012 (transformers' class attributes are lists)
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_attention_backend = True
    _can_compile_fullgraph = True  # but for the sparse MLM prediction and the length-dependent RoPE types
    # For `output_hidden_states` / `output_attentions`, hooks of `capture_outputs`: transformers' internal helper, used
    # on purpose, as its own v5 models use it; tests/test_modeling.py checks it on the oldest and newest releases.
    _can_record_outputs = {"hidden_states": RoFormerLayer, "attentions": RoFormerSelfAttention}  # noqa: RUF012
    # transformers' RoFormer stores a fixed sinusoid table; RoPE here is computed from position ids instead.
    _keys_to_ignore_on_load_unexpected = [r"embed_positions"]  # noqa: RUF012

    def __init__(self, config: RoFormerConfig, *inputs, **kwargs):
        """As `PreTrainedModel.__init__`, once the config's heads fit its hidden size (`check_attention_heads`): where
        transformers' models check it, so that the config itself accepts any sizes, as transformers' configs do."""
        config.check_attention_heads()
        super().__init__(config, *inputs, **kwargs)

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, RoFormerLMPredictionHead) and module.bias is not None:
            init.zeros_(module.bias)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        """As transformers' `from_pretrained`, but encoder weights (under `roformer.`, pooler excepted) that the
        checkpoint lacks or holds in another shape raise a ValueError naming the likely cause
        (`check_encoder_weights_loaded`); new heads and a new pooler initialise as usual, and
        `ignore_mismatched_sizes=True` as in transformers, with a warning. Where roformer_hf is installed, a published
        RoFormer-Sim or Zhouwenwang checkpoint loads in roformer_hf's layout (`published_layouts`)."""
        check_model_files(pretrained_model_name_or_path, MODEL_FILES, kwargs.get("subfolder"))  # damaged files named
        source, layouts = pretrained_model_name_or_path, roformer_hf_module("conversion.published_layouts")
        if layouts is not None and kwargs.get("config") is None and isinstance(source, (str, os.PathLike)):
            pretrained_model_name_or_path, kwargs = layouts.published_layout_inputs(source, kwargs, cls)
        if isinstance(pretrained_model_name_or_path, (str, os.PathLike)):
            check_floating_weights(pretrained_model_name_or_path, kwargs)
        output_loading_info = kwargs.pop("output_loading_info", False)
        ignore_mismatched_sizes = kwargs.pop("ignore_mismatched_sizes", False)
        # Mismatched shapes are collected rather than raised, so that the encoder's can be explained below.
        model, loading_info = super().from_pretrained(
            pretrained_model_name_or_path,
            *model_args,
            output_loading_info=True,
            ignore_mismatched_sizes=True,
            **kwargs,
        )
        if pretrained_model_name_or_path is None:  # loaded from weights: the model still says where they came from
            model.name_or_path = model.config.name_or_path = str(source)
        if output_loading_info and holds_no_weight_of(model, loading_info):
            logger.warning(
                f"The checkpoint holds no weight of {type(model).__name__}, so all its weights are random "
                "(loading_info['missing_keys'] lists them): load a checkpoint saved from this model."
            )
        else:
            check_encoder_weights_loaded(model, loading_info, ignore_mismatched_sizes)
        if not ignore_mismatched_sizes:
            check_head_shapes(model, loading_info)
        return (model, loading_info) if output_loading_info else model

    def push_to_hub(self, repo_id: str, **kwargs):
        """As transformers' `push_to_hub` (same arguments), but the README.md uploaded is a RoFormer model card, to
        which the optional `training_summary` (a `model_card.TrainingSummary`) and `base_model` add. Without
        roformer_hf installed (remote code), transformers' own upload and card."""
        model_card = roformer_hf_module("hub.model_card")
        if model_card is None:
            return super().push_to_hub(repo_id, **kwargs)
        return model_card.push_to_hub_with_model_card(self, repo_id, **kwargs)

    def save_pretrained(self, save_directory: str | os.PathLike, *args, **kwargs) -> None:
        """As transformers' `save_pretrained` (same arguments); with `config.add_pooling_layer`, also the files that
        make `SentenceTransformer(save_directory)` encode texts as `pooler_output` (see
        `sentence_transformers_files`; not written by remote code where roformer_hf is not installed). A model
        quantized in memory (`int8_serving.quantize_int8`) is refused in one line before anything is written."""
        refuse_int8_quantized_in_memory(self)
        super().save_pretrained(save_directory, *args, **kwargs)
        files = roformer_hf_module("hub.sentence_transformers_files") if self.config.add_pooling_layer else None
        if files is not None:
            files.write_sentence_transformers_files(save_directory)
        if self.config.classification_inputs:
            copy_recipe_pipeline_code(save_directory, loaded_from=self.name_or_path)


# The query weight exists in every variant: when it is missing, the checkpoint lacks the whole layer.
ABSENT_LAYER = re.compile(r"encoder\.layer\.(\d+)\.attention\.self\.query\.weight$")
# The weight files transformers reads, in the order it prefers them.
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
HUB_ARGUMENTS = ("cache_dir", "revision", "token", "local_files_only", "subfolder")


def refuse_int8_quantized_in_memory(model: PreTrainedModel) -> None:
    """Raise `ValueError` for a model whose Linear layers were made int8 in memory (torchao's `quantize_`, or torch's
    `quantize_dynamic`) rather than loaded so (transformers' `TorchAoConfig`, which records it in the config): its
    weights are tensors safetensors cannot write, and it would die inside safetensors with half a folder written."""
    if getattr(model, "hf_quantizer", None) is not None:
        return
    if any(type(weight).__module__.startswith("torchao") for weight in model.parameters()):
        raise ValueError(
            "this model's Linear layers were made int8 in memory (roformer_hf.int8_serving.quantize_int8), which "
            "save_pretrained cannot write: save the float32 model, or load it with "
            "roformer_hf.int8_serving.load_int8(path) (transformers' TorchAoConfig), whose int8 model saves and reloads."
        )
    if any(type(module).__module__.startswith("torch.ao.nn.quantized") for module in model.modules()):
        # int8_serving's fallback without torchao, load_int8's too: naming load_int8 would send the user in a circle
        raise ValueError(
            "this model's Linear layers were made int8 by torch's quantize_dynamic (roformer_hf.int8_serving's route "
            "where torchao is not installed), which save_pretrained cannot write: save the float32 model and quantize "
            "it where it is served, or install torchao (pip install 'roformer_hf[int8]') and load it with "
            "roformer_hf.int8_serving.load_int8(path), whose int8 model saves and reloads."
        )


def copy_recipe_pipeline_code(save_directory: str | os.PathLike, loaded_from: str | os.PathLike = "") -> None:
    """Copy the code of the text-classification pipeline that the saved `custom_pipelines` names (see
    `configuration.RECIPE_PIPELINE`) beside the model's: `trust_remote_code=True` loads it from there. The file sits
    beside this one in roformer_hf. In a checkpoint's code (remote code) it does only once that pipeline was loaded,
    so it is taken from the checkpoint the model was loaded from, `loaded_from` (a folder or a Hub repository)."""
    for name in RECIPE_PIPELINE_FILES:
        source = Path(__file__).with_name(name)
        if not source.is_file() and loaded_from:
            source = checkpoint_file(loaded_from, name, {})
        target = Path(save_directory) / name
        if source is None or not source.is_file():
            warnings.warn(
                f"{target} is not written: neither roformer_hf nor the checkpoint this model was loaded from "
                f"({loaded_from or 'none'}) has it, so pipeline(..., trust_remote_code=True) cannot read this "
                "classifier's documents as it was fine-tuned; save it where roformer_hf is installed",
                stacklevel=3,
            )
        elif not target.exists() or not target.samefile(source):  # saved into the folder it was loaded from
            shutil.copyfile(source, target)


def roformer_hf_module(name: str) -> ModuleType | None:
    """The module `roformer_hf.<name>`, or None where roformer_hf is not installed (a checkpoint's own code, loaded
    with `trust_remote_code=True`). Imported by name so that transformers neither copies it into checkpoints nor
    requires it: it follows `from .x import` lines and checks that every package imported plainly is installed."""
    try:
        return importlib.import_module(f"roformer_hf.{name}")
    except ModuleNotFoundError as error:
        if error.name is None or error.name.split(".")[0] != "roformer_hf":
            raise
        return None


def checkpoint_file(pretrained_model_name_or_path: str | os.PathLike, name: str, hub_kwargs: dict) -> Path | None:
    """The local path of a checkpoint's file (downloaded into the Hub cache as `from_pretrained` would), or None
    where there is none; transformers then reports any problem with the checkpoint itself."""
    folder = Path(pretrained_model_name_or_path, hub_kwargs.get("subfolder") or "")
    if folder.is_dir():
        return folder / name if (folder / name).is_file() else None
    if os.path.exists(pretrained_model_name_or_path):  # a single file: no config.json beside it to read
        return None
    try:
        return Path(hf_hub_download(str(pretrained_model_name_or_path), name, **hub_kwargs))
    except (OSError, ValueError, EntryNotFoundError):  # no such repository or file, offline without it, bad id
        return None


def check_floating_weights(pretrained_model_name_or_path: str | os.PathLike, kwargs: dict) -> None:
    """Raises a ValueError where a checkpoint's safetensors weights hold integer tensors (every RoFormer weight is
    floating-point): transformers would load their values cast to float, e.g. weights of about 0.02 saved as integers
    load as zeros. A quantized checkpoint (its config's `quantization_config`) is left to its quantizer."""
    hub_kwargs = {name: kwargs[name] for name in HUB_ARGUMENTS if kwargs.get(name) is not None}
    config_file = checkpoint_file(pretrained_model_name_or_path, "config.json", hub_kwargs)
    if config_file is None or "quantization_config" in config_file.read_text(encoding="utf-8"):
        return
    weights_file = checkpoint_file(pretrained_model_name_or_path, "model.safetensors", hub_kwargs)
    if weights_file is None:  # sharded or pickled weights: transformers' own checks
        return
    with safe_open(weights_file, framework="pt") as weights:
        saved_names = weights.keys()
        parameters = [name for name in saved_names if name.endswith((".weight", ".bias"))]  # not buffers of ids
        dtypes = {name: weights.get_slice(name).get_dtype() for name in parameters}
    integer = sorted(f"{name} ({dtype})" for name, dtype in dtypes.items() if not dtype.startswith(("F", "BF")))
    if integer:
        raise ValueError(
            f"{weights_file} holds integer weights, which would load as their values cast to float: "
            f"{abbreviated(integer)}. Load the checkpoint these weights were saved from (a RoFormer's weights are "
            "floating-point), or save the model again with its float weights."
        )


class CheckpointMismatchError(ValueError, RuntimeError):
    """A checkpoint that does not fit the encoder as configured: a ValueError, as every refusal of a bad checkpoint
    here, and a RuntimeError, what transformers raises for weights of another shape without `ignore_mismatched_sizes`
    (so code written for either catches it)."""


def check_encoder_weights_loaded(
    model: PreTrainedModel, loading_info: dict, ignore_mismatched_sizes: bool = False
) -> None:
    """Raises a ValueError naming the likely cause when a checkpoint does not fill the encoder of `model` (missing or
    mismatched weights), or holds norm or bias weights that the config leaves out (RoFormer-V1 read as V2).

    Args:
        model (`RoFormerPreTrainedModel`): The model `from_pretrained` built.
        loading_info (`dict`): Its `output_loading_info` (missing, unexpected and mismatched keys).
        ignore_mismatched_sizes (`bool`): the caller asked for weights of another shape to be initialised anew (as
            transformers does, e.g. to change the vocabulary): those are then warned about, not refused.
    """
    config = model.config
    missing = sorted(name for name in loading_info["missing_keys"] if is_encoder_weight(model, name))
    unexpected = sorted(name for name in loading_info["unexpected_keys"] if is_encoder_weight(model, name))
    mismatched = sorted(item for item in loading_info["mismatched_keys"] if is_encoder_weight(model, item[0]))
    if mismatched and ignore_mismatched_sizes:
        shapes = [f"{name} {tuple(saved)} vs {tuple(built)}" for name, saved, built in mismatched]
        logger.warning(
            f"{type(model).__name__}: these weights have another shape in the checkpoint, so they are random, as "
            f"ignore_mismatched_sizes=True asks: {abbreviated(shapes)}. Fine-tune them before use."
        )
        mismatched = []
    absent_layers = sorted(int(found.group(1)) for name in missing if (found := ABSENT_LAYER.search(name)))
    missing_in_layers = [name for name in missing if not in_layers(name, absent_layers)]
    encoder_size = sum(is_encoder_weight(model, name) for name in model.state_dict())
    # A checkpoint without any encoder weight says nothing of the variant (no norm weights to miss).
    loaded_some = len(missing) < encoder_size
    needed = variant_settings_of_weights(config, missing_in_layers, unexpected) if loaded_some else {}
    if not (missing or mismatched or needed):
        return
    causes = mismatch_causes(config, needed, missing_in_layers, absent_layers, mismatched)
    raise CheckpointMismatchError(
        f"The checkpoint does not fit the encoder of {type(model).__name__} as configured, so some of its weights "
        f"would be random: {'; '.join(causes)}. Load it with the config saved with these weights, or fix these "
        "settings."
    )


def mismatch_causes(
    config: RoFormerConfig,
    needed: dict[str, object],
    missing_in_layers: list[str],
    absent_layers: list[int],
    mismatched: list[tuple],
) -> list[str]:
    """The likely causes of a checkpoint that does not fit the encoder, each a clause of
    `check_encoder_weights_loaded`'s error: the variant its weights say, the norm or weights it lacks, its number of
    layers, and the weights of another shape."""
    causes = []
    if needed:
        is_v2 = needed.get("norm_type") == "rms_norm" or needed.get("use_bias") is False
        settings = ", ".join(f"{name}={value!r}" for name, value in needed.items())
        causes.append(
            f"this looks like a {'RoFormer-V2' if is_v2 else 'RoFormer (V1)'} checkpoint: its config needs {settings}"
        )
    elif missing_in_layers and config.final_layer_norm and all(map(is_final_norm, missing_in_layers)):
        causes.append(
            f"the checkpoint has no norm after the last layer ({abbreviated(missing_in_layers)}), which "
            "final_layer_norm=True asks for (Zhouwenwang's layout): its config needs final_layer_norm=False, or the "
            "checkpoint lost its final norm"
        )
    elif missing_in_layers:
        causes.append(f"the checkpoint lacks {abbreviated(missing_in_layers)}")
    if absent_layers and absent_layers == list(range(absent_layers[0], config.num_hidden_layers)):
        causes.append(
            f"the checkpoint has {absent_layers[0]} layers but config.num_hidden_layers is {config.num_hidden_layers}"
        )
    elif absent_layers:
        causes.append(f"the checkpoint lacks the layers {', '.join(map(str, absent_layers))}")
    if mismatched:
        shapes = [f"{name} {tuple(saved)} vs {tuple(built)}" for name, saved, built in mismatched]
        causes.append(
            f"these weights have another shape in the checkpoint than in the config: {abbreviated(shapes)} (compare "
            "hidden_size, intermediate_size, embedding_size, vocab_size and type_vocab_size)"
        )
    return causes


def holds_no_weight_of(model: PreTrainedModel, loading_info: dict) -> bool:
    """Whether the checkpoint filled no weight of `model` at all: every one is in `missing_keys` (tied weights
    included). Not the case `check_encoder_weights_loaded` is for, a checkpoint that a config fails to describe, where
    a few random weights hide among many loaded ones; here the report lists everything. transformers' common test of
    the missing-keys report (test_model_weights_reload_no_missing_tied_weights) saves such a file and reads the report;
    a plain `from_pretrained` still refuses it."""
    return set(model.state_dict()) <= set(loading_info["missing_keys"])


def check_head_shapes(model: PreTrainedModel, loading_info: dict) -> None:
    """Raises transformers' error for head weights of another shape (the encoder's are `check_encoder_weights_loaded`'s
    concern), for a caller that did not pass `ignore_mismatched_sizes=True`."""
    mismatched = [item for item in loading_info["mismatched_keys"] if not is_encoder_weight(model, item[0])]
    if mismatched:
        shapes = ", ".join(f"{name} {tuple(saved)} vs {tuple(built)}" for name, saved, built in sorted(mismatched))
        raise RuntimeError(
            f"Error(s) in loading state_dict for {type(model).__name__}: size mismatch (in the checkpoint vs in the "
            f"model) for {shapes}. You may consider adding `ignore_mismatched_sizes=True` to `from_pretrained(...)` "
            "to initialise these weights afresh."
        )


def is_encoder_weight(model: PreTrainedModel, name: str) -> bool:
    """Whether the parameter `name` (of `model` or of the checkpoint) belongs to the encoder, pooler excluded."""
    prefix = f"{model.base_model_prefix}."
    if model.base_model is not model and not name.startswith(prefix):  # a head: the encoder is under "roformer."
        return False
    name = name.removeprefix(prefix)  # a bare model reports unexpected keys with the checkpoint's prefix
    return name.startswith(("embeddings.", "embeddings_project.", "encoder."))


def in_layers(name: str, layers: list[int]) -> bool:
    return any(f"encoder.layer.{index}." in name for index in layers)


def variant_settings_of_weights(config: RoFormerConfig, missing: list[str], unexpected: list[str]) -> dict:
    """The `norm_type` / `use_bias` that the encoder weights call for, where they differ from `config`."""

    def is_norm(name: str) -> bool:
        return ".LayerNorm." in name

    def is_linear_bias(name: str) -> bool:  # the projection of the embeddings keeps its bias in V2
        return (
            name.endswith(".bias")
            and not is_norm(name)
            and not is_final_norm(name)
            and "embeddings_project" not in name
        )

    needed = {}
    if config.norm_type == "layer_norm" and any(map(is_norm, missing)):
        needed["norm_type"] = "rms_norm"
    if config.norm_type == "rms_norm" and any(map(is_norm, unexpected)):
        needed["norm_type"] = "layer_norm"
    if config.use_bias and any(map(is_linear_bias, missing)):
        needed["use_bias"] = False
    if not config.use_bias and any(map(is_linear_bias, unexpected)):
        needed["use_bias"] = True
    return needed


def is_final_norm(name: str) -> bool:
    """Whether `name` is a weight of the norm after the last layer (`final_layer_norm`: Zhouwenwang's layout)."""
    return ".final_norm." in f".{name}"


def abbreviated(names: list[str], shown: int = 4) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


# --- Input checks ----------------------------------------------------------------------------------------------------
# A mistake in what a user passes raises a ValueError naming it and the fix, where torch would raise an IndexError from
# inside an embedding or a device-side assert. Shape checks always run; checks of values read the tensor, so only on
# the CPU and outside compilation (`reads_values`).

# What `check_labels` tells to do, per kind of head.
TOKEN_LABELS_FIX = "labels are token ids of this model's vocabulary, from the same tokenizer as input_ids."
CLASS_LABELS_FIX = (
    "number the classes from 0 and give the model as many outputs as classes (num_labels=... in from_pretrained or "
    "the config)."
)
CHOICE_LABELS_FIX = "a label is the index of the right choice, below num_choices (input_ids.shape[1])."


def describe(value: object) -> str:
    """How an error message names what was passed: its type, or a tensor's dtype."""
    return f"a tensor of {value.dtype}" if isinstance(value, torch.Tensor) else f"a {type(value).__name__}"


def reads_values(tensor: torch.Tensor) -> bool:
    """Whether the value checks may read `tensor`: on the CPU (no device sync), outside `torch.compile` (no graph
    break), and not empty."""
    return tensor.device.type == "cpu" and not torch.compiler.is_compiling() and tensor.numel() > 0


def check_input_ids(input_ids: torch.Tensor, vocab_size: int) -> None:
    """Raises a ValueError naming the fix when `input_ids` cannot index the embedding table."""
    if not isinstance(input_ids, torch.Tensor) or input_ids.dtype not in (torch.long, torch.int):
        raise ValueError(
            f"input_ids must be a LongTensor of token ids, got {describe(input_ids)}: call the tokenizer with "
            "return_tensors='pt', or convert with torch.tensor(ids, dtype=torch.long)."
        )
    if input_ids.dim() != 2:
        raise ValueError(
            f"input_ids must have shape (batch_size, seq_len), got {tuple(input_ids.shape)}: add a batch dimension "
            "with input_ids[None] or use return_tensors='pt' in the tokenizer."
        )
    if not reads_values(input_ids):
        return  # an empty input: check_side_inputs names its shape
    smallest, largest = int(input_ids.min()), int(input_ids.max())
    if smallest < 0 or largest >= vocab_size:
        raise ValueError(
            f"input_ids hold ids from {smallest} to {largest}, but the model's vocabulary has ids 0 to "
            f"{vocab_size - 1}: use the tokenizer that belongs to this checkpoint, or call "
            "model.resize_token_embeddings(len(tokenizer)) after adding tokens."
        )


def check_side_inputs(
    config: RoFormerConfig,
    input_shape: tuple[int, int],
    past_len: int,
    attention_mask: torch.Tensor | None,
    token_type_ids: torch.Tensor | None,
    position_ids: torch.Tensor | None,
) -> None:
    """Raises a ValueError naming the fix when the input is empty or a side input does not fit its
    (batch_size, seq_len). Shape checks, and the range of `token_type_ids` where `reads_values` allows."""
    batch_size, seq_len = input_shape
    if batch_size == 0 or seq_len == 0:
        raise ValueError(
            f"The input has shape {input_shape} (batch_size, seq_len), but the model needs at least one sequence of at "
            "least one token: skip empty batches, and encode texts with the tokenizer, whose [CLS] and [SEP] keep "
            "every sequence non-empty."
        )
    for name, value in (("attention_mask", attention_mask), ("token_type_ids", token_type_ids),
                        ("position_ids", position_ids)):  # fmt: skip
        if value is not None and not isinstance(value, torch.Tensor):
            raise ValueError(f"{name} must be a tensor, got {describe(value)}: use return_tensors='pt'.")
    if attention_mask is not None:
        check_attention_mask(config, attention_mask, input_shape, past_len)
    if token_type_ids is not None:
        check_token_type_ids(token_type_ids, input_shape, config.type_vocab_size)
    shape = None if position_ids is None else tuple(position_ids.shape)
    # One row of positions (batch size 1) may serve the whole batch.
    if shape is not None and (len(shape) not in (2, 3) or shape[0] not in (1, batch_size) or shape[1] != seq_len):
        raise ValueError(
            f"position_ids has shape {shape} but the input has shape {input_shape}: pass "
            f"({batch_size}, {seq_len}) positions (or (1, {seq_len}) for every sequence), or ({batch_size}, {seq_len}, "
            "2) for 2-D positions."
        )


def check_token_type_ids(token_type_ids: torch.Tensor, input_shape: tuple[int, int], type_vocab_size: int) -> None:
    """Raises a ValueError naming the fix when `token_type_ids` do not fit the input or the token-type table."""
    if tuple(token_type_ids.shape) != input_shape:
        raise ValueError(
            f"token_type_ids has shape {tuple(token_type_ids.shape)} but the input has shape {input_shape}: "
            "pass one segment id per token."
        )
    if not reads_values(token_type_ids):
        return
    smallest, largest = int(token_type_ids.min()), int(token_type_ids.max())
    if smallest < 0 or largest >= type_vocab_size:
        raise ValueError(
            f"token_type_ids must be in [0, {type_vocab_size}) (config.type_vocab_size), got values from "
            f"{smallest} to {largest}."
        )


def check_attention_mask(
    config: RoFormerConfig, attention_mask: torch.Tensor, input_shape: tuple[int, int], past_len: int
) -> None:
    """Raises a ValueError naming the fix when `attention_mask` does not fit the input (shapes only)."""
    batch_size, seq_len = input_shape
    key_len = past_len + seq_len
    if attention_mask.dim() == 2:
        if tuple(attention_mask.shape) != (batch_size, key_len):
            raise ValueError(
                f"attention_mask has shape {tuple(attention_mask.shape)} but the input has shape {input_shape}"
                + (f" after {past_len} cached tokens" if past_len else "")
                + f": pass a mask of shape ({batch_size}, {key_len}), 1 for tokens and 0 for padding."
            )
        return
    if attention_mask.dim() != 4:
        raise ValueError(
            f"attention_mask must have shape (batch_size, seq_len) (or be a prepared 4-D mask), got "
            f"{tuple(attention_mask.shape)}."
        )
    if config.attention_type == "linear":
        raise ValueError(
            "Linear attention excludes padding through a (batch_size, seq_len) attention_mask of 1 for tokens and "
            f"0 for padding; it cannot use a prepared 4-D mask of shape {tuple(attention_mask.shape)}."
        )
    # (batch, heads, queries, keys); every size but the keys' may be 1 and broadcast.
    allowed = ((1, batch_size), (1, config.num_attention_heads), (1, seq_len), (key_len,))
    if any(size not in sizes for size, sizes in zip(attention_mask.shape, allowed, strict=True)):
        raise ValueError(
            f"The 4-D attention_mask has shape {tuple(attention_mask.shape)}, but this input needs "
            f"({batch_size}, 1, {seq_len}, {key_len}) (batch_size, 1, seq_len, "
            + ("cached + new tokens" if past_len else "seq_len")
            + "; sizes other than the last may be 1): pass a mask of that shape, or a (batch_size, seq_len) mask of "
            "1 for tokens and 0 for padding."
        )


def check_labels(labels: torch.Tensor, num_classes: int, fix: str) -> None:
    """Raises a ValueError naming `fix` when class-id `labels` are not in [0, num_classes) or -100 (ignored by the
    loss), where torch would raise an IndexError. The range is checked where `reads_values` allows."""
    if not isinstance(labels, torch.Tensor) or labels.is_floating_point() or labels.dtype == torch.bool:
        raise ValueError(
            f"labels must be a LongTensor of class ids, got {describe(labels)}: convert them with "
            "torch.tensor(labels, dtype=torch.long)."
        )
    if not reads_values(labels):
        return
    outside = (labels >= num_classes) | ((labels < 0) & (labels != -100))
    if outside.any():
        raise ValueError(
            f"labels must be in [0, {num_classes}) or -100 (left out of the loss), got {int(labels[outside][0])}: "
            f"{fix}"
        )


def check_multiple_choice_input(choices: object) -> None:
    """Raises a ValueError naming the shape RoFormerForMultipleChoice needs when `choices` (its `input_ids`, or
    `inputs_embeds`) lack the choice dimension."""
    if not isinstance(choices, torch.Tensor) or choices.dim() < 3:
        shape = tuple(choices.shape) if isinstance(choices, torch.Tensor) else describe(choices)
        raise ValueError(
            f"RoFormerForMultipleChoice takes input_ids of shape (batch_size, num_choices, seq_len), got {shape}: "
            "encode each (context, choice) pair with return_tensors='pt' and stack the choices of a question."
        )


# --- The bare model --------------------------------------------------------------------------------------------------


class RoFormerModel(RoFormerPreTrainedModel):
    r"""
    The bare RoFormer encoder (or decoder, with `config.is_decoder`), and optionally its pooler.

    Args:
        config ([`RoFormerConfig`]): The model configuration.
        add_pooling_layer (`bool`, *optional*):
            Whether to add the pooler (`pooler_output`); `None` reads `config.add_pooling_layer`.
    """

    def __init__(self, config: RoFormerConfig, add_pooling_layer: bool | None = None):
        super().__init__(config)
        self.embeddings = RoFormerEmbeddings(config)
        if config.embedding_size != config.hidden_size:
            self.embeddings_project = nn.Linear(config.embedding_size, config.hidden_size)
        self.rotary_emb = RoFormerRotaryEmbedding(config)
        self.encoder = RoFormerEncoder(config)
        add_pooling_layer = config.add_pooling_layer if add_pooling_layer is None else add_pooling_layer
        self.pooler = RoFormerPooler(config) if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embeddings.word_embeddings = value

    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        cache: Cache | None = None,
        use_cache: bool | None = None,
        last_layer_positions: slice | None = None,
        past_key_values: Cache | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutputWithPoolingAndCrossAttentions:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, seq_len)`):
                Token ids in `[0, vocab_size)`; empty or non-integer inputs raise a `ValueError`.
            attention_mask (`torch.Tensor` of shape `(batch_size, past_len + seq_len)`, *optional*):
                1 for tokens, 0 for padding; or a prepared 4-D mask `(batch_size, 1, seq_len, past_len + seq_len)`.
            token_type_ids (`torch.LongTensor` of shape `(batch_size, seq_len)`, *optional*):
                Segment ids (missing means all 0); for a UniLM decoder also what each token attends to.
            position_ids (`torch.LongTensor` of shape `(batch_size, seq_len)` or `(batch_size, seq_len, 2)`, *optional*):
                Any integers (only differences matter), or (x, y) pairs for 2-D RoPE; missing means `past_len, ...`.
            inputs_embeds (`torch.Tensor` of shape `(batch_size, seq_len, embedding_size)`, *optional*): For `input_ids`.
            cache ([`~cache_utils.Cache`], *optional*):
                Keys and values of earlier tokens (decoder only); `past_key_values` before transformers 5.24.
            use_cache (`bool`, *optional*):
                Whether a decoder returns its cache; defaults to `config.use_cache` for a decoder, `False` otherwise
                and while training with gradient checkpointing (whose replayed layers would add their keys again).
            last_layer_positions (`slice`, *optional*):
                The positions whose last hidden states are needed (`slice(0, 1)`: [CLS]); the last layer computes
                only those where `_last_layer_positions` allows it (Mosaic BERT's trick).
            kwargs ([`~utils.TransformersKwargs`]):
                `output_hidden_states`, `output_attentions`, `return_dict`, and what the attention backend takes.
        """
        inputs_embeds = self._embed(input_ids, inputs_embeds)
        batch_size, seq_len = inputs_embeds.shape[:2]
        cache, use_cache = self._cache(cache, past_key_values, use_cache)
        past_len = cache.get_seq_length() if cache is not None else 0
        check_side_inputs(self.config, (batch_size, seq_len), past_len, attention_mask, token_type_ids, position_ids)
        if position_ids is None:
            position_ids = torch.arange(past_len, past_len + seq_len, device=inputs_embeds.device).unsqueeze(0)
        hidden_states = self.embeddings(inputs_embeds, token_type_ids)
        if self.config.embedding_size != self.config.hidden_size:
            hidden_states = self.embeddings_project(hidden_states)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)  # (cos, sin), once for all layers
        last_hidden_state = self.encoder(
            hidden_states,
            last_layer_positions=self._last_layer_positions(last_layer_positions, seq_len, kwargs),
            position_embeddings=position_embeddings,
            rotation=rotation_of(*position_embeddings),  # and the rotation every layer applies, once too
            attention_mask=layer_attention_mask(self.config, attention_mask, hidden_states, cache, token_type_ids),
            cache=cache,
            **kwargs,
        )
        return BaseModelOutputWithPoolingAndCrossAttentions(
            last_hidden_state=last_hidden_state,
            pooler_output=self.pooler(last_hidden_state) if self.pooler is not None else None,
            **cache_argument(cache if use_cache else None),
        )

    def _embed(self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None) -> torch.Tensor:
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of input_ids and inputs_embeds.")
        if inputs_embeds is not None:
            return inputs_embeds
        check_input_ids(input_ids, self.embeddings.word_embeddings.num_embeddings)
        return self.embeddings.word_embeddings(input_ids)

    def _cache(
        self, cache: Cache | None, past_key_values: Cache | None, use_cache: bool | None
    ) -> tuple[Cache | None, bool]:
        """The cache the layers use (given under either name, or a new one) and whether the output returns it."""
        cache = given_cache(cache, past_key_values)
        replays_layers = self.encoder.layer[0].gradient_checkpointing and self.training and torch.is_grad_enabled()
        if not self.config.is_decoder or replays_layers:
            return cache, False
        if self.config.attention_type == "linear" and cache is not None:
            raise ValueError(
                "RoFormer with linear attention keeps no key/value cache: call the model (or generate) with "
                "use_cache=False."
            )
        use_cache = self.config.attention_type != "linear" and (
            self.config.use_cache if use_cache is None else use_cache
        )
        return (DynamicCache(config=self.config) if use_cache and cache is None else cache), use_cache

    def _last_layer_positions(self, positions: slice | None, seq_len: int, kwargs: dict) -> slice | None:
        """`positions`, where the last layer may compute only those: not for decoders, linear attention, backends
        other than "sdpa" and "eager", when `capture_outputs` records every layer's outputs (`output_hidden_states` or
        `output_attentions`, from the call or else the config), nor with a pooler unless they start at 0."""
        records_outputs = any(
            kwargs.get(flag, getattr(self.config, flag)) for flag in ("output_hidden_states", "output_attentions")
        )
        allowed = (
            positions is not None
            and not records_outputs
            and not self.config.is_decoder
            and self.config.attention_type == "softmax"
            and self.config._attn_implementation in ("sdpa", "eager")
            and (self.pooler is None or starts_at_first_position(positions, seq_len))  # the pooler reads position 0
        )
        return positions if allowed else None


def starts_at_first_position(positions: slice, seq_len: int) -> bool:
    """Whether the first position `positions` selects from `seq_len` tokens is position 0, read from the slice alone
    where it can be, so that `torch.export` keeps the length symbolic (`range(seq_len)` would fix it)."""
    step = 1 if positions.step is None else positions.step
    start = 0 if positions.start is None else positions.start
    if step > 0 and start == 0 and (positions.stop is None or positions.stop > 0):
        return seq_len > 0
    if step > 0 and start > 0:
        return False  # starts after position 0, or selects nothing
    return range(seq_len)[positions][:1] == range(1)


def recorded_outputs(outputs: ModelOutput) -> dict[str, tuple[torch.Tensor, ...] | None]:
    """The encoder's `hidden_states` and `attentions` (recorded when asked for), which every head passes on."""
    return {"hidden_states": outputs.hidden_states, "attentions": outputs.attentions}


class RoFormerHeadModel(RoFormerPreTrainedModel):
    """A task head on the encoder (`self.roformer`): `forward` encodes and hands the output and `labels` to the head's
    `head_output`; heads with other targets, inputs or a cache write their own `forward` around `encode`."""

    # The loss is a per-batch mean: the Trainer must scale it for gradient accumulation itself.
    accepts_loss_kwargs = False
    # The positions the head reads (`last_layer_positions` of `RoFormerModel.forward`); None: all of them.
    last_layer_positions: slice | None = None

    def __init__(self, config: RoFormerConfig):
        super().__init__(config)
        self.roformer = RoFormerModel(config)

    def encode(self, *inputs: torch.Tensor | None, **kwargs) -> BaseModelOutputWithPoolingAndCrossAttentions:
        """`self.roformer(*inputs, **kwargs)` with `return_dict=True`: the inputs are `RoFormerModel.forward`'s."""
        return self.roformer(*inputs, return_dict=True, **kwargs)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> ModelOutput:
        r"""
        Args:
            labels (`torch.Tensor`, *optional*): The head's targets (see its class); no loss without them.

        The other arguments are those of [`RoFormerModel.forward`].
        """
        if self.last_layer_positions is not None:
            kwargs["last_layer_positions"] = self.last_layer_positions
        outputs = self.encode(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, **kwargs)
        return self.head_output(outputs, labels, **kwargs)


# --- Language-model heads --------------------------------------------------------------------------------------------


class RoFormerPredictionHeadTransform(nn.Module):
    """dense -> activation -> LayerNorm, mapping hidden states to the width of the word embeddings."""

    def __init__(self, config: RoFormerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.embedding_size)
        self.transform_act_fn = ACT2FN[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.transform_act_fn(self.dense(hidden_states)))


class RoFormerLMPredictionHead(nn.Module):
    """Scores over the vocabulary; `decoder.weight` is tied to the word embeddings and `decoder.bias` to `bias`.
    RoFormer-V2's head (`norm_type="rms_norm"`) is the tied decoder alone: no transform, no bias."""

    def __init__(self, config: RoFormerConfig):
        super().__init__()
        is_v2 = config.norm_type == "rms_norm"
        if is_v2 and config.embedding_size != config.hidden_size:
            raise ValueError(
                f"RoFormer-V2's MLM head is the tied decoder alone, so it reads hidden states as word embeddings: "
                f"embedding_size ({config.embedding_size}) must equal hidden_size ({config.hidden_size})."
            )
        self.transform = nn.Identity() if is_v2 else RoFormerPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.embedding_size, config.vocab_size, bias=not is_v2)
        self.bias = None if is_v2 else nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.transform(hidden_states))


class RoFormerOnlyMLMHead(nn.Module):
    def __init__(self, config: RoFormerConfig):
        super().__init__()
        self.predictions = RoFormerLMPredictionHead(config)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.predictions(hidden_states)


class RoFormerLMHeadMixin:
    """The LM head (`cls`) of the masked and causal LMs, whose decoder shares the word embeddings."""

    # The loss is transformers' loss_function, which divides by the Trainer's num_items_in_batch.
    accepts_loss_kwargs = True

    def add_lm_head(self, config: RoFormerConfig) -> None:
        self.cls = RoFormerOnlyMLMHead(config)
        # The decoder shares the word embeddings, and its bias (none in V2) the head's `bias` (the checkpoint's name).
        self._tied_weights_keys = {"cls.predictions.decoder.weight": "roformer.embeddings.word_embeddings.weight"}
        if config.norm_type == "layer_norm":
            self._tied_weights_keys["cls.predictions.decoder.bias"] = "cls.predictions.bias"

    def get_output_embeddings(self) -> nn.Linear:
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings: nn.Linear) -> None:
        self.cls.predictions.decoder = new_embeddings
        self.cls.predictions.bias = new_embeddings.bias

    def lm_loss(self, logits: torch.Tensor, labels: torch.Tensor, **kwargs) -> torch.Tensor:
        check_labels(labels, logits.shape[-1], TOKEN_LABELS_FIX)
        return self.loss_function(logits=logits, labels=labels, vocab_size=logits.shape[-1], **kwargs)


# Sparse MLM prediction in a fixed number of slots: the head scores a number of tokens that depends only on the
# batch's shape (its worst case at the masking rate), not on how many tokens the masking chose, so that
# `torch.compile` and CUDA graphs see one shape per batch shape. The masking collator keeps the chosen tokens within
# the slots; the slots it leaves empty hold ignored positions (label -100), which the loss skips.
# Slot counts are rounded up to a multiple of this (tensor cores' tile; also fewer distinct shapes).
SLOT_MULTIPLE = 8
# Headroom above the expected number of chosen tokens, in standard deviations of that number (binomial over tokens):
# whole words are chosen together, which widens the spread about 1.5 times, so this is about 4 of the words'.
SLOT_HEADROOM_STDS = 6.0


def slot_count(tokens: int, rate: float) -> int:
    """
    The number of prediction slots for a batch of `tokens` token positions masked at `rate`: the expected number of
    chosen tokens plus `SLOT_HEADROOM_STDS` standard deviations, rounded up to a multiple of `SLOT_MULTIPLE`, at most
    `tokens`. 32 x 512 tokens at 0.15: 2,736 slots (2,458 expected).

    Args:
        tokens (`int`): positions of the batch (rows x length, padding included).
        rate (`float`): the masking rate (run_mlm.py's `--mlm_probability`).
    """
    expected = rate * tokens
    spread = math.sqrt(tokens * rate * (1.0 - rate))
    slots = math.ceil((expected + SLOT_HEADROOM_STDS * spread) / SLOT_MULTIPLE) * SLOT_MULTIPLE
    return min(tokens, slots)


def labelled_tokens(
    hidden_states: torch.Tensor, labels: torch.Tensor, slot_rate: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """
    The hidden states and labels of the tokens the MLM head scores. Without `slot_rate`: the labelled tokens, `(N, H)`
    and `(N,)`, N read from the labels (a shape `torch.compile` cannot know). With it: `slot_count(B x T, slot_rate)`
    slots, the labelled tokens first in the order of `labels[labels != -100]`, then ignored positions (label -100);
    the caller keeps the labelled tokens within the slots (`WholeWordMaskCollator`'s `prediction_slot_rate`).
    """
    if slot_rate is None:
        labelled = labels != -100
        return hidden_states[labelled], labels[labelled]
    flat_labels = labels.flatten()
    # a stable sort of "is ignored" puts the labelled positions first, in order, without reading their number
    order = (flat_labels == -100).to(torch.int32).argsort(stable=True)[: slot_count(flat_labels.numel(), slot_rate)]
    return hidden_states.flatten(0, 1)[order], flat_labels[order]


class RoFormerForMaskedLM(RoFormerLMHeadMixin, RoFormerHeadModel):
    r"""
    RoFormer with the masked-language-modelling head (`cls.predictions`). `labels`: the original id at masked
    positions, -100 elsewhere. With `config.sparse_prediction` only labelled positions are scored (logits `(N,
    vocab_size)`, a number `torch.compile` cannot know: `fullgraph=True` needs dense prediction); a setting of the
    training run, which `save_pretrained` leaves out, so a loaded model scores every position.

    Args:
        config ([`RoFormerConfig`]): The model configuration; `is_decoder` must be False.
    """

    def __init__(self, config: RoFormerConfig):
        super().__init__(config)
        if config.is_decoder:
            raise ValueError("RoFormerForMaskedLM attends in both directions: set config.is_decoder=False.")
        self.add_lm_head(config)
        self.post_init()

    def head_output(self, outputs: ModelOutput, labels: torch.Tensor | None, **kwargs) -> MaskedLMOutput:
        hidden_states = outputs.last_hidden_state  # (B, T, H)
        if labels is not None and self.config.sparse_prediction:
            hidden_states, labels = labelled_tokens(hidden_states, labels, self.config.prediction_slot_rate)
        logits = self.cls(hidden_states)  # (B, T, vocab_size), or (N, vocab_size) with sparse prediction
        loss = self.lm_loss(logits, labels, **kwargs) if labels is not None else None
        return MaskedLMOutput(loss=loss, logits=logits, **recorded_outputs(outputs))


@dataclass
class RoFormerCausalLMOutput(CausalLMOutputWithPast):
    """[`~modeling_outputs.CausalLMOutputWithPast`] and `pooler_output`, `(batch_size, hidden_size)`: the pooled first
    token, RoFormer-Sim's sentence vector."""

    pooler_output: torch.FloatTensor | None = None


class RoFormerForCausalLM(RoFormerLMHeadMixin, RoFormerHeadModel, GenerationMixin):
    r"""
    RoFormer as a left-to-right language model with a key/value cache for `generate`. RoFormer-Sim attends as a UniLM
    (`decoder_mask="unilm"`: type-0 tokens read each other both ways, generated ones have type 1) and has a pooler
    (its sentence vector); other causal LMs have one only with `config.add_pooling_layer` (it would get no gradient).

    Args:
        config ([`RoFormerConfig`]): The model configuration. With `is_decoder=False` the model attends in both
            directions and keeps no cache, as transformers' RoFormerForCausalLM does, with a warning.
    """

    def __init__(self, config: RoFormerConfig):
        is_sim = config.decoder_mask == "unilm" and config.encoder_mask == "bidirectional"  # not Zhouwenwang
        if is_sim and not config.add_pooling_layer:
            # RoFormer-Sim's published configs do not say it has a pooler: its own copy of the config does (saved, so
            # AutoModel keeps the pooler).
            config = copy.deepcopy(config)
            config.add_pooling_layer = True
        super().__init__(config)
        if not config.is_decoder:
            logger.warning(
                "RoFormerForCausalLM with config.is_decoder=False attends in both directions (every token sees the "
                "ones after it): add is_decoder=True to the config (or to from_pretrained) to use it as a standalone "
                "causal LM."
            )
        self.add_lm_head(config)
        self.post_init()

    def generate(self, inputs: torch.Tensor | None = None, *args, **kwargs):
        """As transformers' `generate`; a UniLM decoder's prompt has token type 0 unless `token_type_ids` are given."""
        if self.config.decoder_mask == "unilm" and kwargs.get("token_type_ids") is None:
            prompt = inputs if inputs is not None else kwargs.get("input_ids", kwargs.get("inputs_embeds"))
            if prompt is not None:
                kwargs["token_type_ids"] = torch.zeros(prompt.shape[:2], dtype=torch.long, device=prompt.device)
        return super().generate(inputs, *args, **kwargs)

    def _update_model_kwargs_for_generation(self, outputs, model_kwargs: dict, *args, **kwargs) -> dict:
        """GenerationMixin's hook after every step: a UniLM decoder's new tokens get type 1, not the last type."""
        token_type_ids = model_kwargs.get("token_type_ids")
        model_kwargs = super()._update_model_kwargs_for_generation(outputs, model_kwargs, *args, **kwargs)
        if self.config.decoder_mask == "unilm" and token_type_ids is not None:
            num_new_tokens = model_kwargs["token_type_ids"].shape[-1] - token_type_ids.shape[-1]
            model_kwargs["token_type_ids"] = F.pad(token_type_ids, (0, num_new_tokens), value=1)
        return model_kwargs

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        cache: Cache | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        past_key_values: Cache | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> RoFormerCausalLMOutput:
        r"""
        Args:
            labels (`torch.LongTensor` of shape `(batch_size, seq_len)`, *optional*):
                Usually the `input_ids` themselves (shifted inside the loss); -100 is ignored.
            logits_to_keep (`int` or `torch.Tensor`, *optional*):
                Compute logits only for the last `logits_to_keep` positions (0 means all), as `generate` does.

        The other arguments are those of [`RoFormerModel.forward`].
        """
        cache = given_cache(cache, past_key_values)
        inputs = (input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)
        outputs = self.encode(*inputs, cache=cache, use_cache=use_cache, **kwargs)
        keep = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
        logits = self.cls(outputs.last_hidden_state[:, keep])
        return RoFormerCausalLMOutput(
            loss=self.lm_loss(logits, labels, **kwargs) if labels is not None else None,
            logits=logits,
            **cache_argument(cache_of(outputs)),
            **recorded_outputs(outputs),
            pooler_output=outputs.pooler_output,
        )


# --- Classification, tagging, question answering, multiple choice ----------------------------------------------------
# Each head's loss beside it, after the label checks; no loss reads a value back to the host, so under `torch.compile`
# a training forward with its loss is one graph.


def check_multi_hot_labels(labels: torch.Tensor, logits: torch.Tensor) -> None:
    """Multi-label targets are one 0/1 value per class: refuse another shape, e.g. class ids given as floats."""
    if labels.shape != logits.shape:
        raise ValueError(
            f"multi-label classification needs labels of shape {tuple(logits.shape)} (batch_size, num_labels), one "
            f"0/1 value per class, got {tuple(labels.shape)}: for one class per example give the class ids as "
            "integers (torch.long), which makes the task single-label."
        )


def sequence_classification_loss(config: RoFormerConfig, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The loss of `config.problem_type`: "regression" (mean squared error), "single_label_classification"
    (cross-entropy) or "multi_label_classification" (binary cross-entropy with logits). Unset, it is inferred as
    transformers does and stored in the config once the labels gave a loss (not under `torch.compile`, whose graph
    would be recompiled for the changed config)."""
    num_labels = logits.shape[-1]
    problem_type = config.problem_type
    if problem_type is None:
        if num_labels == 1:
            problem_type = "regression"
        elif labels.dtype in (torch.long, torch.int):
            problem_type = "single_label_classification"
        else:
            problem_type = "multi_label_classification"
    labels = labels.to(logits.device)
    if problem_type == "regression":
        predictions, targets = (logits.squeeze(-1), labels.squeeze(-1)) if num_labels == 1 else (logits, labels)
        loss = F.mse_loss(predictions, targets.to(logits.dtype))
    elif problem_type == "single_label_classification":
        check_labels(labels, num_labels, CLASS_LABELS_FIX)
        loss = F.cross_entropy(logits.view(-1, num_labels), labels.view(-1))
    else:
        check_multi_hot_labels(labels, logits)
        loss = F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
    if not torch.compiler.is_compiling():  # a compiled graph would be recompiled for the changed config
        config.problem_type = problem_type
    return loss


class RoFormerClassificationHead(nn.Module):
    """On the [CLS] (first) token: dropout -> dense -> activation -> dropout -> out_proj."""

    def __init__(self, config: RoFormerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = ACT2FN[config.hidden_act]
        self.dropout = RoFormerDropout(config.hidden_dropout_prob)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        cls_state = self.dropout(hidden_states[:, 0])  # (B, hidden_size)
        return self.out_proj(self.dropout(self.activation(self.dense(cls_state))))


class RoFormerForSequenceClassification(RoFormerHeadModel):
    r"""
    RoFormer with a classification (or regression) head on the first token. `labels`: class ids, multi-hot floats
    (multi-label) or target values (regression); the loss follows `config.problem_type`.

    Args:
        config ([`RoFormerConfig`]): The model configuration; `num_labels` sets the number of outputs.
    """

    last_layer_positions = slice(0, 1)  # the head reads the [CLS] token only

    def __init__(self, config: RoFormerConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.classifier = RoFormerClassificationHead(config)
        self.post_init()

    def head_output(self, outputs: ModelOutput, labels: torch.Tensor | None, **kwargs) -> SequenceClassifierOutput:
        logits = self.classifier(outputs.last_hidden_state)  # (B, num_labels)
        loss = sequence_classification_loss(self.config, logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits, **recorded_outputs(outputs))


def token_classification_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over every token's tag, `logits` `(B, T, num_labels)`; labels of -100 are left out."""
    num_labels = logits.shape[-1]
    check_labels(labels, num_labels, CLASS_LABELS_FIX)
    return F.cross_entropy(logits.view(-1, num_labels), labels.view(-1).to(logits.device))


class RoFormerForTokenClassification(RoFormerHeadModel):
    r"""
    RoFormer with a linear layer on every token (tagging). `labels`: the tag id of every token, -100 to leave it out.

    Args:
        config ([`RoFormerConfig`]): The model configuration; `num_labels` sets the number of tags.
    """

    def __init__(self, config: RoFormerConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.dropout = RoFormerDropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def head_output(self, outputs: ModelOutput, labels: torch.Tensor | None, **kwargs) -> TokenClassifierOutput:
        logits = self.classifier(self.dropout(outputs.last_hidden_state))  # (B, T, num_labels)
        loss = token_classification_loss(logits, labels) if labels is not None else None
        return TokenClassifierOutput(loss=loss, logits=logits, **recorded_outputs(outputs))


def span_loss(
    start_logits: torch.Tensor, end_logits: torch.Tensor, start_positions: torch.Tensor, end_positions: torch.Tensor
) -> torch.Tensor:
    """The mean of the start and end cross-entropies of extractive question answering. A position past the end marks
    an answer cut off by truncation and is ignored, as in transformers."""
    ignored_index = start_logits.shape[1]
    start_positions = start_positions.view(-1).clamp(0, ignored_index).to(start_logits.device)
    end_positions = end_positions.view(-1).clamp(0, ignored_index).to(end_logits.device)
    start_loss = F.cross_entropy(start_logits, start_positions, ignore_index=ignored_index)
    end_loss = F.cross_entropy(end_logits, end_positions, ignore_index=ignored_index)
    return (start_loss + end_loss) / 2


class RoFormerForQuestionAnswering(RoFormerHeadModel):
    r"""
    RoFormer for extractive question answering: start and end scores for every token (`qa_outputs`).

    Args:
        config ([`RoFormerConfig`]): The model configuration (`num_labels` is 2: start and end).
    """

    def __init__(self, config: RoFormerConfig):
        config.num_labels = 2
        super().__init__(config)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        start_positions: torch.LongTensor | None = None,
        end_positions: torch.LongTensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> QuestionAnsweringModelOutput:
        r"""
        Args:
            start_positions, end_positions (`torch.LongTensor` of shape `(batch_size,)`, *optional*):
                Token index of the answer's first and last token; indices outside the input are ignored.

        The other arguments are those of [`RoFormerModel.forward`].
        """
        outputs = self.encode(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, **kwargs)
        start_logits, end_logits = self.qa_outputs(outputs.last_hidden_state).unbind(dim=-1)  # 2 x (B, T)
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = span_loss(start_logits, end_logits, start_positions, end_positions)
        return QuestionAnsweringModelOutput(
            loss=loss,
            start_logits=start_logits.contiguous(),
            end_logits=end_logits.contiguous(),
            **recorded_outputs(outputs),
        )


def multiple_choice_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the choices, `logits` `(B, num_choices)`, `labels` the index of the right one."""
    check_labels(labels, logits.shape[-1], CHOICE_LABELS_FIX)
    return F.cross_entropy(logits, labels.to(logits.device))


class RoFormerForMultipleChoice(RoFormerHeadModel):
    r"""
    RoFormer for multiple choice: every (context, choice) pair is encoded, summarised by the hidden state of its last
    token and scored by one linear layer. `config.multiple_choice_pooling`: `"last_token"` (default), the last token
    that is not padding; `"last_position"`, the last position even when it is padding, as in transformers' RoFormer.

    Args:
        config ([`RoFormerConfig`]): The model configuration.
    """

    def __init__(self, config: RoFormerConfig):
        super().__init__(config)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> MultipleChoiceModelOutput:
        r"""
        Args:
            input_ids, attention_mask, token_type_ids (`torch.Tensor` of shape `(batch_size, num_choices, seq_len)`):
                One row per choice; `position_ids` and `inputs_embeds` likewise carry the extra choice dimension.
            labels (`torch.LongTensor` of shape `(batch_size,)`, *optional*): The index of the right choice.
        """
        choices = input_ids if input_ids is not None else inputs_embeds  # (B, num_choices, T[, embedding_size])
        check_multiple_choice_input(choices)
        num_choices = choices.shape[1]
        input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds = (
            tensor.flatten(0, 1) if tensor is not None else None  # (B, num_choices, ...) -> (B * num_choices, ...)
            for tensor in (input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)
        )
        last_position = self.config.multiple_choice_pooling == "last_position"
        if last_position:
            kwargs["last_layer_positions"] = slice(-1, None)  # the head reads the last position only
        outputs = self.encode(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, **kwargs)
        hidden_states = outputs.last_hidden_state
        summary = hidden_states[:, -1] if last_position else last_token_states(hidden_states, attention_mask)
        logits = self.classifier(summary).view(-1, num_choices)  # (B, num_choices)
        loss = multiple_choice_loss(logits, labels) if labels is not None else None
        return MultipleChoiceModelOutput(loss=loss, logits=logits, **recorded_outputs(outputs))


def last_token_states(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """The hidden state of the last token of every sequence that is not padding (the last position without a mask)."""
    if attention_mask is None or attention_mask.dim() != 2:
        return hidden_states[:, -1]
    last_index = attention_mask.shape[1] - 1 - attention_mask.flip(-1).argmax(-1)  # last position holding a 1
    return hidden_states[torch.arange(hidden_states.shape[0], device=hidden_states.device), last_index]


__all__ = [
    "RoFormerForCausalLM",
    "RoFormerForMaskedLM",
    "RoFormerForMultipleChoice",
    "RoFormerForQuestionAnswering",
    "RoFormerForSequenceClassification",
    "RoFormerForTokenClassification",
    "RoFormerLayer",
    "RoFormerModel",
    "RoFormerPreTrainedModel",
]
