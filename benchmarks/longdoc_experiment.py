#!/usr/bin/env python
"""Long-document classification: does reading more of each document help a RoFormer?

1. Pretrain a small RoFormer with run_mlm.py on People's Daily (January 1998).
2. Fine-tune it with run_classification.py on the Fudan long documents (7 topics, median about 5,600 characters),
   split into train and validation (stratified), at max_seq_length 512, at 1024 (beyond nothing: RoPE has no length
   cap), and with the chunk strategy (512-token windows over the whole document, logits mean-pooled).
3. Compare with the reference: multinomial naive Bayes on character uni- and bigrams of the first 3,000 characters,
   fitted with scikit-learn on the same split.

Prints a markdown table (accuracy, macro-F1, wall time). Every run is a subprocess of the project's own scripts, so
the numbers are what a user gets from the command line. The defaults fit a CPU in about 20 minutes and the model is
small; on a GPU, raise the sizes and steps:

```bash
python benchmarks/longdoc_experiment.py                                   # CPU, small
python benchmarks/longdoc_experiment.py --device cuda --hidden_size 384 --num_hidden_layers 6 \
    --pretrain_steps 20000 --finetune_epochs 10 --batch_size 16          # GPU
```
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("ROFORMER_HF_DATA", REPO_ROOT.parent / "shared" / "data"))
FUDAN = DATA_DIR / "cls" / "fudan_longdoc_7cls.jsonl"
PEOPLES_DAILY = DATA_DIR / "pretrain" / "peoples_daily_199801.txt"
VOCAB = DATA_DIR / "vocab" / "roformer_chinese_base_vocab.txt"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", default="outputs/longdoc_experiment")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--vocab", default=str(VOCAB), help="vocab.txt of the tokenizer (default: the 50k original).")
    parser.add_argument("--hidden_size", type=int, default=128)
    parser.add_argument("--num_hidden_layers", type=int, default=2)
    parser.add_argument("--num_attention_heads", type=int, default=4)
    parser.add_argument("--pretrain_steps", type=int, default=300)
    parser.add_argument("--pretrain_seq_length", type=int, default=256)
    parser.add_argument("--pretrained", default=None, help="Skip pretraining and fine-tune this checkpoint.")
    parser.add_argument("--finetune_epochs", type=float, default=2.0)
    parser.add_argument("--finetune_max_steps", type=int, default=-1, help="Overrides --finetune_epochs if > 0.")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--learning_rate", type=float, default=5e-4)
    parser.add_argument("--validation_fraction", type=float, default=0.2)
    parser.add_argument("--chunk_stride", type=int, default=64)
    parser.add_argument("--settings", default="512,1024,chunk512", help="Comma-separated fine-tuning settings.")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def split_fudan(output_dir: Path, validation_fraction: float, seed: int) -> tuple[Path, Path]:
    """Stratified train/validation split of the Fudan documents, written as two JSON-lines files."""
    by_label = defaultdict(list)
    for line in FUDAN.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        by_label[row["label"]].append({"id": row["id"], "label": row["label"], "text": row["text"]})
    rng = random.Random(seed)
    train, validation = [], []
    for label in sorted(by_label):
        rows = by_label[label]
        rng.shuffle(rows)
        cut = round(len(rows) * validation_fraction)
        validation += rows[:cut]
        train += rows[cut:]
    rng.shuffle(train)
    paths = output_dir / "fudan_train.jsonl", output_dir / "fudan_validation.jsonl"
    for path, rows in zip(paths, (train, validation), strict=True):
        path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return paths


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def naive_bayes_accuracy(train_file: Path, validation_file: Path) -> tuple[float, float, float]:
    """The reference: multinomial naive Bayes on character uni- and bigrams of the first 3,000 characters."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.metrics import accuracy_score, f1_score
    from sklearn.naive_bayes import MultinomialNB

    start = time.perf_counter()
    train, validation = read_jsonl(train_file), read_jsonl(validation_file)
    vectorizer = CountVectorizer(analyzer="char", ngram_range=(1, 2))
    features = vectorizer.fit_transform([row["text"][:3000] for row in train])
    classifier = MultinomialNB().fit(features, [row["label"] for row in train])
    predicted = classifier.predict(vectorizer.transform([row["text"][:3000] for row in validation]))
    labels = [row["label"] for row in validation]
    accuracy = accuracy_score(labels, predicted)
    return accuracy, f1_score(labels, predicted, average="macro"), time.perf_counter() - start


def run_script(arguments: list[str], log_file: Path) -> float:
    """Run one of the project's scripts in a subprocess (its output to `log_file`); returns the wall time."""
    start = time.perf_counter()
    with log_file.open("w", encoding="utf-8") as log:
        completed = subprocess.run(
            [sys.executable, *arguments],
            cwd=REPO_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
            check=False,
        )
    if completed.returncode != 0:
        raise SystemExit(f"{arguments[0]} failed (exit {completed.returncode}); see {log_file}")
    return time.perf_counter() - start


def device_arguments(device: str) -> list[str]:
    return ["--use_cpu", "true"] if device == "cpu" else ["--bf16", "true"]


