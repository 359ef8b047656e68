"""Linear attention with RoPE: against a naive O(n^2) evaluation of the same formula, padding, and bad input."""

import pytest
import torch
from transformers import DynamicCache

from roformer_hf import RoFormerConfig
from roformer_hf.modeling import (
    RoFormerForCausalLM,
    RoFormerForMaskedLM,
    RoFormerModel,
    RoFormerRotaryEmbedding,
    apply_rotary,
    feature_map,
    linear_attention_forward,
)

BATCH, HEADS, HEAD_DIM = 2, 3, 16


def naive_linear_attention(query, key, value, cos, sin, attention_mask, is_causal):
    """o_i = sum_j [R_i phi(q_i)]^T [R_j phi(k_j)] v_j / sum_j phi(q_i)^T phi(k_j), written out as (T, T) matrices."""
    query_features, key_features = feature_map(query), feature_map(key)
    numerator_weights = apply_rotary(query_features, cos, sin) @ apply_rotary(key_features, cos, sin).transpose(-1, -2)
    denominator_weights = query_features @ key_features.transpose(-1, -2)  # (B, H, T, T)
    seq_len = query.shape[2]
    allowed = torch.ones(query.shape[0], 1, seq_len, seq_len, dtype=torch.bool)
    if attention_mask is not None:
        allowed = allowed & attention_mask[:, None, None, :].bool()
    if is_causal:
        allowed = allowed & torch.ones(seq_len, seq_len, dtype=torch.bool).tril()
    numerator = numerator_weights.masked_fill(~allowed, 0.0) @ value
    denominator = denominator_weights.masked_fill(~allowed, 0.0).sum(dim=-1, keepdim=True)
    return (numerator / denominator).transpose(1, 2)  # (B, T, H, D)


