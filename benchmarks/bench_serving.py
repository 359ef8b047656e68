"""Serving a RoFormer classifier on the CPU: latency, throughput and accuracy cost of each recipe.

The model is `RoFormerForSequenceClassification` at the shape of RoFormer chinese base (12 layers, 768 wide, 12 heads,
feed-forward 3,072, the 50,000-word vocabulary of data/roformer_chinese_base_vocab.txt, 2 labels) with random weights
from seed 0, saved once by transformers' RoFormer and loaded by every implementation:

- transformers-float32: transformers' `RoFormerForSequenceClassification` (eager attention, its only one): the
  reference of the speed-ups.
- roformer_hf-float32: ours in float32 with its default attention (SDPA).
- roformer_hf-bf16: ours with bf16 weights (`from_pretrained(..., dtype=torch.bfloat16)`); fast only on a CPU with
  bf16 instructions (the header says whether this one has them).
- roformer_hf-int8: ours with the Linear layers quantized to int8 weights, activations quantized per call, through
  the supported route, `roformer_hf.int8_serving.quantize_int8` (torchao's `quantize_`, the `int8` extra); where
  torchao is not installed, the row gives that reason instead of numbers.
- roformer_hf-int8-compiled: that model compiled once for every length, `torch.compile(quantize_int8(model),
  dynamic=True)` (the compilation, 10 to 20 s, falls in the untimed warm-up call).
- roformer_hf-int8-deprecated: the same through torch's deprecated `torch.ao.quantization.quantize_dynamic`, the
  fallback `quantize_int8` takes without torchao.
- onnxruntime-float32: ours exported by `torch.onnx.export(..., dynamo=True)` (dynamic batch and sequence axes, as
  docs/export.md does), run by an onnxruntime `InferenceSession` with its default graph optimisations.
- onnxruntime-int8: that export after `onnxruntime.quantization.quantize_dynamic` (int8 weights of the matrix
  products); where it fails, the table gives its one-line reason instead of numbers.

Speed: each shape `BATCHxTOKENS` is a batch of random ids without padding (an attention mask of ones, as a tokenizer
gives one). Every (implementation, shape) runs in a fresh process with `--threads` threads: it loads the model, runs
one call at full size to warm up, then timed calls (as many as fit in 2 s, 1 to 5); the implementations take turns,
`--rounds` times, so that a change of load hits all of them alike. The table gives the median time of a call
(latency), tokens per second at that latency (throughput), the median CPU time of a call, the peak resident set of
the process while it served (model, runtime and activations; its high-water mark is reset once the model is loaded),
and the speed-up = transformers-float32's time / the row's.

Accuracy: the first `--num_texts` texts of ChnSentiCorp (hotel reviews), tokenized by `RoFormerJiebaTokenizer` with
the 50k vocabulary, truncated at 128 tokens, padded per batch of 8, go through every implementation of ours; each is
compared with our float32: how many argmax predictions agree, and the largest absolute difference of the
probabilities. The weights are random, so the raw head gives near-uniform probabilities on every text: the `raw head`
rows measure how far each recipe moves the logits, not how often it changes a decision. The `calibrated head` rows
apply one affine map to every implementation's logit difference (label 1 - label 0): shifted so that our float32
predicts half the texts as each label, and scaled so that its spread across the texts is that of a trained
classifier (standard deviation 2). That is what a head whose last Linear layer had those weights and bias would give
(exactly, in float32), so a recipe's error in the [CLS] representation weighs as much as in a trained classifier, and
texts near the decision boundary can flip.

    python benchmarks/bench_serving.py
    python benchmarks/bench_serving.py --shapes 1x128,8x128 --rounds 3 --json outputs/bench_serving.json
    python benchmarks/bench_serving.py --tiny   # a 2-layer, 64-wide model and 16 texts: a smoke test
"""

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

