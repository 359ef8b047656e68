"""LoRA (peft) on our models with the `target_modules` that docs/models.md gives: what it wraps, what trains, saving the
adapter, and merging it into the weights."""

import pytest
import torch
from peft import LoraConfig, PeftModel, get_peft_model

from roformer_hf import RoFormerConfig, RoFormerForSequenceClassification

# peft 0.21 reads a property that transformers 5.24 deprecates (peft's access, not ours)
pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")

LORA_TARGET_MODULES = ["query", "key", "value"]  # docs/models.md, "LoRA"
TINY = {
    "vocab_size": 100,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "num_labels": 3,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}


def lora_config() -> LoraConfig:
    # task_type SEQ_CLS trains and saves the classification head in full (peft's modules_to_save: "classifier")
    return LoraConfig(task_type="SEQ_CLS", target_modules=LORA_TARGET_MODULES, r=4, lora_alpha=8)


def base_classifier() -> RoFormerForSequenceClassification:
    torch.manual_seed(0)
    return RoFormerForSequenceClassification(RoFormerConfig(**TINY))


def batch() -> dict[str, torch.Tensor]:
    torch.manual_seed(1)
    input_ids = torch.randint(1, TINY["vocab_size"], (4, 9))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[-1, 6:] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": torch.tensor([0, 1, 2, 1])}


def train(model: torch.nn.Module, steps: int) -> None:
    optimizer = torch.optim.AdamW([parameter for parameter in model.parameters() if parameter.requires_grad], lr=1e-2)
    model.train()
    for _ in range(steps):
        optimizer.zero_grad()
        model(**batch()).loss.backward()
        optimizer.step()


def is_trained_by_lora(name: str) -> bool:
    """LoRA's own matrices, and the trainable copy of the classification head."""
    return "lora_" in name or ".modules_to_save." in name


def test_lora_wraps_every_attention_projection_and_nothing_else():
    model = get_peft_model(base_classifier(), lora_config())
    expected = [
        f"roformer.encoder.layer.{layer}.attention.self.{name}"
        for layer in range(TINY["num_hidden_layers"])
        for name in LORA_TARGET_MODULES
    ]
    assert sorted(model.base_model.targeted_module_names) == sorted(expected)


def test_lora_without_target_modules_asks_for_them():
    """peft has default target modules for transformers' "bert", none for "roformer_hf" (nor for transformers'
    "roformer"): docs/models.md gives them."""
    with pytest.raises(ValueError, match="target_modules"):
        get_peft_model(base_classifier(), LoraConfig(task_type="SEQ_CLS"))


def test_a_training_step_reaches_only_lora_and_the_classification_head():
    model = get_peft_model(base_classifier(), lora_config())
    before = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    train(model, steps=1)
    with_gradients = {name for name, parameter in model.named_parameters() if parameter.grad is not None}
    lora_and_head = {name for name in before if is_trained_by_lora(name)}
    assert with_gradients == lora_and_head
    changed = {name for name, parameter in model.named_parameters() if not torch.equal(parameter, before[name])}
    assert changed <= lora_and_head
    assert all(name in changed for name in lora_and_head if "lora_B" in name or ".modules_to_save." in name)


def test_merge_and_unload_gives_the_logits_of_the_adapted_model():
    model = get_peft_model(base_classifier(), lora_config())
    inputs = {key: value for key, value in batch().items() if key != "labels"}
    with torch.no_grad():
        untrained = model.eval()(**inputs).logits
    train(model, steps=3)
    with torch.no_grad():
        adapted = model.eval()(**inputs).logits
        merged = model.merge_and_unload()
        merged_logits = merged(**inputs).logits
    assert type(merged) is RoFormerForSequenceClassification
    assert not any("lora_" in name for name, _ in merged.named_parameters())
    assert not torch.allclose(adapted, untrained, atol=1e-3)
    torch.testing.assert_close(merged_logits, adapted, atol=1e-5, rtol=1e-5)


def test_a_saved_adapter_loads_onto_the_saved_base_model(tmp_path):
    base_classifier().save_pretrained(tmp_path / "base")
    model = get_peft_model(RoFormerForSequenceClassification.from_pretrained(tmp_path / "base"), lora_config())
    train(model, steps=2)
    model.save_pretrained(tmp_path / "adapter")
    inputs = {key: value for key, value in batch().items() if key != "labels"}
    base = RoFormerForSequenceClassification.from_pretrained(tmp_path / "base")
    loaded = PeftModel.from_pretrained(base, tmp_path / "adapter").eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(**inputs).logits, model.eval()(**inputs).logits, atol=1e-6, rtol=1e-6)
