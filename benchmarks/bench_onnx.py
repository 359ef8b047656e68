"""Inference speed on the CPU: a RoFormer classifier in torch against its ONNX export in onnxruntime.

The model is `RoFormerForSequenceClassification` at the shape of RoFormer chinese base (12 layers, 768 wide, 12 heads,
feed-forward 3,072, the 50,000-word vocabulary, 2 labels) with random weights, in float32. It is exported once with
`torch.onnx.export(..., dynamo=True)` (dynamic batch and sequence axes, the exporter's default graph optimisation) and
run by an onnxruntime `InferenceSession` on the CPU with its default graph optimisations; torch runs the same model
with its default attention (SDPA) under `torch.inference_mode()`. Both use `--threads` threads (default: torch's).

Each row is a batch of `BATCHxTOKENS` random ids without padding (an `attention_mask` of ones is passed, as a tokenizer
gives one). For every row both run once to warm up and the logits are compared (the largest absolute difference is
printed; the run stops above 1e-3); then `--repeats` timed calls each, taking turns (torch, onnxruntime, torch, ...)
so that a change of load on a shared machine hits both alike. The table gives the median time of a call and the
speed-up (torch's time / onnxruntime's: above 1, onnxruntime is faster).

    python benchmarks/bench_onnx.py
    python benchmarks/bench_onnx.py --num_hidden_layers 2 --rows 1x128,1x4096 --repeats 3
"""

import argparse
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from bench_model import BASE_SIZE  # the benchmarks' base size, beside this script

from roformer_hf import RoFormerConfig, RoFormerForSequenceClassification

DEFAULT_ROWS = "1x128,8x128,1x512,1x2048"
INPUT_NAMES = ["input_ids", "attention_mask"]
MAX_DIFFERENCE = 1e-3


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", default=DEFAULT_ROWS, help="Comma-separated BATCHxTOKENS rows.")
    parser.add_argument("--repeats", type=int, default=3, help="Timed calls per row and runtime.")
    parser.add_argument("--num_hidden_layers", type=int, default=BASE_SIZE["num_hidden_layers"], help="Layers.")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="Threads of both runtimes.")
    return parser.parse_args()


def parse_rows(text: str) -> list[tuple[int, int]]:
    rows = []
    for row in text.split(","):
        batch_size, _, length = row.partition("x")
        if not (batch_size.isdigit() and length.isdigit()):
            sys.exit(f"--rows takes BATCHxTOKENS rows such as 1x512,8x128; got {row!r}")
        rows.append((int(batch_size), int(length)))
    return rows


def random_inputs(batch_size: int, length: int, vocab_size: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(batch_size * 100_003 + length)
    input_ids = torch.randint(1, vocab_size, (batch_size, length), generator=generator)
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}


def export(model: torch.nn.Module, path: Path) -> float:
    """Exports `model` to `path` with dynamic batch and sequence axes; returns the seconds it took."""
    started = time.perf_counter()
    axes = {0: "batch", 1: "sequence"}
    program = torch.onnx.export(
        model,
        (),
        kwargs=random_inputs(2, 16, model.config.vocab_size),
        dynamic_shapes=dict.fromkeys(INPUT_NAMES, axes),
        input_names=INPUT_NAMES,
        output_names=["logits"],
        dynamo=True,
        verbose=False,
    )
    program.save(path)
    return time.perf_counter() - started


def open_session(path: Path, threads: int):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    return onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def run_torch(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    with torch.inference_mode():
        return model(**inputs).logits


def run_onnxruntime(session, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.from_numpy(session.run(["logits"], {name: tensor.numpy() for name, tensor in inputs.items()})[0])


def measure_row(model, session, batch_size: int, length: int, repeats: int) -> dict:
    """Warm-up and agreement check, then `repeats` timed calls of each runtime, taking turns."""
    inputs = random_inputs(batch_size, length, model.config.vocab_size)
    difference = (run_torch(model, inputs) - run_onnxruntime(session, inputs)).abs().max().item()
    if difference > MAX_DIFFERENCE:
        sys.exit(f"onnxruntime's logits differ from torch's by {difference:.1e} at {batch_size}x{length}: stopping")
    times = {"torch": [], "onnxruntime": []}
    for _ in range(repeats):
        started = time.perf_counter()
        run_torch(model, inputs)
        times["torch"].append(time.perf_counter() - started)
        started = time.perf_counter()
        run_onnxruntime(session, inputs)
        times["onnxruntime"].append(time.perf_counter() - started)
    medians = {name: statistics.median(values) for name, values in times.items()}
    return {"row": f"{batch_size} x {length:,}", **medians, "difference": difference}


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def header_lines(args: argparse.Namespace, size: dict, export_seconds: float, start_load: float) -> list[str]:
    """The command, the machine (with its load: other jobs share a busy machine's cores) and the settings."""
    import onnxruntime

    return [
        "command: " + shlex.join(["python", "benchmarks/bench_onnx.py", *sys.argv[1:]]),
        f"machine: {cpu_name()}, {os.cpu_count()} cores, load average (1 min) {start_load:.1f} at the start and "
        f"{os.getloadavg()[0]:.1f} at the end",
        f"software: torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, {args.threads} threads each",
        f"model: RoFormerForSequenceClassification {size}, float32, random weights; export took {export_seconds:.0f} s",
        f"settings: median of {args.repeats} timed calls after a warm-up, runtimes taking turns",
    ]


def print_table(results: list[dict]) -> None:
    print("| batch x tokens | torch (s) | onnxruntime (s) | speed-up | max abs difference |")
    print("|---|---:|---:|---:|---:|")
    for result in results:
        speed_up = result["torch"] / result["onnxruntime"]
        print(
            f"| {result['row']} | {result['torch']:.3f} | {result['onnxruntime']:.3f} | {speed_up:.2f}x "
            f"| {result['difference']:.1e} |"
        )


def main() -> None:
    import transformers

    transformers.logging.set_verbosity_error()
    args = parse_args()
    rows = parse_rows(args.rows)
    torch.set_num_threads(args.threads)
    size = {**BASE_SIZE, "num_hidden_layers": args.num_hidden_layers}
    start_load = os.getloadavg()[0]
    torch.manual_seed(0)
    model = RoFormerForSequenceClassification(RoFormerConfig(**size, num_labels=2)).eval()
    with tempfile.TemporaryDirectory() as temporary:
        path = Path(temporary) / "model.onnx"
        export_seconds = export(model, path)
        session = open_session(path, args.threads)
        results = []
        for batch_size, length in rows:
            results.append(measure_row(model, session, batch_size, length, args.repeats))
            print(f"done: {results[-1]['row']}", file=sys.stderr, flush=True)
    print("\n".join(header_lines(args, size, export_seconds, start_load)) + "\n")
    print_table(results)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
