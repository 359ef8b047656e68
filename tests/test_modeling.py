"""The RoFormer models: agreement with transformers' RoFormer on its own checkpoints, and the model's invariants."""

import json
import logging

import pytest
import torch
import transformers
from conftest import (
    TINY,
    assert_padding_changes_nothing,
    enable_activation_checkpointing,
    skip_unless_transformers_causal_lm_is_causal,
)
from safetensors import safe_open
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
)

import roformer_hf
from roformer_hf import RoFormerConfig, RoFormerForCausalLM, RoFormerForMaskedLM, RoFormerModel
from roformer_hf.modeling import blockwise_attention_forward, cache_of, eager_attention_forward, layer_attention_mask

TOLERANCE = {"eager": 1e-5, "sdpa": 1e-4}
HEADS = [
    "RoFormerForMaskedLM",
    "RoFormerForSequenceClassification",
    "RoFormerForCausalLM",
    "RoFormerForTokenClassification",
    "RoFormerForQuestionAnswering",
    "RoFormerForMultipleChoice",
]


def tiny_config(**overrides) -> RoFormerConfig:
    return RoFormerConfig(**{**TINY, **overrides})


def transformers_checkpoint(folder, head: str, **overrides) -> torch.nn.Module:
    """A random-weight transformers RoFormer `head`, saved to `folder`."""
    torch.manual_seed(0)
    config = transformers.RoFormerConfig(**{**TINY, "is_decoder": head == "RoFormerForCausalLM", **overrides})
    model = getattr(transformers, head)(config).eval()
    model.save_pretrained(folder)
    return model


def batch_with_padding(batch_size: int = 2, seq_len: int = 13, device: torch.device | str = "cpu") -> dict:
    torch.manual_seed(1)
    input_ids = torch.randint(1, TINY["vocab_size"], (batch_size, seq_len))
    attention_mask = torch.ones(batch_size, seq_len, dtype=torch.long)
    attention_mask[-1, seq_len - 4 :] = 0
    token_type_ids = torch.zeros(batch_size, seq_len, dtype=torch.long)
    token_type_ids[:, seq_len // 2 :] = 1
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
    return {name: tensor.to(device) for name, tensor in batch.items()}


def outputs_to_compare(head: str, output, attention_mask: torch.Tensor) -> list[torch.Tensor]:
    """The outputs of a head at the positions that are not padding."""
    real = attention_mask.bool()
    if head == "RoFormerForQuestionAnswering":
        return [output.start_logits[real], output.end_logits[real]]
    if head in ("RoFormerForSequenceClassification", "RoFormerForMultipleChoice"):
        return [output.logits]
    return [output.logits[real]]


# --- agreement with transformers' RoFormer -----------------------------------------------------------------------


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize(("rotary_value", "embedding_size"), [(False, None), (True, None), (False, 16)])
def test_parity_with_transformers(tmp_path, device, head, attn_implementation, rotary_value, embedding_size):
    if head == "RoFormerForCausalLM":
        skip_unless_transformers_causal_lm_is_causal()
    reference = transformers_checkpoint(tmp_path, head, rotary_value=rotary_value, embedding_size=embedding_size)
    reference = reference.to(device)
    ours, loading_info = getattr(roformer_hf, head).from_pretrained(
        tmp_path, attn_implementation=attn_implementation, output_loading_info=True
    )
    assert type(ours).__module__ == "roformer_hf.modeling"
    # embed_positions: ignored
    assert not loading_info["missing_keys"] and not loading_info["unexpected_keys"]
    ours = ours.to(device)
    inputs = batch_with_padding(device=device)
    if head == "RoFormerForMultipleChoice":  # (batch, choices, seq); transformers summarises the last position
        inputs = {name: tensor[None].repeat(2, 1, 1) for name, tensor in inputs.items()}
        inputs["attention_mask"] = torch.ones_like(inputs["attention_mask"])
    with torch.no_grad():
        expected, actual = reference(**inputs), ours.eval()(**inputs)
    mask = inputs["attention_mask"]
    for want, got in zip(
        outputs_to_compare(head, expected, mask), outputs_to_compare(head, actual, mask), strict=True
    ):
        assert (want - got).abs().max() <= TOLERANCE[attn_implementation]


@pytest.mark.parametrize("head", ["RoFormerModel", "RoFormerForSequenceClassification"])
def test_hidden_states_and_attentions_match_transformers(tmp_path, head):
    """Captured by hooks (`_can_record_outputs`): the embeddings' output then every layer's, and every layer's
    attention weights, as transformers' RoFormer returns them; the classifier then computes its last layer whole."""
    reference = transformers_checkpoint(tmp_path, head, attn_implementation="eager")
    ours = getattr(roformer_hf, head).from_pretrained(tmp_path, attn_implementation="eager").eval()
    inputs = batch_with_padding()
    with torch.no_grad():
        expected = reference(**inputs, output_hidden_states=True, output_attentions=True)
        actual = ours(**inputs, output_hidden_states=True, output_attentions=True)
        as_tuple = ours(**inputs, output_hidden_states=True, return_dict=False)
    assert len(actual.hidden_states) == TINY["num_hidden_layers"] + 1
    assert len(actual.attentions) == TINY["num_hidden_layers"]
    real = inputs["attention_mask"].bool()
    for want, got in zip(expected.hidden_states, actual.hidden_states, strict=True):
        torch.testing.assert_close(got[real], want[real], atol=TOLERANCE["eager"], rtol=0)
    for want, got in zip(expected.attentions, actual.attentions, strict=True):
        torch.testing.assert_close(got, want, atol=TOLERANCE["eager"], rtol=0)
    assert isinstance(as_tuple, tuple) and len(as_tuple[-1]) == TINY["num_hidden_layers"] + 1  # hidden states last


@pytest.mark.parametrize(
    ("labels", "problem_type"),
    [
        (torch.tensor([2, 0]), "single_label_classification"),
        (torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]), "multi_label_classification"),
        (torch.tensor([[0.5], [-1.0]]), "regression"),
    ],
)
def test_sequence_classification_losses_match_transformers(tmp_path, labels, problem_type):
    num_labels = labels.shape[-1] if labels.dim() == 2 else 3
    reference = transformers_checkpoint(tmp_path, "RoFormerForSequenceClassification", num_labels=num_labels)
    ours = roformer_hf.RoFormerForSequenceClassification.from_pretrained(tmp_path).eval()
    inputs = batch_with_padding()
    with torch.no_grad():
        expected, actual = reference(**inputs, labels=labels), ours(**inputs, labels=labels)
    assert ours.config.problem_type == reference.config.problem_type == problem_type
    torch.testing.assert_close(actual.loss, expected.loss, atol=1e-5, rtol=1e-5)


