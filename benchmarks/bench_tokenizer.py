"""Tokenizer throughput on People's Daily: characters/s and tokens per character.

```bash
HF_HUB_OFFLINE=1 python benchmarks/bench_tokenizer.py --repeats 5
```

Compares RoFormerJiebaTokenizer (rjieba path and jieba path) with transformers' RoFormerTokenizer built from the same
vocab (`RoFormerTokenizer(vocab=...)`, jieba pre-tokenizer in Python over a Rust WordPiece) and with plain
character-level BERT (`BertTokenizerFast`, BERT-Chinese vocab). Every tokenizer encodes the whole corpus in batches
(`tokenizer(batch)`, no padding); the table gives the median over repeats, run round-robin so that background load
hits all alike. Characters per CPU-second (all threads of the process) depend less on other load. Each repeat of
ours starts from a fresh copy (empty cache of out-of-vocabulary words), i.e. one pass over unseen text.
"""

import argparse
import pickle
import statistics
import time
from pathlib import Path

from transformers import BertTokenizerFast, RoFormerTokenizer

from roformer_hf import RoFormerJiebaTokenizer

DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default=str(DATA_DIR / "pretrain" / "peoples_daily_199801.txt"))
    parser.add_argument("--roformer_vocab", default=str(DATA_DIR / "vocab" / "roformer_chinese_base_vocab.txt"))
    parser.add_argument("--bert_vocab", default=str(DATA_DIR / "vocab" / "bert_base_chinese_vocab.txt"))
    parser.add_argument("--repeats", type=int, default=5, help="Timed passes over the corpus per tokenizer.")
    parser.add_argument("--jieba_repeats", type=int, default=3, help="Timed passes for the slow jieba path.")
    parser.add_argument("--batch_size", type=int, default=1000)
    return parser.parse_args()


def build_tokenizers(args: argparse.Namespace) -> dict:
    ours = RoFormerJiebaTokenizer(args.roformer_vocab)
    return {
        "RoFormerJiebaTokenizer (rjieba)": ours,
        "RoFormerJiebaTokenizer (jieba)": RoFormerJiebaTokenizer(args.roformer_vocab, use_rjieba=False),
        "transformers RoFormerTokenizer(vocab=...)": RoFormerTokenizer(vocab=dict(ours.vocab)),
        "BertTokenizerFast (characters)": BertTokenizerFast(vocab_file=args.bert_vocab),
    }


def encode_corpus(tokenizer, lines: list[str], batch_size: int) -> tuple[tuple[float, float], list[list[int]]]:
    """Wall-clock and CPU seconds (all threads of the process) to encode every line in batches, and the ids."""
    if isinstance(tokenizer, RoFormerJiebaTokenizer):
        tokenizer = pickle.loads(pickle.dumps(tokenizer))  # a fresh copy: no cached out-of-vocabulary words
    start, start_cpu = time.perf_counter(), time.process_time()
    ids = []
    for index in range(0, len(lines), batch_size):
        ids += tokenizer(lines[index : index + batch_size])["input_ids"]
    return (time.perf_counter() - start, time.process_time() - start_cpu), ids


def measure(tokenizers: dict, lines: list[str], args: argparse.Namespace) -> tuple[dict, dict]:
    seconds = {name: [] for name in tokenizers}
    ids = {name: encode_corpus(tokenizer, lines[:2000], args.batch_size)[1] for name, tokenizer in tokenizers.items()}
    for repeat in range(args.repeats):
        for name, tokenizer in tokenizers.items():
            if "(jieba)" in name and repeat >= args.jieba_repeats:
                continue
            elapsed, ids[name] = encode_corpus(tokenizer, lines, args.batch_size)
            seconds[name].append(elapsed)
    return seconds, ids


def print_table(seconds: dict, ids: dict, characters: int, reference: str) -> None:
    reference_speed = characters / statistics.median(wall for wall, _ in seconds[reference])
    reference_cpu_speed = characters / statistics.median(cpu for _, cpu in seconds[reference])
    print(f"\n{characters:,} characters in {len(ids[reference]):,} lines; medians over repeats\n")
    print(
        "| tokenizer | characters/s | vs transformers | characters/CPU-s | vs transformers (CPU) | tokens/character "
        "| ids identical to ours |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    ours = ids["RoFormerJiebaTokenizer (rjieba)"]
    for name, timings in seconds.items():
        speed = characters / statistics.median(wall for wall, _ in timings)
        cpu_speed = characters / statistics.median(cpu for _, cpu in timings)
        tokens = sum(len(row) - 2 for row in ids[name])  # without [CLS] and [SEP]
        differing = sum(row != our_row for row, our_row in zip(ids[name], ours, strict=True))
        identical = "yes" if differing == 0 else f"no ({differing:,} lines differ)"
        if name.startswith("BertTokenizerFast"):
            identical = "n/a (other vocab)"
        print(
            f"| {name} | {speed:,.0f} | {speed / reference_speed:.2f}x | {cpu_speed:,.0f} | "
            f"{cpu_speed / reference_cpu_speed:.2f}x | {tokens / characters:.3f} | {identical} |"
        )


def main() -> None:
    args = parse_args()
    lines = Path(args.corpus).read_text(encoding="utf-8").splitlines()
    characters = sum(map(len, lines))
    tokenizers = build_tokenizers(args)
    seconds, ids = measure(tokenizers, lines, args)
    print_table(seconds, ids, characters, reference="transformers RoFormerTokenizer(vocab=...)")


if __name__ == "__main__":
    main()
