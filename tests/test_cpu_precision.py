"""training/machine/cpu_precision.py: the precision of a run on a CPU from the CPU's flags and the probe of the model
(both mocked here; the verdicts themselves: test_cpu_arithmetic.py), what a run on a GPU keeps, and bf16
mixed-precision training tracking float32 (on a CPU that has bf16, skipped elsewhere). What the scripts print for each
case: test_script_console.py."""

from types import SimpleNamespace

import pytest
import torch
from conftest import TINY, skip_unless_bf16_pays

from roformer_hf import RoFormerConfig, RoFormerForSequenceClassification
from roformer_hf.training.machine import cpu_precision
from roformer_hf.training.machine.cpu_arithmetic import CpuBf16
from roformer_hf.training.machine.cpu_precision import choose_cpu_precision, settle_cpu_precision


def no_probe() -> float:
    pytest.fail("the CPU was asked although the run is on a GPU")


def training_arguments(**given) -> SimpleNamespace:
    """What choose_cpu_precision reads and sets; `bf16=None`: --bf16 not given."""
    return SimpleNamespace(**{"bf16": None, "fp16": False, "bf16_full_eval": False, "use_cpu": False, **given})


@pytest.mark.parametrize(("given", "expected"), [(None, False), (True, True), (False, False)])
def test_on_a_gpu_bf16_is_what_was_given_and_off_by_default(monkeypatch, given, expected):
    """transformers' behaviour on a GPU: --bf16 off unless given; the CPU is not asked."""
    monkeypatch.setattr(cpu_precision, "trains_on_cpu", lambda use_cpu: False)
    monkeypatch.setattr(cpu_precision, "cpu_bf16", no_probe)
    arguments = training_arguments(bf16=given)
    choose_cpu_precision(arguments)
    assert arguments.bf16 is expected and arguments.use_cpu is False


@pytest.mark.parametrize(
    ("pays", "given", "expected"),
    [(True, {}, True), (True, {"fp16": True}, False), (True, {"bf16": False}, False), (False, {}, False)],
    ids=["bf16-cpu-default", "fp16-given", "bf16-false-given", "cpu-without-bf16"],
)
def test_on_a_cpu_the_default_follows_the_cpu(monkeypatch, pays, given, expected):
    monkeypatch.setattr(cpu_precision, "trains_on_cpu", lambda use_cpu: True)
    monkeypatch.setattr(cpu_precision, "cpu_bf16", lambda: CpuBf16(pays, "mocked"))
    arguments = training_arguments(**given)
    choose_cpu_precision(arguments)
    assert arguments.bf16 is expected
    assert arguments.use_cpu is expected  # transformers accepts bf16 without a GPU only with use_cpu


def settled(monkeypatch, pays_for_model: bool, **given) -> tuple[SimpleNamespace, list[tuple]]:
    """Both steps on a CPU with bf16 instructions whose probe of the model says `pays_for_model`; what was probed."""
    monkeypatch.setattr(cpu_precision, "trains_on_cpu", lambda use_cpu: True)
    monkeypatch.setattr(cpu_precision, "cpu_bf16", lambda: CpuBf16(True, "this CPU has bf16 instructions (mocked)"))
    probed = []

    def step_bf16(model, batch_size: int, seq_len: int) -> CpuBf16:
        probed.append((model, batch_size, seq_len))
        return CpuBf16(pays_for_model, "this model trains 1.50x as fast (mocked)")

    monkeypatch.setattr(cpu_precision, "step_bf16", step_bf16)
    arguments = training_arguments(mixed_precision="unset", per_device_train_batch_size=16, **given)
    choose_cpu_precision(arguments)
    settle_cpu_precision(arguments, DEMO_MODEL, 64)
    return arguments, probed


DEMO_MODEL = RoFormerForSequenceClassification(
    RoFormerConfig(vocab_size=64, hidden_size=128, intermediate_size=512, num_attention_heads=2, num_hidden_layers=1)
)


@pytest.mark.parametrize("pays", [True, False])
def test_an_unset_bf16_on_a_bf16_cpu_follows_the_probe_of_the_model(monkeypatch, caplog, pays):
    with caplog.at_level("WARNING", logger=cpu_precision.__name__):
        arguments, probed = settled(monkeypatch, pays)
    assert probed == [(DEMO_MODEL, 16, 64)]
    assert arguments.bf16 is pays and arguments.mixed_precision == ("bf16" if pays else "no")
    [line] = caplog.messages
    assert "1.50x" in line
    assert line.startswith("bf16 mixed precision: ") if pays else line.startswith("float32: ")
    assert ("--bf16 false runs in float32" if pays else "--bf16 true runs in bf16") in line


@pytest.mark.parametrize(("given", "expected"), [(True, True), (False, False)])
def test_a_given_bf16_wins_over_the_probe(monkeypatch, caplog, given, expected):
    with caplog.at_level("WARNING", logger=cpu_precision.__name__):
        arguments, probed = settled(monkeypatch, not given, bf16=given)
    assert probed == [] and arguments.bf16 is expected and caplog.messages == []


def test_a_distributed_launch_keeps_the_flags_decision_without_probing(monkeypatch, caplog):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with caplog.at_level("WARNING", logger=cpu_precision.__name__):
        arguments, probed = settled(monkeypatch, False)
    assert probed == [] and arguments.bf16 is True
    [line] = caplog.messages
    assert "bf16 instructions" in line


# --- bf16 mixed precision against float32, on this CPU ---

PARITY_STEPS = 40
# Largest |bf16 loss - float32 loss| over the steps, the loss falling from 1.1 (3 classes) to below 0.01: 0.0008 on
# this project's AVX-512 BF16 CPU; bf16 rounds each product to 8 significant bits, so runs on other CPUs' kernels may
# drift apart somewhat more.
PARITY_TOLERANCE = 0.01


def training_losses(autocast: bool) -> list[float]:
    """The losses of PARITY_STEPS AdamW steps of a tiny classifier with attention dropout (blockwise attention) on
    padded batches, the same weights, data and dropout masks whatever the precision."""
    torch.manual_seed(0)
    config = RoFormerConfig(**{**TINY, "attention_probs_dropout_prob": 0.1}, num_labels=3)
    model = RoFormerForSequenceClassification(config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, TINY["vocab_size"], (4, 24), generator=generator)
    attention_mask = (torch.arange(24) < torch.tensor([[24], [20], [12], [5]])).long()
    labels = torch.tensor([0, 1, 2, 1])
    losses = []
    for _ in range(PARITY_STEPS):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert all(parameter.dtype == torch.float32 for parameter in model.parameters())  # the weights stay float32
    return losses


def test_bf16_autocast_training_tracks_float32():
    skip_unless_bf16_pays()
    float32, bf16 = training_losses(autocast=False), training_losses(autocast=True)
    assert float32[-1] < 0.1 * float32[0]  # it learns, so that tracking means something
    assert max(abs(left - right) for left, right in zip(float32, bf16, strict=True)) <= PARITY_TOLERANCE
    assert float32 != bf16  # bf16 did run
