"""The long-range decay of RoPE, and what NTK and dynamic scaling do to it.

The RoFormer paper (section 3.4.3) bounds the rotated score of a query and a key m positions apart, by Abel summation:

    |sum_i q_i k_i* e^(i m theta_i)| <= (max_i |h_(i+1) - h_i|) * sum_(j=1..d/2) |S_j|,   S_j = sum_(i<j) e^(i m theta_i)

and plots the relative upper bound (1 / (d/2)) sum_j |S_j| against m: it decays as m grows. This script draws that
curve for d = 128 and m up to 256, for plain RoPE and for the frequencies of the `"ntk"` and `"dynamic"` RoPE types
(computed by `roformer_hf.modeling.inverse_frequencies`, the code the model runs), assuming a model trained on
`--trained_length` tokens and read at m up to 256. Lower frequencies decay more slowly: the scaled types keep
distant tokens "closer", which is what lets them extrapolate.

    python benchmarks/rope_decay.py --output benchmarks/rope_decay.png
"""

import argparse
from pathlib import Path

import torch
from matplotlib.figure import Figure

from roformer_hf import RoFormerConfig
from roformer_hf.modeling import inverse_frequencies

HEAD_DIM = 128


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=Path(__file__).with_suffix(".png"), help="PNG to write.")
    parser.add_argument("--max_distance", type=int, default=256, help="Largest relative distance m.")
    parser.add_argument("--trained_length", type=int, default=64, help="max_position_embeddings of the model.")
    parser.add_argument("--ntk_factor", type=float, default=4.0, help='factor of rope_type "ntk".')
    parser.add_argument("--dynamic_factor", type=float, default=2.0, help='factor of rope_type "dynamic".')
    return parser.parse_args()


def relative_upper_bound(frequencies: torch.Tensor, max_distance: int) -> torch.Tensor:
    """(1 / (d/2)) sum_j |S_j| with S_j = sum_(i<j) e^(i m theta_i), for m = 0..max_distance. Shape (max_distance + 1,)."""
    distances = torch.arange(max_distance + 1, dtype=torch.float64)[:, None]  # (M, 1)
    phases = torch.polar(torch.ones(1, dtype=torch.float64), distances * frequencies.double())  # (M, d/2)
    partial_sums = phases.cumsum(dim=-1)  # S_1 .. S_(d/2)
    return partial_sums.abs().mean(dim=-1)


def frequencies_by_rope_type(args: argparse.Namespace) -> dict[str, torch.Tensor]:
    """The inverse frequencies the model uses at a length of max_distance + 1 tokens, for each RoPE type."""
    settings = {
        "plain RoPE": {"rope_type": "default"},
        f"ntk, factor {args.ntk_factor:g}": {"rope_type": "ntk", "factor": args.ntk_factor},
        f"dynamic, factor {args.dynamic_factor:g} ({args.max_distance + 1} tokens)": {
            "rope_type": "dynamic",
            "factor": args.dynamic_factor,
        },
    }
    frequencies = {}
    for label, rope_parameters in settings.items():
        config = RoFormerConfig(
            hidden_size=HEAD_DIM,
            num_attention_heads=1,
            max_position_embeddings=args.trained_length,
            rope_parameters={"rope_theta": 10000.0, **rope_parameters},
        )
        frequencies[label], _ = inverse_frequencies(config, HEAD_DIM, seq_len=args.max_distance + 1)
    return frequencies


def plot(bounds: dict[str, torch.Tensor], args: argparse.Namespace) -> None:
    figure = Figure(figsize=(7, 4.2))  # no pyplot: nothing to display, no backend to choose
    axes = figure.subplots()
    for label, bound in bounds.items():
        axes.plot(bound.numpy(), label=label, linewidth=1.4)
    axes.axvline(args.trained_length, color="grey", linestyle=":", linewidth=1)
    axes.text(args.trained_length + 2, axes.get_ylim()[1] * 0.95, "trained length", color="grey", va="top")
    axes.set_xlabel("relative distance m")
    axes.set_ylabel("relative upper bound  (2/d) Σ_j |S_j|")
    axes.set_title(f"Long-range decay of RoPE (d = {HEAD_DIM}, base 10000)")
    axes.legend()
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(args.output, dpi=120)


def print_table(bounds: dict[str, torch.Tensor], max_distance: int) -> None:
    distances = [m for m in (0, 8, 32, 64, 128, 192, 256) if m <= max_distance]
    print("| rope | " + " | ".join(f"m={m}" for m in distances) + " |")
    print("| --- |" + " ---: |" * len(distances))
    for label, bound in bounds.items():
        print(f"| {label} | " + " | ".join(f"{bound[m]:.2f}" for m in distances) + " |")


def main() -> None:
    args = parse_args()
    frequencies = frequencies_by_rope_type(args)
    bounds = {label: relative_upper_bound(values, args.max_distance) for label, values in frequencies.items()}
    plot(bounds, args)
    print_table(bounds, args.max_distance)
    print(f"figure: {args.output}")


if __name__ == "__main__":
    main()
