"""RoFormer-V2 (RMS norm, no biases), the pooler of RoFormer-Sim, loading checks and multiple-choice pooling."""

import json
import logging

import pytest
import safetensors.torch
import torch
import transformers
from conftest import TINY, assert_padding_changes_nothing, enable_activation_checkpointing
from transformers import AutoModel

import roformer_hf
from roformer_hf import (
    RoFormerConfig,
    RoFormerForCausalLM,
    RoFormerForMaskedLM,
    RoFormerForMultipleChoice,
    RoFormerForSequenceClassification,
    RoFormerModel,
)
from roformer_hf.modeling import RoFormerRMSNorm, blockwise_attention_forward
from roformer_hf.training.building import build_model
from roformer_hf.training.cli import ModelArguments
from roformer_hf.training.errors import ScriptError

V2 = {"norm_type": "rms_norm", "use_bias": False, "hidden_act": "relu"}
V1_SETTINGS = {"norm_type": "layer_norm", "use_bias": True}
POOLER_KEYS = {"roformer.pooler.dense.weight", "roformer.pooler.dense.bias"}


def tiny_config(**overrides) -> RoFormerConfig:
    return RoFormerConfig(**{**TINY, **overrides})


def v2_config(**overrides) -> RoFormerConfig:
    return tiny_config(**{**V2, **overrides})


def batch_with_padding(batch_size: int = 2, seq_len: int = 13) -> dict:
    torch.manual_seed(1)
    input_ids = torch.randint(1, TINY["vocab_size"], (batch_size, seq_len))
    attention_mask = torch.ones(batch_size, seq_len, dtype=torch.long)
    attention_mask[-1, seq_len - 4 :] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def gradients(model: torch.nn.Module, **inputs) -> dict[str, torch.Tensor]:
    model.zero_grad()
    model(**inputs).loss.backward()
    return {name: parameter.grad.clone() for name, parameter in model.named_parameters() if parameter.grad is not None}


def assert_same_gradients(actual: dict, expected: dict) -> None:
    assert actual.keys() == expected.keys()
    for name, gradient in expected.items():
        torch.testing.assert_close(actual[name], gradient, atol=1e-6, rtol=1e-5, msg=name)


# --- RoFormer-V2 -----------------------------------------------------------------------------------------------


def test_rms_norm_is_x_over_root_mean_square():
    torch.manual_seed(0)
    hidden_states = torch.randn(2, 5, 32) * 3
    expected = hidden_states / torch.sqrt(hidden_states.pow(2).mean(-1, keepdim=True) + 1e-12)
    norm = RoFormerRMSNorm(eps=1e-12)
    torch.testing.assert_close(norm(hidden_states), expected, atol=1e-6, rtol=1e-6)
    assert not list(norm.parameters())
    half = norm(hidden_states.bfloat16())
    assert half.dtype == torch.bfloat16
    torch.testing.assert_close(half.float(), expected, atol=0.05, rtol=0.01)  # bfloat16 has 8 bits of mantissa


def test_v2_encoder_has_no_norm_weights_and_no_biases():
    model = RoFormerModel(v2_config(embedding_size=16))
    names = {name for name, _ in model.named_parameters()}
    assert not [name for name in names if "LayerNorm" in name]
    assert not [name for name in names if name.endswith(".bias") and name.startswith("encoder.")]
    assert "embeddings_project.bias" in names  # the embedding projection keeps its bias, as in roformer 0.4.3
    hidden, inner, layers = 32, 37, 2
    per_layer = 4 * hidden * hidden + 2 * hidden * inner
    embeddings = 99 * 16 + 2 * 16 + (16 * hidden + hidden)
    assert sum(parameter.numel() for parameter in model.parameters()) == embeddings + layers * per_layer


def test_v2_mlm_head_is_the_tied_decoder_alone():
    model = RoFormerForMaskedLM(v2_config())
    assert [name for name in model.state_dict() if name.startswith("cls.")] == ["cls.predictions.decoder.weight"]
    assert model.cls.predictions.decoder.weight is model.roformer.embeddings.word_embeddings.weight
    assert model.cls.predictions.decoder.bias is None
    with pytest.raises(ValueError, match=r"embedding_size \(16\) must equal hidden_size \(32\)"):
        RoFormerForMaskedLM(v2_config(embedding_size=16))


