"""Speed and peak memory of roformer_hf against transformers' RoFormer, same weights, one fresh process per
measurement.

Two models, the 12-layer base model first (what users fine-tune and pretrain), then a 2-layer one:

- base: the RoFormer chinese base shape: 12 layers, 768 wide, 12 heads, feed-forward 3072, the 50,000-word vocabulary,
  the default dropouts (0.1). Rows: train 4 x 512, train 1 x 2,048, infer 1 x 4,096, mlm 1 x 512.
- small: the same with 2 layers (where the [CLS]-only last layer of our classifier is half the model). Rows: train
  512, train 2,048, infer 512, infer 4,096, batch 1.

The tasks of a row (`task:BATCHxTOKENS`, or `task:TOKENS` for batch 1):

- train: `RoFormerForSequenceClassification` forward + loss + backward + `zero_grad` (the optimizer step costs the
  same for both and is left out). Our classifier computes its last layer at [CLS] only (the head reads nothing else).
- mlm: `RoFormerForMaskedLM` forward + loss + backward + `zero_grad`, 15% of the real tokens labelled, as in
  pretraining. Ours twice: `roformer_hf-sdpa-sparse` with `config.sparse_prediction=True` (the MLM head only at the
  labelled positions; what `scripts/run_mlm.py` uses), `roformer_hf-sdpa-dense` predicting every position as
  transformers does. The loss is the same (checked before timing).
- infer: `RoFormerModel` forward under `torch.inference_mode()`.

A batch of more than one sequence is padded, as a tokenizer pads a real batch: sequence i of B holds
TOKENS * (B - i) / B real tokens (4 x 512: 512, 384, 256 and 128), the rest padding; every input comes with its
`attention_mask`, as a tokenizer's does. transformers' RoFormer has only eager attention; ours runs its default (SDPA,
plus `roformer_hf.modeling`'s blockwise attention for CPU training with dropout). `--variants` adds our eager attention
(`roformer_hf-eager`) and, for train, our classifier computing every position of its last layer
(`roformer_hf-sdpa-full-last-layer`).

Both sides load the same random weights, saved by transformers' RoFormer (its config's max_position_embeddings made to
cover the longest row: it holds a sinusoid table of that length). Before timing, both run every head of the rows in
eval mode on a padded 2 x 64 batch; the largest absolute difference of the outputs (and of the MLM loss, ours with
sparse prediction) is printed, and the run stops if one exceeds 1e-3.

Every measurement runs in a fresh process: the model is loaded, one warm-up step runs on at most 128 tokens per
sequence (it initialises the kernels and thread pools; a full-size one would double the run time of the base rows),
then the timed steps at full size: `--repeats` of them, or by default as many as fit in 2 seconds (1 to 5). The
implementations of a row take turns, `--rounds` times (transformers, ours, transformers, ours, ...), so that a change
of load on a shared machine hits them alike; the table shows the median step time over every timed step and the median
peak. Peak memory is what the steps add on top of the loaded model: on the CPU the growth of the process's
resident-set high-water mark (VmHWM, reset after loading) over the warm-up and timed steps, on CUDA the growth of
`torch.cuda.max_memory_allocated`. Speed-ups are transformers' step time / ours (above 1: ours is faster), from
wall-clock time and from the process's CPU time (steadier when other jobs share the cores); memory is our peak /
transformers' peak (below 1: ours is smaller).

`--dtype` takes one precision or several, comma-separated (`float32,bf16`), each measured on every row with the same
checkpoints:

- float32 (the default): float32 weights and arithmetic.
- bf16, fp16: mixed precision as users run it. Training rows keep float32 weights and run forward and loss under
  `torch.autocast(device, dtype)`, as `--bf16 true` / `--fp16 true` of the Trainer do; inference rows load the
  weights in that dtype, as `from_pretrained(..., dtype=torch.bfloat16)` does. Both sides alike.
- bfloat16, float16: every row with its weights in that dtype (training included, without float32 master weights).

Speed-ups are against transformers at the same precision; with float32 among the precisions, a second column gives
the speed-up against transformers in float32 (what a switch of library and of precision together gains). The header
names the machine and measures its roofs: the CPU model, its ISA level as torch dispatches it, whether it has bf16
instructions, and the best GFLOP/s of a square matrix product in float32 and bf16 over sizes 512 to 4,096 and 1 or
all threads (on a GPU, its name and the TFLOP/s of a 4,096^3 product, TF32 off): the figures each row is read
against.

With `--v2`, the rows compare RoFormer-V2 (RMS norm without weights, no biases in the encoder, ReLU) with our own
V1 at the base shape with the V2 checkpoints' 12,000-word vocabulary, both roformer_hf with SDPA, both with random
weights: speed-ups and memory are then V1's / V2's and V2's / V1's.

The default run (both models, 2 rounds) takes about 7 minutes on a quiet 2-core CPU.

    python benchmarks/bench_model.py                         # base rows, then the 2-layer rows, on the CPU
    python benchmarks/bench_model.py --only base --rounds 3  # steadier base rows
    python benchmarks/bench_model.py --only small --variants eager,full-last-layer --rounds 3 --repeats 3
    python benchmarks/bench_model.py --only base --dtype float32,bf16  # mixed precision beside float32
    python benchmarks/bench_model.py --device cuda --only base --dtype float32,bf16 \
        --rows train:4x512,train:1x2048,infer:1x8192,infer:1x16384
    python benchmarks/bench_model.py --v2                    # V2 against V1, base shape, 512 and 2,048 tokens
"""

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from bench_options import check_at_least, check_device, check_writable_file  # beside us

