"""GPU correctness and GPU figures in one command, for a machine lent for a few minutes.

Five parts, each in a subprocess with its share of a time budget, each written to `<out>/gpu_check.md` as soon as it
ends (a part that fails or runs out of time is recorded and the next one runs; a `--tiny` dry run has no budget:
it shows that each part runs, however busy the machine):

1. versions: torch, CUDA, cuDNN, transformers and the other libraries, the GPU and its driver;
2. the model tests that honour `ROFORMER_HF_TEST_DEVICE` (`pytest -m device`, see tests/conftest.py) on the device:
   agreement with transformers' RoFormer and with the reference fixtures (V1, V2, Sim), eager against sdpa, padding,
   bf16 and fp16 against float32 (forward, gradients, 30 training steps), gradient checkpointing, generation with
   the cache; counts, failures, and the measured half-precision errors;
3. `bench_model.py` at the base shape, ours (sdpa) against transformers' RoFormer (eager), float32 and bf16 mixed
   precision: training (classifier, dropout 0.1) at 4 x 512 and 1 x 2,048, inference at 1 x 8,192 and 1 x 16,384;
4. how long the whole-word-masking collator takes for one batch of 32 x 512 on the host CPU;
5. `run_mlm.py` pretraining the base-shape model on People's Daily with the 50k vocabulary (bf16 on a GPU): tokens/s,
   the step time against the collator's, and the GPU's utilisation sampled by nvidia-smi while it trains;
6. "steps": `bench_compile.py`, one bf16 training step of the base classifier, transformers' RoFormer against ours,
   eager / `torch.compile` / CUDA graphs at 1 x 2,048 and 4 x 512, with the first step (compilation) and peak memory;
7. "mlm_graphs": `run_mlm.py` at 32 x 512, eager and with `--torch_compile true --torch_compile_mode
   reduce-overhead` (static shapes, CUDA graphs), run in-process: steady tokens/s, share of the measured bf16 roof,
   GPU utilisation, the first step's time (compilation) and the graphs compiled after it (recompilations);
8. "longdoc": `longdoc_experiment.py` within its share (RoFormer's long-document claim: pretrain, fine-tune at 512,
   1,024 and chunks with 3 seeds, naive Bayes on the same split).

The default parts (`--parts`) are the issue-45 set, sized to 9 minutes (`--budget_s 540`): versions, tests, steps,
mlm_graphs, longdoc; bench, collator and mlm (parts 3-5) run when named.

    python benchmarks/gpu_check.py --out outputs/gpu_check                       # on a GPU machine, ~9 minutes
    python benchmarks/gpu_check.py --tiny --device cpu --out outputs/gpu_dry_run # the same parts, tiny, on a CPU

On a machine without the package registry, `benchmarks/gpu_wheels.sh` prepares the missing packages beforehand
(docs/gpu.md says how the check was run).
"""

import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("ROFORMER_HF_DATA", REPO_ROOT.parent / "shared" / "data"))
BENCH_ROWS = {"full": "train:4x512,train:1x2048,infer:1x8192,infer:1x16384", "tiny": "train:2x64,infer:1x128"}
MLM_BATCH, MLM_LENGTH = 32, 512
MLM_EAGER_STEPS, MLM_GRAPH_STEPS = 100, 300
DEVICE_TESTS_S = 40  # 17 s on the H100
# Seconds of the 540-second budget: the step table, and the long-document experiment (the issue allows it 5 minutes).
STEP_TABLE_S, LONGDOC_S = 90, 240
DEVICE_TEST_FILES = ("tests/test_modeling.py", "tests/test_reference.py", "tests/test_precision.py")
LIBRARIES = ("torch", "transformers", "tokenizers", "safetensors", "accelerate", "datasets", "evaluate", "jieba")
LIBRARIES += ("rjieba", "numpy")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="Folder of the report and the logs.")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu for a dry run.")
    parser.add_argument("--tiny", action="store_true", help="Tiny sizes everywhere: the dry run of the command.")
    parser.add_argument(
        "--budget_s", type=float, default=540, help="Seconds for all parts together (default 540; none with --tiny)."
    )
    parser.add_argument("--mlm_steps", type=int, default=300, help="Optimizer steps of the run_mlm.py part.")
    parser.add_argument(
        "--mlm_workers",
        default="0,4",
        help="--dataloader_num_workers of the run_mlm.py runs, one run each (default 0,4: the collator in the "
        "training process, then in 4 worker processes).",
    )
    parser.add_argument(
        "--parts", default="versions,tests,steps,mlm_graphs,longdoc", help="Parts to run, in this order."
    )
    parser.add_argument(
        "--compile_backend",
        default=None,
        help="torch.compile backend instead of the modes; --tiny on a CPU: aot_eager (traces as inductor does, without "
        "generating kernels: the dry run takes minutes, not an hour on 2 cores).",
    )
    parser.add_argument("--collator_worker", help=argparse.SUPPRESS)  # internal: time the collator with this vocab
    parser.add_argument("--mlm_worker", type=Path, help=argparse.SUPPRESS)  # internal: one timed run_mlm run
    args = parser.parse_args()
    if args.tiny and args.device == "cpu" and args.compile_backend is None:
        args.compile_backend = "aot_eager"
    return args


