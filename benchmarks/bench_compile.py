"""One training step of the classifier, ours against transformers' RoFormer, eager / `torch.compile` / CUDA graphs
(`mode="reduce-overhead"`): the first step's time (compilation included), the steady step, peak memory.

Each (library, variant, shape) starts from a fresh dynamo and the same random weights; bf16 autocast and fused AdamW
on CUDA (float32 and plain AdamW on a CPU), dropout 0.1, `torch.compiler.cudagraph_mark_step_begin()` before every
step. On a CPU, "reduce-overhead" compiles as the default mode does (torch captures CUDA graphs on CUDA only), so its
first step is the CPU's compile time for that shape.

    python benchmarks/bench_compile.py --device cuda                      # base shape, 1 x 2,048 and 4 x 512
    python benchmarks/bench_compile.py --tiny --device cpu --steps 3      # tiny model: the CPU's compile time per shape
"""

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

BASE = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072}
BASE["vocab_size"] = 50000
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128}
TINY["vocab_size"] = 1000
VARIANTS = {"eager": None, "compile": "default", "cudagraphs": "reduce-overhead"}
ROOF_SIZE = 8192


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="A 2-layer, 64-wide model: the dry run, or CPU compiles.")
    parser.add_argument("--shapes", default=None, help="batch x length, comma-separated (default 1x2048,4x512).")
    parser.add_argument("--libraries", default="transformers,ours")
    parser.add_argument("--variants", default="eager,compile,cudagraphs")
    parser.add_argument("--steps", type=int, default=20, help="Timed steps after 3 warm-up steps (median).")
    parser.add_argument("--json", type=Path, default=None, help="Also write the rows here.")
    parser.add_argument(
        "--backend",
        default=None,
        help="A torch.compile backend instead of the modes (aot_eager: the CPU dry run, which traces without kernels).",
    )
    args = parser.parse_args(argv)
    args.shapes = args.shapes or ("1x128,2x64" if args.tiny else "1x2048,4x512")
    return args


def build_models(size: dict, max_length: int) -> dict[str, torch.nn.Module]:
    """Both libraries' classifiers with the same random weights (ours first, copied into transformers')."""
    import transformers

    from roformer_hf import RoFormerConfig, RoFormerForSequenceClassification

    torch.manual_seed(0)
    config = {**size, "num_labels": 2, "max_position_embeddings": max(1536, max_length)}
    config["problem_type"] = (
        "single_label_classification"  # unset, our loss would store it at the first step: a recompile
    )
    ours = RoFormerForSequenceClassification(RoFormerConfig(**config, attn_implementation="sdpa"))
    theirs = transformers.RoFormerForSequenceClassification(
        transformers.RoFormerConfig(**config, attn_implementation="eager")
    )
    missing = theirs.load_state_dict(ours.state_dict(), strict=False).missing_keys
    return {"ours": ours, "transformers": theirs, "copied": len(theirs.state_dict()) - len(missing)}


def train_step(model, optimizer, batch: dict, device: str, mark_step: bool) -> None:
    if mark_step:
        torch.compiler.cudagraph_mark_step_begin()
    with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda"):
        loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def measure(
    model: torch.nn.Module, variant: str, shape: tuple[int, int], args: argparse.Namespace, vocab: int
) -> dict:
    """The first step (compilation included), the median steady step and the peak memory of one variant."""
    torch._dynamo.reset()
    model = model.to(args.device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=args.device == "cuda")
    mode = VARIANTS[variant]
    if mode is None:
        step_model = model
    elif args.backend:
        step_model = torch.compile(model, backend=args.backend)
    else:
        step_model = torch.compile(model, mode=None if mode == "default" else mode)
    generator = torch.Generator().manual_seed(0)
    batch = {
        "input_ids": torch.randint(5, vocab, shape, generator=generator).to(args.device),
        "attention_mask": torch.ones(shape, dtype=torch.long, device=args.device),
        "labels": torch.randint(0, 2, shape[:1], generator=generator).to(args.device),
    }
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base_memory = torch.cuda.memory_allocated()
    started = time.perf_counter()
    train_step(step_model, optimizer, batch, args.device, mode is not None)
    synchronize(args.device)
    first = time.perf_counter() - started
    times = []
    for index in range(3 + args.steps):
        started = time.perf_counter()
        train_step(step_model, optimizer, batch, args.device, mode is not None)
        synchronize(args.device)
        if index >= 3:
            times.append(time.perf_counter() - started)
    peak = torch.cuda.max_memory_allocated() - base_memory if args.device == "cuda" else None
    model.to("cpu")
    return {"first_step_s": first, "step_s": statistics.median(times), "peak_memory_bytes": peak}


