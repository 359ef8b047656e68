"""Whether bf16 pays on this CPU, decided in this one place, and the precision the scripts train in on a CPU.

bf16 mixed precision (`torch.autocast("cpu", dtype=torch.bfloat16)`, what `--bf16 true` turns on) is fast on a CPU
only where the CPU multiplies bf16 numbers natively: AVX-512 BF16 (`avx512_bf16`: AMD Zen 4 and later, Intel Cooper
Lake), AMX (`amx_bf16`: Intel Sapphire Rapids and later), or Arm's BF16 extension (`bf16`). On this project's AMD EPYC
with AVX-512 BF16 a matrix product runs 3-4x as fast as in float32 and a training step about 2-3x (docs/benchmarks.md;
the other instruction sets are not measured here). Without them torch converts every bf16 number to float32 and
back, and the same step runs several times slower than in float32.

The decision reads the CPU's instruction sets from /proc/cpuinfo (Linux). Where there is none (macOS, Windows), a
short probe decides instead: a 512 x 512 matrix product in both dtypes, bf16 paying if it runs at least
`MIN_PROBE_SPEEDUP` times as fast. Nothing is taken from a machine other than the one the code runs on.
"""

import functools
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import torch

from .launch import trains_on_cpu

logger = logging.getLogger(__name__)

# The /proc/cpuinfo flags (x86 "flags", Arm "Features") of instructions that multiply bf16 numbers.
BF16_INSTRUCTION_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
MIN_PROBE_SPEEDUP = 1.5
CPUINFO = Path("/proc/cpuinfo")


class CpuBf16(NamedTuple):
    """Whether bf16 mixed precision pays on a CPU, and why, in words that complete "bf16 ... because " ."""

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


def choose_cpu_precision(training_args: Any) -> None:
    """
    The precision of a run on the CPU, set on `training_args` (a `TrainingArguments` whose `bf16` is None when
    `--bf16` was not given) before transformers checks it:

    - `--bf16 true` is kept where bf16 pays and dropped where it does not, with one line naming what the CPU lacks;
    - with neither `--bf16` nor `--fp16`, bf16 mixed precision where it pays, said in one line with the way back
      (`--bf16 false`), else float32;
    - `--bf16_full_eval` follows the same rule as `--bf16 true`.

    On a GPU (or XPU, TPU, ...) nothing changes: an unset `--bf16` is False, as transformers has it. transformers
    accepts bf16 on a machine that has a GPU only with `--use_cpu`, which this sets where bf16 is kept.
    """
    given = training_args.bf16 is not None
    if not trains_on_cpu(training_args.use_cpu):
        training_args.bf16 = bool(training_args.bf16)
        return
    wanted, full_eval = (training_args.bf16 if given else not training_args.fp16), training_args.bf16_full_eval
    decision = cpu_bf16() if wanted or full_eval else None
    keep = decision is not None and decision.pays
    training_args.bf16, training_args.bf16_full_eval = bool(wanted and keep), bool(full_eval and keep)
    if training_args.bf16 or training_args.bf16_full_eval:
        training_args.use_cpu = True
    if decision is None or int(os.environ.get("RANK", "0")) != 0:
        return
    dropped = [name for name, value in (("--bf16", given and wanted), ("--bf16_full_eval", full_eval)) if value]
    if dropped and not keep:
        logger.warning(
            f"{' and '.join(dropped)} dropped: {decision.reason}, where bf16 is slower than float32: running in "
            "float32."
        )
    elif keep and not given:
        logger.warning(
            f"training in bf16 mixed precision, the default where it pays: {decision.reason}; --bf16 false trains "
            "in float32."
        )


__all__ = ["CpuBf16", "choose_cpu_precision", "cpu_bf16", "cpu_flags", "decide_cpu_bf16", "matmul_speedup"]