class Report:
    """The markdown report, appended and flushed part by part, and the deadline the parts share (none where not
    `capped`: a dry run shows that each part runs, however busy the machine)."""

    def __init__(self, out: Path, budget_s: float, capped: bool = True):
        self.out, self.deadline, self.capped = out, time.monotonic() + budget_s, capped
        self.path = out / "gpu_check.md"
        self.path.write_text("")

    def add(self, *lines: str) -> None:
        text = "\n".join(lines) + "\n"
        print(text, flush=True)
        with self.path.open("a", encoding="utf-8") as report:
            report.write(text + "\n")

    def seconds_left(self, cap: float) -> float | None:
        """Seconds a part may run: its cap (sized for the GPU), within the budget left; `None` (no limit) in a dry
        run."""
        if not self.capped:
            return None
        return max(1.0, min(cap, self.deadline - time.monotonic()))


def child_environment(device: str) -> dict[str, str]:
    """The repository on the path of every subprocess, offline, the tests on `device`."""
    python_path = [str(REPO_ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(python_path),
        "HF_HUB_OFFLINE": "1",
        "ROFORMER_HF_TEST_DEVICE": device,
        "ROFORMER_HF_DATA": str(DATA_DIR),
        "PYTHONUNBUFFERED": "1",
    }


def run_logged(command: list[str], log: Path, timeout: float | None, device: str) -> tuple[int | str, float]:
    """Runs `command` from the repository root with stdout and stderr into `log`; returns (exit status or
    "timed out after N s", seconds)."""
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as output:
        output.write("$ " + " ".join(command) + "\n")
        output.flush()
        try:
            status = subprocess.run(
                command, cwd=REPO_ROOT, env=child_environment(device), stdout=output, stderr=subprocess.STDOUT,
                timeout=timeout, check=False,
            ).returncode  # fmt: skip
        except subprocess.TimeoutExpired:
            status = f"timed out after {timeout:.0f} s"
    return status, time.monotonic() - started


# --- 1. versions ------------------------------------------------------------------------------------------------


def versions(report: Report, args: argparse.Namespace) -> None:
    from importlib.metadata import PackageNotFoundError, version

    import torch

    lines = [f"python {sys.version.split()[0]}"]
    for library in LIBRARIES:
        try:
            lines.append(f"{library} {version(library)}")
        except PackageNotFoundError:
            lines.append(f"{library}: not installed")
    lines.append(f"torch CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")
    if torch.cuda.is_available():
        properties = torch.cuda.get_device_properties(0)
        lines.append(
            f"GPU {properties.name}, {properties.total_memory / 2**30:.1f} GiB, {properties.multi_processor_count} SMs"
        )
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,power.limit", "--format=csv,noheader"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        lines.append(f"nvidia-smi: driver, max SM clock, power limit: {smi.stdout.strip() or smi.stderr.strip()}")
    else:
        lines.append(f"no CUDA device; device {args.device}")
    report.add("## Versions", "", *(f"- {line}" for line in lines))


# --- 2. the device tests ----------------------------------------------------------------------------------------


def device_tests(report: Report, args: argparse.Namespace) -> None:
    xml_path, log = args.out / "device_tests.xml", args.out / "device_tests.log"
    # The files of the device tests: collecting the others needs packages a GPU machine may lack (nbclient, ...).
    command = [sys.executable, "-m", "pytest", *DEVICE_TEST_FILES, "-m", "device", "-q", "-rfE"]
    command += ["-p", "no:cacheprovider"]
    command += ["-o", "junit_family=legacy", f"--junitxml={xml_path}", "--durations=5"]
    status, seconds = run_logged(command, log, report.seconds_left(DEVICE_TESTS_S), args.device)
    lines = [f"`ROFORMER_HF_TEST_DEVICE={args.device} python -m pytest -m device`: exit {status}, {seconds:.0f} s"]
    if xml_path.exists():
        lines += test_counts(xml_path)
    else:
        lines += ["no JUnit XML: see device_tests.log, whose end is:", "```", *tail(log, 25), "```"]
    report.add("## Device tests", "", *lines)


def test_counts(xml_path: Path) -> list[str]:
    """Counts by file, the failures with their first line, and the recorded half-precision errors."""
    cases = ElementTree.parse(xml_path).getroot().iter("testcase")
    counts, failures, errors_measured = {}, [], []
    for case in cases:
        file = case.get("classname", "").rsplit(".", 1)[-1] or "?"
        outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        counts.setdefault(file, {}).setdefault(outcome, 0)
        counts[file][outcome] += 1
        if outcome in ("failure", "error"):
            message = next(child for child in case if child.tag == outcome).get("message", "")
            failures.append(f"- FAILED {file}::{case.get('name')}: {message.splitlines()[0][:200] if message else ''}")
        for prop in case.iter("property"):
            errors_measured.append(f"- {case.get('name')}: {prop.get('name')} {float(prop.get('value')):.2e}")
    table = ["| test file | passed | failed | errors | skipped |", "|---|---|---|---|---|"]
    for file, outcome in sorted(counts.items()):
        cells = [outcome.get(name, 0) for name in ("passed", "failure", "error", "skipped")]
        table.append(f"| {file} | " + " | ".join(map(str, cells)) + " |")
    totals = [sum(outcome.get(name, 0) for outcome in counts.values()) for name in ("passed", "failure", "error")]
    totals.append(sum(outcome.get("skipped", 0) for outcome in counts.values()))
    table.append("| **all** | " + " | ".join(map(str, totals)) + " |")
    return ["", *table, "", *(failures or ["no failures"]), "", "Measured half-precision errors:", *errors_measured]


def tail(path: Path, count: int) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines()[-count:] if path.exists() else []


# --- 3. bench_model.py ------------------------------------------------------------------------------------------


def model_benchmark(report: Report, args: argparse.Namespace) -> None:
    rows = BENCH_ROWS["tiny" if args.tiny else "full"]
    command = [sys.executable, "benchmarks/bench_model.py", "--device", args.device, "--only", "base"]
    command += ["--dtype", "float32,bf16", "--rows", rows, "--rounds", "1", "--repeats", "3"]
    command += ["--json", str(args.out / "bench_model.json")]
    command += ["--num_hidden_layers", "1"] if args.tiny else []
    log = args.out / "bench_model.log"
    status, seconds = run_logged(command, log, report.seconds_left(300), args.device)
    output = log.read_text(encoding="utf-8", errors="replace").splitlines()
    kept = [
        line for line in output if line.startswith(("|", "command:", "machine:", "roofs", "software:", "agreement"))
    ]
    kept = list(dict.fromkeys(kept))  # the agreement line comes on stderr and again in the header
    report.add("## bench_model.py", "", f"exit {status}, {seconds:.0f} s", "", *kept)
    if status != 0:
        report.add("```", *tail(log, 15), "```")


# --- 4. the collator --------------------------------------------------------------------------------------------


def collator_time(report: Report, args: argparse.Namespace) -> None:
    """The collator's time, measured in a subprocess that has the repository on its path."""
    command = [sys.executable, __file__, "--out", str(args.out), "--collator_worker", str(vocab_file(args))]
    completed = subprocess.run(
        command, cwd=REPO_ROOT, env=child_environment("cpu"), capture_output=True, text=True, check=True
    )
    median = float(completed.stdout.split()[-1])
    report.collator_seconds = median
    report.add("## Whole-word-masking collator", "", f"{MLM_BATCH} x {MLM_LENGTH}: {median * 1000:.1f} ms a batch "
               f"(median of 18, one host CPU process)")  # fmt: skip


def measure_collator(vocab: str) -> float:
    """Seconds per batch of the whole-word-masking collator on random blocks with words of 1 to 3 tokens."""
    import torch

    from roformer_hf import RoFormerJiebaTokenizer
    from roformer_hf.training.mlm.whole_word_masking import WholeWordMaskCollator

    tokenizer = RoFormerJiebaTokenizer(vocab)
    collator = WholeWordMaskCollator(tokenizer, seed=0)
    generator = torch.Generator().manual_seed(0)
    examples = []
    for index in range(MLM_BATCH):
        word_lengths = torch.randint(1, 4, (MLM_LENGTH,), generator=generator)
        word_ids = torch.repeat_interleave(torch.arange(MLM_LENGTH), word_lengths)[:MLM_LENGTH].tolist()
        input_ids = torch.randint(5, len(tokenizer), (MLM_LENGTH,), generator=generator).tolist()
        examples.append({"input_ids": input_ids, "word_ids": word_ids, "example_index": index})
    seconds = []
    for _ in range(20):
        started = time.perf_counter()
        collator(examples)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds[2:])


