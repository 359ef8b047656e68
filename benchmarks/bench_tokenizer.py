"""Tokenizer throughput on People's Daily (characters/s, tokens per character), and what our encoding machinery saves.

```bash
HF_HUB_OFFLINE=1 python benchmarks/bench_tokenizer.py --repeats 5
HF_HUB_OFFLINE=1 python benchmarks/bench_tokenizer.py --mode encoding --repeats 7
```

`--mode throughput` (the default):

Compares RoFormerJiebaTokenizer (rjieba path and jieba path) with transformers' RoFormerTokenizer built from the same
vocab (`RoFormerTokenizer(vocab=...)`, jieba pre-tokenizer in Python over a Rust WordPiece) and with plain
character-level BERT (`BertTokenizerFast`, BERT-Chinese vocab). Every tokenizer encodes the whole corpus in batches
(`tokenizer(batch)`, no padding); the table gives the median over repeats, run round-robin so that background load
hits all alike. Characters per CPU-second (all threads of the process) depend less on other load. Each repeat of
ours starts from a fresh copy (empty cache of out-of-vocabulary words), i.e. one pass over unseen text.

`--mode encoding`: RoFormerJiebaTokenizer's own `_encode_plus` (batch rows built at once, truncation windows, padding
only when asked) against transformers' `PreTrainedTokenizer._encode_plus` (text by text: `tokenize`, then
`prepare_for_model`, then `pad`) on the same tokenizer, the same rule and a warm cache, on real text: People's Daily
lines, Fudan long documents, CAIL case texts; single texts, batches of 32 and 256, pairs, truncation from either side,
padding and tensors. Both paths run round-robin, the table gives the minimum over repeats, and it checks that both
return the same encoding. Rows that transformers' slow-tokenizer path cannot produce (offsets, word ids, overflowing
windows as rows) have no transformers column.
"""

import argparse
import json
import pickle
import statistics
import time
from pathlib import Path

from transformers import BertTokenizerFast, PreTrainedTokenizer, RoFormerTokenizer
from transformers.utils import logging

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
    parser.add_argument("--mode", choices=["throughput", "encoding"], default="throughput")
    parser.add_argument("--cls_dir", default=str(DATA_DIR / "cls"), help="Fudan and CAIL texts for --mode encoding.")
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


# ----------------------------------------------------------------------------------------------------------------
# --mode encoding: our `_encode_plus` against transformers' on the same tokenizer
# ----------------------------------------------------------------------------------------------------------------


class TransformersEncoding(RoFormerJiebaTokenizer):
    """The same tokenizer (same rule, same `_tokenize`), encoding through transformers' `PreTrainedTokenizer`."""

    _encode_plus = PreTrainedTokenizer._encode_plus


def read_texts(path: Path) -> list[str]:
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()]


def encoding_cases(lines: list[str], fudan: list[str], cail: list[str]) -> list[tuple[str, str, tuple, dict]]:
    """(name, truncation side, positional arguments, keyword arguments) of every measured call."""
    questions = [line for line in lines if len(line) < 30][:32]  # short first texts leave room for only_second
    pairs = list(zip(questions, lines[:32], strict=True))
    truncated = {"truncation": True, "max_length": 512}
    tensors = {"padding": True, "return_tensors": "pt"}
    return [
        ("1 line", "right", (lines[3],), {}),
        ("1 Fudan document (~3k tokens)", "right", (fudan[0],), {}),
        ("32 lines", "right", (lines[:32],), {}),
        ("256 lines", "right", (lines[:256],), {}),
        ("256 lines, padding, pt", "right", (lines[:256],), tensors),
        ("32 Fudan, truncation 512 (head)", "right", (fudan[:32],), truncated),
        ("32 Fudan, truncation 512 (tail)", "left", (fudan[:32],), truncated),
        ("32 CAIL, truncation 512, pad to 512, pt", "right", (cail[:32],), {**truncated, "padding": "max_length",
                                                                            "return_tensors": "pt"}),
        ("1 pair", "right", pairs[3], {}),
        ("32 pairs", "right", (pairs,), {}),
        ("32 pairs, longest_first 64", "right", (pairs,), {"truncation": "longest_first", "max_length": 64}),
        ("32 pairs, only_second 64, padding, pt", "right", (pairs,), {"truncation": "only_second", "max_length": 64,
                                                                      **tensors}),
        ("32 lines, special_tokens_mask, length", "right", (lines[:32],), {"return_special_tokens_mask": True,
                                                                          "return_length": True}),
        ("32 pre-split lines", "right", ([line.split("，") for line in lines[:32]],), {"is_split_into_words": True}),
        ("32 lines, offsets, padding", "right", (lines[:32],), {"return_offsets_mapping": True, "padding": True}),
        ("32 lines, word_ids", "right", (lines[:32],), {"return_word_ids": True}),
        ("32 Fudan, overflow 512 stride 64", "right", (fudan[:32],), {**truncated, "stride": 64,
                                                                      "return_overflowing_tokens": True}),
    ]  # fmt: skip