def rotary(seq_len: int, start: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    config = RoFormerConfig(hidden_size=HEADS * HEAD_DIM, num_attention_heads=HEADS, num_hidden_layers=1)
    position_ids = torch.arange(start, start + seq_len)[None].expand(BATCH, seq_len)
    return RoFormerRotaryEmbedding(config)(torch.empty(0), position_ids)


def random_qkv(seq_len: int, dtype=torch.float32, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(BATCH, HEADS, seq_len, HEAD_DIM, generator=generator, dtype=dtype) for _ in range(3)]


@pytest.mark.parametrize("is_causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("seq_len", [1, 37, 300])
def test_matches_naive_quadratic_formula(is_causal, dtype, seq_len):
    query, key, value = random_qkv(seq_len, dtype)
    cos, sin = rotary(seq_len)
    attention_mask = torch.ones(BATCH, seq_len)
    attention_mask[1, seq_len // 2 + 1 :] = 0  # right padding in the second sequence
    output = linear_attention_forward(query, key, value, cos, sin, attention_mask, is_causal, chunk_size=64)
    expected = naive_linear_attention(query, key, value, cos, sin, attention_mask, is_causal)
    assert output.shape == (BATCH, seq_len, HEADS, HEAD_DIM) and output.dtype == dtype
    tolerance = 1e-4 if dtype == torch.float32 else 1e-10
    torch.testing.assert_close(output, expected, atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize("chunk_size", [1, 5, 64, 1000])
def test_causal_result_does_not_depend_on_chunk_size(chunk_size):
    query, key, value = random_qkv(70, torch.float64)
    cos, sin = rotary(70)
    output = linear_attention_forward(query, key, value, cos, sin, None, True, chunk_size=chunk_size)
    expected = naive_linear_attention(query, key, value, cos, sin, None, True)
    torch.testing.assert_close(output, expected, atol=1e-10, rtol=1e-10)


def test_causal_queries_after_earlier_keys_match_the_full_sequence():
    # The last 9 queries against all 40 keys (e.g. a continuation) are the last 9 rows of the full computation.
    query, key, value = random_qkv(40, torch.float64)
    cos, sin = rotary(40)
    full = linear_attention_forward(query, key, value, cos, sin, None, True, chunk_size=4)
    tail = linear_attention_forward(query[:, :, -9:], key, value, cos, sin, None, True, chunk_size=4)
    torch.testing.assert_close(tail, full[:, -9:])


@pytest.mark.parametrize("is_causal", [False, True], ids=["bidirectional", "causal"])
def test_padding_changes_nothing_for_the_tokens(is_causal):
    # Left padding with positions that keep counting through the pad: RoPE makes the numerator depend on relative
    # positions only, and the denominator has none, so the real tokens' outputs must equal the unpadded run's.
    seq_len, pad = 23, 6
    query, key, value = random_qkv(seq_len, torch.float64)
    noise = random_qkv(pad, torch.float64, seed=1)
    padded = [torch.cat([junk, tensor], dim=2) for junk, tensor in zip(noise, (query, key, value), strict=True)]
    attention_mask = torch.cat([torch.zeros(BATCH, pad), torch.ones(BATCH, seq_len)], dim=1)
    output = linear_attention_forward(*padded, *rotary(seq_len + pad), attention_mask, is_causal)
    expected = linear_attention_forward(query, key, value, *rotary(seq_len), None, is_causal)
    torch.testing.assert_close(output[:, pad:], expected)


def test_a_query_that_sees_no_key_gives_zeros_not_nan():
    query, key, value = random_qkv(5)
    attention_mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    output = linear_attention_forward(query, key, value, *rotary(5), attention_mask, is_causal=True)
    assert torch.isfinite(output).all()
    assert torch.equal(output[0, :2], torch.zeros_like(output[0, :2]))


def test_half_precision_input_keeps_its_dtype():
    query, key, value = (tensor.bfloat16() for tensor in random_qkv(50))
    output = linear_attention_forward(query, key, value, *rotary(50), None, False)
    expected = naive_linear_attention(*(tensor.double() for tensor in (query, key, value)), *rotary(50), None, False)
    assert output.dtype == torch.bfloat16
    torch.testing.assert_close(output.double(), expected, atol=2e-2, rtol=2e-2)


def test_cos_sin_shorter_than_the_keys_raise():
    query, key, value = random_qkv(10)
    cos, sin = rotary(4)
    with pytest.raises(ValueError, match="must cover all 10 key positions"):
        linear_attention_forward(query[:, :, -4:], key, value, cos, sin, None, True)


def test_four_dimensional_mask_raises():
    query, key, value = random_qkv(6)
    with pytest.raises(ValueError, match=r"\(batch_size, seq_len\) padding mask"):
        linear_attention_forward(query, key, value, *rotary(6), torch.ones(BATCH, 1, 6, 6), False)


# Through the model: RoFormerConfig(attention_type="linear")


def linear_config(**kwargs) -> RoFormerConfig:
    settings = {
        "vocab_size": 99,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 37,
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
        "attention_type": "linear",
    }
    return RoFormerConfig(**{**settings, **kwargs})


def random_input_ids(batch_size: int, seq_len: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(1, 99, (batch_size, seq_len), generator=torch.Generator().manual_seed(seed))


def test_model_trains_with_linear_attention():
    torch.manual_seed(0)
    model = RoFormerForMaskedLM(linear_config())
    input_ids = random_input_ids(2, 40)
    loss = model(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    assert torch.isfinite(loss)
    for name, parameter in model.named_parameters():
        if "token_type_embeddings" in name:  # only type 0 occurs: most rows get no gradient
            continue
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
    assert model.roformer.encoder.layer[0].attention.self.query.weight.grad.abs().sum() > 0


def test_model_uses_the_linear_attention_function():
    torch.manual_seed(0)
    model = RoFormerModel(linear_config()).eval()
    softmax_model = RoFormerModel(linear_config(attention_type="softmax")).eval()
    softmax_model.load_state_dict(model.state_dict())
    input_ids = random_input_ids(2, 17)
    captured = {}
    layer = model.encoder.layer[0]
    layer.attention.self.register_forward_hook(lambda module, args, output: captured.update(output=output[0]))
    layer.register_forward_pre_hook(lambda module, args: captured.update(hidden_states=args[0]))
    model(input_ids=input_ids)
    attention = layer.attention.self
    hidden_shape = (2, 17, 2, 16)
    query, key, value = (
        projection(captured["hidden_states"]).view(hidden_shape).transpose(1, 2)
        for projection in (attention.query, attention.key, attention.value)
    )
    cos, sin = model.rotary_emb(torch.empty(0), torch.arange(17)[None])
    expected = naive_linear_attention(query, key, value, cos, sin, None, is_causal=False).reshape(2, 17, 32)
    torch.testing.assert_close(captured["output"], expected, atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        assert not torch.allclose(model(input_ids).last_hidden_state, softmax_model(input_ids).last_hidden_state)


@pytest.mark.parametrize("is_decoder", [False, True], ids=["encoder", "decoder"])
def test_model_padding_invariance(is_decoder):
    torch.manual_seed(0)
    model = RoFormerModel(linear_config(is_decoder=is_decoder)).eval()
    input_ids = random_input_ids(1, 12)
    padded = torch.cat([input_ids, torch.zeros(1, 5, dtype=torch.long)], dim=1)
    attention_mask = torch.cat([torch.ones(1, 12), torch.zeros(1, 5)], dim=1).long()
    with torch.no_grad():
        alone = model(input_ids=input_ids, use_cache=False).last_hidden_state
        batched = model(input_ids=padded, attention_mask=attention_mask, use_cache=False).last_hidden_state
    torch.testing.assert_close(batched[:, :12], alone, atol=1e-5, rtol=1e-5)


def test_causal_model_does_not_look_ahead():
    torch.manual_seed(0)
    model = RoFormerForCausalLM(linear_config(is_decoder=True)).eval()
    input_ids = random_input_ids(1, 20)
    changed = input_ids.clone()
    changed[0, 12:] = random_input_ids(1, 8, seed=1)
    with torch.no_grad():
        logits = model(input_ids=input_ids, use_cache=False).logits
        changed_logits = model(input_ids=changed, use_cache=False).logits
    torch.testing.assert_close(logits[:, :12], changed_logits[:, :12])
    assert not torch.allclose(logits[:, 12:], changed_logits[:, 12:])


def test_causal_model_generates_without_cache_and_refuses_one():
    torch.manual_seed(0)
    model = RoFormerForCausalLM(linear_config(is_decoder=True)).eval()
    input_ids = random_input_ids(1, 5)
    generated = model.generate(input_ids, max_new_tokens=4, do_sample=False, use_cache=False, pad_token_id=0)
    assert generated.shape == (1, 9) and torch.equal(generated[:, :5], input_ids)
    with torch.no_grad():
        logits = model(input_ids=generated, use_cache=False).logits
    assert torch.equal(logits[0, 4:8].argmax(dim=-1), generated[0, 5:9])  # greedy: each token is the arg-max
    with pytest.raises(ValueError, match="use_cache=False"):
        model(input_ids=input_ids, cache=DynamicCache(config=model.config))


def test_linear_attention_refuses_a_prepared_four_dimensional_mask():
    config = RoFormerConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=64,
        attention_type="linear",
    )
    model = RoFormerModel(config).eval()
    with pytest.raises(ValueError, match="prepared 4-D mask"):
        model(input_ids=torch.randint(1, 100, (2, 9)), attention_mask=torch.ones(2, 1, 9, 9))