def pretrain(args: argparse.Namespace, output_dir: Path) -> tuple[Path, float]:
    """Pretrain a small RoFormer with run_mlm.py on People's Daily."""
    checkpoint = output_dir / "pretrained"
    overrides = (
        f"hidden_size={args.hidden_size},num_hidden_layers={args.num_hidden_layers},"
        f"num_attention_heads={args.num_attention_heads},intermediate_size={4 * args.hidden_size}"
    )
    arguments = [
        "run_mlm.py",
        *("--train_file", str(PEOPLES_DAILY), "--tokenizer_name", args.vocab, "--config_overrides", overrides),
        *("--max_seq_length", str(args.pretrain_seq_length), "--max_steps", str(args.pretrain_steps)),
        *("--per_device_train_batch_size", str(args.batch_size * 2), "--learning_rate", "1e-3"),
        *("--warmup_steps", str(args.pretrain_steps // 10), "--do_train", "--save_strategy", "no"),
        *("--output_dir", str(checkpoint), "--overwrite_output_dir", "--seed", str(args.seed), "--report_to", "none"),
        *("--max_eval_samples", "64", "--disable_tqdm", "true"),
        *device_arguments(args.device),
    ]
    seconds = run_script(arguments, output_dir / "pretrain.log")
    return checkpoint, seconds


def setting_arguments(setting: str, chunk_stride: int) -> list[str]:
    """'512' and '1024' truncate (keep the head); 'chunk512' pools windows of 512 tokens over the whole document."""
    if setting.startswith("chunk"):
        length = setting.removeprefix("chunk")
        return ["--max_seq_length", length, "--long_doc_strategy", "chunk", "--chunk_stride", str(chunk_stride)]
    return ["--max_seq_length", setting]


def finetune(args, checkpoint: Path, train_file: Path, validation_file: Path, setting: str, output_dir: Path):
    """Fine-tune and evaluate one setting; returns (accuracy, macro-F1, seconds)."""
    run_dir = output_dir / f"finetune_{setting}"
    arguments = [
        "run_classification.py",
        *("--model_name_or_path", str(checkpoint), "--train_file", str(train_file)),
        *("--validation_file", str(validation_file), "--do_train", "--do_eval"),
        *setting_arguments(setting, args.chunk_stride),
        *("--num_train_epochs", str(args.finetune_epochs), "--max_steps", str(args.finetune_max_steps)),
        *("--per_device_train_batch_size", str(args.batch_size), "--per_device_eval_batch_size", str(args.batch_size)),
        *("--learning_rate", str(args.learning_rate), "--warmup_steps", "0.1", "--save_strategy", "no"),
        *("--train_sampling_strategy", "group_by_length", "--output_dir", str(run_dir), "--overwrite_output_dir"),
        *("--seed", str(args.seed)),
        *("--report_to", "none", "--disable_tqdm", "true"),
        *device_arguments(args.device),
    ]
    seconds = run_script(arguments, output_dir / f"finetune_{setting}.log")
    metrics = json.loads((run_dir / "eval_results.json").read_text())
    return metrics["eval_accuracy"], metrics["eval_f1_macro"], seconds


def describe(setting: str) -> str:
    if setting.startswith("chunk"):
        return f"chunks of {setting.removeprefix('chunk')} tokens, mean-pooled (whole document)"
    return f"max_seq_length {setting} (head)"


def main() -> None:
    args = parse_args()
    output_dir = Path(args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    train_file, validation_file = split_fudan(output_dir, args.validation_fraction, args.seed)
    print(f"Fudan split: {len(read_jsonl(train_file))} train, {len(read_jsonl(validation_file))} validation documents")
    rows = []
    accuracy, f1_macro, seconds = naive_bayes_accuracy(train_file, validation_file)
    rows.append(("naive Bayes, character 1-2-grams of the first 3,000 characters", accuracy, f1_macro, seconds))
    if args.pretrained is None:
        checkpoint, seconds = pretrain(args, output_dir)
        print(f"pretrained {args.pretrain_steps} steps in {seconds:.0f} s -> {checkpoint}", flush=True)
        rows.append((f"(pretraining: run_mlm.py, {args.pretrain_steps} steps, People's Daily)", None, None, seconds))
    else:
        checkpoint = Path(args.pretrained)
    for setting in args.settings.split(","):
        accuracy, f1_macro, seconds = finetune(args, checkpoint, train_file, validation_file, setting, output_dir)
        rows.append((f"RoFormer, {describe(setting)}", accuracy, f1_macro, seconds))
        print(f"{setting}: accuracy {accuracy:.4f} in {seconds:.0f} s", flush=True)
    print("\n| model | accuracy | macro-F1 | time (s) |\n| --- | --- | --- | --- |")
    for name, accuracy, f1_macro, seconds in rows:
        scores = "| - | - |" if accuracy is None else f"| {accuracy:.3f} | {f1_macro:.3f} |"
        print(f"| {name} {scores} {seconds:.0f} |")


if __name__ == "__main__":
    main()