import torch
from bench_model import (  # beside us
    AUTO_REPEAT_MAX,
    AUTO_REPEAT_SECONDS,
    BASE_SIZE,
    enough_steps,
    machine_lines,
    reset_peak_memory,
    resident_memory,
    run_in_subprocess,
    save_random_heads,
    with_medians,
)
from bench_options import check_at_least, check_writable_file, stop  # beside us

REPOSITORY = Path(__file__).resolve().parent.parent
VOCABULARY = REPOSITORY / "data" / "roformer_chinese_base_vocab.txt"
DATA = Path(os.environ.get("ROFORMER_HF_DATA", REPOSITORY.parent / "shared" / "data"))  # as tests/conftest.py
TEXTS = DATA / "cls" / "chnsenticorp_htl.jsonl"
TINY_SIZE = {
    **BASE_SIZE,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 128,
}
DEFAULT_SHAPES, TINY_SHAPES = "8x128,1x512,1x2048", "2x32"
IMPLEMENTATIONS = (
    "transformers-float32",
    "roformer_hf-float32",
    "roformer_hf-bf16",
    "roformer_hf-int8",
    "roformer_hf-int8-compiled",
    "roformer_hf-int8-deprecated",
    "onnxruntime-float32",
    "onnxruntime-int8",
)
REFERENCE = "transformers-float32"
TEXT_LENGTH, TEXT_BATCH = 128, 8
CALIBRATED_SPREAD = 2.0  # standard deviation of a trained classifier's logit difference, roughly
INPUT_NAMES = ["input_ids", "attention_mask"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="examples:\n" + __doc__.rstrip().split("\n\n")[-1] + "\n\nWhat each row runs and how it is measured: "
        "the docstring at the top of this script.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--shapes", help=f"Comma-separated BATCHxTOKENS (default {DEFAULT_SHAPES}; {TINY_SHAPES} with --tiny)."
    )
    parser.add_argument(
        "--rounds", type=int, help="Fresh processes per implementation and shape, in turn (2; 1 with --tiny)."
    )
    parser.add_argument(
        "--num_texts", type=int, help="ChnSentiCorp texts of the agreement rows (500; 16 with --tiny)."
    )
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="Threads of every runtime.")
    parser.add_argument(
        "--tiny", action="store_true", help="A 2-layer, 64-wide model, 16 texts, 1 round: a smoke test."
    )
    parser.add_argument("--layers", type=int, help="Encoder layers of the model (12; 2 with --tiny).")
    parser.add_argument(
        "--skip",
        default="",
        help="Comma-separated implementations to leave out (their rows say so), e.g. onnxruntime-int8.",
    )
    parser.add_argument("--texts", type=Path, default=TEXTS, help="JSON lines with a `text` field (ChnSentiCorp).")
    parser.add_argument("--json", type=Path, help="Also write the results to this JSON file.")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # internal: JSON of one measurement to run
    return parser.parse_args()


def parse_shapes(text: str) -> list[tuple[int, int]]:
    """`8x128,1x512` -> [(8, 128), (1, 512)]."""
    shapes = []
    for item in text.split(","):
        batch_size, _, length = item.strip().partition("x")
        if not (batch_size.isdigit() and length.isdigit() and int(batch_size) > 0 and int(length) > 0):
            stop(__file__, f"--shapes takes BATCHxTOKENS items of at least 1x1, such as 8x128,1x512; got {item!r}")
        shapes.append((int(batch_size), int(length)))
    return shapes


def check_options(args: argparse.Namespace) -> None:
    """Every option, before the checkpoint is written and exported (half a minute): one line for a bad one."""
    check_at_least(__file__, {"--rounds": args.rounds, "--num_texts": args.num_texts, "--threads": args.threads}, 1)
    check_writable_file(__file__, "--json", args.json)


# --- the models of each implementation --------------------------------------------------------------------------