def test_transformers_config_reads_without_warning(tmp_path, caplog):
    transformers_checkpoint(tmp_path, "RoFormerForMaskedLM", embedding_size=16, rotary_value=True)
    with caplog.at_level(logging.WARNING):
        config = RoFormerConfig.from_pretrained(tmp_path)
    assert type(config) is RoFormerConfig and config.model_type == "roformer_hf"
    assert (config.embedding_size, config.rotary_value, config.rope_parameters["rope_theta"]) == (16, True, 10000.0)
    assert not [record for record in caplog.records if "model of type" in record.getMessage()]


# --- RoPE: no cap, relative ------------------------------------------------------------------------------------


def test_no_length_cap(device):
    torch.manual_seed(0)
    model = RoFormerModel(tiny_config(max_position_embeddings=64)).to(device).eval()
    input_ids = torch.randint(1, TINY["vocab_size"], (1, 1000)).to(device)
    with torch.no_grad():
        hidden_states = model(input_ids).last_hidden_state
    assert hidden_states.shape == (1, 1000, TINY["hidden_size"]) and torch.isfinite(hidden_states).all()


@pytest.mark.parametrize("rotary_value", [False, True])
def test_shifting_positions_leaves_outputs_unchanged(device, rotary_value):
    torch.manual_seed(0)
    model = RoFormerModel(tiny_config(rotary_value=rotary_value, initializer_range=0.5)).to(device).eval()
    inputs = batch_with_padding(device=device)
    positions = torch.arange(inputs["input_ids"].shape[1], device=device)[None]
    with torch.no_grad():
        at_zero = model(**inputs, position_ids=positions).last_hidden_state
        shifted = model(**inputs, position_ids=positions + 1234).last_hidden_state
    if rotary_value:  # rotated values carry absolute angles into the output: only the scores are relative
        assert (at_zero - shifted).abs().max() > 1e-3
    else:
        assert (at_zero - shifted).abs().max() <= 1e-4


def test_two_dimensional_positions_pass_through():
    torch.manual_seed(0)
    # Large weights make attention sharp enough for positions to show in the output.
    model = RoFormerModel(tiny_config(num_attention_heads=2, initializer_range=0.5)).eval()
    input_ids = torch.randint(1, TINY["vocab_size"], (1, 6))
    grid = torch.tensor([[[x, y] for y in range(2) for x in range(3)]])  # (1, 6, 2)
    with torch.no_grad():
        one_d = model(input_ids).last_hidden_state
        two_d = model(input_ids, position_ids=grid).last_hidden_state
        two_d_shifted = model(input_ids, position_ids=grid + torch.tensor([5, 7])).last_hidden_state
    assert (one_d - two_d).abs().max() > 1e-2
    assert (two_d - two_d_shifted).abs().max() <= 1e-4


# --- attention backends --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("is_decoder", [False, True])
def test_eager_equals_sdpa(device, is_decoder):
    torch.manual_seed(0)
    config = tiny_config(is_decoder=is_decoder)
    eager = RoFormerModel(config).to(device).eval()
    eager.set_attn_implementation("eager")
    sdpa = RoFormerModel(tiny_config(is_decoder=is_decoder)).to(device).eval()
    sdpa.load_state_dict(eager.state_dict())
    assert sdpa.config._attn_implementation == "sdpa"  # the default
    inputs = batch_with_padding(device=device)
    real = inputs["attention_mask"].bool()
    with torch.no_grad():
        expected = eager(**inputs, use_cache=False).last_hidden_state
        actual = sdpa(**inputs, use_cache=False).last_hidden_state
    assert (expected[real] - actual[real]).abs().max() <= 1e-5


def test_the_encoders_sdpa_mask_is_one_row_per_sequence():
    """Padding hides the same keys from every query: for "sdpa" the encoder's mask is (B, 1, 1, T), True where a key
    is seen; eager keeps transformers' additive (B, 1, T, T); without padding there is none."""
    config = RoFormerModel(tiny_config()).config  # the model sets its backend: "sdpa"
    inputs = batch_with_padding()
    hidden_states = torch.zeros(2, 13, TINY["hidden_size"])
    mask = layer_attention_mask(config, inputs["attention_mask"], hidden_states, None, None)
    assert mask.dtype == torch.bool and torch.equal(mask, inputs["attention_mask"].bool()[:, None, None, :])
    assert layer_attention_mask(config, torch.ones(2, 13, dtype=torch.long), hidden_states, None, None) is None
    config._attn_implementation = "eager"
    eager_mask = layer_attention_mask(config, inputs["attention_mask"], hidden_states, None, None)
    assert eager_mask.shape == (2, 1, 13, 13) and eager_mask.dtype == torch.float32


