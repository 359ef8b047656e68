"""How long the scripts take to answer what needs no model: `--help`, `--help-all`, a missing `--train_file`, an
unknown option; wall time of the whole command and the imports `python -X importtime` lists (their top-level cumulative time,
how many modules, whether torch, transformers or datasets among them), quiet and beside busy processes.

    python benchmarks/bench_first_answers.py                    # this checkout
    python benchmarks/bench_first_answers.py --busy 2           # beside two `while True: pass` processes
    python benchmarks/bench_first_answers.py --checkout ../old  # another checkout's scripts and package (the baseline)
"""

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "datasets")

# The commands timed: what each asks, and its arguments.
COMMANDS = {
    "--help": ["--help"],
    "--help-all": ["--help-all"],
    "missing --train_file": ["--train_file", "missing.jsonl", "--do_train", "--tokenizer_name", "data/demo_vocab.txt"],
    "unknown option": ["--lerning_rate", "1e-4", "--train_file", "data/cail_sample.jsonl"],
}


def timed(checkout: Path, script: str, arguments: list[str]) -> tuple[float, float, int, list[str]]:
    """One run: wall seconds, import seconds, modules imported, heavy packages among them."""
    environment = {**os.environ, "PYTHONPATH": str(checkout), "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-X", "importtime", str(checkout / script), *arguments],
        capture_output=True,
        text=True,
        cwd=checkout,
        env=environment,
    )
    wall = time.perf_counter() - start
    lines = re.findall(r"^import time:\s+\d+ \|\s+(\d+) \|( *)([\w.]+)$", result.stderr, flags=re.MULTILINE)
    top_level = sum(int(cumulative) for cumulative, indent, _ in lines if len(indent) == 1)
    names = {name.split(".")[0] for _, _, name in lines}
    return wall, top_level / 1e6, len(lines), [name for name in HEAVY if name in names]


def cpu_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    found = re.search(r"^model name\s*: (.*)$", cpuinfo.read_text(), re.MULTILINE) if cpuinfo.exists() else None
    return found.group(1) if found else platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, default=REPO_ROOT, help="The checkout whose scripts are timed.")
    parser.add_argument("--busy", type=int, default=0, help="Busy processes (`while True: pass`) running beside.")
    parser.add_argument("--repeats", type=int, default=3, help="Runs per command; the median is reported.")
    args = parser.parse_args()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        time.sleep(1 if busy else 0)
        load = os.getloadavg()[0]
        print(
            f"{cpu_name()}, {os.cpu_count()} cores, {args.busy} busy beside, "
            f"1-minute load {load:.1f} at the start; {args.checkout}; median of {args.repeats}\n"
        )
        print("| script | command | wall | imports | modules | torch, transformers, datasets |")
        print("|---|---|---|---|---|---|")
        for script in ("run_classification.py", "run_mlm.py"):
            for command, arguments in COMMANDS.items():
                runs = [timed(args.checkout, script, arguments) for _ in range(args.repeats)]
                wall = statistics.median(run[0] for run in runs)
                imports = statistics.median(run[1] for run in runs)
                heavy = ", ".join(runs[0][3]) or "none"
                print(f"| {script} | {command} | {wall:.2f} s | {imports:.2f} s | {runs[0][2]:,} | {heavy} |")
    finally:
        for process in busy:
            process.kill()


if __name__ == "__main__":
    main()
