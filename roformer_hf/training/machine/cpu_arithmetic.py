"""Whether bf16 arithmetic pays on the CPU this process runs on, for one model at one batch shape: the scripts'
`--bf16` default (`training/machine/cpu_precision.py`) reads it. The model's own code does not: a checkpoint does not
carry this file.

bf16 (weights in bf16, or `torch.autocast("cpu", dtype=torch.bfloat16)`, what the scripts' `--bf16 true` turns on) can
be fast on a CPU only where the CPU multiplies bf16 numbers natively: AVX-512 BF16 (`avx512_bf16`: AMD Zen 4 and later,
Intel Cooper Lake), AMX (`amx_bf16`: Intel Sapphire Rapids and later), or Arm's BF16 extension (`bf16`). Without them
torch converts every bf16 number to float32 and back, and bf16 runs slower than float32: the CPU's flags in
/proc/cpuinfo are a fast "never". With them, whether bf16 pays depends on the CPU and on the sizes of the products: a
small one loses AMX's tile set-up, a mid-size one on two threads gains little, and autocast's casts cost the same
whatever the gain. So a probe decides: the model's own training step (forward and backward on random tokens,
dropout on) at the run's batch shape, on one thread (`PROBE_THREADS`), in float32 and under bf16 autocast, where that
costs a few billion operations (the demo's model: its embeddings, its output head and its layers all count); for wider
models one layer of it at a capped number of tokens, where bf16's gain is either large or absent. bf16 is chosen where
it trains at least `STEP_MIN_SPEEDUP` (the whole step) or `LAYER_MIN_SPEEDUP` (one layer, which leaves out the
embeddings, the head and the optimizer) times as fast: margins that keep the choice within a few percent of the better
precision where the two are close. The measured speed-up is cached per machine (CPU model, torch version) and shape
(`probe_cache_file`), so a run pays the probe once, and the same command gives the same precision however busy the
machine.
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
# bf16 is chosen only where the probe measures it at least this much faster. The whole step's timing varies by a
# few percent, and the optimizer step it leaves out runs alike in both (on the demo's model: 1.08x without it, 1.06x
# with it). A layer leaves out the embeddings, the head and the optimizer step too, which gain less from bf16.
STEP_MIN_SPEEDUP = 1.03
LAYER_MIN_SPEEDUP = 1.1
CPUINFO = Path("/proc/cpuinfo")
# Floating-point operations of one timed pass at most (about 0.1 s in float32 on two cores): a model whose whole step
# fits is probed whole (the demo's model: 3 to 7e9), a wider one by one layer, its tokens capped to fit (a base-width
# model: one sequence of up to 320 tokens).
PROBE_FLOPS = 14e9
# The share of masked tokens the MLM head scores with sparse prediction (the scripts' default --mlm_probability).
MASKED_SHARE = 0.15
PROBE_SECONDS = 0.4  # the timed rounds stop once this much time has gone, after at least one of each dtype
PROBE_ROUNDS = 3
# The probe's thread count, whatever the run's: one thread's CPU time is what the arithmetic costs however busy the
# machine (a multi-thread probe read differently under load), so the choice depends on the machine, torch and the
# model's shape only, and is cached once for them (`probe_cache_key`).
PROBE_THREADS = 1


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

    def layer_flops_per_token(self, seq_len: int | None = None) -> float:
        """Floating-point operations of one token through one layer, forward and backward: the projections and the
        attention over `seq_len` (the shape's) tokens."""
        seq_len = self.seq_len if seq_len is None else seq_len
        return 3 * (8 * self.hidden**2 + 4 * self.hidden * self.intermediate + 4 * seq_len * self.hidden)

    def probed(self) -> "LayerShape":
        """The shape the layer probe times: the tokens capped to `PROBE_FLOPS` (fewer sequences first)."""
        flops_per_token = self.layer_flops_per_token(seq_len=0)
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


def decide_bf16(flags: set[str] | None, what: str, min_speedup: float, probe: Callable[[], ProbeResult]) -> CpuBf16:
    """
    Whether bf16 pays: never without bf16 instructions among `flags`, else where `probe` measures `what` training at
    least `min_speedup` times as fast in bf16.

    Args:
        flags (`set[str]`, *optional*): the CPU's instruction-set flags (`cpu_flags`); None where they are unknown.
        what (`str`): what the probe trains, in words ("this model (...)", "a layer of this model (...)").
        min_speedup (`float`): the margin bf16 must clear (`STEP_MIN_SPEEDUP`, `LAYER_MIN_SPEEDUP`).
        probe (`Callable[[], ProbeResult]`): bf16's speed-up over float32 (`cached_speedup`); not called without bf16
            instructions.
    """
    never = no_bf16_instructions(flags)
    if never is not None:
        return never
    speedup, threads = probe()
    verdict = "at least" if speedup >= min_speedup else "less than"
    return CpuBf16(
        speedup >= min_speedup,
        f"{what} trains {speedup:.2f}x as fast in bf16 as in float32 on this CPU at {threads} "
        f"thread{'s' if threads > 1 else ''} ({verdict} {min_speedup}x)",
    )


def step_flops(model: torch.nn.Module, shape: LayerShape) -> float:
    """Floating-point operations of `model`'s training step (forward and backward) at `shape`: its layers and, for a
    masked LM, the output head over the tokens it scores."""
    config = model.config
    per_token = config.num_hidden_layers * shape.layer_flops_per_token()
    if hasattr(model, "cls"):  # a masked LM's head: hidden x hidden, then hidden x vocab
        scored = MASKED_SHARE if getattr(config, "sparse_prediction", False) else 1.0
        per_token += 6 * shape.hidden * (shape.hidden + config.vocab_size) * scored
    return shape.batch_size * shape.seq_len * per_token


def bf16_speedup(one_pass: Callable[[bool], None]) -> ProbeResult:
    """How many times as fast `one_pass` (a training pass: False in float32, True under bf16 autocast) runs in bf16
    on this CPU: the best of up to `PROBE_ROUNDS` passes of each, taken in turn, after one untimed pass of each, on
    `PROBE_THREADS` thread timed by its CPU time, which other processes do not lengthen: the same ratio on a quiet
    machine and a busy one, whatever thread count the run then trains with."""
    threads = torch.get_num_threads()
    with torch.random.fork_rng(devices=[]):  # the run's random numbers are left as they were
        torch.manual_seed(0)
        try:
            torch.set_num_threads(PROBE_THREADS)
            best = _best_pass_times(one_pass, time.thread_time)
        finally:
            torch.set_num_threads(threads)
    return ProbeResult(best[False] / best[True], PROBE_THREADS)


def step_speedup(model: torch.nn.Module, shape: LayerShape) -> ProbeResult:
    """bf16's speed-up for a copy of `model` (the caller's is left untouched) trained on `shape.batch_size` random
    sequences of `shape.seq_len` tokens, dropout on; a masked LM scores `MASKED_SHARE` of them, as in pretraining."""
    probe_model = copy.deepcopy(model).train()
    generator = torch.Generator().manual_seed(0)
    size = (shape.batch_size, shape.seq_len)
    inputs = {"input_ids": torch.randint(0, model.config.vocab_size, size, generator=generator)}
    if hasattr(model, "cls"):
        scored = torch.rand(size, generator=generator) < MASKED_SHARE
        inputs["labels"] = inputs["input_ids"].masked_fill(~scored, -100)

    def one_pass(in_bf16: bool) -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=in_bf16):
            outputs = probe_model(**inputs)
        loss = outputs.get("loss")
        (loss if loss is not None else outputs[0].float().square().mean()).backward()
        probe_model.zero_grad(set_to_none=True)

    return bf16_speedup(one_pass)