@pytest.mark.parametrize("is_decoder", [False, True])
def test_training_with_attention_dropout_hides_padding_and_the_future(device, is_decoder):
    """On the CPU, training with attention dropout runs blockwise attention on the SDPA form of the mask (boolean, or
    none at all for a plain causal mask), on a GPU SDPA's fused kernels with their dropout: padded tokens, and in a
    decoder later tokens, must stay invisible."""
    torch.manual_seed(0)
    config = tiny_config(is_decoder=is_decoder, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.1)
    model = RoFormerModel(config).to(device).train()
    inputs = batch_with_padding(device=device)
    real = inputs["attention_mask"].bool()
    changed = inputs["input_ids"].masked_fill(~real, 5)  # other tokens under the padding
    changed[0, -1] = 6  # and another last token in the unpadded row: the future of every other position
    unaffected = real.clone()
    unaffected[0, -1] = False
    torch.manual_seed(1)  # the same dropout masks in both calls
    expected = model(**inputs, use_cache=False).last_hidden_state
    torch.manual_seed(1)
    actual = model(**{**inputs, "input_ids": changed}, use_cache=False).last_hidden_state
    if is_decoder:
        assert (actual[unaffected] - expected[unaffected]).abs().max() <= 1e-6
    else:  # every token sees the last one, and none sees the padding
        assert (actual[1][real[1]] - expected[1][real[1]]).abs().max() <= 1e-6
        assert (actual[0] - expected[0]).abs().max() > 1e-3
    with torch.no_grad():
        assert (model.eval()(**inputs, use_cache=False).last_hidden_state - expected).abs().max() > 1e-3  # dropped


class _Attention(torch.nn.Module):
    def __init__(self, is_causal: bool):
        super().__init__()
        self.is_causal = is_causal


@pytest.mark.parametrize(
    ("is_causal", "with_padding", "query_len"),
    [(False, False, 37), (False, True, 37), (True, False, 37), (True, True, 37), (False, True, 20), (True, False, 20)],
)
def test_blockwise_attention_matches_eager(monkeypatch, is_causal, with_padding, query_len):
    """Also with fewer queries than keys: the last layer of a classifier, or cached decoding (the last positions)."""
    monkeypatch.setattr("roformer_hf.modeling.BLOCK_ELEMENTS", 2 * 3 * 8 * 37)  # several blocks
    torch.manual_seed(0)
    query = torch.randn(2, 3, query_len, 8, requires_grad=True)
    key, value = (torch.randn(2, 3, 37, 8, requires_grad=True) for _ in range(2))
    allowed = torch.ones(2, 1, query_len, 37, dtype=torch.bool)
    if is_causal:
        allowed = allowed.tril(diagonal=37 - query_len)
    if with_padding:
        allowed[1, :, :, 30:] = False
    module = _Attention(is_causal)
    mask_given = with_padding or not is_causal  # the causal mask alone is left to is_causal, as SDPA is given it
    output, _ = blockwise_attention_forward(module, query, key, value, allowed if mask_given else None, 8**-0.5)
    additive = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)
    expected, _ = eager_attention_forward(module.eval(), query, key, value, additive, 8**-0.5)
    torch.testing.assert_close(output, expected, atol=1e-6, rtol=1e-5)
    grad_output = torch.randn_like(output)
    grads = torch.autograd.grad(output, (query, key, value), grad_output)
    expected_grads = torch.autograd.grad(expected, (query, key, value), grad_output)
    for got, want in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("pays", [True, False], ids=["cpu-with-bf16", "cpu-without-bf16"])
def test_bf16_inference_runs_blockwise_attention_where_bf16_pays(monkeypatch, pays):
    """SDPA's fused CPU kernel computes in float32 whatever its inputs: bf16 goes to blockwise attention on a CPU
    where bf16 pays (mocked here), and stays with SDPA elsewhere, as float32 does. Both agree with float32 within
    bf16's rounding."""
    monkeypatch.setattr("roformer_hf.modeling.cpu_multiplies_bf16", lambda: pays)
    calls = []

    def recording(*args, **kwargs):
        calls.append("blockwise")
        return blockwise_attention_forward(*args, **kwargs)

    monkeypatch.setattr("roformer_hf.modeling.blockwise_attention_forward", recording)
    model = RoFormerModel(tiny_config()).eval()
    inputs = batch_with_padding()
    real = inputs["attention_mask"].bool()
    with torch.no_grad():
        expected = model(**inputs).last_hidden_state
        assert calls == []  # float32: SDPA
        actual = model.to(torch.bfloat16)(**inputs).last_hidden_state
    assert calls == (["blockwise", "blockwise"] if pays else [])
    assert (actual.float() - expected)[real].abs().max() < 0.05  # hidden states of norm ~1, bf16 keeps 8 bits


def padding_visibility(padding: str) -> torch.Tensor:
    """Which of 37 keys each of 3 sequences may see: (3, 37), True where visible."""
    visible = torch.ones(3, 37, dtype=torch.bool)
    if padding == "right":
        visible[1, 30:], visible[2, 9:] = False, False
    elif padding == "left":
        visible[1, :7], visible[2, :20] = False, False
    elif padding == "nothing visible":
        visible[1, 30:], visible[2] = False, False
    return visible


