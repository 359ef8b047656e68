"""The RoFormer model family: a BERT encoder whose attention knows positions through rotations (RoPE).

What differs from BERT: no position embeddings (queries and keys are rotated by angles proportional to their
positions, computed once per forward by `rope.py`, so scores depend only on relative positions and no table caps the
length); pairs (2i, 2i + 1) rotate together, as in bert4keras and transformers' RoFormer, so checkpoints load without
permutation; optionally rotated values (`rotary_value`) and linear attention (`attention_kernels.py`). RoFormer-V2 is
`norm_type="rms_norm"`, `use_bias=False`, ReLU and an MLM head reduced to the tied decoder; RoFormer-Sim a
`RoFormerForCausalLM` with UniLM attention over token types (`decoder_mask="unilm"`) whose pooler gives sentence
vectors; IDEA's Zhouwenwang a pre-norm stack (`norm_position="pre"`, `final_layer_norm`, no embedding norm) that
attends as a UniLM in every head (`encoder_mask="unilm"`). Parameter names are those of transformers' RoFormer (its
sinusoid table, `embed_positions`, is left out).
"""

import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers import GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, DynamicCache
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
from transformers.modeling_utils import AttentionInterface
from transformers.processing_utils import Unpack
from transformers.utils import ModelOutput, TransformersKwargs, can_return_tuple, logging
from transformers.utils.output_capturing import capture_outputs

from .attention_kernels import blockwise_attention_forward, linear_attention_function, prefers_blockwise_attention
from .compat import cache_argument, cache_of, given_cache
from .configuration import RoFormerConfig
from .dropout import RoFormerDropout
from .input_checks import (
    TOKEN_LABELS_FIX,
    check_input_ids,
    check_labels,
    check_multiple_choice_input,
    check_side_inputs,
)
from .losses import (
    labelled_tokens,
    multiple_choice_loss,
    sequence_classification_loss,
    span_loss,
    token_classification_loss,
)
from .masks import layer_attention_mask
from .norms import embedding_norm, final_norm, post_norm, pre_norm
from .pretrained import RoFormerPretrainedMixin
from .rope import RoFormerRotaryEmbedding, rotate, rotation_at, rotation_of

logger = logging.get_logger(__name__)


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


class RoFormerAttentionFunctions(AttentionInterface):
    """transformers' attention functions by name (`config._attn_implementation`: "sdpa", "flash_attention_2", ...)
    and RoFormer's two (`attention_kernels.py`): "roformer_blockwise" and "roformer_linear", read from this module
    when asked for, so that replacing `blockwise_attention_forward` here replaces what runs."""

    def __getitem__(self, key: str) -> Callable:
        own = {"roformer_blockwise": blockwise_attention_forward, "roformer_linear": linear_attention_function}
        return own[key] if key in own else super().__getitem__(key)


ROFORMER_ATTENTION_FUNCTIONS = RoFormerAttentionFunctions()
LOGGED_ATTENTION_CHOICES: set[str] = set()  # `attention_function` logs each choice once per process


class RoFormerSelfAttention(nn.Module):
    """Multi-head self-attention with RoPE on queries and keys (and values if `config.rotary_value`), through one
    attention function that `attention_function` chooses: transformers' backends (`config._attn_implementation`), or
    RoFormer's own (`attention_kernels.py`): blockwise attention, which "sdpa" hands CPU training with dropout and bf16
    on a CPU that has bf16 instructions (`prefers_blockwise_attention`; docs/benchmarks.md), and linear attention."""

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
        (`rope.rotation_of`; made here when not given). `query_positions` (the encoder's last layer): the outputs to
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


class RoFormerPreTrainedModel(RoFormerPretrainedMixin, PreTrainedModel):
    """Weights and capabilities shared by every RoFormer class; loading, saving and upload: `RoFormerPretrainedMixin`."""

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

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, RoFormerLMPredictionHead) and module.bias is not None:
            init.zeros_(module.bias)


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