def layer_speedup(config: PreTrainedConfig, shape: LayerShape) -> ProbeResult:
    """bf16's speed-up for one layer of `config`'s model (forward and backward, dropout on) at the probed `shape`,
    its input given as embeddings."""
    from ...modeling import RoFormerModel  # here: the model's code does not import this module

    probed = shape.probed()
    layer_config = copy.deepcopy(config)
    layer_config.num_hidden_layers, layer_config.vocab_size = 1, 8  # one layer; the input comes as embeddings
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = RoFormerModel(layer_config, add_pooling_layer=False).train()
        embedded = torch.randn(probed.batch_size, probed.seq_len, layer_config.embedding_size, requires_grad=True)

    def one_pass(in_bf16: bool) -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=in_bf16):
            output = model(inputs_embeds=embedded).last_hidden_state
        output.float().square().mean().backward()

    return bf16_speedup(one_pass)


def _best_pass_times(one_pass: Callable[[bool], None], clock: Callable[[], float]) -> dict[bool, float]:
    """The shortest `one_pass` in float32 (False) and under bf16 autocast (True)."""
    best = {False: float("inf"), True: float("inf")}
    passes = [False, True, *[in_bf16 for _ in range(PROBE_ROUNDS) for in_bf16 in (False, True)]]
    started = time.perf_counter()
    for index, in_bf16 in enumerate(passes):
        start = clock()
        one_pass(in_bf16)
        if index >= 2:  # the first pass of each warms up
            best[in_bf16] = min(best[in_bf16], clock() - start)
        if index >= 3 and index % 2 == 1 and time.perf_counter() - started > PROBE_SECONDS:
            break
    return best


