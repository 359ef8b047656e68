"""The attention of one layer (12 heads of 64, the base model's), our kernels against torch's, in float32 and bf16.

What `roformer_hf.modeling.prefers_blockwise_attention` decides from, measured on this machine:

- train: forward and backward with attention dropout 0.1, on a padded 4 x 512 batch (512, 384, 256 and 128 real
  tokens, the mask one row per sequence as `roformer_hf.modeling.layer_attention_mask` gives it) and on 1 x 2,048.
  Kernels: `blockwise` (ours), `eager` (our readable reference: softmax in float32, `F.dropout`), `sdpa` (torch's,
  whose CPU kernel with dropout is its "math" fallback).
- infer: forward without dropout under `torch.inference_mode`, 1 x 4,096. Kernels: `sdpa` (torch's fused CPU kernel)
  and `blockwise`.
- rope: `roformer_hf.modeling.apply_rotary` on the queries and keys of 4 x 512, forward and backward (`apply_rotary`:
  float32 angles, bf16 inputs widened to float32 for one complex product) against the real form computed in the
  inputs' dtype (`rope-real`: x * cos + rotate_pairs(x) * sin, cos and sin rounded to that dtype), the alternative
  for bf16.

bf16 rows get bf16 queries, keys and values, as under `torch.autocast("cpu", dtype=torch.bfloat16)`. Every kernel of
a row runs in the same process, in turn, `--rounds` times after a warm-up; the table shows the median wall-clock and
CPU time of a call and the speed-up over the row's float32 reference (eager for train, SDPA for infer), from both.

    python benchmarks/bench_attention.py               # every row, about a minute on a quiet 2-core CPU
    python benchmarks/bench_attention.py --rounds 7 --tasks infer
"""

import argparse
import statistics
import time

import torch
from bench_model import machine_lines, real_lengths  # the same machine header as the model benchmark
from torch.nn import functional as F

from roformer_hf.modeling import apply_rotary, blockwise_attention_forward, eager_attention_forward, rotate_pairs
from roformer_hf.training.machine.cpu_arithmetic import cpu_bf16

NUM_HEADS, HEAD_DIM, DROPOUT = 12, 64, 0.1
ROWS = {"train": [(4, 512), (1, 2048)], "infer": [(1, 4096)], "rope": [(4, 512)]}
KERNELS = {
    "train": ["eager", "sdpa", "blockwise"],
    "infer": ["sdpa", "blockwise"],
    "rope": ["apply_rotary", "rope-real"],
}
REFERENCE = {"train": "eager", "infer": "sdpa", "rope": "apply_rotary"}
DTYPES = {"float32": torch.float32, "bf16": torch.bfloat16}


class Attention(torch.nn.Module):
    is_causal = False


def inputs(batch_size: int, length: int, dtype: torch.dtype, train: bool) -> tuple:
    """Queries, keys and values (B, nh, T, hs), and the padding mask of one row per sequence (None unpadded)."""
    generator = torch.Generator().manual_seed(0)
    shape = (batch_size, NUM_HEADS, length, HEAD_DIM)
    query, key, value = (torch.randn(shape, generator=generator).to(dtype).requires_grad_(train) for _ in range(3))
    visible = torch.arange(length) < torch.tensor(real_lengths(batch_size, length))[:, None]  # (B, T)
    return query, key, value, (visible[:, None, None, :] if batch_size > 1 else None)


def run(kernel: str, module: torch.nn.Module, query, key, value, mask, train: bool) -> None:
    dropout = DROPOUT if train else 0.0
    if kernel in ("apply_rotary", "rope-real"):
        output = torch.stack([rotate(kernel, hidden_states) for hidden_states in (query, key)])
    elif kernel == "sdpa":
        output = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout)
    elif kernel == "eager":
        additive = None if mask is None else torch.zeros(mask.shape, dtype=query.dtype).masked_fill(~mask, -1e4)
        output, _ = eager_attention_forward(module, query, key, value, additive, HEAD_DIM**-0.5, dropout=dropout)
    else:
        output, _ = blockwise_attention_forward(module, query, key, value, mask, HEAD_DIM**-0.5, dropout=dropout)
    if train:
        output.backward(torch.ones_like(output))


