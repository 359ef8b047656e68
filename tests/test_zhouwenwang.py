"""IDEA's Zhouwenwang-Unified: a pre-norm RoFormer with a final LayerNorm, no embedding LayerNorm and UniLM attention in
every head, loaded from fengshen's Hub layout directly and through conversion.

The golden values (`tests/fixtures/reference/zhouwenwang/`) come from fengshen's own RoFormer, run by hand by
`tests/fixtures/make_zhouwenwang_reference.py` in a separate environment. fengshen's port adds its boolean mask to the
attention scores (+1.0 where masked) instead of masking; Megatron, which trained the model, sets masked scores to
-10000. So the padded and two-segment outputs, and the generation, were made with the port's mask applied the
Megatron way (the script patches it at run time); the one-segment batch without padding has nothing to mask and is the
port's output as it is. We match them within 1e-5 with eager and sdpa attention.
"""

import json
import shutil
from pathlib import Path

import huggingface_hub
import pytest
import torch
from conftest import TINY
from safetensors.torch import load_file

from roformer_hf import (
    RoFormerConfig,
    RoFormerForCausalLM,
    RoFormerForMaskedLM,
    RoFormerForSequenceClassification,
    RoFormerModel,
)
from roformer_hf.conversion.convert import ConversionError, convert, main
from roformer_hf.conversion.fengshen_layout import (
    FENGSHEN_BUFFERS,
    ZHOUWENWANG_SETTINGS,
    fengshen_to_roformer_hf,
    roformer_hf_to_fengshen,
)
from roformer_hf.modeling import blockwise_attention_forward

FIXTURE = Path(__file__).parent / "fixtures" / "reference" / "zhouwenwang"
TOLERANCE = 1e-5  # fp32; fengshen and we sum in different orders
ATTENTION = ["eager", "sdpa"]
BATCHES = ["one_segment", "padded", "two_segments"]
HUB_ID = "IDEA-CCNL/Zhouwenwang-Unified-tiny"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
V1_DEFAULTS = {
    "norm_position": "post",
    "final_layer_norm": False,
    "embedding_layer_norm": True,
    "encoder_mask": "bidirectional",
}


