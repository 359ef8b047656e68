"""`decoder_mask="unilm"`: RoFormer-Sim's attention, UniLM's sequence-to-sequence mask over token types.

Query i sees key j when cumsum(token_type_ids)[j] <= cumsum(token_type_ids)[i] and j is not padding: the first segment
(type 0) reads itself both ways, the second (type 1, generated text) sees the first and itself causally. The Sim
fixtures of roformer 0.4.3 are checked in test_reference.py; these are the invariants of the mask itself.
"""

import pytest
import torch
import transformers
from conftest import TINY, skip_unless_transformers_causal_lm_is_causal

from roformer_hf import RoFormerConfig, RoFormerForCausalLM, RoFormerModel
from roformer_hf.modeling import cache_of, unilm_attention_mask

UNILM = {"is_decoder": True, "decoder_mask": "unilm"}
ATTENTION = ["eager", "sdpa"]


def unilm_config(**overrides) -> RoFormerConfig:
    return RoFormerConfig(**{**TINY, **UNILM, **overrides})


def unilm_model(attn_implementation: str = "sdpa", **overrides) -> RoFormerForCausalLM:
    torch.manual_seed(0)
    model = RoFormerForCausalLM(unilm_config(**overrides)).eval()
    model.set_attn_implementation(attn_implementation)
    return model


def two_segments(prompt_lengths: list[int], answer_lengths: list[int], seq_len: int = 12) -> dict:
    """A right-padded batch of prompt (type 0) + answer (type 1); padding has type 0, as tokenizers give it."""
    torch.manual_seed(1)
    input_ids = torch.randint(1, TINY["vocab_size"], (len(prompt_lengths), seq_len))
    token_type_ids = torch.zeros_like(input_ids)
    attention_mask = torch.zeros_like(input_ids)
    for row, (prompt_length, answer_length) in enumerate(zip(prompt_lengths, answer_lengths, strict=True)):
        token_type_ids[row, prompt_length : prompt_length + answer_length] = 1
        attention_mask[row, : prompt_length + answer_length] = 1
    return {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask}


def naive_unilm_mask(token_type_ids: list[int], padding: list[int], past_len: int) -> torch.Tensor:
    """The rule written out over the whole text (cached tokens' types given as the first `past_len`)."""
    segments = [sum(token_type_ids[: index + 1]) for index in range(len(token_type_ids))]
    return torch.tensor(
        [
            [segments[key] <= segments[query] and padding[key] == 1 for key in range(len(token_type_ids))]
            for query in range(past_len, len(token_type_ids))
        ]
    )


@pytest.mark.parametrize("past_len", [0, 3])
def test_mask_equals_the_rule_written_out(past_len):
    """Cached keys are all visible (earlier, and segments only grow); among new tokens only their own types count."""
    torch.manual_seed(2)
    for _ in range(20):
        token_types = torch.randint(0, 2, (3, 9))
        token_types[:, past_len] = 1 if past_len else token_types[:, past_len]  # a continuation starts segment 1
        padding = torch.ones_like(token_types)
        padding[1, -2:] = 0
        padding[2, :2] = 0
        mask = unilm_attention_mask(token_types[:, past_len:], padding, past_len)
        assert mask.shape == (3, 1, 9 - past_len, 9)
        for row in range(3):
            expected = naive_unilm_mask(token_types[row].tolist(), padding[row].tolist(), past_len)
            is_padding = padding[row, past_len:] == 0
            assert torch.equal(mask[row, 0][~is_padding], expected[~is_padding])
            # A padding query sees what the rule gives it, and itself (so that no row is empty).
            diagonal = torch.arange(9 - past_len)
            expected[diagonal, diagonal + past_len] = True
            assert torch.equal(mask[row, 0][is_padding], expected[is_padding])


