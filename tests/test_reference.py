"""Agreement with JunnYu's `roformer` 0.4.3, the PyTorch RoFormer the published checkpoints (V1, Sim, V2) came with.

The fixtures in `tests/fixtures/reference/` are tiny random checkpoints in the original layout and the reference's
outputs on a right-padded batch, written by `tests/fixtures/make_reference.py` in a separate environment (see the
README there). Each test rebuilds the checkpoint as it lies on the Hub (`config.json` with model_type "roformer" and
`pytorch_model.bin`, no sinusoid table) and loads it with our classes, which must take every weight and give the
reference's outputs at every non-padding position, with eager and sdpa attention, on the CPU and, where
`ROFORMER_HF_TEST_DEVICE` names one, on a GPU (the `device` fixture).
"""

import json
import shutil
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file

from roformer_hf import (
    RoFormerForCausalLM,
    RoFormerForMaskedLM,
    RoFormerForSequenceClassification,
    RoFormerModel,
)

REFERENCE = Path(__file__).parent / "fixtures" / "reference"
TOLERANCE = 1e-5  # fp32; the reference and we sum in different orders
ATTENTION = ["eager", "sdpa"]
# roformer 0.4.3's Sim attends in both directions on a call without a cache (the causal mask only applies to tokens
# fed with one): UniLM's mask, with the prompt (or sentence) as segment 0 and generated tokens as segment 1. The Sim
# config.json is the reference's, without decoder_mask, so the setting is passed as from_pretrained does it for a
# user (conversion writes it into the config). With the default causal mask: logits off by 4.17, pooler_output by 1.62.
SIM_SETTINGS = {"is_decoder": True, "decoder_mask": "unilm", "pooler_activation": "linear"}
HEADS = {
    "v1_word": RoFormerForMaskedLM,
    "v1_rotary_value": RoFormerForMaskedLM,
    "sim": RoFormerForCausalLM,
    "v2": RoFormerForMaskedLM,
    "v2_classification": RoFormerForSequenceClassification,
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    """Every family's checkpoint as published: config.json and a pytorch_model.bin of the reference's state dict."""
    folders = {}
    for family in HEADS:
        folder = tmp_path_factory.mktemp(family)
        shutil.copy(REFERENCE / family / "config.json", folder / "config.json")
        torch.save(load_file(REFERENCE / family / "weights.safetensors"), folder / "pytorch_model.bin")
        folders[family] = folder
    return folders


def reference_batch(family: str, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    inputs = json.loads((REFERENCE / family / "inputs.json").read_text())
    return {name: torch.tensor(values, device=device) for name, values in inputs.items()}


def reference_outputs(family: str) -> dict[str, torch.Tensor]:
    return load_file(REFERENCE / family / "outputs.safetensors")


def load_every_weight(model_class: type, folder: Path, ignored_prefix: str | None = None, device="cpu", **kwargs):
    """`from_pretrained` that fails on any missing, unexpected or mismatched weight (but those under
    `ignored_prefix`, a head the class does not have), instead of initialising it at random; on `device`."""
    model, loading_info = model_class.from_pretrained(folder, output_loading_info=True, **kwargs)
    problems = {
        kind: sorted(str(key) for key in keys if not (ignored_prefix and str(key).startswith(ignored_prefix)))
        for kind, keys in loading_info.items()
    }
    assert not any(problems.values()), f"{model_class.__name__} from {folder.name}: {problems}"
    return model.to(device).eval()


def assert_matches(name: str, actual: torch.Tensor, expected: torch.Tensor, attention_mask: torch.Tensor) -> None:
    """Compares per-token outputs where attention_mask is 1 (the reference's padding positions mean nothing)."""
    assert actual.shape == expected.shape, f"{name}: shape {tuple(actual.shape)}, reference {tuple(expected.shape)}"
    actual, attention_mask = actual.cpu(), attention_mask.cpu()
    if expected.dim() >= 3:
        actual, expected = actual[attention_mask.bool()], expected[attention_mask.bool()]
    difference = (actual - expected).abs().max().item()
    assert difference <= TOLERANCE, f"{name}: max abs difference {difference:.3g} from the reference"


def assert_hidden_states_match(hidden_states: tuple, expected: dict, attention_mask: torch.Tensor) -> None:
    """`hidden_states.<i>` (the embedding output, then every layer but the last) and `last_hidden_state`."""
    *earlier_states, last_hidden_state = hidden_states
    assert len(earlier_states) == sum(name.startswith("hidden_states.") for name in expected)
    for index, states in enumerate(earlier_states):
        assert_matches(f"hidden_states[{index}]", states, expected[f"hidden_states.{index}"], attention_mask)
    assert_matches("last_hidden_state", last_hidden_state, expected["last_hidden_state"], attention_mask)


@pytest.mark.parametrize("attn_implementation", ATTENTION)
@pytest.mark.parametrize("family", list(HEADS))
def test_head_matches_reference(checkpoints, device, family, attn_implementation):
    settings = SIM_SETTINGS if family == "sim" else {}
    model = load_every_weight(
        HEADS[family], checkpoints[family], device=device, attn_implementation=attn_implementation, **settings
    )
    batch, expected = reference_batch(family, device), reference_outputs(family)
    with torch.no_grad():
        output = model(**batch, output_hidden_states=True)
    assert_matches("logits", output.logits, expected["logits"], batch["attention_mask"])
    if "pooler_output" in expected:
        assert_matches("pooler_output", output.pooler_output, expected["pooler_output"], batch["attention_mask"])
    if family != "v2_classification":  # the classifier computes its last layer at [CLS] only
        assert_hidden_states_match(output.hidden_states, expected, batch["attention_mask"])


@pytest.mark.parametrize("attn_implementation", ATTENTION)
@pytest.mark.parametrize("family", ["v2", "v2_classification", "sim"])
def test_bare_model_matches_reference(checkpoints, device, family, attn_implementation):
    """The encoder alone, from a checkpoint with a head; Sim's with its pooler (the sentence vector)."""
    pooled = family == "sim"
    model = load_every_weight(
        RoFormerModel,
        checkpoints[family],
        ignored_prefix="cls." if family != "v2_classification" else "classifier.",
        device=device,
        attn_implementation=attn_implementation,
        add_pooling_layer=pooled,
        **(SIM_SETTINGS if pooled else {}),
    )
    batch, expected = reference_batch(family, device), reference_outputs(family)
    with torch.no_grad():
        output = model(**batch, output_hidden_states=True)
    assert_hidden_states_match(output.hidden_states, expected, batch["attention_mask"])
    assert_matches(
        "last_hidden_state", output.last_hidden_state, expected["last_hidden_state"], batch["attention_mask"]
    )
    if pooled:
        assert_matches("pooler_output", output.pooler_output, expected["pooler_output"], batch["attention_mask"])


@pytest.mark.parametrize("attn_implementation", ATTENTION)
@pytest.mark.parametrize("settings", [SIM_SETTINGS, {}], ids=["by-hand", "as-published"])
@pytest.mark.parametrize("use_cache", [True, False])
def test_sim_greedy_generation_matches_reference(checkpoints, device, use_cache, settings, attn_implementation):
    """The reference encodes the prompt in both directions, then each new token (token type 1) attends to everything
    before it; generation.json holds its greedy tokens, whose every step wins by a margin fp32 cannot flip. Without
    the cache, the UniLM mask over token types gives every step the same view, so the same tokens. The published
    checkpoint needs no settings: loading reads its layout."""
    model = load_every_weight(
        RoFormerForCausalLM, checkpoints["sim"], device=device, attn_implementation=attn_implementation, **settings
    )
    generation = json.loads((REFERENCE / "sim" / "generation.json").read_text())
    prompt = torch.tensor(generation["prompt"], device=device)
    sequences = model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=generation["max_new_tokens"],
        do_sample=False,
        num_beams=1,
        use_cache=use_cache,
    )
    assert sequences.tolist() == generation["sequences"]


@pytest.mark.parametrize("attn_implementation", ATTENTION)
def test_published_sim_loads_as_a_unilm_with_its_pooler(checkpoints, device, attn_implementation):
    """A Sim checkpoint as published says is_decoder and pooler_activation but neither decoder_mask nor
    add_pooling_layer: the causal LM and the bare encoder, with no extra argument or with add_pooling_layer=True
    only, give the reference's logits and pooler_output (a left-to-right mask gave 1.75e-2 off, the pooler dropped)."""
    batch, expected = reference_batch("sim", device), reference_outputs("sim")
    folder, attention = checkpoints["sim"], {"attn_implementation": attn_implementation, "device": device}
    causal_lm = load_every_weight(RoFormerForCausalLM, folder, **attention)
    encoders = [
        load_every_weight(RoFormerModel, folder, ignored_prefix="cls.", **attention),
        load_every_weight(RoFormerModel, folder, ignored_prefix="cls.", add_pooling_layer=True, **attention),
    ]
    for model in (causal_lm, *encoders):
        assert model.config.decoder_mask == "unilm" and model.config.pooler_activation == "linear"
        with torch.no_grad():
            output = model(**batch)
        assert_matches("pooler_output", output.pooler_output, expected["pooler_output"], batch["attention_mask"])
    with torch.no_grad():
        logits = causal_lm(**batch).logits
    assert_matches("logits", logits, expected["logits"], batch["attention_mask"])


def test_published_causal_lm_without_a_pooler_stays_left_to_right(checkpoints, tmp_path):
    """The Sim rule needs both a pooler and an LM head: transformers' own causal RoFormer (no pooler) keeps its
    causal mask, and an explicit setting wins over the rule."""
    state_dict = torch.load(checkpoints["sim"] / "pytorch_model.bin", weights_only=True)
    without_pooler = {name: tensor for name, tensor in state_dict.items() if not name.startswith("roformer.pooler.")}
    torch.save(without_pooler, tmp_path / "pytorch_model.bin")
    shutil.copy(checkpoints["sim"] / "config.json", tmp_path / "config.json")
    assert load_every_weight(RoFormerForCausalLM, tmp_path).config.decoder_mask == "causal"
    explicit = RoFormerForCausalLM.from_pretrained(checkpoints["sim"], decoder_mask="causal")
    assert explicit.config.decoder_mask == "causal"


def transformers_masked_lm_logits(folder: Path, family: str) -> torch.Tensor:
    model = transformers.RoFormerForMaskedLM.from_pretrained(folder).eval()
    with torch.no_grad():
        return model(**reference_batch(family)).logits


@pytest.mark.parametrize("family", ["v1_word", "v1_rotary_value"])
def test_transformers_roformer_agrees_with_the_fixtures_on_v1(checkpoints, family):
    """transformers' own RoFormer, a third implementation, gives the reference's V1 outputs: the fixtures are sound."""
    batch = reference_batch(family)
    logits = transformers_masked_lm_logits(checkpoints[family], family)
    assert_matches("logits", logits, reference_outputs(family)["logits"], batch["attention_mask"])


def test_transformers_roformer_is_wrong_on_v2(checkpoints):
    """Why V2 support exists: transformers' RoFormer ignores norm_type and use_bias, so a V2 checkpoint loads into it
    with fresh LayerNorms and biases and other logits: max abs difference 13.7 to 16.6 over 5 seeds of that fresh
    initialisation, where the reference's logits are at most 11.3 in magnitude."""
    batch = reference_batch("v2")
    logits = transformers_masked_lm_logits(checkpoints["v2"], "v2")
    attended = batch["attention_mask"].bool()
    difference = (logits[attended] - reference_outputs("v2")["logits"][attended]).abs().max().item()
    assert difference > 1.0
