"""Length extrapolation of a RoFormer MLM: trained at L tokens, read at L, 2L, 4L and 8L with each RoPE type.

Steps: split People's Daily into training and held-out paragraphs; pretrain a small MLM with `run_mlm.py` at
`--train_length` L tokens (max_position_embeddings = L, so the scaled RoPE types know the trained length); then load
the same weights once per RoPE type (`from_pretrained(..., rope_parameters=...)`, nothing retrained) and measure the
masked-token loss and accuracy on the held-out text cut into blocks of L, 2L, 4L and 8L tokens. Every length sees the
same tokens with the same masks (15% of the tokens, replaced by [MASK]); only the context around them grows.

    python benchmarks/extrapolation.py --output_dir /tmp/extrapolation   # ~11 min on 2 free CPU cores

A trained model already in `--output_dir` is reused (delete it to retrain); an interrupted pretraining resumes.
"""

import argparse
import subprocess
import sys
from pathlib import Path

import torch
from torch.nn import functional as F

from roformer_hf import RoFormerForMaskedLM, RoFormerJiebaTokenizer

REPO_ROOT = Path(__file__).resolve().parents[1]
PEOPLES_DAILY = REPO_ROOT.parent / "shared" / "data" / "pretrain" / "peoples_daily_199801.txt"
ROPE_VARIANTS = {
    "plain": {"rope_type": "default"},
    "ntk x4": {"rope_type": "ntk", "factor": 4.0},
    "ntk x8": {"rope_type": "ntk", "factor": 8.0},
    "dynamic x2": {"rope_type": "dynamic", "factor": 2.0},
    "linear x4": {"rope_type": "linear", "factor": 4.0},
    "yarn x4": {"rope_type": "yarn", "factor": 4.0},
}
MULTIPLES = (1, 2, 4, 8)


