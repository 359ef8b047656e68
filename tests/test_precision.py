"""bf16 and fp16 against float32 with the same weights, on the `device` fixture (the CPU, or the GPU that
`ROFORMER_HF_TEST_DEVICE` names): half-precision weights (`from_pretrained(..., dtype=torch.bfloat16)`), and float32
weights under `torch.autocast` (mixed precision, what `--bf16 true` and `--fp16 true` train with).

Errors are relative: ||half - float32|| / ||float32|| over the outputs at real tokens, or over all the gradients.
bfloat16 keeps 8 bits of mantissa (a rounding of 2^-9, about 2e-3, per operation), float16 11 bits (2^-12, about
2.4e-4); through two layers of matrix products, softmax and norms they add up to several roundings. The bounds below
are about 3x the largest error measured (below, and on a GPU in docs/gpu.md), so that a real loss of precision (angles
in half precision, fp16 overflow, a mask lost on the way) fails them while the ordinary rounding passes.
"""

import pytest
import torch
from conftest import TINY

from roformer_hf import RoFormerConfig, RoFormerForMaskedLM

PRECISIONS = {"bf16": torch.bfloat16, "fp16": torch.float16}
# Measured on the CPU (AMD EPYC, torch 2.13) and on an H100 (torch 2.11), the same to two digits: logits bf16 6.5e-3,
# fp16 8.5e-4 (half weights; autocast 4.6e-3 and 5.5e-4), gradients bf16 4.8e-3, fp16 6.1e-4 (docs/gpu.md).
OUTPUT_TOLERANCE = {"bf16": 2e-2, "fp16": 3e-3}
GRADIENT_TOLERANCE = {"bf16": 2e-2, "fp16": 3e-3}
# Wider than TINY, so that matrix products sum over enough terms for half precision to show.
CONFIG = {**TINY, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4}
SEQ_LEN = 48


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return ((actual.float() - expected.float()).norm() / expected.float().norm()).item()


def padded_batch(device: torch.device) -> dict[str, torch.Tensor]:
    """Two sequences, the second with 12 padding tokens, and MLM labels at about 15% of the real tokens."""
    generator = torch.Generator().manual_seed(3)
    input_ids = torch.randint(5, CONFIG["vocab_size"], (2, SEQ_LEN), generator=generator)
    attention_mask = torch.ones(2, SEQ_LEN, dtype=torch.long)
    attention_mask[1, SEQ_LEN - 12 :] = 0
    labelled = (torch.rand(2, SEQ_LEN, generator=generator) < 0.15) & attention_mask.bool()
    labels = input_ids.masked_fill(~labelled, -100)
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
    return {name: tensor.to(device) for name, tensor in batch.items()}


def float32_model(device: torch.device, attn_implementation: str = "sdpa") -> RoFormerForMaskedLM:
    torch.manual_seed(0)
    config = RoFormerConfig(**CONFIG, attn_implementation=attn_implementation)
    return RoFormerForMaskedLM(config).to(device).eval()


def real_logits(model: torch.nn.Module, batch: dict, autocast_dtype: torch.dtype | None = None, **extra):
    """The logits at the real tokens, in eval mode, under autocast to `autocast_dtype` where given."""
    inputs = {name: batch[name] for name in ("input_ids", "attention_mask")}
    device_type = batch["input_ids"].device.type
    with torch.no_grad(), torch.autocast(device_type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
        logits = model(**inputs, **extra).logits
    return logits[batch["attention_mask"].bool()].float()


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("mode", ["weights", "autocast"])
@pytest.mark.parametrize("precision", list(PRECISIONS))
def test_half_precision_logits_track_float32(device, record_property, precision, mode, attn_implementation):
    model = float32_model(device, attn_implementation)
    batch = padded_batch(device)
    expected = real_logits(model, batch)
    if mode == "weights":
        actual = real_logits(model.to(PRECISIONS[precision]), batch)
    else:
        actual = real_logits(model, batch, autocast_dtype=PRECISIONS[precision])
    assert torch.isfinite(actual).all()
    record_property("relative_error", relative_error(actual, expected))  # benchmarks/gpu_check.py reports it
    assert relative_error(actual, expected) <= OUTPUT_TOLERANCE[precision]


@pytest.mark.parametrize("precision", list(PRECISIONS))
def test_rotation_stays_float32_at_distant_positions(device, record_property, precision):
    """Positions 30,000 on: bf16 spaces its numbers 128 apart there (fp16 16 apart), so angles computed in half
    precision would be noise. Ours keeps the angles and the rotation in float32: the error stays that of the rest of
    the model at position 0."""
    model = float32_model(device)
    batch = padded_batch(device)
    far = {"position_ids": torch.arange(30_000, 30_000 + SEQ_LEN, device=device)[None].expand(2, -1)}
    expected = real_logits(model, batch, **far)
    actual = real_logits(model.to(PRECISIONS[precision]), batch, **far)
    record_property("relative_error", relative_error(actual, expected))
    assert relative_error(actual, expected) <= OUTPUT_TOLERANCE[precision]


def gradients(model: torch.nn.Module, batch: dict, autocast_dtype: torch.dtype | None) -> torch.Tensor:
    """Every parameter's gradient of the MLM loss in train mode (the dropouts of TINY are 0), flattened into one."""
    model.zero_grad(set_to_none=True)
    with torch.autocast(batch["input_ids"].device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
        loss = model.train()(**batch).loss
    loss.backward()
    return torch.cat([parameter.grad.flatten() for parameter in model.parameters() if parameter.grad is not None])


@pytest.mark.parametrize("precision", list(PRECISIONS))
def test_mixed_precision_gradients_track_float32(device, record_property, precision):
    model = float32_model(device)
    batch = padded_batch(device)
    expected = gradients(model, batch, None)
    actual = gradients(model, batch, PRECISIONS[precision])
    assert all(parameter.grad.dtype == torch.float32 for parameter in model.parameters())  # float32 master weights
    assert torch.isfinite(actual).all()
    record_property("relative_error", relative_error(actual, expected))
    assert relative_error(actual, expected) <= GRADIENT_TOLERANCE[precision]


def test_bf16_mixed_precision_training_tracks_float32(device, record_property):
    """30 AdamW steps on one batch, from the same start: the bf16 run's losses follow the float32 run's (within 5% of
    the loss; both fall from about 4.6 to well under 1), and its weights stay float32."""
    losses = {}
    for precision in (None, torch.bfloat16):
        model = float32_model(device).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        batch = padded_batch(device)
        losses[precision] = []
        for _ in range(30):
            with torch.autocast(device.type, dtype=precision, enabled=precision is not None):
                loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses[precision].append(loss.item())
        assert all(parameter.dtype == torch.float32 for parameter in model.parameters())
    float32_losses, bf16_losses = torch.tensor(losses[None]), torch.tensor(losses[torch.bfloat16])
    record_property("largest_loss_difference", (bf16_losses - float32_losses).abs().max().item())
    assert float32_losses[-1] < 0.5 * float32_losses[0]  # it learns, so the comparison means something
    assert ((bf16_losses - float32_losses).abs() <= 0.05 * float32_losses.clamp(min=0.2)).all()
