#!/usr/bin/env python
"""Long-document classification: does reading more of each document help a RoFormer?

1. Split the Fudan long documents (7 topics, median about 5,600 characters; both files, the second's 1,050 documents
   too) into train and validation (stratified, `--split_seed`); the split is fixed for everything below.
2. Pretrain a RoFormer with run_mlm.py on People's Daily (January 1998) and the texts of the Fudan training split
   (never the validation documents), written together to `pretraining_corpus_train.jsonl` in the output folder; the
   last 5% of each source is held out to measure the masked-token accuracy.
3. Fine-tune it with run_classification.py at max_seq_length 512, at 1024 (RoPE has no length cap) and with the chunk
   strategy (512-token windows over the whole document, logits mean-pooled), each with the same optimizer steps and
   batch size, once per fine-tuning seed of `--seeds`.
4. Compare with the reference: multinomial naive Bayes on character uni- and bigrams of the first 3,000 characters,
   fitted with scikit-learn on the same split.

Prints markdown tables (accuracy and macro-F1 per setting: mean, sample standard deviation and min-max over the seeds;
then every run) and writes them to `results.md`, every run's numbers to `results.json`. Every run is a subprocess of
the project's own scripts, so the numbers are what a user gets from the command line; on a CPU the scripts choose
the precision (bf16 mixed precision where the CPU has bf16 instructions) unless `--bf16` says. The defaults are the
run in docs/scripts.md (hours on a 2-core CPU); a quick check of the pipeline, and a GPU:

```bash
python benchmarks/longdoc_experiment.py --tiny --output_dir outputs/longdoc_dry_run         # the dry run, CPU
python benchmarks/longdoc_experiment.py --pretrain_steps 20 --finetune_max_steps 5 --seeds 0  # minutes
python benchmarks/longdoc_experiment.py --device cuda --hidden_size 384 --num_hidden_layers 6 \
    --pretrain_steps 20000 --finetune_max_steps 1000 --batch_size 16                          # GPU
```
"""

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("ROFORMER_HF_DATA", REPO_ROOT.parent / "shared" / "data"))
FUDAN = DATA_DIR / "cls" / "fudan_longdoc_7cls.jsonl"
# 1,050 more Fudan documents of the same 7 topics: read with the first file where present (--no_more_documents: not)
FUDAN_MORE = DATA_DIR / "cls" / "fudan_longdoc_7cls_more.jsonl"
PEOPLES_DAILY = DATA_DIR / "pretrain" / "peoples_daily_199801.txt"
VOCAB = REPO_ROOT / "data" / "roformer_chinese_base_vocab.txt"
# --tiny: the dry run of the whole pipeline on a CPU in a minute or two (its numbers mean nothing)
TINY_SETTINGS = {
    "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "pretrain_steps": 3,
    "pretrain_seq_length": 64, "pretrain_batch_size": 4, "finetune_max_steps": 2, "batch_size": 4,
    "settings": "64,128,chunk64", "chunk_stride": 16, "seeds": "0", "max_documents_per_class": 4, "max_pretraining_paragraphs": 200,
}  # fmt: skip
# Written beside a checkpoint this script pretrained: the Fudan documents it never saw, checked with --pretrained.
HELD_OUT_IDS_FILE = "longdoc_validation_ids.json"
PRETRAINING_HELD_OUT_FRACTION = 0.05


class Pretraining(NamedTuple):
    checkpoint: Path
    seconds: float
    cpu_seconds: float
    eval_loss: float
    masked_token_accuracy: float
    precision: str


