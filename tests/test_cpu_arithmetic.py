"""cpu_arithmetic.py: whether bf16 pays for a model on a CPU: never without bf16 instructions (flags mocked here), else
as a probe of the model's step or of one layer measures (injected here), cached per machine, threads and shape."""

import json

import pytest
import torch
from conftest import TINY

from roformer_hf import (
    RoFormerConfig,
    RoFormerForMaskedLM,
    RoFormerForSequenceClassification,
    RoFormerModel,
)
from roformer_hf.training.machine import cpu_arithmetic
from roformer_hf.training.machine.cpu_arithmetic import (
    LAYER_MIN_SPEEDUP,
    STEP_MIN_SPEEDUP,
    LayerShape,
    ProbeResult,
    bf16_speedup,
    cached_speedup,
    cpu_flags,
    decide_bf16,
    probe_cache_file,
    probe_cache_key,
    step_flops,
)

X86_WITHOUT_BF16 = {"fpu", "sse2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni"}
DEMO = LayerShape(batch_size=16, seq_len=64, hidden=128, intermediate=512, heads=2)
WHAT = "a layer of this model (16 x 64 tokens, hidden 128, intermediate 512)"


def no_probe() -> ProbeResult:
    pytest.fail("the probe ran although the CPU has no bf16 instructions")


@pytest.mark.parametrize("flags", [X86_WITHOUT_BF16, {"fp", "asimd"}, set()])
def test_without_bf16_instructions_bf16_never_pays_and_nothing_is_probed(flags):
    decision = decide_bf16(flags, WHAT, LAYER_MIN_SPEEDUP, probe=no_probe)
    assert not decision.pays
    assert decision.reason.startswith("this CPU has no bf16 instructions (none of avx512_bf16, amx_bf16, bf16")


@pytest.mark.parametrize(
    "flags",
    [X86_WITHOUT_BF16 | {"avx512_bf16"}, X86_WITHOUT_BF16 | {"amx_bf16", "amx_tile"}, {"fp", "asimd", "bf16"}, None],
    ids=["avx512_bf16", "amx_bf16", "arm-bf16", "no-cpuinfo"],
)
@pytest.mark.parametrize(
    ("speedup", "margin", "pays"),
    [
        (6.2, LAYER_MIN_SPEEDUP, True),
        (LAYER_MIN_SPEEDUP, LAYER_MIN_SPEEDUP, True),
        (1.05, LAYER_MIN_SPEEDUP, False),
        (1.05, STEP_MIN_SPEEDUP, True),
        (1.01, STEP_MIN_SPEEDUP, False),
        (0.78, STEP_MIN_SPEEDUP, False),
    ],
)
def test_with_bf16_instructions_the_probe_decides_with_a_margin(flags, speedup, margin, pays):
    """bf16 instructions alone decide nothing (an AMX Xeon trains the demo model 15-22% slower in bf16): bf16 is
    chosen only where the probe measures it at least the margin faster, and the reason gives the ratio."""
    probed = []
    decision = decide_bf16(flags, WHAT, margin, probe=lambda: probed.append(True) or ProbeResult(speedup, 2))
    assert probed == [True]
    assert decision.pays is pays
    assert decision.reason.startswith(f"{WHAT} trains {speedup:.2f}x as fast in bf16 as in float32 on this CPU at 2 ")
    assert f"({'at least' if pays else 'less than'} {margin}x)" in decision.reason


def test_small_models_are_probed_whole_and_wide_ones_by_a_layer():
    """The demo's model (2 layers, hidden 128, a 4,602-word vocabulary) costs about 3e9 operations a step at 16 x 64:
    probed whole; a base-width classifier at 8 x 512 about 2e12: by one layer."""
    demo_config = RoFormerConfig(
        vocab_size=4602, hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512
    )
    demo = RoFormerForMaskedLM(demo_config)
    assert 2e9 < step_flops(demo, LayerShape.of(demo_config, 16, 64)) < cpu_arithmetic.PROBE_FLOPS
    base_config = RoFormerConfig(vocab_size=64, num_labels=2)
    base = RoFormerForSequenceClassification(base_config)
    assert step_flops(base, LayerShape.of(base_config, 8, 512)) > 100 * cpu_arithmetic.PROBE_FLOPS