BASE_SIZE = {
    "vocab_size": 50000,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
}
MODEL_SIZES = {"base": BASE_SIZE, "small": {**BASE_SIZE, "num_hidden_layers": 2}}
DEFAULT_ROWS = {
    "base": "train:4x512,train:1x2048,infer:1x4096,mlm:1x512",
    "small": "train:512,train:2048,infer:512,infer:4096",
}
V2_SIZE = {**BASE_SIZE, "vocab_size": 12000}  # the --v2 comparison, at the vocabulary of the V2 checkpoints
V2_ROWS = "train:512,train:2048,infer:512,infer:2048"
V2_SETTINGS = {"norm_type": "rms_norm", "use_bias": False, "hidden_act": "relu"}
TASK_HEADS = {"train": "classification", "mlm": "mlm", "infer": "classification"}  # the checkpoint each task loads
MIXED_PRECISIONS = {"bf16": torch.bfloat16, "fp16": torch.float16}  # autocast for training, half weights for inference
PRECISIONS = ("float32", *MIXED_PRECISIONS, "bfloat16", "float16")
ROOF_SIZE = 4096  # the matrix product of the header's roofs on a GPU
ROOF_SIZES, ROOF_SECONDS = (512, 1024, 2048, 4096), 0.5  # the CPU roofs: the best of these sizes (cpu_matmul_roof)
VARIANTS = ("eager", "full-last-layer", "compile")
LABELLED_FRACTION = 0.15  # of the real tokens in an MLM row, as in pretraining
WARMUP_TOKENS = 128
AUTO_REPEAT_SECONDS, AUTO_REPEAT_MAX = 2.0, 5
AGREEMENT_TOLERANCE = 1e-3
CHECK_BATCH, CHECK_TOKENS = 2, 64


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="examples:\n" + __doc__.rstrip().split("\n\n")[-1] + "\n\nWhat each row runs and how time and memory "
        "are measured: the docstring at the top of this script.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda.")
    parser.add_argument(
        "--only", choices=sorted(MODEL_SIZES), help="Only the base (12-layer) or small (2-layer) rows."
    )
    parser.add_argument(
        "--rows",
        help="Comma-separated task:BATCHxTOKENS or task:TOKENS (batch 1), task train, mlm or infer, for each model "
        f"measured; default {DEFAULT_ROWS['base']} for base, {DEFAULT_ROWS['small']} for small, {V2_ROWS} with --v2.",
    )
    parser.add_argument("--rounds", type=int, default=2, help="Fresh processes per implementation, taken in turn.")
    parser.add_argument(
        "--repeats",
        type=int,
        default=0,
        help=f"Timed steps per process, after the warm-up; 0 (default): as many as fit in {AUTO_REPEAT_SECONDS:g} s, "
        f"1 to {AUTO_REPEAT_MAX}.",
    )
    parser.add_argument(
        "--variants", default="", help=f"Comma-separated extra rows of ours: {', '.join(VARIANTS)} (none by default)."
    )
    parser.add_argument("--v2", action="store_true", help="RoFormer-V2 against our V1 at the base shape.")
    parser.add_argument("--num_hidden_layers", type=int, help="Override the number of layers of every model (checks).")
    parser.add_argument(
        "--dtype",
        default="float32",
        help=f"Precisions, comma-separated, of {', '.join(PRECISIONS)}: bf16/fp16 are mixed precision (autocast for "
        "training, half weights for inference), bfloat16/float16 half weights everywhere (default float32).",
    )
    parser.add_argument(
        "--attention_dropout", type=float, default=0.1, help="attention_probs_dropout_prob of the model (0.1 default)."
    )
    parser.add_argument(
        "--threads",
        type=int,
        help="Threads of every measurement (default: OMP_NUM_THREADS, else as the scripts choose: the usable cores "
        "less those other processes keep busy at start).",
    )
    parser.add_argument("--json", type=Path, help="Also write the results to this JSON file.")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # internal: JSON of one measurement to run
    return parser.parse_args()