def write_fengshen_folder(folder: Path) -> Path:
    """The checkpoint as fengshen saves it: config.json (model_type "roformer"), pytorch_model.bin (`bert.*` names),
    vocab.txt."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "vocab.txt"):
        shutil.copy(FIXTURE / name, folder / name)
    torch.save(load_file(FIXTURE / "weights.safetensors"), folder / "pytorch_model.bin")
    return folder


@pytest.fixture(scope="module")
def fengshen_folder(tmp_path_factory) -> Path:
    return write_fengshen_folder(tmp_path_factory.mktemp("zhouwenwang"))


@pytest.fixture(scope="module")
def converted(fengshen_folder, tmp_path_factory) -> Path:
    return convert(fengshen_folder, tmp_path_factory.mktemp("converted") / "zhouwenwang")


def batch(name: str) -> dict[str, torch.Tensor]:
    inputs = json.loads((FIXTURE / "inputs.json").read_text())[name]
    return {key: torch.tensor(values) for key, values in inputs.items()}


def reference(name: str) -> torch.Tensor:
    return load_file(FIXTURE / "outputs.safetensors")[name]


def load_every_weight(model_class: type, folder: Path | str, ignored_prefix: str = "-", **kwargs):
    """`from_pretrained` that fails on any missing, unexpected or mismatched weight but those under `ignored_prefix`
    (a head the class does not have)."""
    model, loading_info = model_class.from_pretrained(folder, output_loading_info=True, **kwargs)
    problems = {
        kind: sorted(k for k in map(str, keys) if not k.startswith(ignored_prefix))
        for kind, keys in loading_info.items()
    }
    assert not any(problems.values()), problems
    return model.eval()


def assert_matches(actual: torch.Tensor, expected: torch.Tensor, inputs: dict, tolerance: float = TOLERANCE) -> None:
    """Compares per-token outputs where there is a token (fengshen's outputs at padding mean nothing)."""
    tokens = inputs.get("attention_mask", torch.ones_like(inputs["input_ids"])).bool()
    difference = (actual - expected)[tokens].abs().max().item()
    assert difference <= tolerance, f"max difference {difference:.2e} over {tolerance:.0e}"


def mlm_logits(model: torch.nn.Module, name: str) -> torch.Tensor:
    with torch.no_grad():
        return model(**batch(name)).logits


@pytest.mark.parametrize("attn_implementation", ATTENTION)
def test_loads_directly_as_a_pre_norm_unilm(fengshen_folder, attn_implementation):
    model = load_every_weight(RoFormerForMaskedLM, fengshen_folder, attn_implementation=attn_implementation)
    assert {name: getattr(model.config, name) for name in ZHOUWENWANG_SETTINGS} == ZHOUWENWANG_SETTINGS
    assert model.config._attn_implementation == attn_implementation
    assert not model.config.add_pooling_layer  # fengshen's MLM has no pooler
    assert model.name_or_path == str(fengshen_folder)


@pytest.mark.parametrize("attn_implementation", ATTENTION)
@pytest.mark.parametrize("name", BATCHES)
def test_mlm_logits_match_fengshen(fengshen_folder, name, attn_implementation):
    model = load_every_weight(RoFormerForMaskedLM, fengshen_folder, attn_implementation=attn_implementation)
    assert_matches(mlm_logits(model, name), reference(f"{name}.logits"), batch(name))


@pytest.mark.parametrize("attn_implementation", ATTENTION)
@pytest.mark.parametrize("name", BATCHES)
def test_hidden_states_of_every_layer_match_fengshen(fengshen_folder, name, attn_implementation):
    """The embedding output (no LayerNorm), each layer's output, the last after the final LayerNorm."""
    model = load_every_weight(RoFormerModel, fengshen_folder, "cls.", attn_implementation=attn_implementation)
    with torch.no_grad():
        hidden_states = model(**batch(name), output_hidden_states=True).hidden_states
    assert len(hidden_states) == model.config.num_hidden_layers + 1
    for index, states in enumerate(hidden_states):
        assert_matches(states, reference(f"{name}.hidden_states.{index}"), batch(name))


@pytest.mark.parametrize("attn_implementation", ATTENTION)
def test_greedy_generation_continues_as_fengshen(fengshen_folder, attn_implementation):
    """fengshen re-read the whole text at every step (prompt type 0, new tokens type 1); `generate` uses the cache."""
    generation = json.loads((FIXTURE / "generation.json").read_text())
    model = load_every_weight(RoFormerForCausalLM, fengshen_folder, attn_implementation=attn_implementation)
    assert (
        model.config.is_decoder and model.roformer.pooler is None
    )  # a generating class is a decoder; no pooler to invent
    prompt = torch.tensor(generation["prompt"])
    kwargs = {"max_new_tokens": generation["max_new_tokens"], "do_sample": False}
    with_cache = model.generate(prompt, **kwargs)
    assert with_cache.tolist() == generation["sequences"]
    assert torch.equal(model.generate(prompt, use_cache=False, **kwargs), with_cache)


def test_blockwise_attention_honours_the_unilm_mask(fengshen_folder, monkeypatch):
    """The CPU training path of "sdpa" (blockwise attention) takes the UniLM mask and padding as eager does."""
    calls = []

    def recording(*args, **kwargs):
        calls.append("blockwise")
        return blockwise_attention_forward(*args, **kwargs)

    monkeypatch.setattr("roformer_hf.modeling.blockwise_attention_forward", recording)
    monkeypatch.setattr("roformer_hf.modeling.prefers_blockwise_attention", lambda config, query, dropout: True)
    model = load_every_weight(RoFormerForMaskedLM, fengshen_folder, attn_implementation="sdpa")
    for name in ("padded", "two_segments"):
        assert_matches(mlm_logits(model, name), reference(f"{name}.logits"), batch(name))
    assert calls


def test_classifier_reading_cls_only_equals_the_whole_last_layer(fengshen_folder):
    """The classifier's last layer computes [CLS] alone (`last_layer_positions`), under the UniLM mask as well."""
    torch.manual_seed(0)
    classifier = RoFormerForSequenceClassification.from_pretrained(fengshen_folder, num_labels=3).eval()  # new head
    model = RoFormerModel(classifier.config).eval()
    model.load_state_dict(classifier.roformer.state_dict())
    inputs = batch("two_segments")
    with torch.no_grad():
        expected = classifier.classifier(model(**inputs).last_hidden_state)
        torch.testing.assert_close(classifier(**inputs).logits, expected)


def test_conversion_matches_fengshen(converted):
    config = json.loads((converted / "config.json").read_text())
    assert config["model_type"] == "roformer_hf"
    assert {name: config[name] for name in ZHOUWENWANG_SETTINGS} == ZHOUWENWANG_SETTINGS
    model = load_every_weight(RoFormerForMaskedLM, converted)
    for name in ("one_segment", "two_segments"):
        assert_matches(mlm_logits(model, name), reference(f"{name}.logits"), batch(name), tolerance=1e-4)


def test_converted_model_generates_as_fengshen(converted):
    generation = json.loads((FIXTURE / "generation.json").read_text())
    model = load_every_weight(RoFormerForCausalLM, converted, is_decoder=True)
    sequences = model.generate(torch.tensor(generation["prompt"]), max_new_tokens=8, do_sample=False)
    assert sequences.tolist() == generation["sequences"]


def test_command_line_converts(fengshen_folder, tmp_path, capsys):
    assert main([str(fengshen_folder), str(tmp_path / "out")]) == 0
    assert "Wrote the roformer_hf checkpoint" in capsys.readouterr().out
    assert_matches(
        mlm_logits(load_every_weight(RoFormerForMaskedLM, tmp_path / "out"), "padded"),
        reference("padded.logits"),
        batch("padded"),
    )


@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> Path:
    """huggingface_hub's cache, offline, holding a snapshot of the fixture as the Hub id `HUB_ID`."""
    repo_folder = tmp_path / "hub" / f"models--{HUB_ID.replace('/', '--')}"
    write_fengshen_folder(repo_folder / "snapshots" / COMMIT)
    (repo_folder / "refs").mkdir()
    (repo_folder / "refs" / "main").write_text(COMMIT)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return tmp_path / "hub"


def test_a_hub_id_in_the_cache_loads_and_converts(hub_cache, tmp_path):
    model = load_every_weight(RoFormerForMaskedLM, HUB_ID)
    assert_matches(mlm_logits(model, "two_segments"), reference("two_segments.logits"), batch("two_segments"))
    output = convert(HUB_ID, tmp_path / "converted")
    converted_model = load_every_weight(RoFormerForMaskedLM, output)
    assert_matches(
        mlm_logits(converted_model, "two_segments"), reference("two_segments.logits"), batch("two_segments")
    )


def test_a_pooler_in_the_checkpoint_is_kept(tmp_path):
    """fengshen's `RoFormerModel` has a pooler by default: where the weights hold one, the model has it, directly
    and after conversion (so `pooler_output` is fengshen's tanh(dense(h[:, 0]))."""
    folder = write_fengshen_folder(tmp_path / "with_pooler")
    weights = torch.load(folder / "pytorch_model.bin", weights_only=True)
    pooler = {"bert.pooler.dense.weight": torch.randn(32, 32), "bert.pooler.dense.bias": torch.randn(32)}
    torch.save({**weights, **pooler}, folder / "pytorch_model.bin")
    for source in (folder, convert(folder, tmp_path / "converted")):
        model = load_every_weight(RoFormerModel, source, "cls.")
        torch.testing.assert_close(model.pooler.dense.weight, pooler["bert.pooler.dense.weight"])
        with torch.no_grad():
            output = model(**batch("two_segments"))
        expected = torch.tanh(model.pooler.dense(output.last_hidden_state[:, 0]))
        torch.testing.assert_close(output.pooler_output, expected)


def test_the_bare_encoders_layout_loads_and_converts(tmp_path):
    """fengshen's `RoFormerModel` saves the encoder without the `bert.` prefix (and without the LM head)."""
    folder = write_fengshen_folder(tmp_path / "bare")
    weights = torch.load(folder / "pytorch_model.bin", weights_only=True)
    bare = {name.removeprefix("bert."): tensor for name, tensor in weights.items() if name.startswith("bert.")}
    torch.save(bare, folder / "pytorch_model.bin")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "architectures": ["RoFormerModel"]}))
    for source in (folder, convert(folder, tmp_path / "converted")):
        model = load_every_weight(RoFormerModel, source)
        with torch.no_grad():
            last_hidden_state = model(**batch("two_segments")).last_hidden_state
        assert_matches(last_hidden_state, reference("two_segments.hidden_states.3"), batch("two_segments"))