class FinetuneRun(NamedTuple):
    setting: str
    seed: int
    accuracy: float
    f1_macro: float
    seconds: float
    cpu_seconds: float
    precision: str


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", default="outputs/longdoc_experiment")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--bf16",
        choices=["auto", "true", "false"],
        default="auto",
        help="bf16 mixed precision: 'auto' leaves it to the scripts (on a CPU: on where it has bf16 instructions; "
        "on a GPU: on).",
    )
    parser.add_argument("--vocab", default=str(VOCAB), help="vocab.txt of the tokenizer (default: the 50k original).")
    parser.add_argument("--hidden_size", type=int, default=256)
    parser.add_argument("--num_hidden_layers", type=int, default=4)
    parser.add_argument("--num_attention_heads", type=int, default=4)
    parser.add_argument("--pretrain_steps", type=int, default=600)
    parser.add_argument("--pretrain_seq_length", type=int, default=512)
    parser.add_argument("--pretrain_batch_size", type=int, default=8)
    parser.add_argument("--pretrain_learning_rate", type=float, default=1e-3)
    parser.add_argument("--pretrained", default=None, help="Skip pretraining and fine-tune this checkpoint.")
    parser.add_argument("--finetune_epochs", type=float, default=2.0)
    parser.add_argument("--finetune_max_steps", type=int, default=300, help="Overrides --finetune_epochs if > 0.")
    parser.add_argument("--batch_size", type=int, default=8, help="Fine-tuning batch (documents or windows).")
    parser.add_argument("--learning_rate", type=float, default=5e-4, help="Fine-tuning peak learning rate.")
    parser.add_argument("--validation_fraction", type=float, default=0.2)
    parser.add_argument("--chunk_stride", type=int, default=64)
    parser.add_argument("--settings", default="512,1024,chunk512", help="Comma-separated fine-tuning settings.")
    parser.add_argument("--split_seed", type=int, default=0, help="Seed of the Fudan split and of pretraining.")
    parser.add_argument("--seeds", default="0,1,2", help="Comma-separated fine-tuning seeds, one run each.")
    parser.add_argument("--no_more_documents", action="store_true", help=f"Leave out {FUDAN_MORE.name}.")
    parser.add_argument("--max_documents_per_class", type=int, default=None, help="Keep this many of each topic.")
    parser.add_argument("--max_pretraining_paragraphs", type=int, default=None, help="Of People's Daily.")
    parser.add_argument("--tiny", action="store_true", help="The dry run: tiny model, few documents and steps.")
    args = parser.parse_args(argv)
    if args.tiny:
        for name, value in TINY_SETTINGS.items():
            setattr(args, name, value)
    return args


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def fudan_documents(with_more: bool) -> list[dict]:
    """The Fudan documents (both files unless `with_more` is False), each id once."""
    files = [FUDAN, *([FUDAN_MORE] if with_more and FUDAN_MORE.exists() else [])]
    rows = {row["id"]: row for path in files for row in read_jsonl(path)}
    return [{"id": row["id"], "label": row["label"], "text": row["text"]} for row in rows.values()]


def split_fudan(
    output_dir: Path, validation_fraction: float, seed: int, with_more: bool = True, per_class: int | None = None
) -> tuple[Path, Path]:
    """Stratified train/validation split of the Fudan documents (at most `per_class` of each topic), written as two
    JSON-lines files."""
    by_label = defaultdict(list)
    for row in fudan_documents(with_more):
        by_label[row["label"]].append(row)
    rng = random.Random(seed)
    train, validation = [], []
    for label in sorted(by_label):
        rows = by_label[label]
        rng.shuffle(rows)
        rows = rows[:per_class]
        cut = round(len(rows) * validation_fraction)
        validation += rows[:cut]
        train += rows[cut:]
    rng.shuffle(train)
    return write_jsonl(output_dir / "fudan_train.jsonl", train), write_jsonl(
        output_dir / "fudan_validation.jsonl", validation
    )