@pytest.mark.parametrize("attn_implementation", ATTENTION)
@pytest.mark.parametrize("token_types", ["zeros", "missing"])
def test_one_segment_reads_both_ways_as_the_encoder(attn_implementation, token_types):
    """Sentence vectors: a type-0 batch (padded) in unilm mode equals the bidirectional encoder with the same weights."""
    model = unilm_model(attn_implementation)
    encoder = RoFormerModel(RoFormerConfig(**TINY), add_pooling_layer=True).eval()
    encoder.load_state_dict(model.roformer.state_dict())
    encoder.set_attn_implementation(attn_implementation)
    batch = two_segments([12, 8, 5], [0, 0, 0])
    if token_types == "missing":
        del batch["token_type_ids"]
    with torch.no_grad():
        decoder_output, encoder_output = model.roformer(**batch), encoder(**batch)
    tokens = batch["attention_mask"].bool()
    difference = (decoder_output.last_hidden_state - encoder_output.last_hidden_state)[tokens].abs().max()
    assert difference <= 1e-6
    assert torch.allclose(decoder_output.pooler_output, encoder_output.pooler_output, atol=1e-6)
    causal = RoFormerModel(RoFormerConfig(**TINY, is_decoder=True), add_pooling_layer=True).eval()
    causal.load_state_dict(model.roformer.state_dict())
    with torch.no_grad():  # the default decoder mask differs: its [CLS] sees only itself
        causal_cls_states = causal(**batch).last_hidden_state[:, 0]
    assert (causal_cls_states - encoder_output.last_hidden_state[:, 0]).abs().max() > 1e-3  # 1e-6 above


@pytest.mark.parametrize("attn_implementation", ATTENTION)
def test_prompt_reads_both_ways_and_answer_tokens_see_only_what_came_before(attn_implementation):
    """Independent of the mask code: prompt outputs are the encoder's on the prompt alone, and the output at an answer
    token is the same when the text is cut right after it (later answer tokens change nothing)."""
    model = unilm_model(attn_implementation)
    encoder = RoFormerModel(RoFormerConfig(**TINY), add_pooling_layer=True).eval()
    encoder.load_state_dict(model.roformer.state_dict())
    encoder.set_attn_implementation(attn_implementation)
    batch = two_segments([5], [7])
    with torch.no_grad():
        full = model(**batch).logits
        prompt_states = encoder(input_ids=batch["input_ids"][:, :5]).last_hidden_state
        assert (model.roformer(**batch).last_hidden_state[:, :5] - prompt_states).abs().max() <= 1e-6
        for end in range(6, 13):
            cut = {name: tensor[:, :end] for name, tensor in batch.items()}
            assert (model(**cut).logits[:, -1] - full[:, end - 1]).abs().max() <= 1e-5


@pytest.mark.parametrize("attn_implementation", ATTENTION)
def test_padding_changes_nothing(attn_implementation):
    model = unilm_model(attn_implementation)
    batch = two_segments([4, 6], [5, 3], seq_len=12)  # the second row has 3 positions of padding
    with torch.no_grad():
        padded = model(**batch).logits
        alone = model(**{name: tensor[1:, :9] for name, tensor in batch.items()}).logits
        # left padding: the same tokens moved right, positions kept by position_ids
        left = {name: torch.roll(tensor[1:], 3, dims=1) for name, tensor in batch.items()}
        left_logits = model(**left, position_ids=torch.arange(-3, 9)[None]).logits
    assert (padded[1, :9] - alone[0]).abs().max() <= 1e-5
    assert (left_logits[0, 3:] - alone[0]).abs().max() <= 1e-5


def test_eager_equals_sdpa():
    batch = two_segments([4, 6, 2], [5, 3, 9])
    with torch.no_grad():
        eager, sdpa = (unilm_model(implementation)(**batch).logits for implementation in ATTENTION)
    tokens = batch["attention_mask"].bool()
    assert (eager - sdpa)[tokens].abs().max() <= 1e-5


@pytest.mark.parametrize("attn_implementation", ATTENTION)
def test_cached_steps_match_the_whole_text(attn_implementation):
    """The prompt at once, then the answer with the cache (one token, then the rest as a block): the logits of the
    whole text read in one call."""
    model = unilm_model(attn_implementation)
    batch = two_segments([5, 4], [7, 8])
    with torch.no_grad():
        full = model(**batch).logits
        steps = [slice(0, 5), slice(5, 6), slice(6, 12)]
        cache, logits = None, []
        for positions in steps:
            output = model(
                input_ids=batch["input_ids"][:, positions],
                token_type_ids=batch["token_type_ids"][:, positions],
                attention_mask=batch["attention_mask"][:, : positions.stop],
                cache=cache,
                use_cache=True,
            )
            cache = cache_of(output)
            logits.append(output.logits)
    tokens = batch["attention_mask"].bool()
    assert (torch.cat(logits, dim=1) - full)[tokens].abs().max() <= 1e-5


