"""Whether bf16 arithmetic pays on the CPU this process runs on, for one model at one batch shape: the scripts'
`--bf16` default (`training/cpu_precision.py`) reads it. The model's own code does not: a checkpoint does not carry
this file.

bf16 (weights in bf16, or `torch.autocast("cpu", dtype=torch.bfloat16)`, what the scripts' `--bf16 true` turns on) can
be fast on a CPU only where the CPU multiplies bf16 numbers natively: AVX-512 BF16 (`avx512_bf16`: AMD Zen 4 and later,
Intel Cooper Lake), AMX (`amx_bf16`: Intel Sapphire Rapids and later), or Arm's BF16 extension (`bf16`). Without them
torch converts every bf16 number to float32 and back, and bf16 runs slower than float32: the CPU's flags in
/proc/cpuinfo are a fast "never". With them, whether bf16 pays depends on the CPU and on the sizes of the products: a
small one loses AMX's tile set-up, a mid-size one on two threads gains little, and autocast's casts cost the same
whatever the gain. So a probe decides: one layer of the model itself (its attention, its hidden x hidden and
hidden x intermediate products, dropout) trained forward and backward in float32 and under bf16 autocast, at the run's
sequences and thread count. bf16 pays if the layer trains at least `MIN_SPEEDUP` times as fast, a margin that keeps
the choice within a few percent of the better precision where the two are close (the embeddings, the head and the
optimizer step gain less). The measured speed-up is cached per machine (CPU model, torch version, threads) and shape
(`probe_cache_file`), so a run pays the probe once.
"""

import contextlib
import copy
import functools
import json
import os
import platform
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import NamedTuple

import torch
from transformers import PreTrainedConfig

# The /proc/cpuinfo flags (x86 "flags", Arm "Features") of instructions that multiply bf16 numbers.
BF16_INSTRUCTION_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
# bf16 is chosen only where the probe measures it at least this much faster: the probe's layer leaves out the
# embeddings, the head and the optimizer step, which gain less from bf16, and its timing varies by a few percent.
MIN_SPEEDUP = 1.1
CPUINFO = Path("/proc/cpuinfo")
# Floating-point operations of one timed pass of the probe's projections at most (about 0.1 s in float32 on two
# cores): the tokens are capped to fit, so a base-width model probes one sequence of up to 320 tokens, the demo's
# model a whole batch.
PROBE_FLOPS = 14e9
PROBE_SECONDS = 0.4  # the timed rounds stop once this much time has gone, after at least one of each dtype
PROBE_ROUNDS = 3
# Below this share of its threads' time on the CPU, the probe's process was kept waiting by others (`layer_speedup`).
BUSY_SHARE = 0.75


class CpuBf16(NamedTuple):
    """Whether bf16 arithmetic pays on a CPU, and the reason in words, e.g. "a layer of this model trains 1.8x as fast
    in bf16 as in float32 on this CPU (at least 1.1x)"."""

    pays: bool
    reason: str


class ProbeResult(NamedTuple):
    """bf16's measured speed-up over float32, and the thread count it was measured at."""

    speedup: float
    threads: int


