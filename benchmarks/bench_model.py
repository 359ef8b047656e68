"""Speed and peak memory of roformer_hf against transformers' RoFormer, same weights, one fresh process per measurement.

The model is the one of the goals: 2 layers, 768 wide, 12 heads, feed-forward 3072, the 50,000-word vocabulary and
the default dropouts (0.1), batch 1. transformers' RoFormer has only eager attention; ours runs with its default
(SDPA, plus the CPU dispatch of `roformer_hf.blockwise_attention`) and, for reference, with eager attention.

- train: `RoFormerForSequenceClassification` with a label, forward + loss + backward + `zero_grad` (the optimizer step
  costs the same for both and is left out). Our classifier computes its last layer at [CLS] only (the head reads
  nothing else; see `last_layer_positions`); the row `roformer_hf-sdpa-full-last-layer` computes every position, as
  transformers does, to show what the attention and its dropout give alone. In a 2-layer model the last layer is half
  the model; in the 12-layer base model it is 1/12.
- infer: `RoFormerModel` forward under `torch.inference_mode()`.

Every measurement runs in a fresh subprocess: one warm-up step, then `--repeats` timed steps. The implementations of
a row take turns, `--rounds` times, so that the load of a shared machine hits them alike; the table shows the median
step time and the median peak. Peak memory is what the steps add on top of the loaded model: on the CPU the growth of the
process's resident-set high-water mark (VmHWM, reset after loading), on CUDA `torch.cuda.max_memory_allocated`.
Speed-ups are transformers' step time / ours (above 1: ours is faster), from wall-clock time and from the process's
CPU time (steadier when other jobs share the cores); memory is our peak / transformers' peak (below 1: ours is
smaller).

With `--v2`, the rows compare RoFormer-V2 (RMS norm without weights, no biases in the encoder, ReLU) with our own
V1 at the base shape (12 layers, 768 wide, 12 heads, feed-forward 3072, vocabulary 12,000), both roformer_hf with
SDPA, both with random weights: speed-ups and memory are then V1's / V2's and V2's / V1's.

    python benchmarks/bench_model.py                         # the goals' rows on the CPU
    python benchmarks/bench_model.py --device cuda --rows train:2048,infer:4096,infer:16384
    python benchmarks/bench_model.py --v2                    # V2 against V1, base shape, 512 and 2,048 tokens
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

DEFAULT_ROWS = "train:512,train:2048,infer:512,infer:4096"
V2_ROWS = "train:512,train:2048,infer:512,infer:2048"
FULL_LAST_LAYER = "-full-last-layer"  # the suffix of our implementation computing every position of the last layer
MODEL_SIZE = {
    "vocab_size": 50000,
    "hidden_size": 768,
    "num_hidden_layers": 2,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
}
BASE_SIZE = {**MODEL_SIZE, "vocab_size": 12000, "num_hidden_layers": 12}  # the --v2 comparison
V2_SETTINGS = {"norm_type": "rms_norm", "use_bias": False, "hidden_act": "relu"}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda.")
    parser.add_argument(
        "--rows",
        help=f"Comma-separated task:length pairs (task train or infer); default {DEFAULT_ROWS}, with --v2 {V2_ROWS}.",
    )
    parser.add_argument("--v2", action="store_true", help="RoFormer-V2 against our V1 at the base shape.")
    parser.add_argument("--num_hidden_layers", type=int, help="Override the number of layers (quick checks).")
    parser.add_argument("--rounds", type=int, default=3, help="Fresh processes per implementation, taken in turn.")
    parser.add_argument("--repeats", type=int, default=2, help="Timed steps per process, after one warm-up step.")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"], help="Weights.")
    parser.add_argument(
        "--attention_dropout", type=float, default=0.1, help="attention_probs_dropout_prob of the model (0.1 default)."
    )
    parser.add_argument("--no_eager", action="store_true", help="Skip the row of our eager attention.")
    parser.add_argument("--json", type=Path, help="Also write the results to this JSON file.")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # internal: JSON of one measurement to run
    return parser.parse_args()


# --- one measurement, in a fresh process ------------------------------------------------------------------------


def load_model(implementation: str, checkpoint: str, task: str, device: str, dtype: torch.dtype):
    """transformers' or our class for `task`, from the same checkpoint (written by transformers), or for --v2 ours
    from the checkpoint of that family."""
    if implementation == "transformers":
        from transformers import RoFormerForSequenceClassification, RoFormerModel

        classes, kwargs = (RoFormerForSequenceClassification, RoFormerModel), {"attn_implementation": "eager"}
    else:
        from roformer_hf import RoFormerForSequenceClassification, RoFormerModel

        attention = implementation.removeprefix("roformer_hf-").removesuffix(FULL_LAST_LAYER)
        attention = "sdpa" if attention in ("v1", "v2") else attention
        classes, kwargs = (RoFormerForSequenceClassification, RoFormerModel), {"attn_implementation": attention}
    model_class = classes[0] if task == "train" else classes[1]
    model = model_class.from_pretrained(checkpoint, dtype=dtype, **kwargs).to(device)
    return model.train() if task == "train" else model.eval()


def run_step(model, task: str, input_ids: torch.Tensor, labels: torch.Tensor, full_last_layer: bool) -> None:
    if task == "train":
        # Asking for every layer's hidden states makes our classifier compute every position of its last layer.
        extra = {"output_hidden_states": True} if full_last_layer else {}
        model(input_ids=input_ids, labels=labels, **extra).loss.backward()
        model.zero_grad(set_to_none=True)
    else:
        with torch.inference_mode():
            model(input_ids=input_ids)


def resident_memory(field: str) -> int:
    """VmRSS or VmHWM of this process, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def reset_peak_memory(device: str) -> int:
    """Starts a new peak measurement; returns the baseline in bytes."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        return torch.cuda.memory_allocated()
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current VmRSS
    return resident_memory("VmRSS")


def peak_memory(device: str) -> int:
    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated()
    return resident_memory("VmHWM")


def measure(spec: dict) -> dict:
    """Loads one model, runs a warm-up and `repeats` steps, returns the step times and the peak memory growth."""
    torch.manual_seed(0)
    dtype = getattr(torch, spec["dtype"])
    model = load_model(spec["implementation"], spec["checkpoint"], spec["task"], spec["device"], dtype)
    input_ids = torch.randint(1, spec["vocab_size"], (1, spec["length"]), device=spec["device"])
    labels = torch.tensor([1], device=spec["device"])
    baseline = reset_peak_memory(spec["device"])
    times, cpu_times = [], []
    for step in range(spec["repeats"] + 1):
        start, cpu_start = time.perf_counter(), time.process_time()
        run_step(model, spec["task"], input_ids, labels, spec["implementation"].endswith(FULL_LAST_LAYER))
        if spec["device"].startswith("cuda"):
            torch.cuda.synchronize()
        if step > 0:  # step 0 warms up
            times.append(time.perf_counter() - start)
            cpu_times.append(time.process_time() - cpu_start)
    return {"times": times, "cpu_times": cpu_times, "peak_bytes": peak_memory(spec["device"]) - baseline}


# --- the driver -------------------------------------------------------------------------------------------------


def model_size(args: argparse.Namespace) -> dict:
    size = BASE_SIZE if args.v2 else MODEL_SIZE
    return {**size, "num_hidden_layers": args.num_hidden_layers or size["num_hidden_layers"]}


def write_checkpoint(folder: str, args: argparse.Namespace, max_length: int) -> None:
    """A random-weight checkpoint saved by transformers' RoFormer: the weights both sides load. With --v2, one of our
    V1 and one of our V2 in the subfolders `roformer_hf-v1` and `roformer_hf-v2`."""
    if args.v2:
        import roformer_hf

        for name, settings in (("roformer_hf-v1", {}), ("roformer_hf-v2", V2_SETTINGS)):
            torch.manual_seed(0)
            config = roformer_hf.RoFormerConfig(
                **model_size(args), **settings, attention_probs_dropout_prob=args.attention_dropout, num_labels=2
            )
            roformer_hf.RoFormerForSequenceClassification(config).save_pretrained(Path(folder) / name)
        return
    from transformers import RoFormerConfig, RoFormerForSequenceClassification

    torch.manual_seed(0)
    config = RoFormerConfig(
        **model_size(args),
        max_position_embeddings=max_length,  # transformers' sinusoid table must cover the input
        attention_probs_dropout_prob=args.attention_dropout,
        num_labels=2,
    )
    RoFormerForSequenceClassification(config).save_pretrained(folder)


def implementations(args: argparse.Namespace, task: str) -> list[str]:
    """The implementations of a row; the first is the reference of the speed-ups."""
    if args.v2:
        return ["roformer_hf-v1", "roformer_hf-v2"]
    names = ["transformers", "roformer_hf-sdpa"]
    if task == "train":
        names.append("roformer_hf-sdpa" + FULL_LAST_LAYER)
    if not args.no_eager:
        names.append("roformer_hf-eager")
    if args.device.startswith("cuda") and is_flash_attention_installed():
        names.append("roformer_hf-flash_attention_2")
    return names


def is_flash_attention_installed() -> bool:
    from transformers.utils import is_flash_attn_2_available

    return is_flash_attn_2_available()


def run_in_subprocess(spec: dict) -> dict:
    completed = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(spec)], capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        return {"error": completed.stderr.strip().splitlines()[-1] if completed.stderr.strip() else "failed"}
    return json.loads(completed.stdout.strip().splitlines()[-1])


COLUMNS = (
    "task",
    "tokens",
    "implementation",
    "time (s)",
    "CPU time (s)",
    "peak (MB)",
    "speed-up",
    "CPU speed-up",
    "memory",
)


def print_table(results: list[dict]) -> None:
    """Markdown table; speed-ups are the reference's time / the row's (the first implementation of a row:
    transformers, or our V1 with --v2), memory is the row's peak / the reference's."""
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "|".join("-" * (len(column) + 2) for column in COLUMNS) + "|")
    reference = {}
    for row in results:
        cells = [row["task"], str(row["length"]), row["implementation"]]
        if "error" in row:
            print("| " + " | ".join([*cells, row["error"][:80]]) + " |")
            continue
        reference.setdefault((row["task"], row["length"]), row)
        base = reference.get((row["task"], row["length"]))
        cells += [f"{row['seconds']:.3f}", f"{row['cpu_seconds']:.3f}", f"{row['peak_bytes'] / 2**20:.0f}"]
        if base:
            cells += [
                f"{base['seconds'] / row['seconds']:.2f}x",
                f"{base['cpu_seconds'] / row['cpu_seconds']:.2f}x",
                f"{row['peak_bytes'] / base['peak_bytes']:.2f}x" if base["peak_bytes"] > 0 else "-",
            ]
        print("| " + " | ".join(cells) + " |")


def measure_row(task: str, length: int, checkpoint: str, args: argparse.Namespace) -> list[dict]:
    """Every implementation for one row, `--rounds` times in turn, so that a change of load hits all of them alike."""
    runs = {implementation: [] for implementation in implementations(args, task)}
    for _ in range(args.rounds):
        for implementation, results in runs.items():
            spec = {
                "implementation": implementation,
                "checkpoint": str(Path(checkpoint) / implementation) if args.v2 else checkpoint,
                "vocab_size": model_size(args)["vocab_size"],
                "task": task,
                "length": length,
                "device": args.device,
                "dtype": args.dtype,
                "repeats": args.repeats,
            }
            results.append(run_in_subprocess(spec))
            print(f"  {task} {length} {implementation}: {results[-1]}", file=sys.stderr, flush=True)
    rows = []
    for implementation, results in runs.items():
        row = {"task": task, "length": length, "implementation": implementation}
        failed = [result["error"] for result in results if "error" in result]
        if failed:
            rows.append({**row, "error": failed[0]})
            continue
        rows.append(
            {
                **row,
                "seconds": statistics.median(time for result in results for time in result["times"]),
                "cpu_seconds": statistics.median(time for result in results for time in result["cpu_times"]),
                "peak_bytes": statistics.median(result["peak_bytes"] for result in results),
                "runs": results,
            }
        )
    return rows


def main() -> None:
    args = parse_args()
    if args.worker:
        print(json.dumps(measure(json.loads(args.worker))))
        return
    args.rows = args.rows or (V2_ROWS if args.v2 else DEFAULT_ROWS)
    rows = [(task, int(length)) for task, length in (item.split(":") for item in args.rows.split(","))]
    if any(task not in ("train", "infer") for task, _ in rows):
        sys.exit(f"--rows takes task:length pairs with task train or infer, got {args.rows!r}")
    print(
        f"device {args.device}, torch {torch.__version__}, {torch.get_num_threads()} threads, dtype {args.dtype}, "
        f"attention dropout {args.attention_dropout}, {args.rounds} rounds x {args.repeats} steps, "
        f"model {model_size(args)}" + (", V2 against V1" if args.v2 else "")
    )
    results = []
    with tempfile.TemporaryDirectory() as checkpoint:
        write_checkpoint(checkpoint, args, max(length for _, length in rows))
        for task, length in rows:
            results.extend(measure_row(task, length, checkpoint, args))
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