def only_ours(kwargs: dict) -> bool:
    """Options transformers' slow-tokenizer `_encode_plus` lacks: offsets, word ids, overflowing windows as rows."""
    return any(kwargs.get(key) for key in ("return_offsets_mapping", "return_word_ids", "return_overflowing_tokens"))


def as_lists(encoding) -> dict:
    return {key: value.tolist() if hasattr(value, "tolist") else value for key, value in encoding.items()}


def best_seconds(tokenizer, arguments: tuple, kwargs: dict, budget: float = 0.05) -> float:
    """Seconds per call: enough calls to fill `budget` seconds, so that short calls are not timer noise."""
    calls, elapsed = 1, 0.0
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            tokenizer(*arguments, **kwargs)
        elapsed = time.perf_counter() - start
        if elapsed >= budget:
            return elapsed / calls
        calls *= 2


def measure_encoding(args: argparse.Namespace) -> list[tuple[str, float, float | None, str]]:
    logging.set_verbosity_error()  # transformers' pair truncation warns on every call
    lines = [line for line in Path(args.corpus).read_text(encoding="utf-8").splitlines() if line.strip()]
    cls_dir = Path(args.cls_dir)
    fudan, cail = read_texts(cls_dir / "fudan_longdoc_7cls.jsonl"), read_texts(cls_dir / "cail2019_domain.jsonl")
    results = []
    for name, side, arguments, kwargs in encoding_cases(lines, fudan, cail):
        ours = RoFormerJiebaTokenizer(args.roformer_vocab, truncation_side=side)
        theirs = None if only_ours(kwargs) else TransformersEncoding(args.roformer_vocab, truncation_side=side)
        same = (
            "n/a"
            if theirs is None
            else str(as_lists(ours(*arguments, **kwargs)) == as_lists(theirs(*arguments, **kwargs)))
        )
        timings = {"ours": [], "theirs": []}
        for _ in range(args.repeats):
            timings["ours"].append(best_seconds(ours, arguments, kwargs))
            if theirs is not None:
                timings["theirs"].append(best_seconds(theirs, arguments, kwargs))
        results.append((name, min(timings["ours"]), min(timings["theirs"], default=None), same))
        print(f"measured: {name}", flush=True)
    return results


def print_encoding_table(results: list[tuple[str, float, float | None, str]]) -> None:
    print("\nms per call, minimum over repeats\n")
    print("| call | ours (ms) | transformers' `_encode_plus` (ms) | ours faster by | same output |")
    print("| --- | ---: | ---: | ---: | --- |")
    for name, ours, theirs, same in results:
        if theirs is None:
            print(f"| {name} | {ours * 1e3:.2f} | (not supported) | n/a | n/a |")
        else:
            print(f"| {name} | {ours * 1e3:.2f} | {theirs * 1e3:.2f} | {theirs / ours:.2f}x | {same} |")


def main() -> None:
    args = parse_args()
    if args.mode == "encoding":
        print_encoding_table(measure_encoding(args))
        return
    lines = Path(args.corpus).read_text(encoding="utf-8").splitlines()
    characters = sum(map(len, lines))
    tokenizers = build_tokenizers(args)
    seconds, ids = measure(tokenizers, lines, args)
    print_table(seconds, ids, characters, reference="transformers RoFormerTokenizer(vocab=...)")


if __name__ == "__main__":
    main()