def vocab_file(args: argparse.Namespace) -> Path:
    """The demo's vocabulary with --tiny, else the original 50k one (shipped in data/)."""
    return REPO_ROOT / "data" / ("demo_vocab.txt" if args.tiny else "roformer_chinese_base_vocab.txt")


# --- 5. run_mlm.py ----------------------------------------------------------------------------------------------


def mlm_arguments(args: argparse.Namespace, output_dir: Path) -> list[str]:
    """Base shape and People's Daily on a GPU; a tiny model and the demo sample with --tiny."""
    if args.tiny:
        data = ["--train_file", str(REPO_ROOT / "data" / "peoples_daily_sample.txt")]
        data += [
            "--config_overrides",
            "hidden_size=64,num_hidden_layers=2,num_attention_heads=2,intermediate_size=128",
        ]
        data += ["--max_seq_length", "64", "--per_device_train_batch_size", "8"]
    else:
        data = ["--train_file", str(DATA_DIR / "pretrain" / "peoples_daily_199801.txt")]
        data += ["--max_seq_length", str(MLM_LENGTH), "--per_device_train_batch_size", str(MLM_BATCH)]
        data += ["--bf16", "true", "--preprocessing_num_workers", "8"]
    return [
        *data,
        *("--tokenizer_name", str(vocab_file(args)), "--output_dir", str(output_dir), "--overwrite_output_dir"),
        *("--max_steps", str(args.mlm_steps), "--learning_rate", "2e-4", "--warmup_steps", "30"),
        *("--logging_steps", "50", "--save_steps", "100000", "--max_eval_samples", "256"),
    ]