@pytest.mark.parametrize("attn_implementation", ATTENTION)
def test_generate_with_cache_equals_without(attn_implementation):
    """Generated tokens get type 1; cache on and off give the same tokens (also for a left-padded batch)."""
    model = unilm_model(attn_implementation)
    prompt = torch.randint(1, TINY["vocab_size"], (2, 6), generator=torch.Generator().manual_seed(3))
    attention_mask = torch.ones_like(prompt)
    attention_mask[1, :2] = 0
    sequences = [
        model.generate(prompt, attention_mask=attention_mask, max_new_tokens=8, do_sample=False, use_cache=use_cache)
        for use_cache in (True, False)
    ]
    assert torch.equal(sequences[0], sequences[1])
    # The last generated token, recomputed from one call over the whole text with types 0 then 1.
    token_type_ids = torch.cat([torch.zeros_like(prompt), torch.ones(2, 7, dtype=torch.long)], dim=1)
    full_mask = torch.cat([attention_mask, torch.ones(2, 7, dtype=torch.long)], dim=1)
    with torch.no_grad():
        logits = model(sequences[0][:, :-1], attention_mask=full_mask, token_type_ids=token_type_ids).logits
    assert torch.equal(logits[:, -1].argmax(-1), sequences[0][:, -1])


def test_explicit_causal_is_transformers_causal_lm():
    """decoder_mask="causal" (the default) is transformers' RoFormerForCausalLM, padding and all."""
    skip_unless_transformers_causal_lm_is_causal()
    torch.manual_seed(0)
    theirs = transformers.RoFormerForCausalLM(transformers.RoFormerConfig(**TINY, is_decoder=True)).eval()
    ours = RoFormerForCausalLM(RoFormerConfig(**TINY, is_decoder=True, decoder_mask="causal")).eval()
    ours.load_state_dict(theirs.state_dict(), strict=False)  # theirs has no pooler, ours no sinusoid table
    batch = two_segments([4, 6], [5, 3])
    with torch.no_grad():
        difference = (ours(**batch).logits - theirs(**batch).logits)[batch["attention_mask"].bool()].abs().max()
    assert difference <= 1e-5


def test_unknown_decoder_mask_names_both_values():
    with pytest.raises(ValueError, match=r"decoder_mask 'prefix'.*'causal', 'unilm'"):
        unilm_config(decoder_mask="prefix")


def test_linear_attention_refuses_unilm():
    with pytest.raises(ValueError, match="linear attention cannot"):
        unilm_config(attention_type="linear")
    RoFormerConfig(**TINY, decoder_mask="unilm", attention_type="linear")  # an encoder ignores decoder_mask


def test_one_token_type_refuses_unilm():
    with pytest.raises(ValueError, match="type_vocab_size=2"):
        unilm_config(type_vocab_size=1)


def test_backend_without_arbitrary_masks_is_refused(monkeypatch):
    model = unilm_model()
    monkeypatch.setattr(model.config, "_attn_implementation", "flash_attention_2")
    with pytest.raises(ValueError, match="attn_implementation='sdpa'"):
        model(torch.tensor([[2, 5, 7]]))


def test_continuation_after_a_cache_must_start_segment_one():
    model = unilm_model()
    with torch.no_grad():
        cache = cache_of(model(torch.tensor([[2, 5, 7]]), use_cache=True))
        for token_type_ids in (None, torch.tensor([[0]])):
            with pytest.raises(ValueError, match="must start a new segment"):
                model(torch.tensor([[9]]), token_type_ids=token_type_ids, cache=cache)


def test_save_and_load_keep_the_unilm_mask(tmp_path):
    model = unilm_model()
    model.save_pretrained(tmp_path)
    reloaded = RoFormerForCausalLM.from_pretrained(tmp_path).eval()
    assert reloaded.config.decoder_mask == "unilm"
    batch = two_segments([4, 6], [5, 3])
    with torch.no_grad():
        assert torch.equal(reloaded(**batch).logits, model(**batch).logits)


def test_training_with_attention_dropout_keeps_answer_tokens_blind_to_later_ones():
    """On the CPU with attention dropout, "sdpa" runs blockwise attention: it must apply the UniLM mask too."""
    model = unilm_model(attention_probs_dropout_prob=0.1).train()
    batch = two_segments([5], [7])
    changed = {**batch, "input_ids": batch["input_ids"].clone()}
    changed["input_ids"][0, -1] = (changed["input_ids"][0, -1] % (TINY["vocab_size"] - 1)) + 1
    logits = []
    for inputs in (batch, changed):
        torch.manual_seed(4)  # the same dropout masks
        logits.append(model(**inputs).logits)
    assert torch.equal(logits[0][:, :-1], logits[1][:, :-1])
    assert not torch.equal(logits[0][:, -1], logits[1][:, -1])
