"""torch's `nn.Dropout` against `roformer_hf.modeling.RoFormerDropout` in one training step, taking turns step by step in
one process (so that a change of load hits both alike), and the share of the step each one's masks take.

The model is a random `RoFormerForSequenceClassification` (task `train`) or `RoFormerForMaskedLM` (`mlm`) of the given
width and depth, in training mode with its dropout of 0.1; the batch is bench_model.py's (padded as a tokenizer pads).
Every step runs forward (under bf16 autocast with `--bf16`), backward and `zero_grad`; the table gives the best and
the median step of each dropout, and the profile the share of self time of the masks (`bernoulli_` for torch's,
the forward and backward of our masked scaling for ours) and of the matrix products.

    python benchmarks/bench_dropout.py --bf16 --threads 1
    python benchmarks/bench_dropout.py --bf16 --task mlm --shape 16x128 --hidden 128 --layers 2 --heads 2 --vocab 4602
"""

import argparse
import collections
import os
import statistics
import time

import torch
from bench_model import machine_lines, make_batch  # beside us

from roformer_hf import RoFormerConfig, RoFormerForMaskedLM, RoFormerForSequenceClassification
from roformer_hf.modeling import RoFormerDropout

DROPOUTS = {"torch nn.Dropout": torch.nn.Dropout.forward, "RoFormerDropout": RoFormerDropout.forward}
MASK_EVENTS = ("aten::bernoulli_", "_MaskedScale", "_MaskedScaleBackward")
MATRIX_PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm_", "aten::baddbmm")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=("train", "mlm"), default="train")
    parser.add_argument("--shape", default="4x512", help="BATCHxTOKENS (default 4x512).")
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--vocab", type=int, default=50000)
    parser.add_argument("--rounds", type=int, default=3, help="Steps of each dropout, in turn (3).")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast, as the scripts train on a bf16 CPU.")
    return parser.parse_args()


def build(args: argparse.Namespace) -> tuple[torch.nn.Module, dict]:
    batch_size, _, length = args.shape.partition("x")
    config = RoFormerConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        intermediate_size=4 * args.hidden,
        max_position_embeddings=max(512, int(length)),
    )
    torch.manual_seed(0)
    model_class = RoFormerForSequenceClassification if args.task == "train" else RoFormerForMaskedLM
    return model_class(config).train(), make_batch(args.task, int(batch_size), int(length), args.vocab, "cpu")


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    model, batch = build(args)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss = model(**batch).loss
        loss.backward()
        model.zero_grad(set_to_none=True)

    step()  # warm-up
    seconds = {name: [] for name in DROPOUTS}
    for _ in range(args.rounds):
        for name, forward in DROPOUTS.items():
            RoFormerDropout.forward = forward  # every dropout of the model is a RoFormerDropout
            start = time.perf_counter()
            step()
            seconds[name].append(time.perf_counter() - start)
    print("\n".join(machine_lines("cpu")))
    print(
        f"{args.task} {args.shape}, hidden {args.hidden}, {args.layers} layers, {'bf16' if args.bf16 else 'float32'}, "
        f"{args.threads} threads, load average {os.getloadavg()[0]:.1f}\n"
    )
    print("| dropout | best step (s) | median step (s) | masks' share | matrix products' share |")
    print("|---|---|---|---|---|")
    for name, forward in DROPOUTS.items():
        RoFormerDropout.forward = forward
        masks, products = profiled_shares(step)
        print(
            f"| {name} | {min(seconds[name]):.3f} | {statistics.median(seconds[name]):.3f} | {masks:.1%} | "
            f"{products:.1%} |"
        )
    best = min(seconds["torch nn.Dropout"]) / min(seconds["RoFormerDropout"])
    print(f"\nbest step, torch's / ours: {best:.2f}x")


def profiled_shares(step) -> tuple[float, float]:
    """The shares of the self time of one step in the dropout masks and in the matrix products."""
    with torch.profiler.profile() as profile:
        step()
    self_times = collections.Counter()
    for event in profile.key_averages():
        self_times[event.key] += event.self_cpu_time_total
    total = sum(self_times.values())
    return (
        sum(self_times[name] for name in MASK_EVENTS) / total,
        sum(self_times[name] for name in MATRIX_PRODUCTS) / total,
    )


if __name__ == "__main__":
    main()