# --- the cache of measured speed-ups ---

# A speed-up outside these bounds is no measurement of a CPU (a hand-edited cache, 1e308 or 1e-300): AMX's bf16 peak is
# 16 times AVX-512's float32 one, and a CPU with bf16 instructions is never 32 times slower in bf16.
PLAUSIBLE_SPEEDUPS = (1 / 32, 32.0)


def is_measurement(speedup: object) -> bool:
    """Whether `speedup` can be a measured bf16 speed-up: a float within `PLAUSIBLE_SPEEDUPS` (not NaN, infinite,
    negative, a string or a boolean)."""
    low, high = PLAUSIBLE_SPEEDUPS
    return isinstance(speedup, float) and low < speedup < high


def probe_cache_file() -> Path:
    """Where measured speed-ups are kept: `roformer_hf/cpu_bf16_probe.json` under `$XDG_CACHE_HOME` (`~/.cache`)."""
    cache_home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache_home) / "roformer_hf" / "cpu_bf16_probe.json"


def probe_cache_key(what: str) -> str:
    """What a measurement holds for: the CPU model, torch's version, the probe's thread count and what was probed."""
    get_capabilities = getattr(torch.cpu, "get_capabilities", dict)  # recent torch only
    cpu_name = get_capabilities().get("cpu_name") or platform.processor() or platform.machine()
    return f"{cpu_name} | torch {torch.__version__} | {PROBE_THREADS} threads | {what}"


def read_probe_cache(path: Path) -> dict[str, float]:
    """The speed-ups cached at `path`, each a plausible one (`is_measurement`: a JSON `Infinity`, `NaN`, a negative
    number or 1e308 is no measurement); empty where the file is missing, unreadable or not such a mapping."""
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(cached, dict):
        return {}
    return {key: value for key, value in cached.items() if is_measurement(value)}


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


def cached_speedup(what: str, probe: Callable[[], ProbeResult]) -> ProbeResult:
    """bf16's speed-up for `what` on this machine: read from the cache, or measured by `probe` (at `PROBE_THREADS`)
    and cached."""
    path, key = probe_cache_file(), probe_cache_key(what)
    cached = read_probe_cache(path)
    if key in cached:
        return ProbeResult(cached[key], PROBE_THREADS)
    measured = probe()
    if is_measurement(float(measured.speedup)):
        write_probe_cache(path, {**cached, key: float(measured.speedup)})
    return measured


def step_bf16(model: torch.nn.Module, batch_size: int, seq_len: int) -> CpuBf16:
    """


    once per machine and shape (`probe_cache_file`).

    Args:
        model (`PreTrainedModel`): the model the run trains (a copy is probed).
        batch_size (`int`), seq_len (`int`): the sequences of one training batch and their length.
    """
    config, shape = model.config, LayerShape.of(model.config, batch_size, seq_len)
    if step_flops(model, shape) > PROBE_FLOPS:
        return layer_bf16(config, batch_size, seq_len)
    what = (
        f"this model ({type(model).__name__}, {config.num_hidden_layers} layers, vocabulary {config.vocab_size}, "
        f"{shape})"
    )
    scoring = "sparse" if getattr(config, "sparse_prediction", False) else "dense"
    key = f"{what}, {shape.heads} heads, {scoring} prediction"
    probe = partial(cached_speedup, key, partial(step_speedup, model, shape))
    return decide_bf16(cpu_flags(), what, STEP_MIN_SPEEDUP, probe)


def layer_bf16(config: PreTrainedConfig, batch_size: int, seq_len: int) -> CpuBf16:
    """
    Whether bf16 pays on this CPU for training `config`'s model on `batch_size` x `seq_len` tokens a step, judged by
    one of its layers at a capped number of tokens (`LayerShape.probed`), on `PROBE_THREADS` thread.
    """
    probed = LayerShape.of(config, batch_size, seq_len).probed()
    what = f"a layer of this model ({probed})"
    probe = partial(cached_speedup, f"{what}, {probed.heads} heads", partial(layer_speedup, config, probed))
    return decide_bf16(cpu_flags(), what, LAYER_MIN_SPEEDUP, probe)


__all__ = [
    "CpuBf16",
    "LayerShape",
    "ProbeResult",
    "cached_speedup",
    "cpu_bf16",
    "cpu_flags",
    "decide_bf16",
    "layer_bf16",
    "layer_speedup",
    "probe_cache_file",
    "step_bf16",
    "step_speedup",
]