def test_the_step_probe_trains_a_copy_of_the_model_and_leaves_it_and_the_random_numbers_alone():
    config = RoFormerConfig(**TINY)
    model = RoFormerForMaskedLM(config).eval()
    weights = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    torch.manual_seed(3)
    expected_next = torch.rand(4)
    torch.manual_seed(3)
    measured = cpu_arithmetic.step_speedup(model, LayerShape.of(config, batch_size=2, seq_len=16))
    assert torch.equal(torch.rand(4), expected_next)  # the run's random numbers go on as without the probe
    assert 0.01 < measured.speedup < 100 and measured.threads in (1, torch.get_num_threads())
    assert not model.training and all(parameter.grad is None for parameter in model.parameters())
    assert all(torch.equal(weights[name], tensor) for name, tensor in model.state_dict().items())


def test_step_bf16_probes_the_model_whole_and_caches_it_by_what_was_probed(cache_home, monkeypatch):
    monkeypatch.setattr(cpu_arithmetic, "cpu_flags", lambda: {"avx512_bf16"})
    model = RoFormerForSequenceClassification(RoFormerConfig(**TINY))
    threads = torch.get_num_threads()
    try:  # on one thread, so that a busy machine cannot send the probe to fewer threads than asked (not cached then)
        torch.set_num_threads(1)
        decision = cpu_arithmetic.step_bf16(model, batch_size=2, seq_len=16)
    finally:
        torch.set_num_threads(threads)
    assert decision.reason.startswith("this model (RoFormerForSequenceClassification, 2 layers, vocabulary")
    [key] = json.loads(probe_cache_file().read_text())
    assert "2 x 16 tokens" in key and "dense prediction" in key


def test_the_probe_caps_the_tokens_of_wide_models_and_keeps_small_ones():
    assert DEMO.probed() == DEMO
    base = LayerShape(batch_size=4, seq_len=512, hidden=768, intermediate=3072, heads=12).probed()
    assert base._replace(seq_len=0) == (1, 0, 768, 3072, 12)  # fewer sequences first, then shorter ones
    assert 128 <= base.seq_len <= 512 and base.seq_len % 64 == 0
    assert LayerShape(8, 128, 768, 3072, 12).probed().seq_len == 128