def load_torch_model(name: str, checkpoint: Path) -> torch.nn.Module:
    """The torch model of an implementation, in eval mode."""
    if name == REFERENCE:
        from transformers import RoFormerForSequenceClassification

        return RoFormerForSequenceClassification.from_pretrained(checkpoint, attn_implementation="eager").eval()
    from roformer_hf import RoFormerForSequenceClassification

    dtype = torch.bfloat16 if name.endswith("bf16") else torch.float32
    model = RoFormerForSequenceClassification.from_pretrained(checkpoint, dtype=dtype).eval()
    if name.endswith(("int8", "int8-compiled")):
        from roformer_hf.int8_serving import quantize_int8

        quantized = quantize_int8(model)
        return torch.compile(quantized, dynamic=True) if name.endswith("compiled") else quantized
    return deprecated_int8(model) if name.endswith("int8-deprecated") else model


def deprecated_int8(model: torch.nn.Module) -> torch.nn.Module:
    """Int8 weights for every Linear layer, activations quantized per call, by torch's deprecated route."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # said once, in the docstring and docs/serving.md
        warnings.simplefilter("ignore", UserWarning)
        return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)


def open_session(path: Path, threads: int):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def predictor(name: str, files: dict[str, str], threads: int):
    """A function from {input_ids, attention_mask} to float32 logits, for one implementation."""
    if files.get(name + "-error"):
        raise RuntimeError(files[name + "-error"])
    if name.startswith("onnxruntime"):
        if files.get(name) is None:
            raise RuntimeError("no ONNX file")
        session = open_session(Path(files[name]), threads)
        return lambda inputs: torch.from_numpy(
            session.run(["logits"], {key: tensor.numpy() for key, tensor in inputs.items()})[0]
        )
    model = load_torch_model(name, Path(files["checkpoint"]))

    def predict(inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        with torch.inference_mode():
            return model(**inputs).logits.float()

    return predict


def export_onnx(checkpoint: Path, folder: Path) -> dict[str, str]:
    """Our float32 export (docs/export.md's route) and its int8 quantization; a failure is kept as its reason."""
    from roformer_hf import RoFormerForSequenceClassification

    model = RoFormerForSequenceClassification.from_pretrained(checkpoint).eval()
    files = {}
    path = folder / "classifier.onnx"
    example = random_inputs(2, 16, model.config.vocab_size)
    program = torch.onnx.export(
        model,
        (),
        kwargs=example,
        dynamic_shapes={name: {0: "batch", 1: "sequence"} for name in INPUT_NAMES},
        input_names=INPUT_NAMES,
        output_names=["logits"],
        dynamo=True,
        verbose=False,
    )
    program.save(path)
    files["onnxruntime-float32"] = str(path)
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(path, folder / "classifier-int8.onnx", weight_type=QuantType.QInt8)
        open_session(folder / "classifier-int8.onnx", 1).run(["logits"], {k: v.numpy() for k, v in example.items()})
        files["onnxruntime-int8"] = str(folder / "classifier-int8.onnx")
    except Exception as error:  # the table reports why, in place of numbers
        files["onnxruntime-int8-error"] = one_line(error)
    return files


def left_out(skip: str) -> dict[str, str]:
    """The `--skip` implementations, each with the reason its rows give."""
    names = [name for name in skip.split(",") if name]
    unknown = [name for name in names if name not in IMPLEMENTATIONS[1:]]
    if unknown:
        sys.exit(f"--skip takes implementations of {', '.join(IMPLEMENTATIONS[1:])}; got {', '.join(unknown)}")
    return {f"{name}-error": "left out (--skip)" for name in names}


def torchao_missing() -> dict[str, str]:
    """The reason the supported int8 row cannot run (torchao is not installed), or nothing."""
    from roformer_hf.int8_serving import torchao_int8

    if torchao_int8()[0] is None:
        reason = "torchao is not installed: pip install 'roformer_hf[int8]'"
        return {"roformer_hf-int8-error": reason, "roformer_hf-int8-compiled-error": reason}
    return {}


def one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:160]


# --- speed, one fresh process per (implementation, shape) -------------------------------------------------------


def random_inputs(batch_size: int, length: int, vocab_size: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(batch_size * 100_003 + length)
    input_ids = torch.randint(5, vocab_size, (batch_size, length), generator=generator)
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}