# --- inputs -----------------------------------------------------------------------------------------------------


def real_lengths(batch_size: int, length: int) -> list[int]:
    """The real tokens of each sequence of a padded batch: length * (B - i) / B for sequence i."""
    return [max(1, round(length * (batch_size - index) / batch_size)) for index in range(batch_size)]


def make_batch(task: str, batch_size: int, length: int, vocab_size: int, device: str) -> dict:
    """Random ids, padded as a tokenizer pads (pad id 0 after the real tokens), with the task's labels."""
    generator = torch.Generator().manual_seed(length * 1000 + batch_size)
    input_ids = torch.randint(5, vocab_size, (batch_size, length), generator=generator)
    positions = torch.arange(length)
    attention_mask = (positions < torch.tensor(real_lengths(batch_size, length))[:, None]).long()  # (B, T)
    input_ids = input_ids.masked_fill(attention_mask == 0, 0)
    batch = {"input_ids": input_ids, "attention_mask": attention_mask}
    if task == "train":
        batch["labels"] = torch.randint(0, 2, (batch_size,), generator=generator)
    elif task == "mlm":
        labelled = (torch.rand(batch_size, length, generator=generator) < LABELLED_FRACTION) & (attention_mask == 1)
        labelled[:, 0] = True  # at least one label per sequence
        batch["labels"] = input_ids.masked_fill(~labelled, -100)
    return {name: tensor.to(device) for name, tensor in batch.items()}


# --- one measurement, in a fresh process ------------------------------------------------------------------------


def model_classes(library: str) -> dict:
    """The class each task runs, from transformers or from roformer_hf."""
    if library == "transformers":
        from transformers import RoFormerForMaskedLM, RoFormerForSequenceClassification, RoFormerModel
    else:
        from roformer_hf import RoFormerForMaskedLM, RoFormerForSequenceClassification, RoFormerModel
    return {"train": RoFormerForSequenceClassification, "mlm": RoFormerForMaskedLM, "infer": RoFormerModel}


def load_model(spec: dict):
    """The task's model of `spec["library"]` from the row's checkpoint, in train or eval mode."""
    kwargs = {"attn_implementation": spec["attention"]}
    if spec["library"] == "roformer_hf" and spec["task"] == "mlm":
        kwargs["sparse_prediction"] = spec["sparse_prediction"]
    model_class = model_classes(spec["library"])[spec["task"]]
    model = model_class.from_pretrained(spec["checkpoint"], dtype=weights_dtype(spec), **kwargs)
    model = model.to(spec["device"])
    model = model.eval() if spec["task"] == "infer" else model.train()
    return torch.compile(model) if spec.get("compile") else model


def weights_dtype(spec: dict) -> torch.dtype:
    """float32 master weights for mixed-precision training; half weights for mixed-precision inference."""
    precision = spec.get("dtype", "float32")
    if precision in MIXED_PRECISIONS:
        return MIXED_PRECISIONS[precision] if spec["task"] == "infer" else torch.float32
    return getattr(torch, precision)


