"""cpu_arithmetic.py: whether bf16 pays on a CPU, decided from its instruction sets (mocked here) or, without
/proc/cpuinfo, from a matrix-product probe."""

import pytest

from roformer_hf import cpu_arithmetic
from roformer_hf.cpu_arithmetic import cpu_flags, decide_cpu_bf16

X86_WITHOUT_BF16 = {"fpu", "sse2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni"}


def no_probe() -> float:
    pytest.fail("the probe ran although the CPU's flags were known")


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (X86_WITHOUT_BF16 | {"avx512_bf16"}, "avx512_bf16"),  # AMD Zen 4, Intel Cooper Lake
        (X86_WITHOUT_BF16 | {"amx_bf16", "amx_tile"}, "amx_bf16"),  # Intel Sapphire Rapids
        ({"fp", "asimd", "sve", "bf16"}, "bf16"),  # Arm with the BF16 extension
    ],
)
def test_bf16_instructions_make_bf16_pay(flags, named):
    decision = decide_cpu_bf16(flags, probe=no_probe)
    assert decision.pays and decision.reason == f"this CPU has bf16 instructions ({named})"


@pytest.mark.parametrize("flags", [X86_WITHOUT_BF16, {"fp", "asimd"}, set()])
def test_without_bf16_instructions_bf16_does_not_pay(flags):
    decision = decide_cpu_bf16(flags, probe=no_probe)
    assert not decision.pays
    assert decision.reason.startswith("this CPU has no bf16 instructions (none of avx512_bf16, amx_bf16, bf16")


@pytest.mark.parametrize(("speedup", "pays"), [(3.7, True), (1.5, True), (1.2, False), (0.1, False)])
def test_without_cpuinfo_a_matrix_product_probe_decides(speedup, pays):
    decision = decide_cpu_bf16(None, probe=lambda: speedup)
    assert decision.pays is pays
    assert f"runs {speedup:.1f}x as fast as float32" in decision.reason and "no /proc/cpuinfo" in decision.reason


def test_cpu_flags_of_x86_and_arm_cpuinfo(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\n")
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 2100.00\nFeatures\t: fp asimd bf16 i8mm\nCPU part\t: 0xd40\n")
    assert cpu_flags(x86) == {"fpu", "avx2", "avx512_bf16"}
    assert cpu_flags(arm) == {"fp", "asimd", "bf16", "i8mm"}
    assert cpu_flags(tmp_path / "missing") is None


def test_the_probe_measures_a_ratio_of_speeds():
    assert 0.01 < cpu_arithmetic.matmul_speedup(size=64, repeats=2) < 100