def measure(spec: dict) -> dict:
    """Loads one implementation, warms it up at full size, times calls; returns times and the serving peak."""
    torch.set_num_threads(spec["threads"])
    predict = predictor(spec["name"], spec["files"], spec["threads"])
    inputs = random_inputs(spec["batch_size"], spec["length"], spec["vocab_size"])
    return_freed_memory()
    baseline = reset_peak_memory("cpu")
    predict(inputs)  # warm-up: kernels, thread pools, onnxruntime's first-run allocations
    times, cpu_times = [], []
    while not enough_steps(times, repeats=0):  # as bench_model.py: as many as fit in 2 s, 1 to 5
        start, cpu_start = time.perf_counter(), time.process_time()
        predict(inputs)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    peak = resident_memory("VmHWM")
    return {"times": times, "cpu_times": cpu_times, "peak_bytes": peak, "loaded_bytes": baseline}


def return_freed_memory() -> None:
    """Hands what loading freed (the float32 weights int8 replaced, say) back to the system, for every implementation
    alike, so that the peak resident set counts what serving holds."""
    import contextlib
    import ctypes
    import gc

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: the peak then includes what loading freed
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def measure_speed(shapes: list[tuple[int, int]], files: dict, args: argparse.Namespace, vocab_size: int) -> list:
    """Every implementation at every shape, `rounds` times in turn; one summary per (shape, implementation)."""
    runs = {(shape, name): [] for shape in shapes for name in IMPLEMENTATIONS}
    for _ in range(args.rounds):
        for (shape, name), results in runs.items():
            if files.get(name + "-error") or (name.startswith("onnxruntime") and files.get(name) is None):
                results.append({"error": files.get(name + "-error", "no ONNX file")})
                continue
            spec = {"name": name, "files": files, "threads": args.threads, "vocab_size": vocab_size}
            results.append(run_in_subprocess({**spec, "batch_size": shape[0], "length": shape[1]}, __file__))
            print(f"  {shape[0]}x{shape[1]} {name}: {results[-1]}", file=sys.stderr, flush=True)
    return [summarize(shape, name, results) for (shape, name), results in runs.items()]


def summarize(shape: tuple[int, int], name: str, results: list[dict]) -> dict:
    return with_medians({"batch_size": shape[0], "length": shape[1], "implementation": name}, results)


# --- agreement on real texts ------------------------------------------------------------------------------------


def read_texts(path: Path, num_texts: int) -> list[str]:
    """The first `num_texts` texts of a JSON-lines file with a `text` field; one line where it has fewer or another
    layout (read before any work, like the options)."""
    if not path.is_file():
        stop(__file__, f"--texts {path} (ChnSentiCorp, JSON lines with a `text` field) is missing: pass another")
    texts = []
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, start=1):
            if len(texts) == num_texts:
                break
            try:
                texts.append(json.loads(line)["text"])
            except (ValueError, KeyError, TypeError):
                stop(__file__, f"--texts {path}: line {number} is not a JSON object with a `text` field")
    if len(texts) < num_texts:
        stop(__file__, f"--texts {path} has {len(texts)} texts, fewer than --num_texts {num_texts}")
    return texts


def text_batches(texts: list[str]) -> list[dict[str, torch.Tensor]]:
    """The texts tokenized with the 50k vocabulary, truncated at 128 tokens, in padded batches."""
    from roformer_hf import RoFormerJiebaTokenizer

    tokenizer = RoFormerJiebaTokenizer(str(VOCABULARY))
    batches = []
    for start in range(0, len(texts), TEXT_BATCH):
        encoded = tokenizer(
            texts[start : start + TEXT_BATCH],
            truncation=True,
            max_length=TEXT_LENGTH,
            padding=True,
            return_tensors="pt",
        )
        batches.append({name: encoded[name] for name in INPUT_NAMES})
    return batches