@pytest.mark.parametrize("padding", ["right", "left", "nothing visible"])
@pytest.mark.parametrize("query_len", [37, 1])
def test_blockwise_attention_reads_a_padding_mask_of_one_row(monkeypatch, padding, query_len):
    """The encoder's SDPA mask is one row per sequence, (B, 1, 1, Tk) (`layer_attention_mask`): each sequence then reads its keys
    up to its last visible one. Outputs and gradients are those of the same mask spelled out for every query."""
    monkeypatch.setattr("roformer_hf.modeling.BLOCK_ELEMENTS", 2 * 37 * 37)  # 2 heads, or rows of one
    torch.manual_seed(0)
    query = torch.randn(3, 4, query_len, 8, requires_grad=True)
    key, value = (torch.randn(3, 4, 37, 8, requires_grad=True) for _ in range(2))
    one_row = padding_visibility(padding)[:, None, None, :]  # (B, 1, 1, Tk)
    module = _Attention(is_causal=False)
    outputs, grads = [], []
    for mask in (one_row, one_row.expand(3, 1, query_len, 37)):
        output, _ = blockwise_attention_forward(module, query, key, value, mask, 8**-0.5)
        outputs.append(output)
        grads.append(torch.autograd.grad(output, (query, key, value), torch.ones_like(output)))
    torch.testing.assert_close(outputs[0], outputs[1], atol=1e-6, rtol=1e-5)
    for got, want in zip(*grads, strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    if padding == "right":
        assert (grads[0][1][2, :, 9:] == 0).all()  # keys after the last visible one: never read, no gradient


@pytest.mark.parametrize("mask_form", ["one row per sequence", "spelled out", "none"])
def test_blockwise_attention_in_bf16_rounds_no_worse_than_eager_attention(monkeypatch, mask_form):
    """Under bf16 autocast the kernel gets bf16 queries, keys and values. Against float32 attention of the same
    (rounded) inputs, its output and gradients are as close as eager attention's in bf16 (softmax in float32, its
    probabilities then rounded to bf16): within 2x of eager's error."""
    monkeypatch.setattr("roformer_hf.modeling.BLOCK_ELEMENTS", 2 * 37 * 37)
    torch.manual_seed(0)
    query, key, value = (torch.randn(3, 4, 37, 16).bfloat16().requires_grad_() for _ in range(3))
    visible = padding_visibility("right")[:, None, None, :]
    mask = {"one row per sequence": visible, "spelled out": visible.expand(3, 1, 37, 37), "none": None}[mask_form]
    module = _Attention(is_causal=False).eval()
    additive = None if mask is None else torch.zeros(mask.shape).masked_fill(~mask, torch.finfo(torch.float32).min)
    grad_output = torch.randn(3, 37, 4, 16)

    def output_and_grads(attention, dtype, attention_mask):
        inputs = [tensor.detach().to(dtype).requires_grad_() for tensor in (query, key, value)]
        output, _ = attention(module, *inputs, attention_mask, 16**-0.5)
        output.backward(grad_output.to(dtype))
        return [output.float(), *(tensor.grad.float() for tensor in inputs)]

    reference = output_and_grads(eager_attention_forward, torch.float32, additive)
    eager = output_and_grads(eager_attention_forward, torch.bfloat16, additive)
    blockwise = output_and_grads(blockwise_attention_forward, torch.bfloat16, mask)
    assert all(tensor.dtype == torch.float32 for tensor in reference)
    real = visible[:, 0, 0] if mask is not None else torch.ones(3, 37, dtype=torch.bool)  # (B, T)
    for name, want, eager_got, got in zip(
        ["output", "query", "key", "value"], reference, eager, blockwise, strict=True
    ):
        positions = real if name == "output" else real[:, None, :].expand(3, 4, 37)  # (B, T) or (B, nh, T)
        eager_error = (eager_got - want)[positions].abs().max()
        error = (got - want)[positions].abs().max()
        assert error <= 2 * eager_error + 1e-6, (name, float(error), float(eager_error))


def test_blockwise_attention_dropout_gradients(monkeypatch):
    """With dropout, the backward pass redraws the forward's masks: checked against finite differences."""
    monkeypatch.setattr("roformer_hf.modeling.BLOCK_ELEMENTS", 2 * 9 * 4)
    query, key, value = (torch.randn(1, 2, 9, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    module = _Attention(is_causal=False)

    def attention(query, key, value):
        torch.manual_seed(7)  # the same masks in every call of gradcheck
        return blockwise_attention_forward(module, query, key, value, None, 0.5, dropout=0.3)[0]

    assert torch.autograd.gradcheck(attention, (query, key, value))
    dropped = attention(query, key, torch.ones_like(value)) == 0  # dropped links make rows sum to less than 1
    assert not dropped.all()


def test_blockwise_attention_dropout_is_unbiased_and_differs_between_blocks(monkeypatch):
    monkeypatch.setattr("roformer_hf.modeling.BLOCK_ELEMENTS", 4 * 16 * 64)  # 4 blocks of 16 queries
    query = key = torch.zeros(1, 4, 64, 8)  # every probability is 1/64
    value = torch.ones(1, 4, 64, 8)
    torch.manual_seed(0)
    output, _ = blockwise_attention_forward(_Attention(is_causal=False), query, key, value, None, 1.0, dropout=0.3)
    kept_fraction = output[0, :, :, 0].T * (1 - 0.3)  # (heads, queries): the kept share of each query's links
    assert abs(kept_fraction.mean() - 0.7) < 0.02  # 16,384 links: 6 standard deviations
    assert abs(output.mean() - 1.0) < 0.03  # kept probabilities are rescaled: the expectation is kept
    first_block, second_block = kept_fraction[:, :16], kept_fraction[:, 16:32]
    assert not torch.equal(first_block, second_block)
    assert not torch.equal(kept_fraction[0], kept_fraction[1])  # heads differ too


@pytest.mark.parametrize("seq_len", [8, 40])
def test_training_on_cpu_with_dropout_runs_blockwise_attention(monkeypatch, seq_len):
    """SDPA has no fused CPU kernel with dropout: training goes to blockwise attention, inference stays with SDPA."""
    monkeypatch.setattr("roformer_hf.modeling.BLOCK_ELEMENTS", 4 * 16 * 16)  # 1 x 4 heads x 16 x 16
    calls = []

    def recording(*args, **kwargs):
        calls.append("blockwise")
        return blockwise_attention_forward(*args, **kwargs)

    monkeypatch.setattr("roformer_hf.modeling.blockwise_attention_forward", recording)
    model = RoFormerModel(tiny_config(attention_probs_dropout_prob=0.1))
    input_ids = torch.randint(1, TINY["vocab_size"], (1, seq_len))
    model.train()(input_ids)
    assert calls == ["blockwise", "blockwise"]  # every layer, in training
    model.eval()(input_ids)
    assert len(calls) == 2  # SDPA's fused kernel in inference
    RoFormerModel(tiny_config(attention_probs_dropout_prob=0.0)).train()(input_ids)
    assert len(calls) == 2  # without attention dropout SDPA's fused kernel trains too


def test_training_with_dropout_runs_blockwise_attention_on_the_cpu_only(monkeypatch, device):
    """Blockwise attention exists because SDPA has no fused CPU kernel with dropout; on a GPU, SDPA's fused kernels
    take the dropout and blockwise attention never runs."""
    calls = []

    def recording(*args, **kwargs):
        calls.append("blockwise")
        return blockwise_attention_forward(*args, **kwargs)

    monkeypatch.setattr("roformer_hf.modeling.blockwise_attention_forward", recording)
    model = RoFormerModel(tiny_config(attention_probs_dropout_prob=0.1)).to(device).train()
    model(torch.randint(1, TINY["vocab_size"], (2, 16), device=device)).last_hidden_state.sum().backward()
    assert len(calls) == (TINY["num_hidden_layers"] if device.type == "cpu" else 0)


def test_linear_attention_ignores_padding(device):
    torch.manual_seed(0)
    model = RoFormerModel(tiny_config(attention_type="linear")).to(device).eval()
    assert_padding_changes_nothing(model)


def test_multiple_choice_summarises_the_last_real_token():
    torch.manual_seed(0)
    model = roformer_hf.RoFormerForMultipleChoice(tiny_config()).eval()
    input_ids = torch.randint(1, TINY["vocab_size"], (1, 2, 9))
    padded = torch.cat([input_ids, torch.zeros(1, 2, 4, dtype=torch.long)], dim=-1)
    mask = torch.cat([torch.ones(1, 2, 9), torch.zeros(1, 2, 4)], dim=-1).long()
    with torch.no_grad():
        expected = model(input_ids).logits
        actual = model(padded, attention_mask=mask).logits
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


# --- decoding --------------------------------------------------------------------------------------------------


def test_generate_with_cache_equals_without(device):
    torch.manual_seed(0)
    model = RoFormerForCausalLM(tiny_config(is_decoder=True)).to(device).eval()
    prompt = torch.randint(1, TINY["vocab_size"], (2, 5)).to(device)
    settings = {"max_new_tokens": 8, "do_sample": False, "pad_token_id": 0}
    with_cache = model.generate(prompt, attention_mask=torch.ones_like(prompt), use_cache=True, **settings)
    without_cache = model.generate(prompt, attention_mask=torch.ones_like(prompt), use_cache=False, **settings)
    assert with_cache.shape == (2, 13)
    assert torch.equal(with_cache, without_cache)


def test_cached_steps_match_full_forward(device):
    torch.manual_seed(0)
    model = RoFormerForCausalLM(tiny_config(is_decoder=True)).to(device).eval()
    input_ids = torch.randint(1, TINY["vocab_size"], (1, 10)).to(device)
    with torch.no_grad():
        full = model(input_ids).logits
        first = model(input_ids[:, :6], use_cache=True)
        rest = model(input_ids[:, 6:], cache=cache_of(first)).logits
    torch.testing.assert_close(torch.cat([first.logits, rest], dim=1), full, atol=1e-5, rtol=1e-5)


# --- checkpoints ---------------------------------------------------------------------------------------------


def test_save_load_round_trip_is_bit_identical(tmp_path):
    torch.manual_seed(0)
    model = RoFormerForMaskedLM(tiny_config(embedding_size=16)).eval()
    model.save_pretrained(tmp_path)
    loaded = RoFormerForMaskedLM.from_pretrained(tmp_path).eval()
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, loaded.state_dict()[name]), name
    inputs = batch_with_padding()
    with torch.no_grad():
        assert torch.equal(model(**inputs).logits, loaded(**inputs).logits)
    assert loaded.cls.predictions.decoder.weight is loaded.roformer.embeddings.word_embeddings.weight


def test_checkpoint_holds_no_rotary_table(tmp_path):
    RoFormerForMaskedLM(tiny_config()).save_pretrained(tmp_path)
    assert not list(tmp_path.glob("*.bin"))
    with safe_open(tmp_path / "model.safetensors", "pt") as checkpoint:
        names = list(checkpoint.keys())
    assert "roformer.encoder.layer.0.attention.self.query.weight" in names
    assert not [name for name in names if any(part in name for part in ("embed_positions", "sin", "cos", "freq"))]


def test_auto_classes_resolve_to_ours_and_to_transformers(tmp_path):
    ours_folder, theirs_folder = tmp_path / "roformer_hf", tmp_path / "roformer"
    RoFormerForMaskedLM(tiny_config()).save_pretrained(ours_folder)
    transformers_checkpoint(theirs_folder, "RoFormerForMaskedLM")
    config = json.loads((ours_folder / "config.json").read_text())
    assert config["model_type"] == "roformer_hf"
    assert config["auto_map"]["AutoModelForMaskedLM"].endswith("RoFormerForMaskedLM")

    assert type(AutoConfig.from_pretrained(ours_folder)) is RoFormerConfig
    assert type(AutoModelForMaskedLM.from_pretrained(ours_folder)) is RoFormerForMaskedLM
    assert type(AutoModel.from_pretrained(ours_folder)) is RoFormerModel
    assert type(AutoConfig.from_pretrained(theirs_folder)) is transformers.RoFormerConfig
    assert type(AutoModelForMaskedLM.from_pretrained(theirs_folder)) is transformers.RoFormerForMaskedLM
    causal = tiny_config(is_decoder=True)
    assert type(AutoModelForCausalLM.from_config(causal)) is RoFormerForCausalLM
    assert type(AutoModelForSequenceClassification.from_config(tiny_config())).__module__ == "roformer_hf.modeling"


def test_resize_token_embeddings_keeps_the_decoder_tied():
    model = RoFormerForMaskedLM(tiny_config())
    model.resize_token_embeddings(TINY["vocab_size"] + 5)
    decoder = model.get_output_embeddings()
    assert decoder.weight is model.roformer.embeddings.word_embeddings.weight
    assert decoder.weight.shape[0] == decoder.bias.shape[0] == model.cls.predictions.bias.shape[0] == 104
    logits = model(torch.tensor([[1, 103, 2]])).logits
    assert logits.shape == (1, 3, 104)


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_classifier_computes_the_last_layer_at_cls_only_with_the_same_numbers(device, attn_implementation):
    """The sequence classifier reads [CLS] only, so its last layer computes that position alone: the loss, the logits
    and every gradient equal those of the full computation (which `output_hidden_states=True` forces)."""
    torch.manual_seed(0)
    config = tiny_config(num_labels=3, num_hidden_layers=3, attn_implementation=attn_implementation)
    model = roformer_hf.RoFormerForSequenceClassification(config).to(device).train()  # dropouts are 0 in TINY
    inputs = {**batch_with_padding(device=device), "labels": torch.tensor([0, 2], device=device)}
    feed_forward_inputs = []
    last_layer = model.roformer.encoder.layer[-1]
    last_layer.intermediate.dense.register_forward_hook(
        lambda module, args, output: feed_forward_inputs.append(args[0])
    )

    def loss_logits_and_gradients(**extra):
        model.zero_grad()
        output = model(**inputs, **extra)
        output.loss.backward()
        return (
            output.loss,
            output.logits,
            {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None},
        )

    subset_loss, subset_logits, subset_gradients = loss_logits_and_gradients()
    full_loss, full_logits, full_gradients = loss_logits_and_gradients(output_hidden_states=True)
    assert [tuple(states.shape[:2]) for states in feed_forward_inputs] == [(2, 1), (2, 13)]  # [CLS] only, then all
    torch.testing.assert_close(subset_loss, full_loss, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(subset_logits, full_logits, atol=1e-6, rtol=1e-6)
    assert subset_gradients.keys() == full_gradients.keys()
    for name, gradient in full_gradients.items():
        torch.testing.assert_close(subset_gradients[name], gradient, atol=1e-6, rtol=1e-5, msg=name)


def test_last_layer_positions_returns_those_positions_or_everything_when_it_cannot_apply():
    torch.manual_seed(0)
    inputs = batch_with_padding()
    encoder = RoFormerModel(tiny_config()).eval()
    decoder = RoFormerModel(tiny_config(is_decoder=True)).eval()
    with torch.no_grad():
        full = encoder(**inputs).last_hidden_state
        subset = encoder(**inputs, last_layer_positions=slice(2, 5)).last_hidden_state
        torch.testing.assert_close(subset, full[:, 2:5], atol=1e-6, rtol=1e-6)
        kept = encoder(**inputs, last_layer_positions=slice(2, 5), output_hidden_states=True).last_hidden_state
        assert kept.shape == full.shape  # every layer's output asked for: every position computed
        decoded = decoder(**inputs, last_layer_positions=slice(0, 1), use_cache=False).last_hidden_state
        assert decoded.shape == full.shape  # decoders compute every position


def test_sparse_prediction_gives_the_loss_and_gradients_of_dense_logits(device):
    torch.manual_seed(0)
    dense = RoFormerForMaskedLM(tiny_config()).to(device).train()  # dropouts are 0 in TINY
    sparse = RoFormerForMaskedLM(tiny_config(sparse_prediction=True)).to(device).train()
    sparse.load_state_dict(dense.state_dict())
    inputs = batch_with_padding(device=device)
    labels = torch.full_like(inputs["input_ids"], -100)
    labels[0, [1, 4, 9]], labels[1, [0, 7]] = inputs["input_ids"][0, [1, 4, 9]], inputs["input_ids"][1, [0, 7]]
    outputs = {}
    for name, model in (("dense", dense), ("sparse", sparse)):
        output = model(**inputs, labels=labels)
        output.loss.backward()
        outputs[name] = output
    assert outputs["sparse"].logits.shape == (5, TINY["vocab_size"])
    torch.testing.assert_close(outputs["sparse"].logits, outputs["dense"].logits[labels != -100], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(outputs["sparse"].loss, outputs["dense"].loss, atol=1e-6, rtol=1e-6)
    for (name, dense_parameter), sparse_parameter in zip(dense.named_parameters(), sparse.parameters(), strict=True):
        torch.testing.assert_close(sparse_parameter.grad, dense_parameter.grad, atol=1e-6, rtol=1e-5, msg=name)
    with torch.no_grad():
        assert sparse(**inputs).logits.shape == (*labels.shape, TINY["vocab_size"])  # no labels: dense logits


def test_sparse_prediction_is_neither_saved_nor_read_back(tmp_path):
    """A setting of the training run: a saved masked LM, and one saved by an older version with
    "sparse_prediction": true in its config.json, loads with logits at every position, labels or not."""
    RoFormerForMaskedLM(tiny_config(sparse_prediction=True)).save_pretrained(tmp_path)
    config_file = tmp_path / "config.json"
    assert "sparse_prediction" not in json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**json.loads(config_file.read_text()), "sparse_prediction": True}))
    inputs = batch_with_padding()
    labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
    for model in (RoFormerForMaskedLM.from_pretrained(tmp_path), AutoModelForMaskedLM.from_pretrained(tmp_path)):
        assert model.config.sparse_prediction is False
        assert model(**inputs, labels=labels).logits.shape == (*labels.shape, TINY["vocab_size"])
    assert RoFormerForMaskedLM.from_pretrained(tmp_path, sparse_prediction=True).config.sparse_prediction is True


def test_gradient_checkpointing_gives_the_same_gradients(device):
    torch.manual_seed(0)
    model = RoFormerForMaskedLM(tiny_config()).to(device).train()
    inputs = batch_with_padding(device=device)
    labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)

    def gradients() -> dict[str, torch.Tensor]:
        model.zero_grad()
        model(**inputs, labels=labels).loss.backward()
        return {name: parameter.grad.clone() for name, parameter in model.named_parameters()}

    plain = gradients()
    enable_activation_checkpointing(model)
    checkpointed = gradients()
    for name, gradient in plain.items():
        torch.testing.assert_close(checkpointed[name], gradient, atol=1e-6, rtol=1e-5)