def test_v2_mlm_logits_are_the_tied_decoder_of_the_last_hidden_state():
    torch.manual_seed(0)
    model = RoFormerForMaskedLM(v2_config()).eval()
    inputs = batch_with_padding()
    with torch.no_grad():
        output = model(**inputs, output_hidden_states=True)
    expected = output.hidden_states[-1] @ model.roformer.embeddings.word_embeddings.weight.T
    torch.testing.assert_close(output.logits, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("is_decoder", [False, True])
def test_v2_eager_equals_sdpa_with_padding(is_decoder):
    torch.manual_seed(0)
    eager = RoFormerModel(v2_config(is_decoder=is_decoder, attn_implementation="eager")).eval()
    sdpa = RoFormerModel(v2_config(is_decoder=is_decoder)).eval()
    sdpa.load_state_dict(eager.state_dict())
    inputs = batch_with_padding()
    real = inputs["attention_mask"].bool()
    with torch.no_grad():
        expected = eager(**inputs, use_cache=False).last_hidden_state
        actual = sdpa(**inputs, use_cache=False).last_hidden_state
    assert (expected[real] - actual[real]).abs().max() <= 1e-5


@pytest.mark.parametrize("attention_type", ["softmax", "linear"])
def test_v2_padding_changes_nothing(attention_type):
    torch.manual_seed(0)
    model = RoFormerModel(v2_config(attention_type=attention_type)).eval()
    assert_padding_changes_nothing(model)


def test_v2_blockwise_training_path_gives_the_gradients_of_eager(monkeypatch):
    monkeypatch.setattr("roformer_hf.modeling.BLOCK_ELEMENTS", 4 * 4 * 13)  # several blocks of queries
    calls = []

    def recording(*args, **kwargs):
        calls.append("blockwise")
        return blockwise_attention_forward(*args, **kwargs)

    monkeypatch.setattr("roformer_hf.modeling.blockwise_attention_forward", recording)
    monkeypatch.setattr(  # blockwise attention without dropout, to compare with eager attention
        "roformer_hf.modeling.prefers_blockwise_attention",
        lambda config, query, dropout: config._attn_implementation == "sdpa",
    )
    torch.manual_seed(0)
    blockwise = RoFormerForMaskedLM(v2_config()).train()
    eager = RoFormerForMaskedLM(v2_config(attn_implementation="eager")).train()
    eager.load_state_dict(blockwise.state_dict())
    inputs = batch_with_padding()
    labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
    expected = gradients(eager, **inputs, labels=labels)
    assert not calls
    actual = gradients(blockwise, **inputs, labels=labels)
    assert calls == ["blockwise", "blockwise"]
    assert_same_gradients(actual, expected)


def test_v2_classifier_last_layer_at_cls_only_gives_the_same_loss_and_gradients():
    torch.manual_seed(0)
    model = RoFormerForSequenceClassification(v2_config(num_labels=3)).train()  # dropouts are 0 in TINY
    inputs = {**batch_with_padding(), "labels": torch.tensor([0, 2])}
    subset_loss = model(**inputs).loss
    full_loss = model(**inputs, output_hidden_states=True).loss  # every layer's output: every position computed
    torch.testing.assert_close(subset_loss, full_loss, atol=1e-6, rtol=1e-6)
    subset = gradients(model, **inputs)
    full = gradients(model, **inputs, output_hidden_states=True)
    assert_same_gradients(subset, full)


def test_v2_gradient_checkpointing_gives_the_same_gradients():
    torch.manual_seed(0)
    model = RoFormerForMaskedLM(v2_config()).train()
    inputs = batch_with_padding()
    labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
    plain = gradients(model, **inputs, labels=labels)
    enable_activation_checkpointing(model)
    assert_same_gradients(gradients(model, **inputs, labels=labels), plain)


@pytest.mark.parametrize(
    "head",
    [
        "RoFormerForMaskedLM",
        "RoFormerForCausalLM",
        "RoFormerForSequenceClassification",
        "RoFormerForTokenClassification",
        "RoFormerForQuestionAnswering",
        "RoFormerForMultipleChoice",
    ],
)
def test_v2_heads_round_trip_through_save_and_load(tmp_path, head):
    torch.manual_seed(0)
    model = getattr(roformer_hf, head)(v2_config(is_decoder=head == "RoFormerForCausalLM")).eval()
    model.save_pretrained(tmp_path)
    loaded, loading_info = getattr(roformer_hf, head).from_pretrained(tmp_path, output_loading_info=True)
    assert not loading_info["missing_keys"] and not loading_info["unexpected_keys"]
    assert (loaded.config.norm_type, loaded.config.use_bias) == ("rms_norm", False)
    inputs = batch_with_padding()
    if head == "RoFormerForMultipleChoice":
        inputs = {name: tensor[None].repeat(2, 1, 1) for name, tensor in inputs.items()}
    with torch.no_grad():
        for name, value in model(**inputs).items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(loaded(**inputs)[name], value), name


def test_v2_config_reads_from_an_original_config_json(tmp_path):
    original = {
        "model_type": "roformer",
        "architectures": ["RoFormerForMaskedLM"],
        **TINY,
        "hidden_act": "relu",
        "norm_type": "rms_norm",
        "use_bias": False,
        "pooler_activation": "linear",
        "max_position_embeddings": 512,
    }
    (tmp_path / "config.json").write_text(json.dumps(original))
    config = RoFormerConfig.from_pretrained(tmp_path)
    assert config.model_type == "roformer_hf"
    assert (config.norm_type, config.use_bias, config.hidden_act, config.pooler_activation) == (
        "rms_norm",
        False,
        "relu",
        "linear",
    )
    config.save_pretrained(tmp_path / "saved")
    again = RoFormerConfig.from_pretrained(tmp_path / "saved")
    assert (again.norm_type, again.use_bias, again.pooler_activation) == ("rms_norm", False, "linear")
    defaults = RoFormerConfig(**TINY)
    assert (defaults.norm_type, defaults.use_bias, defaults.add_pooling_layer) == ("layer_norm", True, False)
    assert (defaults.pooler_activation, defaults.multiple_choice_pooling) == ("tanh", "last_token")


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"norm_type": "rmsnorm"}, "Unknown norm_type 'rmsnorm': use one of 'layer_norm', 'rms_norm'"),
        ({"pooler_activation": "relu"}, "Unknown pooler_activation 'relu': use one of 'tanh', 'linear'"),
        ({"multiple_choice_pooling": "first"}, "Unknown multiple_choice_pooling 'first'"),
    ],
)
def test_unknown_variant_settings_raise_value_error(setting, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(**setting)


# --- no silent random weights ----------------------------------------------------------------------------------


def as_original_checkpoint(folder, drop: tuple[str, ...] = ()) -> None:
    """Rewrites a saved config.json as an original one (model_type "roformer"), without the fields in `drop`."""
    config = json.loads((folder / "config.json").read_text())
    config = {name: value for name, value in config.items() if name not in drop} | {"model_type": "roformer"}
    config.pop("auto_map", None)
    (folder / "config.json").write_text(json.dumps(config))


def test_v2_weights_with_a_v1_config_raise_value_error(tmp_path):
    RoFormerForMaskedLM(v2_config()).save_pretrained(tmp_path)
    as_original_checkpoint(tmp_path, drop=("norm_type", "use_bias"))  # a config that lost the V2 fields
    with pytest.raises(
        ValueError, match="RoFormer-V2 checkpoint: its config needs norm_type='rms_norm', use_bias=False"
    ):
        RoFormerForMaskedLM.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match="RoFormer-V2 checkpoint"):  # a fresh head does not hide the encoder's
        RoFormerForSequenceClassification.from_pretrained(tmp_path)
    model = RoFormerForMaskedLM.from_pretrained(tmp_path, norm_type="rms_norm", use_bias=False)
    assert model.config.norm_type == "rms_norm"