class BenchmarkError(Exception):
    """A problem with the benchmark's inputs, reported as one line."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", type=Path, default=Path("outputs/extrapolation"), help="Data, model, results.")
    parser.add_argument("--corpus", type=Path, default=PEOPLES_DAILY, help="One paragraph a line.")
    parser.add_argument("--tokenizer", type=Path, default=REPO_ROOT / "data" / "demo_vocab.txt", help="vocab.txt")
    parser.add_argument("--train_length", type=int, default=64, help="L: tokens per training block.")
    parser.add_argument("--train_steps", type=int, default=2000, help="~9 minutes on 2 free CPU cores.")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument(
        "--model_size",
        default="hidden_size=128,num_hidden_layers=4,num_attention_heads=2,intermediate_size=512",
        help="--config_overrides for run_mlm.py (max_position_embeddings is set to L).",
    )
    parser.add_argument("--held_out_percentage", type=int, default=5, help="Paragraphs kept out of training.")
    parser.add_argument("--max_eval_blocks", type=int, default=64, help="Blocks of 8L held-out tokens evaluated.")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def split_corpus(args: argparse.Namespace) -> tuple[Path, Path]:
    """Write the first paragraphs to train.txt and the last `held_out_percentage`% to held_out.txt."""
    if not args.corpus.is_file():
        raise BenchmarkError(f"corpus {args.corpus} not found: pass --corpus (one paragraph a line).")
    paragraphs = [line for line in args.corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    cut = len(paragraphs) - len(paragraphs) * args.held_out_percentage // 100
    args.output_dir.mkdir(parents=True, exist_ok=True)
    train_file, held_out_file = args.output_dir / "train.txt", args.output_dir / "held_out.txt"
    train_file.write_text("\n".join(paragraphs[:cut]) + "\n", encoding="utf-8")
    held_out_file.write_text("\n".join(paragraphs[cut:]) + "\n", encoding="utf-8")
    return train_file, held_out_file


def pretrain(args: argparse.Namespace, train_file: Path, held_out_file: Path) -> Path:
    """Run run_mlm.py at length L (a subprocess, as a user would); returns the folder of the trained model."""
    model_dir = args.output_dir / "model"
    if (model_dir / "config.json").is_file() and any(model_dir.glob("*.safetensors")):
        print(f"reusing the model in {model_dir}", flush=True)
        return model_dir
    resume = ["--resume_from_checkpoint", "True"] if any(model_dir.glob("checkpoint-*")) else []
    command = [
        *(sys.executable, "run_mlm.py", "--train_file", str(train_file), "--validation_file", str(held_out_file)),
        *("--tokenizer_name", str(args.tokenizer), "--output_dir", str(model_dir), "--seed", str(args.seed)),
        *("--config_overrides", f"{args.model_size},max_position_embeddings={args.train_length}"),
        *("--max_seq_length", str(args.train_length), "--max_steps", str(args.train_steps)),
        *("--per_device_train_batch_size", str(args.batch_size), "--per_device_eval_batch_size", "64"),
        *("--learning_rate", "1e-3", "--warmup_steps", str(args.train_steps // 20), "--weight_decay", "0.01"),
        *("--logging_steps", "40", "--save_steps", str(max(1, args.train_steps // 4)), "--save_total_limit", "1"),
        *("--max_eval_samples", "256"),
        *resume,
    ]
    print("pretraining: python " + " ".join(command[1:]), flush=True)
    if subprocess.run(command, cwd=REPO_ROOT).returncode != 0:
        raise BenchmarkError("run_mlm.py failed (its output is above).")
    return model_dir


def masked_held_out_blocks(
    held_out_file: Path, tokenizer: RoFormerJiebaTokenizer, args: argparse.Namespace
) -> tuple[torch.Tensor, torch.Tensor]:
    """Held-out text as `(input_ids, labels)` blocks of 8L tokens, 15% of the non-special tokens masked."""
    paragraphs = held_out_file.read_text(encoding="utf-8").splitlines()
    stream = [token for ids in tokenizer(paragraphs)["input_ids"] for token in ids]  # [CLS] text [SEP] [CLS] ...
    block_length = args.train_length * max(MULTIPLES)
    num_blocks = min(len(stream) // block_length, args.max_eval_blocks)
    if num_blocks == 0:
        raise BenchmarkError(f"the held-out text has fewer than {block_length} tokens: raise --held_out_percentage.")
    input_ids = torch.tensor(stream[: num_blocks * block_length]).view(num_blocks, block_length)  # (N, 8L)
    generator = torch.Generator().manual_seed(args.seed)
    special = torch.isin(input_ids, torch.tensor(tokenizer.all_special_ids))
    masked = (torch.rand(input_ids.shape, generator=generator) < 0.15) & ~special
    labels = torch.where(masked, input_ids, -100)
    return torch.where(masked, tokenizer.mask_token_id, input_ids), labels


@torch.inference_mode()
def evaluate(model: RoFormerForMaskedLM, input_ids: torch.Tensor, labels: torch.Tensor, length: int) -> dict:
    """Masked-token loss and accuracy with the blocks cut into pieces of `length` tokens."""
    input_ids, labels = input_ids.reshape(-1, length), labels.reshape(-1, length)  # same tokens, shorter context
    rows_per_batch = max(1, 4096 // length)
    total_loss, correct, count = 0.0, 0, 0
    for start in range(0, len(input_ids), rows_per_batch):
        batch_labels = labels[start : start + rows_per_batch]
        hidden_states = model.roformer(input_ids=input_ids[start : start + rows_per_batch]).last_hidden_state
        masked = batch_labels != -100
        logits = model.cls(hidden_states[masked])  # (masked tokens, vocab): the head only where it is scored
        total_loss += F.cross_entropy(logits, batch_labels[masked], reduction="sum").item()
        correct += (logits.argmax(dim=-1) == batch_labels[masked]).sum().item()
        count += masked.sum().item()
    return {"loss": total_loss / count, "accuracy": correct / count}


def evaluate_variants(model_dir: Path, input_ids: torch.Tensor, labels: torch.Tensor, train_length: int) -> dict:
    results = {}
    for name, rope_parameters in ROPE_VARIANTS.items():
        model = RoFormerForMaskedLM.from_pretrained(
            model_dir, rope_parameters={"rope_theta": 10000.0, **rope_parameters}
        )
        model.eval()
        for multiple in MULTIPLES:
            results[name, multiple] = evaluate(model, input_ids, labels, train_length * multiple)
            print(f"{name:>11} {multiple}L: {results[name, multiple]}", file=sys.stderr, flush=True)
    return results


def print_table(results: dict, train_length: int, num_masked: int) -> None:
    lengths = [train_length * multiple for multiple in MULTIPLES]
    print(f"\nmasked-token loss / accuracy, trained at L = {train_length}, {num_masked} masked held-out tokens\n")
    print(
        "| RoPE | "
        + " | ".join(f"{length} ({multiple}L)" for length, multiple in zip(lengths, MULTIPLES, strict=True))
        + " |"
    )
    print("| --- |" + " ---: |" * len(lengths))
    for name in ROPE_VARIANTS:
        cells = [results[name, multiple] for multiple in MULTIPLES]
        print(f"| {name} | " + " | ".join(f"{cell['loss']:.3f} / {cell['accuracy']:.3f}" for cell in cells) + " |")


def main() -> None:
    args = parse_args()
    torch.manual_seed(args.seed)
    train_file, held_out_file = split_corpus(args)
    model_dir = pretrain(args, train_file, held_out_file)
    tokenizer = RoFormerJiebaTokenizer.from_pretrained(model_dir)
    input_ids, labels = masked_held_out_blocks(held_out_file, tokenizer, args)
    results = evaluate_variants(model_dir, input_ids, labels, args.train_length)
    print_table(results, args.train_length, int((labels != -100).sum()))


if __name__ == "__main__":
    try:
        main()
    except BenchmarkError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