# --- bad input -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"input_ids": torch.tensor([[1, 2, 99]])}, "vocabulary has ids 0 to 98"),
        ({"input_ids": torch.tensor([[1, -2, 3]])}, "resize_token_embeddings"),
        ({"attention_mask": torch.ones(1, 4)}, "pass a mask of shape \\(1, 3\\)"),
        ({"token_type_ids": torch.tensor([[0, 1, 2]])}, "type_vocab_size"),
        ({"token_type_ids": torch.zeros(1, 2, dtype=torch.long)}, "one segment id per token"),
        ({"position_ids": torch.arange(5)[None]}, "position_ids has shape"),
        ({"input_ids": torch.tensor([1, 2, 3])}, "add a batch dimension"),
    ],
)
def test_bad_input_raises_value_error(change, message):
    model = RoFormerModel(tiny_config()).eval()
    with pytest.raises(ValueError, match=message):
        model(**{"input_ids": torch.tensor([[1, 2, 3]]), **change})


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"attention_probs_dropout_prob": 10}, r"attention_probs_dropout_prob is a probability.*\[0, 1\], got 10"),
        ({"hidden_dropout_prob": -0.1}, "hidden_dropout_prob is a probability"),
    ],
)
def test_bad_config_raises_value_error(settings, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(**settings)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"hidden_size": 30, "num_attention_heads": 4}, r"hidden_size \(30\) is not divisible by num_attention_heads"),
        ({"hidden_size": 36, "num_attention_heads": 4}, "head dimension must be even.* = 9: change hidden_size"),
    ],
)
@pytest.mark.parametrize("model_class", [RoFormerModel, RoFormerForMaskedLM, RoFormerForCausalLM])
def test_heads_that_do_not_fit_are_refused_when_the_model_is_built(settings, message, model_class):
    """As transformers' configs (whose common ConfigTester makes RoFormerConfig(hidden_size=37) with 12 heads), the
    config accepts any sizes, also set field by field; the model refuses them when built, in one line."""
    config = tiny_config(**settings)
    assert (config.hidden_size, config.num_attention_heads) == (settings["hidden_size"], 4)
    with pytest.raises(ValueError, match=message):
        model_class(config)
    transformers.RoFormerConfig(**settings)  # theirs accepts them too
    config.hidden_size = 32  # fixed afterwards, the same config builds
    assert model_class(config).config.head_dim == 8