def test_v1_weights_with_a_v2_config_raise_value_error(tmp_path):
    RoFormerForMaskedLM(tiny_config()).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="its config needs norm_type='layer_norm', use_bias=True"):
        RoFormerModel.from_pretrained(tmp_path, **V2)
    with pytest.raises(ValueError, match="its config needs use_bias=True"):
        RoFormerModel.from_pretrained(tmp_path, use_bias=False)


def test_a_truncated_encoder_raises_value_error(tmp_path):
    RoFormerForMaskedLM(tiny_config()).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"the checkpoint has 2 layers but config\.num_hidden_layers is 3"):
        RoFormerForMaskedLM.from_pretrained(tmp_path, num_hidden_layers=3)


def test_a_checkpoint_without_encoder_weights_names_no_variant(tmp_path):
    """No norm weight loaded says nothing of RoFormer-V2: the message names the absent layers instead."""
    RoFormerForSequenceClassification(tiny_config()).save_pretrained(tmp_path)
    weights = safetensors.torch.load_file(tmp_path / "model.safetensors")
    head_only = {name: tensor for name, tensor in weights.items() if name.startswith("classifier.")}
    safetensors.torch.save_file(head_only, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match="the checkpoint has 0 layers") as error:
        RoFormerForSequenceClassification.from_pretrained(tmp_path)
    assert "RoFormer-V2" not in str(error.value)