def run_step(model, spec: dict, batch: dict) -> None:
    if spec["task"] == "infer":
        with torch.inference_mode():
            model(**batch)
        return
    # Asking for every layer's hidden states makes our classifier compute every position of its last layer.
    extra = {"output_hidden_states": True} if spec["full_last_layer"] else {}
    autocast_dtype = MIXED_PRECISIONS.get(spec["dtype"])
    device_type = torch.device(spec["device"]).type
    with torch.autocast(device_type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
        loss = model(**batch, **extra).loss
    loss.backward()
    model.zero_grad(set_to_none=True)


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


def timed_step(model, spec: dict, batch: dict) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one step."""
    start, cpu_start = time.perf_counter(), time.process_time()
    run_step(model, spec, batch)
    if spec["device"].startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start, time.process_time() - cpu_start


def measure(spec: dict) -> dict:
    """Loads one model, runs a short warm-up and the timed steps, returns their times and the peak memory growth."""
    torch.manual_seed(0)  # the dropout masks
    model = load_model(spec)
    shape = (spec["task"], spec["batch_size"])
    # On a GPU a full-size warm-up costs little, and it settles what a first step at a new shape does once (the
    # matrix-product heuristics, a compilation).
    warmup_length = spec["length"] if spec["device"].startswith("cuda") else min(spec["length"], WARMUP_TOKENS)
    warmup = make_batch(*shape, warmup_length, spec["vocab_size"], spec["device"])
    batch = make_batch(*shape, spec["length"], spec["vocab_size"], spec["device"])
    baseline = reset_peak_memory(spec["device"])
    run_step(model, spec, warmup)
    times, cpu_times = [], []
    while not enough_steps(times, spec["repeats"]):
        seconds, cpu_seconds = timed_step(model, spec, batch)
        times.append(seconds)
        cpu_times.append(cpu_seconds)
    return {"times": times, "cpu_times": cpu_times, "peak_bytes": peak_memory(spec["device"]) - baseline}


def enough_steps(times: list[float], repeats: int) -> bool:
    if repeats > 0:
        return len(times) >= repeats
    return len(times) >= AUTO_REPEAT_MAX or (len(times) >= 1 and sum(times) >= AUTO_REPEAT_SECONDS)


# --- checkpoints and the agreement check ------------------------------------------------------------------------


def write_checkpoints(folder: Path, size: dict, heads: set[str], args: argparse.Namespace, max_length: int) -> None:
    """Random-weight checkpoints saved by transformers' RoFormer, one per head (`folder / head`): the weights both
    sides load."""
    from transformers import RoFormerConfig

    config = RoFormerConfig(
        **size,
        max_position_embeddings=max_length,  # transformers' sinusoid table must cover the input
        attention_probs_dropout_prob=args.attention_dropout,
        num_labels=2,
    )
    save_random_heads("transformers", config, heads, folder)


def save_random_heads(library: str, config, heads: set[str], folder: Path) -> None:
    """One checkpoint per head (`folder / head`) of `library`'s classes, each initialised from seed 0."""
    classes = model_classes(library)
    for head in heads:
        torch.manual_seed(0)
        classes["mlm" if head == "mlm" else "train"](config).save_pretrained(folder / head)


def write_v2_checkpoints(folder: Path, size: dict, heads: set[str], args: argparse.Namespace) -> None:
    """Our V1 and V2, random weights, in `folder / roformer_hf-v1 / head` and `folder / roformer_hf-v2 / head`."""
    import roformer_hf

    for family, settings in (("roformer_hf-v1", {}), ("roformer_hf-v2", V2_SETTINGS)):
        config = roformer_hf.RoFormerConfig(
            **size, **settings, attention_probs_dropout_prob=args.attention_dropout, num_labels=2
        )
        save_random_heads("roformer_hf", config, heads, folder / family)


def eval_outputs(library: str, task: str, checkpoint: Path, batch: dict) -> list[torch.Tensor]:
    """What the task's model returns in eval mode at the real tokens: logits or hidden states (and the MLM loss)."""
    spec = {"library": library, "task": task, "checkpoint": checkpoint, "dtype": "float32", "device": "cpu"}
    spec |= {"attention": "eager" if library == "transformers" else "sdpa", "sparse_prediction": True}
    model = load_model(spec).eval()
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    real = batch["attention_mask"].bool()  # (B, T)
    with torch.inference_mode():
        if task == "infer":
            return [model(**inputs).last_hidden_state[real]]
        if task == "train":
            return [model(**inputs).logits]
        return [model(**inputs).logits[real], model(**batch).loss]  # ours with labels: sparse prediction


def check_agreement(folder: Path, tasks: set[str], vocab_size: int) -> dict[str, float]:
    """Largest absolute difference between transformers' and our outputs, per output; exits above the tolerance."""
    names = {"train": ["classification logits"], "infer": ["hidden states"], "mlm": ["MLM logits", "MLM loss"]}
    differences = {}
    for task in sorted(tasks):
        batch = make_batch(task, CHECK_BATCH, CHECK_TOKENS, vocab_size, "cpu")
        checkpoint = folder / TASK_HEADS[task]
        theirs, ours = (eval_outputs(library, task, checkpoint, batch) for library in ("transformers", "roformer_hf"))
        for name, their_output, our_output in zip(names[task], theirs, ours, strict=True):
            differences[name] = (their_output - our_output).abs().max().item()
    failed = {name: value for name, value in differences.items() if not value <= AGREEMENT_TOLERANCE}
    if failed:
        sys.exit(
            f"roformer_hf and transformers disagree on the same weights ({failed}, tolerance {AGREEMENT_TOLERANCE})"
        )
    return differences


# --- the driver -------------------------------------------------------------------------------------------------


def parse_rows(text: str) -> list[tuple[str, int, int]]:
    """`train:4x512,infer:4096` -> [("train", 4, 512), ("infer", 1, 4096)]."""
    rows = []
    for item in text.split(","):
        task, _, shape = item.strip().partition(":")
        batch_size, _, length = shape.rpartition("x")
        if task not in TASK_HEADS or not length.isdigit() or not (batch_size or "1").isdigit():
            sys.exit(f"--rows takes task:BATCHxTOKENS or task:TOKENS with task train, mlm or infer; got {item!r}")
        rows.append((task, int(batch_size or 1), int(length)))
    return rows


def implementations(args: argparse.Namespace, task: str) -> list[dict]:
    """The implementations of a row, each {name, library, attention, full_last_layer, sparse_prediction}; the first
    is the reference of the speed-ups."""
    ours = {"library": "roformer_hf", "attention": "sdpa", "full_last_layer": False, "sparse_prediction": True}
    if args.v2:
        return [{**ours, "name": "roformer_hf-v1"}, {**ours, "name": "roformer_hf-v2"}]
    names = [{**ours, "name": "transformers", "library": "transformers", "attention": "eager"}]
    if task == "mlm":
        names += [{**ours, "name": "roformer_hf-sdpa-sparse"}, {**ours, "name": "roformer_hf-sdpa-dense"}]
        names[-1]["sparse_prediction"] = False
    else:
        names.append({**ours, "name": "roformer_hf-sdpa"})
    variants = {variant for variant in args.variants.split(",") if variant}
    if task == "train" and "full-last-layer" in variants:
        names.append({**ours, "name": "roformer_hf-sdpa-full-last-layer", "full_last_layer": True})
    if "compile" in variants:
        names.append({**ours, "name": "roformer_hf-sdpa-compiled", "compile": True})
    if "eager" in variants:
        suffix = "-sparse" if task == "mlm" else ""
        names.append({**ours, "name": "roformer_hf-eager" + suffix, "attention": "eager"})
    if args.device.startswith("cuda") and is_flash_attention_installed():
        names.append({**ours, "name": "roformer_hf-flash_attention_2", "attention": "flash_attention_2"})
    return names


def is_flash_attention_installed() -> bool:
    from transformers.utils import is_flash_attn_2_available

    return is_flash_attn_2_available()


def run_in_subprocess(spec: dict, script: str = __file__) -> dict:
    """One measurement in a fresh process, `script --worker SPEC`: the JSON of its last line of output, or the last
    line of its error output."""
    completed = subprocess.run(
        [sys.executable, script, "--worker", json.dumps(spec)], capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        lines = completed.stderr.strip().splitlines()
        return {"error": lines[-1] if lines else f"failed with exit status {completed.returncode}"}
    return json.loads(completed.stdout.strip().splitlines()[-1])


def parse_precisions(text: str) -> list[str]:
    """`float32,bf16` -> ["float32", "bf16"]; exits on an unknown one."""
    precisions = [precision.strip() for precision in text.split(",") if precision.strip()]
    unknown = [precision for precision in precisions if precision not in PRECISIONS]
    if unknown or not precisions:
        sys.exit(f"--dtype takes {', '.join(PRECISIONS)}, comma-separated; got {text!r}")
    return precisions


def measure_row(model: str, row: tuple[str, int, int], folder: Path, size: dict, args: argparse.Namespace) -> list:
    """Every implementation at every precision for one row, `--rounds` times in turn, so that a change of load hits
    all of them alike."""
    task, batch_size, length = row
    runs = {
        (precision, implementation["name"]): (implementation, [])
        for precision in parse_precisions(args.dtype)
        for implementation in implementations(args, task)
    }
    for _ in range(args.rounds):
        for (precision, name), (implementation, results) in runs.items():
            checkpoint = folder / name if args.v2 else folder
            spec = {
                **implementation,
                "checkpoint": str(checkpoint / TASK_HEADS[task]),
                "vocab_size": size["vocab_size"],
                "task": task,
                "batch_size": batch_size,
                "length": length,
                "device": args.device,
                "dtype": precision,
                "repeats": args.repeats,
            }
            results.append(run_in_subprocess(spec))
            print(
                f"  {model} {task} {batch_size}x{length} {precision} {name}: {results[-1]}",
                file=sys.stderr,
                flush=True,
            )
    return [summarize(model, row, key, results) for key, (_, results) in runs.items()]


def summarize(model: str, row: tuple[str, int, int], key: tuple[str, str], results: list[dict]) -> dict:
    task, batch_size, length = row
    precision, name = key
    summary = {"model": model, "task": task, "batch_size": batch_size, "length": length}
    summary |= {"precision": precision, "implementation": name}
    return with_medians(summary, results)


def with_medians(summary: dict, results: list[dict]) -> dict:
    """`summary` with the median time, CPU time and peak memory of a row's measurements (one per process), or the
    first error one of them met."""
    failed = [result["error"] for result in results if "error" in result]
    if failed:
        return {**summary, "error": failed[0]}
    return {
        **summary,
        "seconds": statistics.median(seconds for result in results for seconds in result["times"]),
        "cpu_seconds": statistics.median(seconds for result in results for seconds in result["cpu_times"]),
        "peak_bytes": statistics.median(result["peak_bytes"] for result in results),
        "runs": results,
    }


COLUMNS = (
    "model",
    "task",
    "batch x tokens",
    "precision",
    "implementation",
    "time (s)",
    "tokens/s",
    "CPU time (s)",
    "peak (MB)",
    "speed-up",
    "CPU speed-up",
    "memory",
    "speed-up vs float32 reference",
)


def print_table(results: list[dict]) -> None:
    """Markdown table; speed-ups are the reference's time / the row's (the reference: the first implementation of a
    row at the same precision, transformers or our V1 with --v2; the last column: the reference in float32), memory
    is the row's peak / the reference's."""
    columns = COLUMNS if any(row["precision"] == "float32" for row in results) else COLUMNS[:-1]
    columns = columns if len({row["precision"] for row in results}) > 1 else columns[:-1]
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("-" * (len(column) + 2) for column in columns) + "|")
    references = {}
    for row in results:
        cells = [row["model"], row["task"], f"{row['batch_size']} x {row['length']}", row["precision"]]
        cells.append(row["implementation"])
        if "error" in row:
            print("| " + " | ".join([*cells, row["error"][:80]]) + " |")
            continue
        shape = (row["model"], row["task"], row["batch_size"], row["length"])
        reference = references.setdefault((*shape, row["precision"]), row)
        tokens_per_second = row["batch_size"] * row["length"] / row["seconds"]
        cells += [f"{row['seconds']:.3f}", f"{tokens_per_second:,.0f}", f"{row['cpu_seconds']:.3f}"]
        cells += [
            f"{row['peak_bytes'] / 2**20:.0f}",
            f"{reference['seconds'] / row['seconds']:.2f}x",
            f"{reference['cpu_seconds'] / row['cpu_seconds']:.2f}x",
            f"{row['peak_bytes'] / reference['peak_bytes']:.2f}x" if reference["peak_bytes"] > 0 else "-",
        ]
        if len(columns) == len(COLUMNS):
            float32_reference = references.get((*shape, "float32"))
            cells.append(f"{float32_reference['seconds'] / row['seconds']:.2f}x" if float32_reference else "-")
        print("| " + " | ".join(cells) + " |")


def cpu_name() -> str:
    return cpu_info().get("model name", platform.processor() or platform.machine())


def cpu_info() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where there is none)."""
    info = {}
    cpuinfo = Path("/proc/cpuinfo")
    for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else []:
        if not line.strip():
            break
        name, _, value = line.partition(":")
        info[name.strip()] = value.strip()
    return info


def matmul_rate(device: str, dtype: torch.dtype, size: int = ROOF_SIZE, repeats: int = 5) -> float:
    """FLOP/s of a size x size matrix product on random data: the median of `repeats` after 2 warm-ups."""
    left, right = (torch.randn(size, size, device=device).to(dtype) for _ in range(2))
    seconds = []
    for _ in range(repeats + 2):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        left @ right
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(seconds[2:])


def cpu_matmul_roof(dtype: torch.dtype) -> tuple[float, int, int]:
    """The best FLOP/s of a square matrix product over `ROOF_SIZES` and 1 or all of this process's threads, with the
    size and threads that gave it. One size and thread count understates a CPU: AMX gives a 4,096^3 bf16 product a
    third of the rate of a 2,048^3 one, and two threads can lose to one on mid-size products. The sizes stop where
    the next one (8 times the work) would take over `ROOF_SECONDS` a product."""
    threads = torch.get_num_threads()
    best = (0.0, 0, 0)
    try:
        for thread_count in sorted({1, threads}):
            torch.set_num_threads(thread_count)
            for size in ROOF_SIZES:
                rate = matmul_rate("cpu", dtype, size, repeats=3)
                best = max(best, (rate, size, thread_count))
                if 8 * 2 * size**3 / rate > ROOF_SECONDS:
                    break
    finally:
        torch.set_num_threads(threads)
    return best


def machine_lines(device: str) -> list[str]:
    """The machine each row is read against: what it is, and its float32 and bf16 matrix-product roofs."""
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 as float32, as the rows run it
        roofs = f"{matmul_rate(device, torch.float32) / 1e12:.0f} TFLOP/s float32 (TF32 off), "
        roofs += f"{matmul_rate(device, torch.bfloat16) / 1e12:.0f} TFLOP/s bf16"
        properties = torch.cuda.get_device_properties(device)
        name = f"GPU {properties.name}, {properties.total_memory / 2**30:.0f} GiB, CUDA {torch.version.cuda}"
        return [f"machine: {name}; host CPU {cpu_name()}", f"roofs ({ROOF_SIZE}^3 matrix product): {roofs}"]
    flags = set(cpu_info().get("flags", "").split())
    bf16_instructions = sorted(flags & {"avx512_bf16", "amx_bf16", "avx_ne_convert"})
    roofs = [
        f"{rate / 1e9:.0f} GFLOP/s {name} ({size}^3, {threads} thread{'s' * (threads > 1)})"
        for name, (rate, size, threads) in (
            ("float32", cpu_matmul_roof(torch.float32)),
            ("bf16", cpu_matmul_roof(torch.bfloat16)),
        )
    ]
    return [
        f"machine: CPU {cpu_name()}, {os.cpu_count()} cores, ISA {torch.backends.cpu.get_cpu_capability()}, "
        f"bf16 instructions: {', '.join(bf16_instructions) if bf16_instructions else 'none'}",
        f"roofs (the best square matrix product of {', '.join(map(str, ROOF_SIZES))} at "
        f"{'1 thread' if torch.get_num_threads() == 1 else f'1 or {torch.get_num_threads()} threads'}): "
        f"{', '.join(roofs)}",
    ]


def choose_threads(requested: int | None) -> str:
    """The thread count of every measurement, chosen as the scripts choose theirs with `--threads auto` (the usable
    cores less those other processes keep busy: `roformer_hf.training.machine.threads`) and handed to the measuring
    processes through OMP_NUM_THREADS; where several threads share cores with other processes, OMP_WAIT_POLICY=PASSIVE
    too (a fresh process reads it, a running one cannot). Returns the line that says so."""
    from roformer_hf.training.machine.threads import busy_cores_of_others, decide_threads, usable_cores

    environment = os.environ.get("OMP_NUM_THREADS")
    user_chose = requested is not None or (environment or "").strip().isdigit()
    busy = None if user_chose else busy_cores_of_others()
    given = requested if requested is not None else int(environment) if user_chose else "auto"
    choice = decide_threads(given, None, usable_cores(), busy)
    os.environ["OMP_NUM_THREADS"] = str(choice.threads)
    torch.set_num_threads(choice.threads)
    if choice.threads > 1 and busy is not None and round(busy) > 0:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    said = choice.line or f"{choice.threads}, as given"
    return f"threads: {said} (load average {os.getloadavg()[0]:.1f} at the start)"


def header_lines(args: argparse.Namespace, models: dict[str, dict]) -> list[str]:
    """The command, the machine and its roofs, and the settings, printed above the table."""
    import transformers

    repeats = f"{args.repeats} timed steps" if args.repeats else f"timed steps for {AUTO_REPEAT_SECONDS:g} s (1-5)"
    peak = "torch.cuda.max_memory_allocated" if args.device.startswith("cuda") else "resident-set (VmHWM)"
    return [
        "command: " + shlex.join(["python", "benchmarks/bench_model.py", *sys.argv[1:]]),
        *machine_lines(args.device),
        args.threads_line,
        f"software: torch {torch.__version__} ({torch.get_num_threads()} threads), transformers "
        f"{transformers.__version__}; device {args.device}, precisions {args.dtype}",
        f"settings: attention dropout {args.attention_dropout}, {args.rounds} rounds x {repeats} after a warm-up on "
        f"{'full size' if args.device.startswith('cuda') else f'<= {WARMUP_TOKENS} tokens'}, median time, peak = growth of {peak} over the loaded model",
        *(f"model {name}: {size}" for name, size in models.items()),
    ]


def main() -> None:
    import transformers

    transformers.logging.set_verbosity_error()  # no load reports or progress bars between the progress lines
    transformers.logging.disable_progress_bar()
    args = parse_args()
    if args.worker:
        print(json.dumps(measure(json.loads(args.worker))))
        return
    parse_precisions(args.dtype)
    check_at_least(__file__, {"--rounds": args.rounds, "--num_hidden_layers": args.num_hidden_layers}, 1)
    check_at_least(__file__, {"--repeats": args.repeats}, 0)
    check_writable_file(__file__, "--json", args.json)
    check_device(__file__, args.device)
    if args.threads is not None and args.threads < 1:
        sys.exit(f"--threads must be a whole number of at least 1, got {args.threads}")
    args.threads_line = choose_threads(args.threads)
    print(args.threads_line, file=sys.stderr, flush=True)
    unknown = set(args.variants.split(",")) - {"", *VARIANTS}
    if unknown:
        sys.exit(f"--variants takes {', '.join(VARIANTS)}; got {', '.join(sorted(unknown))}")
    if args.v2:
        models = {"v2-vs-v1": V2_SIZE}
    else:
        models = {name: size for name, size in MODEL_SIZES.items() if args.only in (None, name)}
    models = {
        name: {**size, "num_hidden_layers": args.num_hidden_layers or size["num_hidden_layers"]}
        for name, size in models.items()
    }
    started = time.perf_counter()
    results, agreement = [], []
    with tempfile.TemporaryDirectory() as temporary:
        for name, size in models.items():
            rows = parse_rows(args.rows or (V2_ROWS if args.v2 else DEFAULT_ROWS[name]))
            folder = Path(temporary) / name
            heads = {TASK_HEADS[task] for task, _, _ in rows}
            if args.v2:
                write_v2_checkpoints(folder, size, heads, args)
            else:
                write_checkpoints(folder, size, heads, args, max(CHECK_TOKENS, *(length for *_, length in rows)))
                differences = check_agreement(folder, {task for task, _, _ in rows}, size["vocab_size"])
                agreement.append(
                    f"agreement, model {name}: max |transformers - ours| "
                    + ", ".join(f"{output} {value:.1e}" for output, value in differences.items())
                )
                print(agreement[-1], file=sys.stderr, flush=True)
            for row in rows:
                results.extend(measure_row(name, row, folder, size, args))
    print("\n".join([*header_lines(args, models), *agreement]) + "\n")
    print_table(results)
    print(f"\n(run took {(time.perf_counter() - started) / 60:.1f} min)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
