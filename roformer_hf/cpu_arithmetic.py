"""Whether bf16 arithmetic pays on the CPU this process runs on, decided in this one place: the scripts' `--bf16`
default (`training/cpu_precision.py`) and the attention kernels' choice for bf16 inputs (`attention_kernels.py`) read
it.

bf16 (weights in bf16, or `torch.autocast("cpu", dtype=torch.bfloat16)`, what the scripts' `--bf16 true` turns on) is
fast on a CPU only where the CPU multiplies bf16 numbers natively: AVX-512 BF16 (`avx512_bf16`: AMD Zen 4 and later,
Intel Cooper Lake), AMX (`amx_bf16`: Intel Sapphire Rapids and later), or Arm's BF16 extension (`bf16`). There matrix
products run several times as fast as in float32 (measured on AVX-512 BF16 only: docs/benchmarks.md). Without them
torch converts every bf16 number to float32 and back, and bf16 runs slower than float32.

The decision reads the CPU's instruction sets from /proc/cpuinfo (Linux). Where there is none (macOS, Windows), a
short probe decides instead: a 512 x 512 matrix product in both dtypes, bf16 paying if it runs at least
`MIN_PROBE_SPEEDUP` times as fast. Nothing is taken from a machine other than the one the code runs on.
"""

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import torch

# The /proc/cpuinfo flags (x86 "flags", Arm "Features") of instructions that multiply bf16 numbers.
BF16_INSTRUCTION_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
MIN_PROBE_SPEEDUP = 1.5
CPUINFO = Path("/proc/cpuinfo")


class CpuBf16(NamedTuple):
    """Whether bf16 arithmetic pays on a CPU, and the reason in words, e.g. "this CPU has bf16 instructions
    (avx512_bf16)"."""

    pays: bool
    reason: str


def cpu_flags(cpuinfo: Path = CPUINFO) -> set[str] | None:
    """The instruction-set flags of the first CPU in `cpuinfo` (x86 `flags`, Arm `Features`); None without the file."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def matmul_speedup(size: int = 512, repeats: int = 5) -> float:
    """How many times as fast a (size x size) matrix product runs in bf16 as in float32 on this CPU (the best of
    `repeats` each, taken in turn so that other load hits both alike)."""
    generator = torch.Generator().manual_seed(0)
    matrices = {torch.float32: torch.randn(2, size, size, generator=generator)}
    matrices[torch.bfloat16] = matrices[torch.float32].to(torch.bfloat16)
    best = dict.fromkeys(matrices, float("inf"))
    for _ in range(repeats):
        for dtype, (left, right) in matrices.items():
            start = time.perf_counter()
            torch.mm(left, right)
            best[dtype] = min(best[dtype], time.perf_counter() - start)
    return best[torch.float32] / best[torch.bfloat16]


def decide_cpu_bf16(flags: set[str] | None, probe: Callable[[], float] = matmul_speedup) -> CpuBf16:
    """
    The decision, from the CPU's flags (`cpu_flags`), or from `probe` (`matmul_speedup`) where they are unknown.

    Args:
        flags (`set[str]`, *optional*): the CPU's instruction-set flags; None where they cannot be read.
        probe (`Callable[[], float]`): measures bf16's speed-up over float32; called only without flags.
    """
    if flags is not None:
        found = [flag for flag in BF16_INSTRUCTION_FLAGS if flag in flags]
        if found:
            return CpuBf16(True, f"this CPU has bf16 instructions ({', '.join(found)})")
        wanted = ", ".join(BF16_INSTRUCTION_FLAGS)
        return CpuBf16(False, f"this CPU has no bf16 instructions (none of {wanted} among the flags of {CPUINFO})")
    speedup = probe()
    verdict = "at least" if speedup >= MIN_PROBE_SPEEDUP else "less than"
    return CpuBf16(
        speedup >= MIN_PROBE_SPEEDUP,
        f"a bf16 matrix product runs {speedup:.1f}x as fast as float32 on this CPU ({verdict} "
        f"{MIN_PROBE_SPEEDUP}x; no {CPUINFO} to read its instruction sets from)",
    )


@functools.cache
def cpu_bf16() -> CpuBf16:
    """Whether bf16 pays on the CPU this process runs on (decided once per process)."""
    return decide_cpu_bf16(cpu_flags())


__all__ = ["CpuBf16", "cpu_bf16", "cpu_flags", "decide_cpu_bf16", "matmul_speedup"]