def test_masked_lm_refuses_a_decoder_config():
    with pytest.raises(ValueError, match="is_decoder=False"):
        RoFormerForMaskedLM(tiny_config(is_decoder=True))


def test_causal_lm_of_an_encoder_config_warns_and_attends_both_ways(caplog):
    """As transformers' RoFormerForCausalLM: a warning naming the fix, then the config as it is (no cache)."""
    with caplog.at_level(logging.WARNING, logger="roformer_hf.modeling"):
        model = RoFormerForCausalLM(tiny_config()).eval()
    assert "add is_decoder=True" in caplog.text
    input_ids = torch.randint(1, TINY["vocab_size"], (1, 6))
    output = model(input_ids=input_ids)
    assert cache_of(output) is None
    later_token_changed = input_ids.clone()
    later_token_changed[0, -1] = (input_ids[0, -1] % (TINY["vocab_size"] - 1)) + 1
    # The first token sees the last: bidirectional attention, not causal.
    assert not torch.allclose(model(input_ids=later_token_changed).logits[0, 0], output.logits[0, 0])


def test_causal_lm_leaves_a_shared_config_as_it_was():
    """Its pooler (RoFormer-Sim's) is in the model's config only: heads built later from the same config get none."""
    config = tiny_config(is_decoder=True, decoder_mask="unilm")
    causal_lm = RoFormerForCausalLM(config)
    assert causal_lm.config.add_pooling_layer and causal_lm.roformer.pooler is not None
    assert not config.add_pooling_layer and RoFormerModel(config).pooler is None


