"""int8_serving.py: int8 serving through torchao (the supported route) gives the float32 model's outputs within int8's
rounding, and without torchao falls back to torch's deprecated dynamic quantization with one warning that says so."""

import json
import warnings

import pytest
import torch

from roformer_hf import RoFormerConfig, RoFormerForSequenceClassification, int8_serving
from roformer_hf.int8_serving import FALLBACK_WARNING, load_int8, quantize_int8

CONFIG = {
    "vocab_size": 99,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 128,
    "num_labels": 3,
}


def float32_and_int8(quantize=quantize_int8) -> tuple[torch.Tensor, torch.Tensor, torch.nn.Module]:
    """The logits of a random classifier on random texts, in float32 and after `quantize`, and the quantized model."""
    torch.manual_seed(0)
    model = RoFormerForSequenceClassification(RoFormerConfig(**CONFIG)).eval()
    input_ids = torch.randint(5, CONFIG["vocab_size"], (4, 24))
    with torch.inference_mode():
        float32_logits = model(input_ids=input_ids).logits
    quantized = quantize(model)
    with torch.inference_mode():
        return float32_logits, quantized(input_ids=input_ids).logits, quantized


def assert_int8_close(float32_logits: torch.Tensor, int8_logits: torch.Tensor) -> None:
    """Within int8's rounding: a few percent of the logits' spread, and the same decision for each text."""
    spread = float32_logits.abs().max()
    assert (int8_logits - float32_logits).abs().max() < 0.05 * spread
    assert torch.equal(int8_logits.argmax(-1), float32_logits.argmax(-1))


def test_torchao_route_matches_float32():
    pytest.importorskip("torchao", reason="the int8 extra (pip install '.[int8]') is not installed")
    float32_logits, int8_logits, quantized = float32_and_int8()
    assert_int8_close(float32_logits, int8_logits)
    query = quantized.roformer.encoder.layer[0].attention.self.query
    assert type(query) is torch.nn.Linear and "torchao" in type(query.weight).__module__  # int8 weights, kept in place
    assert query.weight.qdata.dtype == torch.int8


def test_without_torchao_the_deprecated_route_says_so(monkeypatch):
    monkeypatch.setattr(int8_serving, "torchao_int8", lambda: (None, None))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        float32_logits, int8_logits, quantized = float32_and_int8()
    assert [str(warning.message) for warning in caught] == [FALLBACK_WARNING]  # torch's own lines are not repeated
    assert_int8_close(float32_logits, int8_logits)
    assert type(quantized.roformer.encoder.layer[0].attention.self.query).__module__.startswith(
        "torch.ao.nn.quantized"
    )


def test_compiled_once_for_every_length_gives_the_eager_int8_logits():
    """docs/serving.md's fastest supported recipe, `torch.compile(quantize_int8(model), dynamic=True)`: the eager
    int8 model's logits, and a text of another length runs without compiling again."""
    pytest.importorskip("torchao", reason="the int8 extra (pip install '.[int8]') is not installed")
    torch._dynamo.reset()
    quantized = float32_and_int8()[2]
    compiled = torch.compile(quantized, dynamic=True)
    generator = torch.Generator().manual_seed(1)
    with torch.inference_mode():
        for index, shape in enumerate([(4, 24), (2, 17)]):
            input_ids = torch.randint(5, CONFIG["vocab_size"], shape, generator=generator)
            with torch._dynamo.config.patch(error_on_recompile=index > 0):
                logits = compiled(input_ids=input_ids).logits
            # the compiled kernels round a few activations to the neighbouring int8 step: 2e-4 here, logits of ~0.3
            torch.testing.assert_close(logits, quantized(input_ids=input_ids).logits, atol=2e-3, rtol=0)


def saved_float32_classifier(folder) -> torch.Tensor:
    """A random float32 classifier saved in `folder`; returns the input ids of `float32_and_int8`."""
    torch.manual_seed(0)
    RoFormerForSequenceClassification(RoFormerConfig(**CONFIG)).save_pretrained(folder)
    return torch.randint(5, CONFIG["vocab_size"], (4, 24))


def test_load_int8_saves_and_reloads_to_the_same_logits(tmp_path):
    """transformers' TorchAoConfig route: the int8 logits of quantize_int8, and a model that saves and reloads."""
    pytest.importorskip("torchao", reason="the int8 extra (pip install '.[int8]') is not installed")
    input_ids = saved_float32_classifier(tmp_path / "float32")
    loaded = load_int8(tmp_path / "float32", RoFormerForSequenceClassification)
    in_place = quantize_int8(RoFormerForSequenceClassification.from_pretrained(tmp_path / "float32").eval())
    with torch.inference_mode():
        logits = loaded(input_ids=input_ids).logits
        torch.testing.assert_close(logits, in_place(input_ids=input_ids).logits, rtol=0, atol=0)
    loaded.save_pretrained(tmp_path / "int8")
    assert json.loads((tmp_path / "int8" / "config.json").read_text())["quantization_config"]["quant_method"] == (
        "torchao"
    )
    reloaded = RoFormerForSequenceClassification.from_pretrained(tmp_path / "int8").eval()
    assert reloaded.roformer.encoder.layer[0].attention.self.query.weight.qdata.dtype == torch.int8
    with torch.inference_mode():
        torch.testing.assert_close(reloaded(input_ids=input_ids).logits, logits, rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"made int8 in memory .*load_int8\(path\)"):
        in_place.save_pretrained(tmp_path / "in_place")  # refused before anything is written
    assert not (tmp_path / "in_place").exists()


def test_without_torchao_load_int8_falls_back_and_refuses_to_save(tmp_path, monkeypatch):
    monkeypatch.setattr(int8_serving, "torchao_int8", lambda: (None, None))
    input_ids = saved_float32_classifier(tmp_path / "float32")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = load_int8(tmp_path / "float32", RoFormerForSequenceClassification)
    assert [str(warning.message) for warning in caught] == [FALLBACK_WARNING]
    float32 = RoFormerForSequenceClassification.from_pretrained(tmp_path / "float32").eval()
    with torch.inference_mode():
        assert_int8_close(float32(input_ids=input_ids).logits, model(input_ids=input_ids).logits)
    with pytest.raises(ValueError, match=r"made int8 by torch's quantize_dynamic .* install torchao .*load_int8"):
        model.save_pretrained(tmp_path / "int8")  # not told to use load_int8 alone, which made this very model


def test_without_torchao_a_masked_lm_from_load_int8_is_refused_the_same_way(tmp_path, monkeypatch):
    """The fallback's masked LM (its tied decoder among the Linear layers): one line, nothing written."""
    from roformer_hf import RoFormerForMaskedLM

    monkeypatch.setattr(int8_serving, "torchao_int8", lambda: (None, None))
    RoFormerForMaskedLM(RoFormerConfig(**CONFIG)).save_pretrained(tmp_path / "float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FALLBACK_WARNING, checked above
        model = load_int8(tmp_path / "float32", RoFormerForMaskedLM)
    with pytest.raises(ValueError, match=r"made int8 by torch's quantize_dynamic .* install torchao .*load_int8"):
        model.save_pretrained(tmp_path / "int8")
    assert not (tmp_path / "int8").exists()
