"""Time and peak memory of linear attention with RoPE next to softmax attention (SDPA), from 1k to 32k tokens.

What is measured: the attention step of one layer alone, forward only, float32, batch 1, 12 heads of 64 (the base
model's shape): `linear_attention_forward` (feature map, RoPE, key-value summary) against RoPE on q and k followed by
`torch.nn.functional.scaled_dot_product_attention`, the softmax path the model takes with `attn_implementation="sdpa"`.
Each measurement runs in a fresh process, so that its peak resident memory (VmHWM minus the resident size once the
inputs exist) is its own. Times are medians of `--repeats` runs.

The last columns check the claim of linear attention: 4x the length costs less than 6x the time (softmax: ~16x).

    python benchmarks/bench_linear_attention.py                       # bidirectional (encoder)
    python benchmarks/bench_linear_attention.py --causal              # causal (decoder)
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch.nn import functional as F

from roformer_hf.modeling import apply_rotary, linear_attention_forward

KINDS = ("softmax", "linear")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384, 32768])
    parser.add_argument("--num_heads", type=int, default=12)
    parser.add_argument("--head_dim", type=int, default=64)
    parser.add_argument("--causal", action="store_true", help="Causal attention (decoder) instead of bidirectional.")
    parser.add_argument("--repeats", type=int, default=3, help="Timed runs per measurement; the median is reported.")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch threads.")
    parser.add_argument("--measure", nargs=2, metavar=("KIND", "LENGTH"), help=argparse.SUPPRESS)  # child process
    return parser.parse_args()


def attention_step(kind: str, length: int, args: argparse.Namespace):
    """Random inputs of `length` tokens and a function running one attention step of `kind` on them."""
    query, key, value = (torch.randn(1, args.num_heads, length, args.head_dim) for _ in range(3))  # (B, H, T, D)
    angles = torch.arange(length, dtype=torch.float32)[None, :, None] * torch.rand(args.head_dim)  # (B, T, D)
    cos, sin = angles.cos(), angles.sin()
    if kind == "linear":
        return lambda: linear_attention_forward(query, key, value, cos, sin, None, args.causal)
    return lambda: F.scaled_dot_product_attention(
        apply_rotary(query, cos, sin), apply_rotary(key, cos, sin), value, is_causal=args.causal
    )


def resident_kib(field: str) -> int:
    """A field of /proc/self/status in KiB: VmRSS (resident now) or VmHWM (its peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status (this benchmark needs Linux)")


@torch.inference_mode()
def measure(kind: str, length: int, args: argparse.Namespace) -> dict[str, float]:
    """Median seconds and peak extra memory (MiB) of one attention step, in this process."""
    attention_step(kind, 128, args)()  # warm up kernels and thread pools on a short input
    step = attention_step(kind, length, args)
    baseline_kib = resident_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident size
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - start)
    return {"seconds": statistics.median(seconds), "peak_mib": (resident_kib("VmHWM") - baseline_kib) / 1024}


def measure_in_child(kind: str, length: int, args: argparse.Namespace) -> dict[str, float]:
    command = [sys.executable, __file__, "--measure", kind, str(length), "--num_heads", str(args.num_heads)]
    command += ["--head_dim", str(args.head_dim), "--repeats", str(args.repeats), "--threads", str(args.threads)]
    command += ["--causal"] if args.causal else []
    finished = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(finished.stdout.splitlines()[-1])


def growth(results: dict, kind: str, length: int) -> str:
    """t(n) / t(n / 4), where both were measured."""
    shorter = results.get((kind, length // 4))
    return f"{results[kind, length]['seconds'] / shorter['seconds']:.1f}x" if shorter else ""


def print_table(results: dict, args: argparse.Namespace) -> None:
    mode = "causal" if args.causal else "bidirectional"
    print(f"\n{mode}, batch 1, {args.num_heads} heads x {args.head_dim}, float32, {args.threads} threads,")
    print(f"median of {args.repeats} runs, forward of the attention step alone\n")
    print("| tokens | softmax s | softmax peak MiB | linear s | linear peak MiB | softmax / linear time "
          "| softmax t(n)/t(n/4) | linear t(n)/t(n/4) | linear 4x length < 6x time |")  # fmt: skip
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: |")
    for length in args.lengths:
        softmax, linear = results["softmax", length], results["linear", length]
        linear_growth = growth(results, "linear", length)
        check = ("yes" if float(linear_growth[:-1]) < 6 else "NO") if linear_growth else ""
        print(
            f"| {length} | {softmax['seconds']:.3f} | {softmax['peak_mib']:.0f} | {linear['seconds']:.3f} "
            f"| {linear['peak_mib']:.0f} | {softmax['seconds'] / linear['seconds']:.1f}x "
            f"| {growth(results, 'softmax', length)} | {linear_growth} | {check} |"
        )


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    if args.measure:
        kind, length = args.measure
        print(json.dumps(measure(kind, int(length), args)))
        return
    results = {}
    for length in args.lengths:
        for kind in KINDS:
            results[kind, length] = measure_in_child(kind, length, args)
            print(f"{kind:>8} {length:>6} tokens: {results[kind, length]}", file=sys.stderr, flush=True)
    print_table(results, args)


if __name__ == "__main__":
    main()