def write_pretraining_corpus(
    output_dir: Path, fudan_train_file: Path, max_paragraphs: int | None = None
) -> tuple[Path, Path]:
    """
    The pretraining text: People's Daily (one paragraph a row) and the texts of the Fudan training split (one
    document a row, as fine-tuning reads it), as JSON lines with a `source`; the last 5% of each source is written
    to the validation file instead (its masked-token accuracy).
    """
    paragraphs = [line for line in PEOPLES_DAILY.read_text(encoding="utf-8").splitlines() if line.strip()]
    paragraphs = paragraphs[:max_paragraphs]
    sources = {
        "peoples_daily": paragraphs,
        "fudan_train": [row["text"] for row in read_jsonl(fudan_train_file)],
    }
    train, validation = [], []
    for source, texts in sources.items():
        cut = len(texts) - round(len(texts) * PRETRAINING_HELD_OUT_FRACTION)
        train += [{"text": text, "source": source} for text in texts[:cut]]
        validation += [{"text": text, "source": source} for text in texts[cut:]]
    return (
        write_jsonl(output_dir / "pretraining_corpus_train.jsonl", train),
        write_jsonl(output_dir / "pretraining_corpus_validation.jsonl", validation),
    )


def naive_bayes_scores(train_file: Path, validation_file: Path) -> tuple[float, float, float]:
    """The reference: multinomial naive Bayes on character uni- and bigrams of the first 3,000 characters; returns
    (accuracy, macro-F1, seconds)."""
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


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_script(arguments: list[str], log_file: Path) -> tuple[float, float]:
    """Run one of the project's scripts in a subprocess (its output to `log_file`); returns its wall time and its
    CPU time (all cores), both in seconds: on a machine shared with other work the first says little on its own."""
    start, start_cpu = time.perf_counter(), children_cpu_seconds()
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
    return time.perf_counter() - start, children_cpu_seconds() - start_cpu


def device_arguments(device: str, bf16: str) -> list[str]:
    """The device and precision options of a run: on a CPU, `--bf16 auto` passes nothing (the scripts decide); on a
    GPU, tokenizing in 8 processes and loading batches in 4 (the host, not the GPU, limits these short runs)."""
    if device == "cuda":
        workers = ["--preprocessing_num_workers", "8", "--dataloader_num_workers", "4"]
        return ["--bf16", "false" if bf16 == "false" else "true", *workers]
    return ["--use_cpu", "true"] + ([] if bf16 == "auto" else ["--bf16", bf16])