def nominal_flops(size: dict, shape: tuple[int, int]) -> float:
    """Training FLOPs of a step (forward and backward): 6 x weights x tokens + attention's 12 x layers x B x T^2 x H."""
    hidden, layers = size["hidden_size"], size["num_hidden_layers"]
    layer_weights = 4 * hidden * hidden + 2 * hidden * size["intermediate_size"]
    batch, length = shape
    return 6 * layers * layer_weights * batch * length + 12 * layers * batch * length * length * hidden


def bf16_roof(device: str) -> float | None:
    """Measured bf16 matrix-product rate (FLOP/s) of an 8,192^3 product, on CUDA only."""
    if device != "cuda":
        return None
    a = torch.randn(ROOF_SIZE, ROOF_SIZE, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ a
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(10):
        a @ a
    torch.cuda.synchronize()
    return 10 * 2 * ROOF_SIZE**3 / (time.perf_counter() - started)


def machine(device: str) -> str:
    if device == "cuda":
        return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}"
    return f"{platform.processor() or platform.machine()} CPU, {torch.get_num_threads()} threads, torch {torch.__version__}"


def table(rows: list[dict], roof: float | None) -> list[str]:
    lines = ["| library | variant | shape | first step (s) | step (ms) | share of bf16 roof | peak memory (MB) |"]
    lines.append("|---|---|---|---:|---:|---:|---:|")
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['library']} | {row['variant']} | {row['shape']} | failed: {row['error']} | | | |")
            continue
        share = f"{row['flops'] / row['step_s'] / roof:.1%}" if roof else "-"
        memory = f"{row['peak_memory_bytes'] / 1e6:,.0f}" if row["peak_memory_bytes"] is not None else "-"
        lines.append(
            f"| {row['library']} | {row['variant']} | {row['shape']} | {row['first_step_s']:.1f} | "
            f"{row['step_s'] * 1000:.1f} | {share} | {memory} |"
        )
    return lines


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    size = TINY if args.tiny else BASE
    shapes = [tuple(int(part) for part in text.split("x")) for text in args.shapes.split(",")]
    models = build_models(size, max(length for _, length in shapes))
    rows = []
    for shape in shapes:
        for library in args.libraries.split(","):
            for variant in args.variants.split(","):
                row = {"library": library, "variant": variant, "shape": f"{shape[0]} x {shape[1]:,}"}
                try:
                    row.update(measure(models[library], variant, shape, args, size["vocab_size"]))
                except Exception as error:  # a variant that fails is a finding; the others still run
                    row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:120]}"
                row["flops"] = nominal_flops(size, shape)
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
                if args.json:  # row by row: a run stopped at its time limit keeps what it measured
                    args.json.write_text(json.dumps({"roof": None, "rows": rows}, indent=2))
    roof = bf16_roof(args.device)
    print(f"machine: {machine(args.device)}; weights copied into transformers': {models['copied']} tensors")
    print(f"bf16 roof: {roof / 1e12:.0f} TFLOP/s (8,192^3 product)" if roof else "bf16 roof: not measured (no GPU)")
    print("\n".join(table(rows, roof)))
    if args.json:
        args.json.write_text(json.dumps({"roof": roof, "rows": rows}, indent=2))
    return rows


if __name__ == "__main__":
    main()
