"""The attention masks of RoFormer's layers: bidirectional for the encoder, causal for a decoder, and UniLM's
sequence-to-sequence mask over token types for RoFormer-Sim (`config.decoder_mask="unilm"`) and for every head of
IDEA's Zhouwenwang (`config.encoder_mask="unilm"` too)."""

import torch
from transformers.cache_utils import Cache
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask

from .compat import cache_argument
from .configuration import RoFormerConfig


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
    """Raises a ValueError unless tokens fed after a cache start a new segment (type 1 first, as generated text).

    Under the UniLM mask, a cached token of segment s would have seen a later token of the same segment; the cache
    holds its keys and values computed without it, so such a continuation cannot match the whole text read at once.
    The types are read outside `torch.compile` only (a graph break).
    """
    missing = token_type_ids is None
    if missing or (not torch.compiler.is_compiling() and bool((token_type_ids[:, 0] == 0).any())):
        raise ValueError(
            "With decoder_mask='unilm', tokens fed after a cache must start a new segment: pass token_type_ids with "
            "1 for them (generate does so), or read the whole text again without a cache."
        )