def test_save_and_load_keep_the_architecture(fengshen_folder, tmp_path):
    """A model loaded from fengshen's layout saves roformer_hf's names and config fields, and loads back alike."""
    load_every_weight(RoFormerForMaskedLM, fengshen_folder).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert {name: config[name] for name in ZHOUWENWANG_SETTINGS} == ZHOUWENWANG_SETTINGS
    reloaded = load_every_weight(RoFormerForMaskedLM, tmp_path)
    assert_matches(mlm_logits(reloaded, "two_segments"), reference("two_segments.logits"), batch("two_segments"))


def test_a_missing_norm_weight_is_refused_not_random(fengshen_folder, tmp_path):
    """The random-weights guard holds for this layout, directly and through conversion."""
    folder = write_fengshen_folder(tmp_path / "incomplete")
    weights = torch.load(folder / "pytorch_model.bin", weights_only=True)
    del weights["bert.encoder.layer.1.ln.weight"]
    torch.save(weights, folder / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"intermediate\.input_norm\.weight"):
        RoFormerForMaskedLM.from_pretrained(folder)
    with pytest.raises(ConversionError, match="some of its weights would be random"):
        convert(folder, tmp_path / "out")


def test_a_plain_v1_config_is_refused(fengshen_folder):
    """Given a config that says V1, the checkpoint's pre-norm weights cannot fill the post-norm model."""
    config = RoFormerConfig.from_pretrained(fengshen_folder)
    with pytest.raises(ValueError, match="some of its weights would be random"):
        RoFormerForMaskedLM.from_pretrained(fengshen_folder, config=config)