def pretraining(report: Report, args: argparse.Namespace) -> None:
    for workers in args.mlm_workers.split(","):
        pretraining_run(report, args, int(workers))


def pretraining_run(report: Report, args: argparse.Namespace, workers: int) -> None:
    output_dir = args.out / "runs" / f"run_mlm_workers{workers}"  # beside the report, never a shared /tmp folder
    arguments = [*mlm_arguments(args, output_dir), "--dataloader_num_workers", str(workers)]
    log, samples = args.out / f"run_mlm_workers{workers}.log", args.out / f"gpu_utilisation_workers{workers}.csv"
    sampler = start_utilisation_sampler(samples) if args.device == "cuda" else None
    status, seconds = run_logged(
        [sys.executable, "run_mlm.py", *arguments], log, report.seconds_left(240), args.device
    )
    if sampler:
        sampler.terminate()
    shown = " ".join(arguments).replace(str(output_dir), "OUT")
    lines = [f"`python run_mlm.py {shown}`", f"exit {status}, {seconds:.0f} s"]
    results = output_dir / "all_results.json"
    if status == 0 and results.exists():
        lines += mlm_figures(json.loads(results.read_text()), args, getattr(report, "collator_seconds", None))
    else:
        lines += ["```", *tail(log, 20), "```"]
    if sampler:
        lines += utilisation_summary(samples)
    report.add(f"## run_mlm.py on the device, {workers} data-loading workers", "", *lines)