def all_logits(files: dict, batches: list[dict], threads: int) -> dict[str, torch.Tensor | str]:
    """Each implementation of ours on every text: (texts, labels) float32 logits, or why it could not run."""
    logits = {}
    for name in IMPLEMENTATIONS[1:]:
        try:
            predict = predictor(name, files, threads)
        except RuntimeError as error:
            logits[name] = str(error)
            continue
        logits[name] = torch.cat([predict(batch) for batch in batches])
        print(f"  agreement: {name} done", file=sys.stderr, flush=True)
    return logits


def calibration(reference: torch.Tensor) -> tuple[float, float]:
    """The shift and scale of the logit difference that give our float32 a median 0 and a spread CALIBRATED_SPREAD."""
    difference = reference[:, 1] - reference[:, 0]
    spread = difference.std().item() if len(difference) > 1 else 0.0
    return difference.median().item(), CALIBRATED_SPREAD / spread if spread > 0 else 1.0


def label_probabilities(logits: torch.Tensor, shift: float, scale: float) -> torch.Tensor:
    """P(label 1) of a 2-label head whose logit difference is mapped to (difference - shift) * scale."""
    return torch.sigmoid((logits[:, 1] - logits[:, 0] - shift) * scale)


def agreement_rows(logits: dict[str, torch.Tensor | str]) -> list[dict]:
    """For each head (raw, calibrated) and implementation: argmax agreement with our float32 and the largest
    probability difference."""
    reference = logits["roformer_hf-float32"]
    rows = []
    for head, (shift, scale) in (("raw", (0.0, 1.0)), ("calibrated", calibration(reference))):
        expected = label_probabilities(reference, shift, scale)
        for name in IMPLEMENTATIONS[1:]:
            row = {"head": head, "implementation": name, "texts": len(reference), "shift": shift, "scale": scale}
            if isinstance(logits[name], str):
                rows.append({**row, "error": logits[name]})
                continue
            probabilities = label_probabilities(logits[name], shift, scale)
            agree = ((probabilities > 0.5) == (expected > 0.5)).sum().item()
            rows.append(
                {**row, "agree": agree, "max_probability_difference": (probabilities - expected).abs().max().item()}
            )
    return rows


# --- the report -------------------------------------------------------------------------------------------------


def header_lines(args: argparse.Namespace, size: dict, num_texts: int, load_at_start: float) -> list[str]:
    """The command, the machine (bench_model's lines: CPU, ISA, bf16 instructions, matrix-product roofs), software."""
    import onnxruntime
    import transformers

    from roformer_hf.training.machine.cpu_arithmetic import cpu_bf16

    return [
        "command: " + shlex.join(["python", "benchmarks/bench_serving.py", *sys.argv[1:]]),
        *machine_lines("cpu"),
        f"bf16 on this CPU: {cpu_bf16().reason}",
        f"software: torch {torch.__version__}, transformers {transformers.__version__}, onnxruntime "
        f"{onnxruntime.__version__}; {args.threads} threads per process; load average at the start {load_at_start:.2f} "
        f"(1 minute, {os.cpu_count()} cores)",
        f"settings: {args.rounds} rounds x timed calls for {AUTO_REPEAT_SECONDS:g} s (1-{AUTO_REPEAT_MAX}) after one "
        f"full-size warm-up call, a fresh process each; agreement on {num_texts} ChnSentiCorp texts, <= {TEXT_LENGTH} "
        f"tokens, batches of {TEXT_BATCH}",
        f"model: RoFormerForSequenceClassification {size}, 2 labels, random weights (seed 0)",
    ]