def test_names_map_both_ways_and_cover_every_weight():
    names = [name for name in load_file(FIXTURE / "weights.safetensors") if not FENGSHEN_BUFFERS.fullmatch(name)]
    ours = {fengshen_to_roformer_hf(name) for name in names}
    model = RoFormerForMaskedLM(
        RoFormerConfig(**{**json.loads((FIXTURE / "config.json").read_text()), **ZHOUWENWANG_SETTINGS})
    )
    assert ours == set(model.state_dict())
    assert all(roformer_hf_to_fengshen(fengshen_to_roformer_hf(name)) == name for name in names)


def test_defaults_are_v1_and_add_no_weights():
    config = RoFormerConfig(**TINY)
    assert {name: getattr(config, name) for name in V1_DEFAULTS} == V1_DEFAULTS
    names = set(RoFormerForMaskedLM(config).state_dict())
    assert not any("input_norm" in name or "final_norm" in name for name in names)
    assert (
        "roformer.embeddings.LayerNorm.weight" in names and "roformer.encoder.layer.0.output.LayerNorm.weight" in names
    )


def test_pre_norm_places_the_norms_on_the_block_inputs():
    """Per layer: x + attention(norm(x)), then y + feed_forward(norm(y)); the embeddings are not normalised."""
    torch.manual_seed(0)
    config = RoFormerConfig(**{**TINY, "num_hidden_layers": 1}, **ZHOUWENWANG_SETTINGS)
    model = RoFormerModel(config).eval()
    embeddings, layer = model.embeddings, model.encoder.layer[0]
    input_ids = torch.randint(1, TINY["vocab_size"], (1, 6))
    with torch.no_grad():
        hidden = embeddings.word_embeddings(input_ids) + embeddings.token_type_embeddings.weight[0]
        cos_sin = model.rotary_emb(hidden, torch.arange(6)[None])
        attention, _ = layer.attention.self(layer.attention.input_norm(hidden), position_embeddings=cos_sin)
        hidden = hidden + layer.attention.output.dense(attention)
        hidden = hidden + layer.output.dense(layer.intermediate(hidden))  # intermediate normalises its input
        expected = model.encoder.final_norm(hidden)
        torch.testing.assert_close(model(input_ids).last_hidden_state, expected)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"norm_position": "middle"}, "Unknown norm_position 'middle'"),
        ({"encoder_mask": "causal"}, "Unknown encoder_mask 'causal'"),
        ({"encoder_mask": "unilm", "attention_type": "linear"}, "encoder_mask='unilm' masks attention by token type"),
        ({"encoder_mask": "unilm", "type_vocab_size": 1}, "encoder_mask='bidirectional'"),
    ],
)
def test_bad_settings_name_the_fix(setting, message):
    with pytest.raises(ValueError, match=message):
        RoFormerConfig(**TINY, **setting)


def test_a_checkpoint_without_its_final_norm_is_not_called_a_v2_checkpoint(tmp_path):
    """Zhouwenwang's layout with the norm after the last layer lost: the line names that norm and
    final_layer_norm, not RoFormer-V2's settings (its missing bias once read as V2's use_bias=False)."""
    from safetensors.torch import load_file, save_file

    from roformer_hf import RoFormerConfig, RoFormerModel
    from roformer_hf.conversion.fengshen_layout import ZHOUWENWANG_SETTINGS

    sizes = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
    RoFormerModel(RoFormerConfig(vocab_size=100, **sizes, **ZHOUWENWANG_SETTINGS)).save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    kept = {name: tensor for name, tensor in weights.items() if "final_norm" not in name}
    save_file(kept, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError) as error:
        RoFormerModel.from_pretrained(tmp_path)
    assert "RoFormer-V2" not in str(error.value) and "use_bias" not in str(error.value)
    assert "no norm after the last layer (encoder.final_norm.bias, encoder.final_norm.weight)" in str(error.value)
    assert "final_layer_norm=False" in str(error.value)