def replace_weights(folder, weights: dict[str, torch.Tensor]) -> None:
    safetensors.torch.save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})


@pytest.mark.parametrize("model_class", [RoFormerModel, RoFormerForMaskedLM, RoFormerForSequenceClassification])
def test_a_file_without_any_weight_of_the_model_is_refused_unless_the_report_is_asked_for(
    tmp_path, model_class, caplog
):
    """transformers' test_model_weights_reload_no_missing_tied_weights saves a model, replaces its weights by one
    tensor of no model and reads the report of `output_loading_info=True`: it gets every weight, listed missing."""
    model_class(tiny_config()).save_pretrained(tmp_path)
    replace_weights(tmp_path, {"tensor": torch.tensor([1, 2])})
    with pytest.raises(ValueError, match="the checkpoint has 0 layers"):
        model_class.from_pretrained(tmp_path)
    with caplog.at_level(logging.WARNING):
        loaded, loading_info = model_class.from_pretrained(tmp_path, output_loading_info=True)
    assert set(loading_info["missing_keys"]) == set(loaded.state_dict())
    assert loading_info["unexpected_keys"] == {"tensor"}
    assert f"holds no weight of {model_class.__name__}, so all its weights are random" in caplog.text


def test_a_checkpoint_that_fills_part_of_the_encoder_is_refused_even_when_the_report_is_asked_for(tmp_path):
    RoFormerForMaskedLM(tiny_config()).save_pretrained(tmp_path)
    weights = safetensors.torch.load_file(tmp_path / "model.safetensors")
    replace_weights(tmp_path, {name: tensor for name, tensor in weights.items() if ".layer.1." not in name})
    with pytest.raises(ValueError, match=r"the checkpoint has 1 layers but config\.num_hidden_layers is 2"):
        RoFormerForMaskedLM.from_pretrained(tmp_path, output_loading_info=True)
    replace_weights(tmp_path, {name: tensor for name, tensor in weights.items() if name.startswith("cls.")})
    with pytest.raises(ValueError, match="the checkpoint has 0 layers"):  # the head's bias alone: not "no weight"
        RoFormerForMaskedLM.from_pretrained(tmp_path, output_loading_info=True)


def test_tied_word_embeddings_absent_from_the_file_are_not_random(tmp_path):
    """A file holding the tied decoder weight under its own name and not the word embeddings (as tools that keep
    either name of a shared tensor may write it) fills both: nothing random, nothing refused."""
    torch.manual_seed(0)
    model = RoFormerForMaskedLM(tiny_config())
    model.save_pretrained(tmp_path)
    weights = safetensors.torch.load_file(tmp_path / "model.safetensors")
    embeddings = weights.pop("roformer.embeddings.word_embeddings.weight")
    replace_weights(tmp_path, {**weights, "cls.predictions.decoder.weight": embeddings})
    loaded, loading_info = RoFormerForMaskedLM.from_pretrained(tmp_path, output_loading_info=True)
    assert not loading_info["missing_keys"]
    torch.testing.assert_close(loaded.roformer.embeddings.word_embeddings.weight, embeddings, atol=0, rtol=0)
    assert loaded.cls.predictions.decoder.weight is loaded.roformer.embeddings.word_embeddings.weight


def test_encoder_weights_of_another_shape_raise_value_error_unless_mismatches_are_ignored(tmp_path, caplog):
    RoFormerForMaskedLM(tiny_config()).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"intermediate\.dense\.weight \(37, 32\) vs \(40, 32\)"):
        RoFormerModel.from_pretrained(tmp_path, intermediate_size=40)
    with pytest.raises(RuntimeError, match="does not fit the encoder"):  # what transformers raises for a mismatch
        RoFormerModel.from_pretrained(tmp_path, intermediate_size=40)
    # Asked for explicitly, as transformers' contract has it: the weights of another shape are new, said in a warning.
    model = RoFormerModel.from_pretrained(tmp_path, intermediate_size=40, ignore_mismatched_sizes=True)
    assert model.encoder.layer[0].intermediate.dense.weight.shape == (40, 32)
    assert "intermediate.dense.weight (37, 32) vs (40, 32)" in caplog.text and "random" in caplog.text
    with pytest.raises(
        ValueError, match=r"config\.num_hidden_layers is 4"
    ):  # a missing weight is refused all the same
        RoFormerModel.from_pretrained(tmp_path, num_hidden_layers=4, ignore_mismatched_sizes=True)