def print_speed_table(results: list[dict]) -> None:
    """Latency, throughput, CPU time, peak resident set and speed-up against transformers-float32 of the shape."""
    columns = ["batch x tokens", "implementation", "latency (s)", "tokens/s", "CPU time (s)", "peak RSS (MB)"]
    columns.append("speed-up")
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("-" * (len(column) + 2) for column in columns) + "|")
    references = {}
    for row in results:
        shape = (row["batch_size"], row["length"])
        cells = [f"{shape[0]} x {shape[1]}", row["implementation"]]
        if "error" in row:
            print("| " + " | ".join([*cells, row["error"], *[""] * (len(columns) - 3)]) + " |")
            continue
        reference = references.setdefault(shape, row) if row["implementation"] == REFERENCE else references.get(shape)
        cells += [f"{row['seconds']:.3f}", f"{shape[0] * shape[1] / row['seconds']:,.0f}", f"{row['cpu_seconds']:.3f}"]
        cells += [
            f"{row['peak_bytes'] / 2**20:.0f}",
            f"{reference['seconds'] / row['seconds']:.2f}x" if reference else "-",
        ]
        print("| " + " | ".join(cells) + " |")


def agreement_summary(logits: dict[str, torch.Tensor | str]) -> str:
    """What the raw head predicts on the texts, and the map of the calibrated head."""
    reference = logits["roformer_hf-float32"]
    difference = reference[:, 1] - reference[:, 0]
    shift, scale = calibration(reference)
    return (
        f"our float32 raw head: label 1 for {(difference > 0).sum().item()} of {len(difference)} texts, logit "
        f"difference {difference.mean().item():+.2e} +- {difference.std().item():.2e} (mean +- std over the texts); "
        f"calibrated head: (difference - {shift:.3e}) x {scale:.3g}"
    )


def print_agreement_table(rows: list[dict]) -> None:
    print("| head | implementation | argmax agreement with roformer_hf-float32 | max abs probability difference |")
    print("|------|----------------|--------------------------------------------|--------------------------------|")
    for row in rows:
        cells = [row["head"], row["implementation"]]
        if "error" in row:
            cells += [row["error"], ""]
        else:
            cells += [f"{row['agree']} / {row['texts']}", f"{row['max_probability_difference']:.1e}"]
        print("| " + " | ".join(cells) + " |")


# --- the driver -------------------------------------------------------------------------------------------------


def write_checkpoint(folder: Path, size: dict, max_length: int) -> Path:
    """transformers' random-weight classifier (seed 0), whose sinusoid table covers the longest shape."""
    from transformers import RoFormerConfig

    config = RoFormerConfig(**size, max_position_embeddings=max_length, num_labels=2)
    save_random_heads("transformers", config, {"classification"}, folder)
    return folder / "classification"


def main() -> None:
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    args = parse_args()
    if args.worker:
        print(json.dumps(measure(json.loads(args.worker))))
        return
    check_options(args)
    shapes = parse_shapes(args.shapes or (TINY_SHAPES if args.tiny else DEFAULT_SHAPES))
    size = TINY_SIZE if args.tiny else BASE_SIZE
    size = {**size, "num_hidden_layers": args.layers} if args.layers else size
    skipped = left_out(args.skip)
    num_texts = args.num_texts if args.num_texts is not None else 16 if args.tiny else 500
    args.rounds = args.rounds if args.rounds is not None else 1 if args.tiny else 2
    texts = read_texts(args.texts, num_texts)
    load_at_start = os.getloadavg()[0]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        checkpoint = write_checkpoint(folder, size, max(TEXT_LENGTH, *(length for _, length in shapes)))
        exported = (
            {}
            if {"onnxruntime-float32-error", "onnxruntime-int8-error"} <= skipped.keys()
            else export_onnx(checkpoint, folder)
        )
        files = {"checkpoint": str(checkpoint), **exported, **torchao_missing(), **skipped}
        logits = all_logits(files, text_batches(texts), args.threads)
        agreement, summary = agreement_rows(logits), agreement_summary(logits)
        results = measure_speed(shapes, files, args, size["vocab_size"])
    print("\n".join(header_lines(args, size, num_texts, load_at_start)) + "\n")
    print_speed_table(results)
    print(f"\n{summary}\n")
    print_agreement_table(agreement)
    print(f"\n(run took {(time.perf_counter() - started) / 60:.1f} min)")
    if args.json:
        args.json.write_text(
            json.dumps({"speed": results, "agreement": agreement, "agreement_summary": summary}, indent=1)
        )


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