def run_precision(run_dir: Path) -> str:
    """The arithmetic a finished run trained in ('bf16', 'fp16' or 'no'), from the table of its model card."""
    for line in (run_dir / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| mixed_precision |"):
            return line.split("|")[2].strip()
    return "unknown"


def pretrain(args: argparse.Namespace, output_dir: Path, corpus: tuple[Path, Path]) -> Pretraining:
    """Pretrain a RoFormer with run_mlm.py on the pretraining corpus (train and validation files)."""
    checkpoint = output_dir / "pretrained"
    overrides = (
        f"hidden_size={args.hidden_size},num_hidden_layers={args.num_hidden_layers},"
        f"num_attention_heads={args.num_attention_heads},intermediate_size={4 * args.hidden_size}"
    )
    arguments = [
        "run_mlm.py",
        *("--train_file", str(corpus[0]), "--validation_file", str(corpus[1])),
        *("--tokenizer_name", args.vocab, "--config_overrides", overrides),
        *("--max_seq_length", str(args.pretrain_seq_length), "--max_steps", str(args.pretrain_steps)),
        *("--per_device_train_batch_size", str(args.pretrain_batch_size)),
        *("--per_device_eval_batch_size", str(args.pretrain_batch_size)),
        *("--learning_rate", str(args.pretrain_learning_rate), "--weight_decay", "0.01"),
        *("--warmup_steps", str(args.pretrain_steps // 10), "--do_train", "--save_strategy", "no"),
        *("--output_dir", str(checkpoint), "--overwrite_output_dir", "--seed", str(args.split_seed)),
        *("--logging_steps", "50", "--report_to", "none", "--disable_tqdm", "true"),
        *device_arguments(args.device, args.bf16),
    ]
    seconds, cpu_seconds = run_script(arguments, output_dir / "pretrain.log")
    results = json.loads((checkpoint / "eval_results.json").read_text())
    return Pretraining(
        checkpoint, seconds, cpu_seconds, results["eval_loss"], results["eval_accuracy"], run_precision(checkpoint)
    )


def validation_ids(validation_file: Path) -> list[str]:
    return sorted(row["id"] for row in read_jsonl(validation_file))


def check_pretrained_split(checkpoint: Path, validation_file: Path) -> None:
    """A checkpoint this script pretrained must have left out the same validation documents (else they leaked)."""
    ids_file = checkpoint / HELD_OUT_IDS_FILE
    if not ids_file.exists():
        print(f"note: {checkpoint} has no {HELD_OUT_IDS_FILE}: make sure it never saw the validation documents")
    elif json.loads(ids_file.read_text()) != validation_ids(validation_file):
        raise SystemExit(
            f"{checkpoint} was pretrained on another Fudan split (its validation documents are in {ids_file}): use "
            "the --split_seed and --validation_fraction it was pretrained with, or pretrain again."
        )


def setting_arguments(setting: str, chunk_stride: int) -> list[str]:
    """'512' and '1024' truncate (keep the head); 'chunk512' pools windows of 512 tokens over the whole document."""
    if setting.startswith("chunk"):
        length = setting.removeprefix("chunk")
        return ["--max_seq_length", length, "--long_doc_strategy", "chunk", "--chunk_stride", str(chunk_stride)]
    return ["--max_seq_length", setting]


def finetune(args, checkpoint: Path, fudan_files: tuple[Path, Path], setting: str, seed: int, output_dir: Path):
    """Fine-tune and evaluate one setting with one seed; returns a `FinetuneRun`."""
    run_name = f"finetune_{setting}_seed{seed}"
    run_dir = output_dir / run_name
    arguments = [
        "run_classification.py",
        *("--model_name_or_path", str(checkpoint), "--train_file", str(fudan_files[0])),
        *("--validation_file", str(fudan_files[1]), "--do_train", "--do_eval"),
        *setting_arguments(setting, args.chunk_stride),
        *("--num_train_epochs", str(args.finetune_epochs), "--max_steps", str(args.finetune_max_steps)),
        *("--per_device_train_batch_size", str(args.batch_size), "--per_device_eval_batch_size", str(args.batch_size)),
        *("--learning_rate", str(args.learning_rate), "--warmup_steps", "0.1", "--save_strategy", "no"),
        *("--train_sampling_strategy", "group_by_length", "--output_dir", str(run_dir), "--overwrite_output_dir"),
        *("--seed", str(seed), "--logging_steps", "10", "--report_to", "none", "--disable_tqdm", "true"),
        *device_arguments(args.device, args.bf16),
    ]
    seconds, cpu_seconds = run_script(arguments, output_dir / f"{run_name}.log")
    metrics = json.loads((run_dir / "eval_results.json").read_text())
    accuracy, f1_macro = metrics["eval_accuracy"], metrics["eval_f1_macro"]
    return FinetuneRun(setting, seed, accuracy, f1_macro, seconds, cpu_seconds, run_precision(run_dir))


def describe(setting: str) -> str:
    if setting.startswith("chunk"):
        return f"chunks of {setting.removeprefix('chunk')} tokens, mean-pooled (whole document)"
    return f"max_seq_length {setting} (head)"


def mean_and_spread(values: list[float]) -> str:
    """'mean ± sample standard deviation (min-max)', or the one value."""
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f} ({min(values):.3f}–{max(values):.3f})"


def summary_table(naive_bayes: tuple[float, float, float], runs: list[FinetuneRun]) -> list[str]:
    """One row per setting: accuracy and macro-F1 over its seeds, the mean wall time of one of its runs."""
    lines = [
        "| model | runs | accuracy | macro-F1 | wall time per run (s) |",
        "| --- | --- | --- | --- | --- |",
        f"| naive Bayes, character 1-2-grams of the first 3,000 characters | 1 | {naive_bayes[0]:.3f} | "
        f"{naive_bayes[1]:.3f} | {naive_bayes[2]:.0f} |",
    ]
    for setting in dict.fromkeys(run.setting for run in runs):
        of_setting = [run for run in runs if run.setting == setting]
        accuracy = mean_and_spread([run.accuracy for run in of_setting])
        f1_macro = mean_and_spread([run.f1_macro for run in of_setting])
        seconds = statistics.mean(run.seconds for run in of_setting)
        lines.append(
            f"| RoFormer, {describe(setting)} | {len(of_setting)} | {accuracy} | {f1_macro} | {seconds:.0f} |"
        )
    return lines


def runs_table(pretraining: Pretraining | None, runs: list[FinetuneRun]) -> list[str]:
    """One row per run of a script: its scores, wall and CPU time, and the mixed precision it trained in."""
    lines = [
        "| run | seed | accuracy | macro-F1 | wall time (s) | CPU time (s) | mixed precision |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    if pretraining is not None:
        lines.append(
            f"| pretraining (eval loss {pretraining.eval_loss:.3f}, masked-token accuracy "
            f"{pretraining.masked_token_accuracy:.3f}) | | | | {pretraining.seconds:.0f} | "
            f"{pretraining.cpu_seconds:.0f} | {pretraining.precision} |"
        )
    for run in runs:
        lines.append(
            f"| {run.setting} | {run.seed} | {run.accuracy:.3f} | {run.f1_macro:.3f} | {run.seconds:.0f} | "
            f"{run.cpu_seconds:.0f} | {run.precision} |"
        )
    return lines


def write_results(output_dir: Path, naive_bayes, pretraining: Pretraining | None, runs: list[FinetuneRun]) -> str:
    """Write every run to results.json and the tables to results.md; returns the tables."""
    pretrained = None if pretraining is None else pretraining._asdict()
    results = {"naive_bayes": naive_bayes, "pretraining": pretrained, "runs": [run._asdict() for run in runs]}
    (output_dir / "results.json").write_text(json.dumps(results, default=str, indent=2) + "\n")
    tables = "\n".join([*summary_table(naive_bayes, runs), "", *runs_table(pretraining, runs)]) + "\n"
    (output_dir / "results.md").write_text(tables, encoding="utf-8")
    return tables


def pretrained_checkpoint(args, output_dir: Path, fudan_files: tuple[Path, Path]) -> tuple[Path, Pretraining | None]:
    """The checkpoint to fine-tune: `--pretrained` (checked against the split), or one pretrained here."""
    if args.pretrained is not None:
        check_pretrained_split(Path(args.pretrained), fudan_files[1])
        return Path(args.pretrained), None
    corpus = write_pretraining_corpus(output_dir, fudan_files[0], args.max_pretraining_paragraphs)
    pretraining = pretrain(args, output_dir, corpus)
    (pretraining.checkpoint / HELD_OUT_IDS_FILE).write_text(json.dumps(validation_ids(fudan_files[1])) + "\n")
    print(
        f"pretrained {args.pretrain_steps} steps in {pretraining.seconds:.0f} s (mixed precision: "
        f"{pretraining.precision}): masked-token accuracy {pretraining.masked_token_accuracy:.3f} -> {pretraining.checkpoint}",
        flush=True,
    )
    return pretraining.checkpoint, pretraining


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    output_dir = Path(args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    fudan_files = split_fudan(
        output_dir, args.validation_fraction, args.split_seed, not args.no_more_documents, args.max_documents_per_class
    )
    print(f"Fudan split: {len(read_jsonl(fudan_files[0]))} train, {len(read_jsonl(fudan_files[1]))} validation")
    naive_bayes = naive_bayes_scores(*fudan_files)
    checkpoint, pretraining = pretrained_checkpoint(args, output_dir, fudan_files)
    runs = []
    for seed in [int(seed) for seed in args.seeds.split(",")]:
        for setting in args.settings.split(","):
            runs.append(finetune(args, checkpoint, fudan_files, setting, seed, output_dir))
            print(f"{setting}, seed {seed}: accuracy {runs[-1].accuracy:.4f} in {runs[-1].seconds:.0f} s", flush=True)
            write_results(output_dir, naive_bayes, pretraining, runs)
    print("\n" + write_results(output_dir, naive_bayes, pretraining, runs), end="")


if __name__ == "__main__":
    main()