def rotate(kernel: str, hidden_states: torch.Tensor) -> torch.Tensor:
    """RoPE on (B, nh, T, hs) at positions 0..T-1, the angles in float32."""
    angles = torch.arange(hidden_states.shape[2])[:, None] * 10000.0 ** (-torch.arange(0, HEAD_DIM, 2) / HEAD_DIM)
    angles = angles.repeat_interleave(2, dim=-1)[None]  # (1, T, hs), float32
    if kernel == "apply_rotary":
        return apply_rotary(hidden_states, angles.cos(), angles.sin())
    cos, sin = (table.to(hidden_states.dtype)[:, None] for table in (angles.cos(), angles.sin()))  # (1, 1, T, hs)
    return hidden_states * cos + rotate_pairs(hidden_states) * sin


def measure(task: str, batch_size: int, length: int, rounds: int) -> list[dict]:
    """Every kernel and dtype of one row, in turn, `rounds` times after one warm-up each."""
    train = task != "infer"
    module = Attention().train(train)
    cases = [(kernel, dtype) for dtype in DTYPES for kernel in KERNELS[task]]
    prepared = {case: inputs(batch_size, length, DTYPES[case[1]], train) for case in cases}
    times = {case: ([], []) for case in cases}
    context = torch.enable_grad if train else torch.inference_mode
    for round_index in range(rounds + 1):
        for case in cases:
            with context():
                start, cpu_start = time.perf_counter(), time.process_time()
                run(case[0], module, *prepared[case], train)
                if round_index > 0:  # the first round warms up
                    times[case][0].append(time.perf_counter() - start)
                    times[case][1].append(time.process_time() - cpu_start)
    return [
        {"task": task, "shape": (batch_size, length), "kernel": kernel, "dtype": dtype}
        | {"seconds": statistics.median(times[kernel, dtype][0])}
        | {"cpu_seconds": statistics.median(times[kernel, dtype][1])}
        for kernel, dtype in cases
    ]


def print_table(results: list[dict]) -> None:
    print("| task | batch x tokens | kernel | dtype | time (ms) | CPU time (ms) | speed-up | CPU speed-up |")
    print("|------|----------------|--------|-------|-----------|---------------|----------|--------------|")
    for row in results:
        reference = next(
            other
            for other in results
            if other["shape"] == row["shape"]
            and other["task"] == row["task"]
            and (other["kernel"], other["dtype"]) == (REFERENCE[row["task"]], "float32")
        )
        cells = [row["task"], "{} x {}".format(*row["shape"]), row["kernel"], row["dtype"]]
        cells += [f"{row['seconds'] * 1000:.1f}", f"{row['cpu_seconds'] * 1000:.1f}"]
        cells += [f"{reference['seconds'] / row['seconds']:.2f}x"]
        cells += [f"{reference['cpu_seconds'] / row['cpu_seconds']:.2f}x"]
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="Timed calls of every kernel, taken in turn.")
    parser.add_argument("--tasks", default="train,infer,rope", help="Comma-separated: train, infer, rope.")
    args = parser.parse_args()
    decision = cpu_bf16()
    print("\n".join(machine_lines("cpu")))
    print(
        f"roformer_hf.training.machine.cpu_arithmetic: bf16 {'pays' if decision.pays else 'does not pay'}: "
        f"{decision.reason}"
    )
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; median of {args.rounds} calls after 1\n")
    results = []
    for task in args.tasks.split(","):
        for batch_size, length in ROWS[task]:
            results += measure(task, batch_size, length, args.rounds)
    print_table(results)


if __name__ == "__main__":
    main()
