"""What a checkpoint's manifest costs (`roformer_hf.training.outputs.checkpoints`) against the save itself, at the base
shape.

A checkpoint of the 12-layer, 768-wide RoFormer MLM over a 50k vocabulary as the Trainer writes it: the weights
(`save_pretrained`: safetensors and config), AdamW's state after one step (`optimizer.pt`: both moments), the scheduler
and RNG states and `trainer_state.json`. Then, on the same files: `write_manifest` (every file's XXH3 checksum, as the
scripts write it last), `verify_checkpoint` (what a resume checks), and zlib's CRC-32, SHA-256 and BLAKE2b over the
same bytes for comparison. Each figure is the median of `--repeats` rounds, each into a new folder; the files are read
back from the page cache, as right after a save (a resume reading a cold disk pays the disk's read speed on top).

    python benchmarks/bench_checkpoint_manifest.py    # ~40 s, ~4 GB of memory, ~1.4 GB of disk at a time
"""

import argparse
import functools
import hashlib
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
import zlib
from pathlib import Path

import torch

from roformer_hf import RoFormerConfig, RoFormerForMaskedLM
from roformer_hf.training.outputs.checkpoints import verify_checkpoint, write_manifest


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="Rounds; the median is reported.")
    parser.add_argument("--vocab_size", type=int, default=50000)
    parser.add_argument("--folder", default=tempfile.gettempdir(), help="Where the checkpoints are written.")
    return parser.parse_args()


def model_and_optimizer(vocab_size: int) -> tuple[RoFormerForMaskedLM, torch.optim.Optimizer]:
    """The base model and an AdamW that has taken one step (so that it holds both moments of every parameter)."""
    model = RoFormerForMaskedLM(RoFormerConfig(vocab_size=vocab_size))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for parameter in model.parameters():
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step()
    return model, optimizer


def save_checkpoint(model, optimizer, folder: Path) -> None:
    """What `Trainer._save_checkpoint` writes, in its order."""
    model.save_pretrained(folder)
    torch.save(optimizer.state_dict(), folder / "optimizer.pt")
    torch.save({"last_epoch": 1, "_step_count": 2}, folder / "scheduler.pt")
    torch.save({"cpu": torch.random.get_rng_state()}, folder / "rng_state.pth")
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 1, "log_history": []}))


def hash_files(folder: Path, algorithm: str) -> None:
    for path in sorted(folder.iterdir()):
        with open(path, "rb") as file:
            hashlib.file_digest(file, algorithm)


def crc32_files(folder: Path) -> None:
    for path in sorted(folder.iterdir()):
        checksum = 0
        with open(path, "rb") as file:
            while chunk := file.read(4 * 2**20):
                checksum = zlib.crc32(chunk, checksum)


def seconds(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def measure_round(model, optimizer, folder: Path) -> dict[str, float]:
    """Seconds of each step on one checkpoint written into `folder`."""
    times = {SAVE: seconds(lambda: save_checkpoint(model, optimizer, folder))}
    times["write_manifest (XXH3 of every file)"] = seconds(lambda: write_manifest(folder, 1))
    times["verify_checkpoint (what a resume checks)"] = seconds(lambda: verify_checkpoint(folder))
    times["zlib CRC-32 of every file (for comparison)"] = seconds(lambda: crc32_files(folder))
    for algorithm in ("sha256", "blake2b"):
        hash_all = functools.partial(hash_files, folder, algorithm)
        times[f"{algorithm} of every file (for comparison)"] = seconds(hash_all)
    return times


SAVE = "the save itself (weights, Adam state, scheduler, RNG, trainer state)"


def main() -> None:
    args = parse_args()
    torch.manual_seed(0)
    model, optimizer = model_and_optimizer(args.vocab_size)
    rounds, size = [], 0
    for _ in range(args.repeats):
        folder = Path(tempfile.mkdtemp(prefix="bench-manifest-", dir=args.folder)) / "checkpoint-1"
        folder.mkdir()
        try:
            rounds.append(measure_round(model, optimizer, folder))
            size = sum(path.stat().st_size for path in folder.iterdir())
        finally:
            shutil.rmtree(folder.parent)
    medians = {name: statistics.median(times[name] for times in rounds) for name in rounds[0]}
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}")
    print(f"checkpoint: {size / 2**30:.2f} GiB; median of {args.repeats} rounds\n")
    print("| step | seconds | against the save |")
    print("|---|---|---|")
    for name, median in medians.items():
        print(f"| {name} | {median:.2f} | {median / medians[SAVE]:.0%} |")


if __name__ == "__main__":
    main()