def test_plain_causal_lm_has_no_pooler_and_every_parameter_learns():
    """Only RoFormer-Sim (UniLM) or add_pooling_layer gives a causal LM a pooler: one its loss never reaches would get
    no gradient (transformers' gradient-checkpointing tests; DDP without find_unused_parameters)."""
    model = RoFormerForCausalLM(tiny_config(is_decoder=True)).train()
    assert model.roformer.pooler is None
    inputs = batch_with_padding()
    model(**inputs, labels=inputs["input_ids"]).loss.backward()
    assert all(parameter.grad is not None for parameter in model.parameters())


def test_auto_causal_lm_loads_an_mlm_checkpoint_with_a_warning(tmp_path, caplog):
    """transformers' common tests and AutoModelForCausalLM build a causal LM from an encoder's config: it warns, then
    scores tokens exactly as the MLM it was loaded from (the same weights, the same bidirectional attention)."""
    mlm = RoFormerForMaskedLM(tiny_config()).eval()
    mlm.save_pretrained(tmp_path)
    with caplog.at_level(logging.WARNING, logger="roformer_hf.modeling"):
        causal_lm = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert isinstance(causal_lm, RoFormerForCausalLM) and "add is_decoder=True" in caplog.text
    inputs = batch_with_padding()
    with torch.no_grad():
        torch.testing.assert_close(causal_lm(**inputs).logits, mlm(**inputs).logits)