def test_scripts_turn_the_loading_error_into_one_line(tmp_path):
    RoFormerForMaskedLM(v2_config()).save_pretrained(tmp_path)
    model_args = ModelArguments(model_name_or_path=str(tmp_path))
    with pytest.raises(ScriptError, match="RoFormer-V2 checkpoint"):
        build_model(model_args, tiny_config(), RoFormerForSequenceClassification)


def test_new_heads_and_a_new_pooler_initialise_as_usual(tmp_path):
    torch.manual_seed(0)
    RoFormerForMaskedLM(tiny_config()).save_pretrained(tmp_path / "mlm")
    classifier, loading_info = RoFormerForSequenceClassification.from_pretrained(
        tmp_path / "mlm", num_labels=3, output_loading_info=True
    )
    assert {name.split(".")[0] for name in loading_info["missing_keys"]} == {"classifier"}
    _, loading_info = RoFormerForCausalLM.from_pretrained(
        tmp_path / "mlm", is_decoder=True, add_pooling_layer=True, output_loading_info=True
    )
    assert loading_info["missing_keys"] == POOLER_KEYS

    classifier.save_pretrained(tmp_path / "classifier")
    with pytest.raises(
        RuntimeError, match="ignore_mismatched_sizes=True"
    ):  # a head of another size: as in transformers
        RoFormerForSequenceClassification.from_pretrained(tmp_path / "classifier", num_labels=5)
    resized = RoFormerForSequenceClassification.from_pretrained(
        tmp_path / "classifier", num_labels=5, ignore_mismatched_sizes=True
    )
    assert resized.classifier.out_proj.weight.shape == (5, 32)


def test_transformers_roformer_loads_as_before(tmp_path):
    """Our check is ours: transformers' RoFormer still loads a checkpoint with missing layers, with its report."""
    transformers.RoFormerForMaskedLM(transformers.RoFormerConfig(**TINY)).save_pretrained(tmp_path)
    _, loading_info = transformers.RoFormerForMaskedLM.from_pretrained(
        tmp_path, num_hidden_layers=3, output_loading_info=True
    )
    assert any(name.startswith("roformer.encoder.layer.2.") for name in loading_info["missing_keys"])


# --- the pooler (RoFormer-Sim) -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("pooler_activation", "activation"), [("tanh", torch.tanh), ("linear", lambda x: x)])
def test_pooler_output_is_the_activation_of_dense_of_the_first_token(pooler_activation, activation):
    torch.manual_seed(0)
    config = tiny_config(add_pooling_layer=True, pooler_activation=pooler_activation)
    model = RoFormerModel(config).eval()
    with torch.no_grad():
        output = model(**batch_with_padding())
    dense = model.pooler.dense
    expected = activation(output.last_hidden_state[:, 0] @ dense.weight.T + dense.bias)
    torch.testing.assert_close(output.pooler_output, expected, atol=1e-6, rtol=1e-6)
    assert output.pooler_output.shape == (2, 32)


def test_add_pooling_layer_argument_overrides_the_config():
    assert RoFormerModel(tiny_config()).pooler is None
    assert RoFormerModel(tiny_config(), add_pooling_layer=True).pooler is not None
    assert RoFormerModel(tiny_config(add_pooling_layer=True), add_pooling_layer=False).pooler is None
    with torch.no_grad():
        assert RoFormerModel(tiny_config()).eval()(torch.tensor([[1, 2, 3]])).pooler_output is None


def sim_model(**overrides) -> RoFormerForCausalLM:
    torch.manual_seed(0)
    settings = {"is_decoder": True, "decoder_mask": "unilm", "pooler_activation": "linear", **overrides}
    return RoFormerForCausalLM(tiny_config(**settings)).eval()