def mlm_figures(results: dict, args: argparse.Namespace, collator_seconds: float | None) -> list[str]:
    step_seconds = results["train_runtime"] / args.mlm_steps
    batch, length = (8, 64) if args.tiny else (MLM_BATCH, MLM_LENGTH)
    lines = [
        f"- {args.mlm_steps} steps of {batch} x {length} tokens in {results['train_runtime']:.1f} s: "
        f"{step_seconds * 1000:.0f} ms a step, {batch * length / step_seconds:,.0f} tokens/s (the whole loop: "
        "data loading, collator, forward, backward, optimizer, logging)",
        f"- eval loss {results.get('eval_loss', float('nan')):.3f}, masked-token accuracy "
        f"{results.get('eval_accuracy', float('nan')):.3f}",
    ]
    if collator_seconds is not None and not args.tiny:
        lines.append(
            f"- the collator's {collator_seconds * 1000:.1f} ms a batch is {collator_seconds / step_seconds:.0%} of a step"
        )
    return lines


def start_utilisation_sampler(path: Path) -> subprocess.Popen:
    """nvidia-smi writing the GPU's utilisation every 200 ms."""
    query = ["nvidia-smi", "--query-gpu=timestamp,utilization.gpu,memory.used", "--format=csv,noheader,nounits"]
    return subprocess.Popen([*query, "-lms", "200"], stdout=path.open("w"), stderr=subprocess.DEVNULL)


def utilisation_summary(path: Path) -> list[str]:
    """The GPU's utilisation while it trained: from the first to the last sample above 10%."""
    samples = [int(fields[1]) for line in tail(path, 100_000) if len(fields := re.split(r",\s*", line)) > 2
               and fields[1].isdigit()]  # fmt: skip
    busy = [index for index, value in enumerate(samples) if value > 10]
    if not busy:
        return [f"- GPU utilisation: no sample above 10% ({len(samples)} samples)"]
    window = samples[busy[0] : busy[-1] + 1]
    return [
        f"- GPU utilisation while training ({len(window)} samples, 200 ms apart): mean {statistics.mean(window):.0f}%,"
        f" median {statistics.median(window):.0f}%, {sum(value < 50 for value in window) / len(window):.0%} of "
        "samples under 50%"
    ]


# --- 6. the step table: bench_compile.py ------------------------------------------------------------------------


def step_table(report: Report, args: argparse.Namespace) -> None:
    """Both libraries' training step, eager / compile / CUDA graphs; rows measured before a time-out still count."""
    rows_json = args.out / "bench_compile.json"
    command = [sys.executable, "benchmarks/bench_compile.py", "--device", args.device, "--json", str(rows_json)]
    command += ["--tiny", "--steps", "2"] if args.tiny else ["--steps", "20"]
    command += ["--backend", args.compile_backend] if args.compile_backend else []
    command += ["--variants", "eager,cudagraphs,compile"]
    log = args.out / "bench_compile.log"
    status, seconds = run_logged(command, log, report.seconds_left(STEP_TABLE_S), args.device)
    output = log.read_text(encoding="utf-8", errors="replace").splitlines()
    kept = [line for line in output if line.startswith(("|", "machine:", "bf16 roof"))]
    if not kept and rows_json.exists():  # stopped before its table: the rows it wrote so far
        kept = bench_compile_table(json.loads(rows_json.read_text())["rows"])
    report.add("## Training step: transformers and ours, eager / torch.compile / CUDA graphs", "",
               f"exit {status}, {seconds:.0f} s", "", *kept)  # fmt: skip
    if status != 0:
        report.add("```", *tail(log, 15), "```")