def test_cpu_flags_of_x86_and_arm_cpuinfo(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\n")
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 2100.00\nFeatures\t: fp asimd bf16 i8mm\nCPU part\t: 0xd40\n")
    assert cpu_flags(x86) == {"fpu", "avx2", "avx512_bf16"}
    assert cpu_flags(arm) == {"fp", "asimd", "bf16", "i8mm"}
    assert cpu_flags(tmp_path / "missing") is None


def test_the_layer_probe_trains_one_layer_of_the_model_and_measures_a_ratio_of_speeds():
    config = RoFormerConfig(**TINY)
    measured = cpu_arithmetic.layer_speedup(config, LayerShape.of(config, batch_size=2, seq_len=16))
    assert 0.01 < measured.speedup < 100 and measured.threads in (1, torch.get_num_threads())
    assert config.num_hidden_layers == TINY["num_hidden_layers"]  # the caller's config is left as it was


# --- the cache ---


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


class CountingProbe:
    """A probe that measures `speedup` at torch's thread count, or at `threads` (a machine too busy for those)."""

    def __init__(self, speedup: float, threads: int | None = None):
        self.speedup, self.threads, self.calls = speedup, threads, 0

    def __call__(self) -> ProbeResult:
        self.calls += 1
        return ProbeResult(self.speedup, self.threads or torch.get_num_threads())


def test_a_measurement_is_cached_whole_and_reused(cache_home):
    probe = CountingProbe(1.7)
    assert cached_speedup(f"{DEMO}", probe).speedup == 1.7
    assert cached_speedup(f"{DEMO}", CountingProbe(0.5)).speedup == 1.7  # read back, not measured again
    assert probe.calls == 1
    assert probe_cache_file().parent.parent == cache_home
    [(key, value)] = json.loads(probe_cache_file().read_text()).items()  # valid JSON: written whole
    assert value == 1.7 and torch.__version__ in key and "16 x 64 tokens, hidden 128, intermediate 512" in key
    assert [path.name for path in probe_cache_file().parent.iterdir()] == [probe_cache_file().name]  # no leftovers


def test_the_cache_key_holds_the_shape_and_not_the_run_s_thread_count(cache_home):
    """The probe runs on one thread whatever the run's count: a run on another count reads the same measurement."""
    threads = torch.get_num_threads()
    probe = CountingProbe(1.3)
    cached_speedup(f"{DEMO}", probe)
    cached_speedup(f"{DEMO._replace(hidden=256)}", probe)
    try:
        torch.set_num_threads(threads + 1)
        assert cached_speedup(f"{DEMO}", probe).speedup == 1.3
    finally:
        torch.set_num_threads(threads)
    assert probe.calls == 2
    assert len(json.loads(probe_cache_file().read_text())) == 2
    assert all(" | 1 threads | " in key for key in json.loads(probe_cache_file().read_text()))


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[1, 2]",
        '{"a key": "not a number"}',
        "",
        '{"KEY": Infinity}',
        '{"KEY": NaN}',
        # hand-edited: a string, a negative number, a boolean, a nested object, numbers no CPU measures
        '{"KEY": "1.2"}',
        '{"KEY": -1.5}',
        '{"KEY": true}',
        '{"KEY": {"speedup": 1.2}}',
        '{"KEY": 1e308}',
        '{"KEY": 1e-300}',
    ],
)
def test_a_corrupted_cache_is_ignored_and_replaced(cache_home, content):
    probe_cache_file().parent.mkdir(parents=True)
    probe_cache_file().write_text(content.replace("KEY", probe_cache_key(f"{DEMO}")))
    probe = CountingProbe(2.5)
    assert cached_speedup(f"{DEMO}", probe).speedup == 2.5 and probe.calls == 1
    assert list(json.loads(probe_cache_file().read_text()).values()) == [2.5]


def test_a_cache_that_cannot_be_written_still_gives_the_measurement(cache_home):
    (cache_home / "roformer_hf").write_text("a file where the cache folder would be")
    probe = CountingProbe(1.2)
    assert cached_speedup(f"{DEMO}", probe).speedup == 1.2
    assert cached_speedup(f"{DEMO}", probe).speedup == 1.2 and probe.calls == 2  # measured again, nothing raised


def test_the_probe_measures_on_one_thread_and_restores_the_run_s_count():
    """The same ratio however busy the machine: one thread timed by its CPU time, the run's thread count restored."""
    threads = torch.get_num_threads()
    seen = []
    try:
        torch.set_num_threads(2)

        def one_pass(in_bf16: bool) -> None:
            seen.append(torch.get_num_threads())
            torch.ones(256, 256).matmul(torch.ones(256, 256))

        result = bf16_speedup(one_pass)
        assert result.threads == 1 and set(seen) == {1} and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)


def test_a_saved_checkpoint_does_not_carry_this_module(tmp_path):
    """The machine's question is the caller's: the model's code (what a checkpoint carries) does not import it."""
    RoFormerModel(RoFormerConfig(**TINY)).save_pretrained(tmp_path)
    carried = {path.name for path in tmp_path.glob("*.py")}
    assert "modeling.py" in carried
    assert "cpu_arithmetic.py" not in carried