def test_sim_causal_lm_loads_without_missing_keys_and_gives_its_sentence_vector(tmp_path):
    model = sim_model()
    assert set(model.state_dict()) >= POOLER_KEYS
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["add_pooling_layer"] is True
    loaded, loading_info = RoFormerForCausalLM.from_pretrained(tmp_path, output_loading_info=True)
    assert not loading_info["missing_keys"] and not loading_info["unexpected_keys"]
    encoder, loading_info = AutoModel.from_pretrained(tmp_path, output_loading_info=True)  # config: with pooler
    assert type(encoder) is RoFormerModel and not loading_info["missing_keys"]
    as_original_checkpoint(tmp_path, drop=("add_pooling_layer",))  # model_type "roformer", as the published ones
    _, loading_info = RoFormerForCausalLM.from_pretrained(tmp_path, output_loading_info=True)
    assert not loading_info["missing_keys"] and not loading_info["unexpected_keys"]
    inputs = batch_with_padding()
    with torch.no_grad():
        output = loaded(**inputs, output_hidden_states=True, use_cache=False)
        vector = encoder(**inputs).pooler_output
    dense = loaded.roformer.pooler.dense
    expected = output.hidden_states[-1][:, 0] @ dense.weight.T + dense.bias  # linear activation
    torch.testing.assert_close(output.pooler_output, expected, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(vector, expected, atol=1e-6, rtol=1e-6)


def test_pooler_keeps_last_layer_positions_right():
    torch.manual_seed(0)
    model = RoFormerModel(tiny_config(add_pooling_layer=True)).eval()
    inputs = batch_with_padding()
    with torch.no_grad():
        full = model(**inputs)
        cls_only = model(**inputs, last_layer_positions=slice(0, 1))
        later = model(**inputs, last_layer_positions=slice(2, 5))
    assert cls_only.last_hidden_state.shape == (2, 1, 32)
    torch.testing.assert_close(cls_only.pooler_output, full.pooler_output, atol=1e-6, rtol=1e-6)
    assert later.last_hidden_state.shape == full.last_hidden_state.shape  # position 0 needed: every position
    torch.testing.assert_close(later.pooler_output, full.pooler_output, atol=1e-6, rtol=1e-6)


# --- multiple choice ---------------------------------------------------------------------------------------------


def multiple_choice_batch() -> dict:
    """Two questions of three choices, right-padded to 11 tokens."""
    torch.manual_seed(2)
    input_ids = torch.randint(1, TINY["vocab_size"], (2, 3, 11))
    lengths = torch.tensor([[11, 8, 6], [9, 11, 7]])
    attention_mask = (torch.arange(11) < lengths[..., None]).long()
    return {"input_ids": input_ids.masked_fill(attention_mask == 0, 0), "attention_mask": attention_mask}


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_last_position_pooling_equals_transformers_multiple_choice(tmp_path, attn_implementation):
    torch.manual_seed(0)
    reference = transformers.RoFormerForMultipleChoice(transformers.RoFormerConfig(**TINY)).eval()
    reference.save_pretrained(tmp_path)
    ours = RoFormerForMultipleChoice.from_pretrained(
        tmp_path, multiple_choice_pooling="last_position", attn_implementation=attn_implementation
    )
    default = RoFormerForMultipleChoice.from_pretrained(tmp_path, attn_implementation=attn_implementation)
    inputs = multiple_choice_batch()
    with torch.no_grad():
        expected = reference(**inputs).logits
        actual = ours(**inputs).logits
        ours_by_default = default(**inputs).logits
    assert (actual - expected).abs().max() <= 1e-5
    assert (ours_by_default - expected).abs().max() > 1e-3  # the padded rows differ: the switch matters


@pytest.mark.parametrize("config", [tiny_config(), v2_config()], ids=["v1", "v2"])
def test_last_token_pooling_equals_the_unpadded_computation(config):
    torch.manual_seed(0)
    model = RoFormerForMultipleChoice(config).eval()
    inputs = multiple_choice_batch()
    lengths = inputs["attention_mask"].sum(-1)
    with torch.no_grad():
        logits = model(**inputs).logits
        for question in range(2):
            for choice in range(3):
                unpadded = inputs["input_ids"][question, choice, : lengths[question, choice]]
                alone = model(unpadded[None, None]).logits  # one question with one choice, no padding
                torch.testing.assert_close(logits[question, choice], alone[0, 0], atol=1e-5, rtol=1e-5)