def bench_compile_table(rows: list[dict]) -> list[str]:
    spec = importlib.util.spec_from_file_location("bench_compile", REPO_ROOT / "benchmarks" / "bench_compile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.table(rows, None)


# --- 7. run_mlm.py eager and with CUDA graphs, in-process -------------------------------------------------------


def graph_arguments(args: argparse.Namespace, output_dir: Path, variant: str, steps: int) -> list[str]:
    arguments = [*mlm_arguments(args, output_dir), "--dataloader_num_workers", "0" if args.tiny else "4"]
    arguments[arguments.index("--max_steps") + 1] = str(steps)
    arguments += ["--logging_steps", "1000", "--report_to", "none", "--disable_tqdm", "true", "--do_eval", "false"]
    if variant == "cudagraphs" and args.compile_backend:
        arguments += ["--torch_compile", "true", "--torch_compile_backend", args.compile_backend]
    elif variant == "cudagraphs":
        arguments += ["--torch_compile", "true", "--torch_compile_mode", "reduce-overhead"]
    return arguments


def mlm_graphs(report: Report, args: argparse.Namespace) -> None:
    for variant, steps, cap in (("eager", MLM_EAGER_STEPS, 60), ("cudagraphs", MLM_GRAPH_STEPS, 110)):
        steps = 6 if args.tiny else steps
        output_dir = args.out / "runs" / f"mlm_{variant}"
        spec = args.out / f"mlm_{variant}.json"
        spec.write_text(json.dumps({"arguments": graph_arguments(args, output_dir, variant, steps)}))
        samples = args.out / f"gpu_utilisation_{variant}.csv"
        sampler = start_utilisation_sampler(samples) if args.device == "cuda" else None
        command = [sys.executable, __file__, "--out", str(args.out), "--mlm_worker", str(spec)]
        status, seconds = run_logged(command, args.out / f"mlm_{variant}.log", report.seconds_left(cap), args.device)
        if sampler:
            sampler.terminate()
        result = json.loads(spec.read_text()).get("result")
        lines = [f"exit {status}, {seconds:.0f} s"]
        lines += (
            mlm_graph_lines(result, args) if result else ["```", *tail(args.out / f"mlm_{variant}.log", 20), "```"]
        )
        lines += utilisation_summary(samples) if sampler else []
        report.add(f"## run_mlm.py {'32 x 512' if not args.tiny else 'tiny'}, {variant}", "", *lines)


def mlm_graph_lines(result: dict, args: argparse.Namespace) -> list[str]:
    batch, length = (8, 64) if args.tiny else (MLM_BATCH, MLM_LENGTH)
    steady = statistics.median(result["step_seconds"][len(result["step_seconds"]) // 3 :])
    tokens_per_second = batch * length / steady
    roof = result.get("roof")
    share = f", {tokens_per_second * mlm_flops_per_token(args) / roof:.0%} of the measured bf16 roof" if roof else ""
    after_first = result["graphs_per_step"][-1] - result["graphs_per_step"][0]
    return [
        f"- steady step {steady * 1000:.1f} ms (median of the last two thirds of {len(result['step_seconds'])} "
        f"steps): {tokens_per_second:,.0f} tokens/s{share}",
        f"- first step {result['first_step_s']:.1f} s (compilation included); graphs compiled: "
        f"{result['graphs_per_step'][-1]}, of which {after_first} after the first step (recompilations)",
        f"- training loss {result.get('train_loss') or float('nan'):.3f}",
    ]


def mlm_flops_per_token(args: argparse.Namespace) -> float:
    """The base shape's training FLOPs a token: 6 x the layers' weights, attention at 512, the sparse head (15%)."""
    hidden, layers, vocab = 768, 12, 50000
    return 6 * layers * 12 * hidden * hidden + 12 * layers * MLM_LENGTH * hidden + 6 * 0.15 * hidden * vocab


def mlm_worker(spec_path: Path) -> None:
    """Runs run_mlm.py in this process with a callback timing every step and counting dynamo's graphs."""
    import torch
    from torch._dynamo.utils import counters
    from transformers import TrainerCallback

    import run_mlm
    from roformer_hf.training.mlm import pretraining

    class StepTimes(TrainerCallback):
        def __init__(self):
            self.started, self.ends, self.graphs = None, [], []

        def on_train_begin(self, *args, **kwargs):
            self.started = time.perf_counter()

        def on_step_end(self, *args, **kwargs):
            self.ends.append(time.perf_counter())
            self.graphs.append(counters["stats"]["unique_graphs"])

    recorder, build = StepTimes(), pretraining.build_stage_trainer

    def build_and_record(*arguments, **options):
        trainer = build(*arguments, **options)
        trainer.add_callback(recorder)
        return trainer

    pretraining.build_stage_trainer = build_and_record
    spec = json.loads(spec_path.read_text())
    table = run_mlm.main(spec["arguments"])
    steps = [later - earlier for earlier, later in zip(recorder.ends, recorder.ends[1:], strict=False)]
    spec["result"] = {
        "first_step_s": recorder.ends[0] - recorder.started,
        "step_seconds": steps,
        "graphs_per_step": recorder.graphs,
        "train_loss": table[-1].get("train_loss"),
        "roof": measured_bf16_roof() if torch.cuda.is_available() else None,
    }
    spec_path.write_text(json.dumps(spec))


def measured_bf16_roof() -> float:
    spec = importlib.util.spec_from_file_location("bench_compile", REPO_ROOT / "benchmarks" / "bench_compile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.bf16_roof("cuda")


# --- 8. the long-document experiment ----------------------------------------------------------------------------


def longdoc_arguments(args: argparse.Namespace) -> list[str]:
    """Sized for LONGDOC_S on an H100/H200 (6 layers, 512 wide); tiny on a CPU for the dry run."""
    output = ["--output_dir", str(args.out.parent / f"{args.out.name}_longdoc")]
    if args.tiny:
        return [*output, "--tiny", "--device", args.device]
    return [
        *output,
        *("--device", "cuda", "--hidden_size", "512", "--num_hidden_layers", "6", "--num_attention_heads", "8"),
        *("--pretrain_steps", "2500", "--pretrain_batch_size", "32", "--pretrain_learning_rate", "1e-3"),
        *("--finetune_max_steps", "200", "--batch_size", "16", "--learning_rate", "1e-4", "--seeds", "0,1,2"),
    ]


def long_documents(report: Report, args: argparse.Namespace) -> None:
    command = [sys.executable, "benchmarks/longdoc_experiment.py", *longdoc_arguments(args)]
    log = args.out / "longdoc.log"
    status, seconds = run_logged(command, log, report.seconds_left(LONGDOC_S), args.device)
    lines = [f"`python {' '.join(command[1:])}`: exit {status}, {seconds:.0f} s", ""]
    output = log.read_text(encoding="utf-8", errors="replace").splitlines()
    lines += [line for line in output if line.startswith(("Fudan split", "pretrained"))]
    results = args.out.parent / f"{args.out.name}_longdoc" / "results.md"  # written after every run
    lines += ["", *results.read_text(encoding="utf-8").splitlines()] if results.exists() else tail(log, 20)
    report.add("## Long documents: 512 and 1,024 tokens, chunks, naive Bayes", "", *lines)


PARTS = {
    "versions": versions,
    "tests": device_tests,
    "bench": model_benchmark,
    "collator": collator_time,
    "mlm": pretraining,
    "steps": step_table,
    "mlm_graphs": mlm_graphs,
    "longdoc": long_documents,
}


def main() -> None:
    args = parse_args()
    if args.collator_worker:
        print(measure_collator(args.collator_worker))
        return
    if args.mlm_worker:
        mlm_worker(args.mlm_worker)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    report = Report(args.out, args.budget_s, capped=not args.tiny)
    report.add(f"# GPU check ({'tiny dry run, ' if args.tiny else ''}device {args.device})", "",
               f"command: python benchmarks/gpu_check.py {' '.join(sys.argv[1:])}")  # fmt: skip
    for name in args.parts.split(","):
        started = time.monotonic()
        try:
            PARTS[name](report, args)
        except Exception as error:  # one part's failure is a finding; the next part still runs
            report.add(f"## {name}: failed", "", f"{type(error).__name__}: {error}")
        print(f"[{name}: {time.monotonic() - started:.0f} s]", file=sys.stderr, flush=True)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