@pytest.mark.parametrize(
    "head",
    ["RoFormerForSequenceClassification", "RoFormerForTokenClassification", "RoFormerForQuestionAnswering"],
)
def test_trainer_scales_per_batch_losses_for_gradient_accumulation(head, tmp_path):
    """Heads whose loss is a per-batch mean must not claim to normalise by `num_items_in_batch`, or the Trainer
    leaves the loss (and gradients) `gradient_accumulation_steps` times too large."""
    model = getattr(roformer_hf, head)(tiny_config())
    arguments = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[])
    assert transformers.Trainer(model=model, args=arguments).model_accepts_loss_kwargs is False


def test_masked_lm_loss_is_normalised_by_the_items_of_the_whole_batch():
    torch.manual_seed(0)
    model = RoFormerForMaskedLM(tiny_config()).eval()
    batch = batch_with_padding()
    labels = torch.full_like(batch["input_ids"], -100)
    labels[:, 2:5] = batch["input_ids"][:, 2:5]
    mean_loss = model(**batch, labels=labels).loss
    summed_over_twice_the_items = model(**batch, labels=labels, num_items_in_batch=2 * 6).loss
    torch.testing.assert_close(summed_over_twice_the_items, mean_loss / 2)


def test_query_key_and_value_in_one_product_give_the_three_projections():
    """The fused projection (one product of the concatenated weights) gives the three `nn.Linear`s' numbers; a
    projection replaced by another module (PEFT's adapters, quantised layers) or hooked turns the fusion off."""
    torch.manual_seed(0)
    attention = RoFormerModel(tiny_config()).encoder.layer[0].attention.self
    hidden_states = torch.randn(2, 7, attention.config.hidden_size)
    fused = attention.fused_projection(hidden_states)  # (B, T, 3, nh, hs)
    separate = [projection(hidden_states) for projection in (attention.query, attention.key, attention.value)]
    for index, expected in enumerate(separate):
        torch.testing.assert_close(fused[:, :, index].flatten(-2), expected, atol=1e-6, rtol=0)
    assert attention.fuses_projections()
    handle = attention.key.register_forward_hook(lambda module, inputs, output: output)
    assert not attention.fuses_projections()
    handle.remove()
    attention.value = torch.nn.Sequential(attention.value)
    assert not attention.fuses_projections()


def test_the_attention_function_is_chosen_in_one_place_and_logged_once(caplog, monkeypatch):
    """`attention_function` names what runs: blockwise attention for CPU training with dropout, SDPA in evaluation,
    linear attention for `attention_type="linear"`; each is logged once, however many layers and calls run it."""
    monkeypatch.setattr("roformer_hf.modeling.LOGGED_ATTENTION_CHOICES", set())  # as in a fresh process
    model = RoFormerModel(tiny_config(attention_probs_dropout_prob=0.1))
    inputs = batch_with_padding()
    linear = RoFormerModel(tiny_config(attention_type="linear")).eval()
    with caplog.at_level(logging.INFO, logger="roformer_hf.modeling"):
        for _ in range(2):
            model.train()(**inputs)
            with torch.no_grad():
                model.eval()(**inputs)
                linear(**inputs)
    chosen = [record.getMessage() for record in caplog.records if "attention runs" in record.getMessage()]
    assert sorted(chosen) == sorted(
        f"RoFormer attention runs {name!r} (config: sdpa)."
        for name in ("roformer_blockwise", "sdpa", "roformer_linear")
    )