class LayerShape(NamedTuple):
    """What one training step asks of one layer: `batch_size` sequences of `seq_len` tokens through a layer `hidden`
    wide with `heads` attention heads and an `intermediate` feed-forward width."""

    batch_size: int
    seq_len: int
    hidden: int
    intermediate: int
    heads: int

    @classmethod
    def of(cls, config: PreTrainedConfig, batch_size: int, seq_len: int) -> "LayerShape":
        """The shape of `config`'s layers at `batch_size` x `seq_len` tokens a step."""
        return cls(batch_size, seq_len, config.hidden_size, config.intermediate_size, config.num_attention_heads)

    def probed(self) -> "LayerShape":
        """The shape the probe times: the same layer, the tokens capped to `PROBE_FLOPS` (fewer sequences first)."""
        flops_per_token = 6 * (4 * self.hidden**2 + 2 * self.hidden * self.intermediate)  # forward + backward
        cap = max(128, int(PROBE_FLOPS / flops_per_token) // 64 * 64)
        seq_len = min(self.seq_len, cap)
        return self._replace(batch_size=max(1, min(self.batch_size, cap // seq_len)), seq_len=seq_len)

    def __str__(self) -> str:
        return f"{self.batch_size} x {self.seq_len} tokens, hidden {self.hidden}, intermediate {self.intermediate}"


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


def no_bf16_instructions(flags: set[str] | None) -> CpuBf16 | None:
    """The fast "never": a verdict where `flags` name no bf16 instructions, None where they do or are unknown."""
    if flags is None or any(flag in flags for flag in BF16_INSTRUCTION_FLAGS):
        return None
    wanted = ", ".join(BF16_INSTRUCTION_FLAGS)
    return CpuBf16(False, f"this CPU has no bf16 instructions (none of {wanted} among the flags of {CPUINFO})")


@functools.cache
def cpu_bf16() -> CpuBf16:
    """Whether this CPU has bf16 instructions at all (read once per process): `pays` is False where it has none, True
    where it has them or cannot tell; whether bf16 pays for a given model is `layer_bf16`'s question."""
    flags = cpu_flags()
    never = no_bf16_instructions(flags)
    if never is not None:
        return never
    if flags is None:
        return CpuBf16(True, f"no {CPUINFO} to read this CPU's instruction sets from")
    found = ", ".join(flag for flag in BF16_INSTRUCTION_FLAGS if flag in flags)
    return CpuBf16(True, f"this CPU has bf16 instructions ({found})")


def decide_layer_bf16(
    flags: set[str] | None, shape: LayerShape, probe: Callable[[LayerShape], ProbeResult]
) -> CpuBf16:
    """
    Whether bf16 pays for layers of `shape`: never without bf16 instructions among `flags`, else as `probe` measures.

    Args:
        flags (`set[str]`, *optional*): the CPU's instruction-set flags (`cpu_flags`); None where they are unknown.
        shape (`LayerShape`): the run's tokens per step and the model's widths.
        probe (`Callable[[LayerShape], ProbeResult]`): bf16's speed-up over float32 for a shape (`cached_layer_speedup`);
            not called without bf16 instructions.
    """
    never = no_bf16_instructions(flags)
    if never is not None:
        return never
    speedup, threads = probe(shape)
    verdict = "at least" if speedup >= MIN_SPEEDUP else "less than"
    return CpuBf16(
        speedup >= MIN_SPEEDUP,
        f"a layer of this model ({shape.probed()}) trains {speedup:.2f}x as fast in bf16 as in float32 on this CPU "
        f"at {threads} thread{'s' if threads > 1 else ''} ({verdict} {MIN_SPEEDUP}x)",
    )


def layer_speedup(config: PreTrainedConfig, shape: LayerShape) -> ProbeResult:
    """How many times as fast one layer of `config`'s model trains (forward and backward, dropout on, at the probed
    `shape`) under bf16 autocast as in float32 on this CPU at torch's current thread count: the best of up to
    `PROBE_ROUNDS` passes of each, taken in turn so that other load hits both alike, after one untimed pass of each.
    Where other processes kept this one's threads from running (their CPU time fell short of the wall time), the
    ratio is measured again on one thread, whose CPU time is what the arithmetic costs however busy the machine."""
    from .modeling import RoFormerModel  # here: the model's code does not import this module

    probed = shape.probed()
    torch.manual_seed(0)
    layer_config = copy.deepcopy(config)
    layer_config.num_hidden_layers, layer_config.vocab_size = 1, 8  # one layer; the input comes as embeddings
    model = RoFormerModel(layer_config, add_pooling_layer=False).train()
    embedded = torch.randn(probed.batch_size, probed.seq_len, layer_config.embedding_size, requires_grad=True)
    threads = torch.get_num_threads()
    if threads > 1:
        started, cpu_started = time.perf_counter(), time.process_time()
        best = _best_pass_times(model, embedded, time.perf_counter)
        if time.process_time() - cpu_started >= BUSY_SHARE * threads * (time.perf_counter() - started):
            return ProbeResult(best[False] / best[True], threads)
    try:
        torch.set_num_threads(1)
        best = _best_pass_times(model, embedded, time.thread_time)
    finally:
        torch.set_num_threads(threads)
    return ProbeResult(best[False] / best[True], 1)


def _best_pass_times(model: torch.nn.Module, embedded: torch.Tensor, clock: Callable[[], float]) -> dict[bool, float]:
    """The shortest pass (forward and backward) of `model` in float32 (False) and under bf16 autocast (True)."""
    best = {False: float("inf"), True: float("inf")}
    passes = [False, True, *[in_bf16 for _ in range(PROBE_ROUNDS) for in_bf16 in (False, True)]]
    started = time.perf_counter()
    for index, in_bf16 in enumerate(passes):
        start = clock()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=in_bf16):
            output = model(inputs_embeds=embedded).last_hidden_state
        output.float().square().mean().backward()
        if index >= 2:  # the first pass of each warms up
            best[in_bf16] = min(best[in_bf16], clock() - start)
        if index >= 3 and index % 2 == 1 and time.perf_counter() - started > PROBE_SECONDS:
            break
    return best


# --- the cache of measured speed-ups ---


def probe_cache_file() -> Path:
    """Where measured speed-ups are kept: `roformer_hf/cpu_bf16_probe.json` under `$XDG_CACHE_HOME` (`~/.cache`)."""
    cache_home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache_home) / "roformer_hf" / "cpu_bf16_probe.json"


def probe_cache_key(shape: LayerShape) -> str:
    """What a measurement holds for: the CPU model, torch's version, the thread count and the probed shape."""
    get_capabilities = getattr(torch.cpu, "get_capabilities", dict)  # recent torch only
    cpu_name = get_capabilities().get("cpu_name") or platform.processor() or platform.machine()
    probed = shape.probed()
    return (
        f"{cpu_name} | torch {torch.__version__} | {torch.get_num_threads()} threads | {probed}, {probed.heads} heads"
    )


def read_probe_cache(path: Path) -> dict[str, float]:
    """The speed-ups cached at `path`; empty where the file is missing, unreadable or not such a mapping."""
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(cached, dict):
        return {}
    return {key: value for key, value in cached.items() if isinstance(value, float) and value > 0}


def write_probe_cache(path: Path, cached: dict[str, float]) -> None:
    """Write `cached` whole (a temporary file renamed into place), so a reader never sees half of it; a cache that
    cannot be written (a read-only home) is left out, and the next run probes again."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps(cached, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)


def cached_layer_speedup(shape: LayerShape, probe: Callable[[LayerShape], ProbeResult]) -> ProbeResult:
    """bf16's speed-up for `shape` on this machine at torch's thread count: read from the cache, or measured by
    `probe` and cached, unless the machine was too busy to measure at that thread count (`layer_speedup`)."""
    path, key, threads = probe_cache_file(), probe_cache_key(shape), torch.get_num_threads()
    cached = read_probe_cache(path)
    if key in cached:
        return ProbeResult(cached[key], threads)
    measured = probe(shape)
    if measured.threads == threads:
        write_probe_cache(path, {**cached, key: float(measured.speedup)})
    return measured


def layer_bf16(config: PreTrainedConfig, batch_size: int, seq_len: int) -> CpuBf16:
    """
    Whether bf16 pays on this CPU for training `config`'s model on `batch_size` x `seq_len` tokens a step, at torch's
    current thread count (probed once per machine and shape: `probe_cache_file`).

    Args:
        config (`RoFormerConfig`): the model's config.
        batch_size (`int`), seq_len (`int`): the sequences of one training batch and their length.
    """
    shape = LayerShape.of(config, batch_size, seq_len)
    return decide_layer_bf16(
        cpu_flags(), shape, lambda shape: cached_layer_speedup(shape, partial(layer_speedup, config))
    )


__all__ = [
    "CpuBf16",
    "LayerShape",
    "ProbeResult",
    "cached_layer_speedup",
    "cpu_bf16",
    "cpu_flags",
    "decide_layer_bf16",
    "layer_bf16",
    "layer_speedup",
    "probe_cache_file",
]
