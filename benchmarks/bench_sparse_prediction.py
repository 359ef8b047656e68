"""Training-step time of `RoFormerForMaskedLM` with dense and with sparse prediction (`config.sparse_prediction`).

With sparse prediction the MLM head runs only at the labelled positions (15% of the tokens here) instead of at every
token; over the 50,000-word vocabulary that head is the largest matrix product of a small model. The loss and the
gradients are the same (tests/test_modeling.py), so only the time differs. Random weights and tokens, CPU, float32;
the two settings take turns, `--rounds` times, and the table shows the fastest mean step of each. The `mlm` row of
`benchmarks/bench_model.py` measures both settings against transformers' RoFormer at the base shape.

    python benchmarks/bench_sparse_prediction.py
"""

import argparse
import time

import torch

from roformer_hf import RoFormerConfig, RoFormerForMaskedLM

MODELS = {
    "small (2 x 256)": {
        "hidden_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 1024,
    },
    "base (12 x 768)": {},  # the defaults: the original chinese base model
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="small (2 x 256)=32x128,base (12 x 768)=4x512", help="model=BxT,...")
    parser.add_argument("--steps", type=int, default=2, help="Timed steps per measurement, after one warm-up.")
    parser.add_argument("--rounds", type=int, default=2, help="Measurements per setting, taken in turn.")
    return parser.parse_args()


def step_seconds(model_size: dict, sparse: bool, batch_size: int, length: int, steps: int) -> float:
    """Mean time of a forward + backward step with 15% of the tokens labelled."""
    torch.manual_seed(0)
    model = RoFormerForMaskedLM(RoFormerConfig(**model_size, sparse_prediction=sparse)).train()
    input_ids = torch.randint(5, model.config.vocab_size, (batch_size, length))
    labels = torch.where(torch.rand(batch_size, length) < 0.15, input_ids, -100)

    def step() -> None:
        model(input_ids=input_ids, labels=labels).loss.backward()
        model.zero_grad(set_to_none=True)

    step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps


def main() -> None:
    args = parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32, 15% of the tokens labelled\n")
    print("| model | batch x tokens | dense (s) | sparse (s) | speed-up |")
    print("|---|---|---|---|---|")
    for item in args.shapes.split(","):
        name, shape = item.rsplit("=", 1)
        batch_size, length = (int(number) for number in shape.split("x"))
        times = {False: [], True: []}
        for _ in range(args.rounds):
            for sparse in times:
                times[sparse].append(step_seconds(MODELS[name], sparse, batch_size, length, args.steps))
        dense, sparse = min(times[False]), min(times[True])
        print(f"| {name} | {batch_size} x {length} | {dense:.3f} | {sparse:.3f} | {dense / sparse:.2f}x |")


if __name__ == "__main__":
    main()
