"""How many operations one training step of the base classifier runs, roformer_hf against transformers' RoFormer, in
one run: what an eager step launches on a GPU, counted on a CPU.

On a GPU an eager training step of the base shape is bound by the host: the GPU waits for Python to launch a few
thousand small kernels (docs/gpu.md). Their number does not depend on the device, so it is counted here with torch's
profiler on the CPU, on the code path a GPU takes: roformer_hf's CPU-only kernels (blockwise attention, the numpy
dropout masks) are switched off (`gpu_path`), so that attention runs torch's SDPA and dropout `nn.Dropout`, as on
CUDA. The model: `RoFormerForSequenceClassification`, 12 layers, 768 wide, 12 heads, the 50,000-word vocabulary,
dropout 0.1, float32 weights; the step: forward and loss under bf16 autocast, then backward (the optimizer's step,
the same for both, is left out). Counts do not depend on the length: the default batch, 1 x 128, keeps the run short.

Columns:

- leaf aten operations: profiler events `aten::*` with no `aten::*` event below them (what docs/gpu.md counted);
- dispatched operations: those that reach torch's kernels (a `TorchDispatchMode` sees them, after autograd and the
  decompositions of composite operations), less views and empty tensors, which launch nothing: about one kernel
  launch each on a GPU. The CPU splits two operations that CUDA fuses, the same for both libraries but for one:
  dropout (CUDA's `native_dropout`; `bernoulli_`, `div_` and `mul` on the CPU) and, ours only, SDPA with dropout
  (one flash-attention kernel on CUDA, its "math" decomposition on the CPU), so this undercounts ours' advantage.

    python benchmarks/count_operations.py
    python benchmarks/count_operations.py --shape 4x512 --top 15
"""

import argparse
import collections
import contextlib
import platform
import statistics
import time

import torch
import transformers
from bench_model import BASE_SIZE  # the benchmarks' base size, beside this script
from torch.utils._python_dispatch import TorchDispatchMode

import roformer_hf
from roformer_hf import modeling

# Made by `empty`-like calls: memory, not work.
ALLOCATIONS = ("aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty", "aten::new_empty_strided")


class DispatchCounter(TorchDispatchMode):
    """Counts the operations that reach torch's kernels (after autograd and the composite operations' decompositions),
    less those that make a view or an empty tensor: roughly one a kernel launch on a GPU."""

    def __init__(self):
        super().__init__()
        self.counts = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = f"aten::{func.__name__.split('.')[0]}"
        if not func.is_view and name not in ALLOCATIONS:
            self.counts[name] += 1
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def gpu_path():
    """roformer_hf's CPU-only kernels switched off: SDPA attention and `nn.Dropout`, as on a GPU."""
    prefers_blockwise_attention = modeling.prefers_blockwise_attention
    dropout_forward = modeling.RoFormerDropout.forward
    modeling.prefers_blockwise_attention = lambda *args, **kwargs: False
    modeling.RoFormerDropout.forward = torch.nn.Dropout.forward
    try:
        yield
    finally:
        modeling.prefers_blockwise_attention = prefers_blockwise_attention
        modeling.RoFormerDropout.forward = dropout_forward


def build(library: str, max_length: int) -> torch.nn.Module:
    torch.manual_seed(0)
    if library == "transformers":
        config = transformers.RoFormerConfig(**BASE_SIZE, max_position_embeddings=max(512, max_length), num_labels=2)
        return transformers.RoFormerForSequenceClassification(config).train()
    config = roformer_hf.RoFormerConfig(**BASE_SIZE, num_labels=2, attn_implementation="sdpa")
    return roformer_hf.RoFormerForSequenceClassification(config).train()


def step(model: torch.nn.Module, batch: dict) -> None:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(**batch).loss
    loss.backward()
    model.zero_grad(set_to_none=True)


def leaf_counts(events) -> collections.Counter:
    """Leaf aten operations by name: profiler events `aten::*` with no `aten::*` event below them."""
    leaves = collections.Counter()
    for event in events:
        if event.name.startswith("aten::") and not any(
            child.name.startswith("aten::") for child in event.cpu_children
        ):
            leaves[event.name] += 1
    return leaves


def measure(library: str, batch_size: int, length: int) -> dict:
    model = build(library, length)
    generator = torch.Generator().manual_seed(0)
    batch = {
        "input_ids": torch.randint(5, BASE_SIZE["vocab_size"], (batch_size, length), generator=generator),
        "attention_mask": torch.ones(batch_size, length, dtype=torch.long),
        "labels": torch.randint(0, 2, (batch_size,), generator=generator),
    }
    with gpu_path():
        step(model, batch)  # warm-up: lazy initialisations out of the count
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
            step(model, batch)
        with DispatchCounter() as counter:
            step(model, batch)
    return {"leaves": leaf_counts(profile.events()), "launching": counter.counts}


def eager_seconds(library: str, batch_size: int, length: int, repeats: int) -> tuple[float, float]:
    """The median wall and CPU time of an eager bf16 step on the CPU, on the CPU's own path (blockwise attention,
    numpy masks), after one warm-up step. CPU time is the steadier where other processes share the cores."""
    model = build(library, length)
    batch = {
        "input_ids": torch.randint(5, BASE_SIZE["vocab_size"], (batch_size, length)),
        "attention_mask": torch.ones(batch_size, length, dtype=torch.long),
        "labels": torch.randint(0, 2, (batch_size,)),
    }
    step(model, batch)
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        step(model, batch)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="1x128", help="BATCHxTOKENS (default 1x128; counts do not depend on it).")
    parser.add_argument("--top", type=int, default=0, help="Also list the N operations ours runs most, with theirs.")
    parser.add_argument("--time", type=int, default=0, help="Also time N eager steps of each on the CPU's own path.")
    args = parser.parse_args()
    batch_size, length = (int(part) for part in args.shape.lower().split("x"))
    transformers.logging.set_verbosity_error()
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, {platform.processor() or 'cpu'}; "
        f"base classifier, {batch_size} x {length}, bf16 autocast, dropout 0.1, forward + loss + backward\n"
    )
    results = {library: measure(library, batch_size, length) for library in ("transformers", "roformer_hf")}
    print("| library | leaf aten operations | dispatched operations (kernels) |")
    print("|---|---:|---:|")
    for library, result in results.items():
        print(f"| {library} | {result['leaves'].total():,} | {result['launching'].total():,} |")
    theirs, ours = results["transformers"], results["roformer_hf"]
    print(
        f"\nours / transformers': {ours['leaves'].total() / theirs['leaves'].total():.3f} (leaf operations), "
        f"{ours['launching'].total() / theirs['launching'].total():.3f} (dispatched operations)"
    )
    if args.top:
        print("\n| dispatched operation | roformer_hf | transformers |\n|---|---:|---:|")
        names = (ours["launching"] + theirs["launching"]).most_common(args.top)
        for name, _ in names:
            print(f"| {name} | {ours['launching'][name]} | {theirs['launching'][name]} |")
    if args.time:
        print(
            f"\n| library | eager bf16 step on the CPU, median of {args.time}: wall (s) | CPU time (s) |\n|---|---:|---:|"
        )
        for library in results:
            wall, cpu = eager_seconds(library, batch_size, length, args.time)
            print(f"| {library} | {wall:.2f} | {cpu:.2f} |")


if __name__ == "__main__":
    main()
