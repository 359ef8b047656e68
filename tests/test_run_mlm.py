"""Tests of run_mlm.py: arguments, whole-word masking, packing, resuming, outputs and bad input (the stage schedule:
test_stages.py; 2-process runs: test_distributed.py)."""

import functools
import json
import logging
import math
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
import torch
from conftest import HANG_GUARD_S, PEOPLES_DAILY_SAMPLE, skip_unless_bf16_pays
from safetensors.torch import load_file
from transformers import (
    AutoModelForMaskedLM,
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

import run_mlm
from roformer_hf import RoFormerConfig, RoFormerJiebaTokenizer
from roformer_hf.modeling import RoFormerOnlyMLMHead
from roformer_hf.training.building import build_config, parse_config_overrides
from roformer_hf.training.cli import ModelArguments
from roformer_hf.training.errors import ScriptError
from roformer_hf.training.mlm import pretraining, text_corpus
from roformer_hf.training.mlm.results import PROBE_COUNT, fill_mask_expectation, fill_mask_probes
from roformer_hf.training.mlm.text_corpus import pack_into_blocks, split_long_text
from roformer_hf.training.mlm.whole_word_masking import WholeWordMaskCollator, predicted_token_ids
from roformer_hf.training.outputs.resume import RUN_SETTINGS_FILE

REPO_ROOT = Path(__file__).resolve().parents[1]
DEMO_VOCAB = REPO_ROOT / "data" / "demo_vocab.txt"
TINY_MODEL = "hidden_size=32,num_hidden_layers=1,num_attention_heads=2,intermediate_size=64"


@pytest.fixture(scope="module")
def tokenizer() -> RoFormerJiebaTokenizer:
    return RoFormerJiebaTokenizer(vocab_file=str(DEMO_VOCAB))


@pytest.fixture(scope="module")
def news_lines() -> list[str]:
    with open(PEOPLES_DAILY_SAMPLE, encoding="utf-8") as file:
        return [next(file).strip() for _ in range(300)]


@pytest.fixture
def news_file(tmp_path, news_lines) -> Path:
    path = tmp_path / "news.txt"
    path.write_text("\n".join(news_lines[:150]) + "\n", encoding="utf-8")
    return path


def run_arguments_of_precision(train_file: Path, output_dir: Path, *extra: str, bf16: str) -> list[str]:
    return run_arguments(train_file, output_dir, "--bf16", bf16, *extra)


def run_arguments(train_file: Path, output_dir: Path, *extra: str) -> list[str]:
    """Arguments of a tiny two-stage run that takes a few seconds."""
    return [
        *("--train_file", str(train_file), "--tokenizer_name", str(DEMO_VOCAB), "--config_overrides", TINY_MODEL),
        *("--stages", "32:8:4,64:4:4", "--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "8"),
        *("--validation_split_percentage", "10", "--max_eval_samples", "16", "--learning_rate", "1e-3"),
        *("--save_steps", "2", "--logging_steps", "1", "--output_dir", str(output_dir)),
        *("--cache_dir", str(output_dir.parent / "cache"), "--seed", "7"),
        *extra,
    ]


# --- the script's shape ---


# --- arguments ---


def test_arguments_from_json_and_yaml_files(tmp_path, news_file):
    arguments = {"train_file": str(news_file), "tokenizer_name": str(DEMO_VOCAB), "stages": "32:8:2", "seed": 3}
    (tmp_path / "args.json").write_text(json.dumps(arguments))
    (tmp_path / "args.yaml").write_text("\n".join(f"{key}: {value!r}" for key, value in arguments.items()))
    for name in ("args.json", "args.yaml"):
        _, data_args, masking_args, training_args = run_mlm.parse_mlm_arguments([str(tmp_path / name)])
        assert (data_args.train_file, masking_args.stages, training_args.seed) == (str(news_file), "32:8:2", 3)
        assert (training_args.do_train, training_args.output_dir) == (True, "outputs/run_mlm")


def test_no_whole_word_mask_flag(news_file):
    _, _, masking_args, _ = run_mlm.parse_mlm_arguments(["--train_file", str(news_file), "--no_whole_word_mask"])
    assert masking_args.whole_word_mask is False


def test_config_overrides_are_typed():
    overrides = parse_config_overrides(
        "hidden_size=256,hidden_dropout_prob=0,rotary_value=true,embedding_size=none,rope_parameters.rope_theta=20000",
        RoFormerConfig(),
    )
    assert overrides == {
        "hidden_size": 256,
        "hidden_dropout_prob": 0.0,
        "rotary_value": True,
        "embedding_size": None,
        "rope_parameters": {"rope_type": "default", "rope_theta": 20000.0},
    }
    config = build_config(ModelArguments(config_overrides="hidden_size=64,num_attention_heads=2"), vocab_size=100)
    assert (config.hidden_size, config.embedding_size, config.vocab_size) == (64, 64, 100)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ("hidden_size=big", "not a valid int"),
        ("hidden_sizes=3", "no field 'hidden_sizes'"),
        ("hidden_size", "not 'key=value'"),
        ("num_attention_heads=5", "not divisible"),
        # a key of a dict field given as a field: the spelling that sets it, which the config then checks
        ("rope_theta=-1", r"no field 'rope_theta' \(a key of rope_parameters: write rope_parameters.rope_theta=-1\)"),
        ("rope_parameters.rope_theta=-1", r"rope_parameters rope_theta must be > 0 \(a finite number\), got -1"),
    ],
)
def test_bad_config_overrides_are_named(overrides, message):
    with pytest.raises(ScriptError, match=message):
        build_config(ModelArguments(config_overrides=overrides))


# --- packing and masking ---


def test_packing_keeps_words_apart(tokenizer, news_lines):
    encoding = tokenizer(news_lines[:20], return_word_ids=True)
    blocks = pack_into_blocks(dict(encoding), block_length=50)
    all_ids = [token for ids in encoding["input_ids"] for token in ids]
    assert all(len(block) == 50 for block in blocks["input_ids"])
    assert [token for block in blocks["input_ids"] for token in block] == all_ids[: len(all_ids) // 50 * 50]
    # every (text, word) pair of the input gets its own id, numbered in order across the texts
    pairs = [(text, word) for text, words in enumerate(encoding["word_ids"]) for word in words]
    new_ids: dict[tuple[int, int], int] = {}
    expected = [new_ids.setdefault(pair, len(new_ids)) if pair[1] >= 0 else -1 for pair in pairs]
    assert [word for block in blocks["word_ids"] for word in block] == expected[: len(all_ids) // 50 * 50]


def masked_batch(tokenizer, news_lines, whole_word_mask=True, **collator_options):
    encoding = tokenizer(news_lines[:200], return_word_ids=True)
    blocks = pack_into_blocks(dict(encoding), block_length=64)
    examples = [{"input_ids": ids, "word_ids": words} for ids, words in zip(*blocks.values(), strict=True)]
    collator = WholeWordMaskCollator(tokenizer, whole_word_mask=whole_word_mask, **collator_options)
    torch.manual_seed(0)
    batch = collator(examples)
    return batch, torch.tensor(blocks["input_ids"]), torch.tensor(blocks["word_ids"])


def test_whole_word_mask_masks_every_piece_of_a_chosen_word_and_nothing_else(tokenizer, news_lines):
    batch, input_ids, word_ids = masked_batch(tokenizer, news_lines, mlm_probability=0.3, mask_replace_probability=1.0)
    chosen = batch["labels"] != -100
    assert torch.equal(batch["labels"][chosen], input_ids[chosen])
    assert torch.equal(batch["input_ids"], torch.where(chosen, tokenizer.mask_token_id, input_ids))
    assert not chosen[word_ids < 0].any()  # never [CLS], [SEP]
    multi_piece_words = 0
    for row in range(word_ids.shape[0]):
        for word in word_ids[row].unique().tolist():
            pieces = chosen[row][word_ids[row] == word]
            if word >= 0:
                assert pieces.all() or not pieces.any(), f"word {word} of block {row} is partly masked"
                multi_piece_words += int(len(pieces) > 1 and bool(pieces.all()))
    assert multi_piece_words > 20
    assert 0.25 < chosen[word_ids >= 0].float().mean() < 0.35


def test_token_mask_splits_words(tokenizer, news_lines):
    batch, _, word_ids = masked_batch(tokenizer, news_lines, whole_word_mask=False, mlm_probability=0.5)
    chosen = batch["labels"] != -100
    partly_masked = [
        pieces.any() and not pieces.all()
        for row in range(word_ids.shape[0])
        for word in word_ids[row].unique().tolist()
        if word >= 0
        for pieces in [chosen[row][word_ids[row] == word]]
    ]
    assert any(partly_masked)
    assert not chosen[word_ids < 0].any()


def test_mask_random_keep_shares(tokenizer, news_lines):
    batch, input_ids, _ = masked_batch(tokenizer, news_lines, mlm_probability=0.5)
    chosen = batch["labels"] != -100
    masked = (batch["input_ids"] == tokenizer.mask_token_id) & chosen
    kept = (batch["input_ids"] == input_ids) & chosen
    shares = torch.stack([masked.sum(), kept.sum(), (chosen & ~masked & ~kept).sum()]) / chosen.sum()
    torch.testing.assert_close(shares, torch.tensor([0.8, 0.1, 0.1]), atol=0.03, rtol=0)


def test_validation_masks_repeat(tokenizer, news_lines):
    encoding = tokenizer(news_lines[:10], return_word_ids=True)
    examples = [
        {"input_ids": ids, "word_ids": words, "mask_seed": index}
        for index, (ids, words) in enumerate(zip(encoding["input_ids"], encoding["word_ids"], strict=True))
    ]
    collator = WholeWordMaskCollator(tokenizer)
    first, second = collator(examples), collator(examples)
    assert all(torch.equal(first[key], second[key]) for key in first)
    assert torch.equal(first["attention_mask"].sum(1), torch.tensor([len(ids) for ids in encoding["input_ids"]]))


def test_training_masks_depend_on_seed_epoch_and_example_only(tokenizer, news_lines):
    encoding = tokenizer(news_lines[:8], return_word_ids=True)
    examples = [
        {"input_ids": ids, "word_ids": words, "example_index": index}
        for index, (ids, words) in enumerate(zip(encoding["input_ids"], encoding["word_ids"], strict=True))
    ]
    collator = WholeWordMaskCollator(tokenizer, mlm_probability=0.3, seed=5)
    first = collator(examples)["labels"]
    torch.manual_seed(123)  # the global RNG plays no part
    assert torch.equal(
        collator(examples[:4])["labels"], first[:4, : max(len(ids) for ids in encoding["input_ids"][:4])]
    )
    collator.epoch = 1
    assert not torch.equal(collator(examples)["labels"], first)


# --- data ---


def test_preprocess_packs_and_splits(tmp_path, news_file, tokenizer):
    model_args, data_args, _, training_args = run_mlm.parse_mlm_arguments(run_arguments(news_file, tmp_path / "out"))
    raw_datasets, _ = run_mlm.load_corpus(data_args, model_args)
    assert (len(raw_datasets["train"]), len(raw_datasets["validation"])) == (135, 15)
    examples = run_mlm.tokenize_corpus(raw_datasets, tokenizer, 48, data_args, training_args)
    assert {len(ids) for ids in examples["train"]["input_ids"]} == {48}
    assert examples["validation"]["mask_seed"][:3] == [0, 1, 2]


def test_a_long_line_is_split_at_sentence_ends(tmp_path, news_lines, monkeypatch):
    """A corpus on one line is cut into pieces before tokenization (the tokenizer's memory follows the length of one
    text); the pieces, in order, are the line, and each ends at a sentence end."""
    monkeypatch.setattr(text_corpus, "LONG_TEXT_CHARACTERS", 300)
    line = "".join(news_lines[:40])
    assert len(line) > 10 * 300
    (tmp_path / "one_line.txt").write_text(line + "\n", encoding="utf-8")
    arguments = run_arguments(tmp_path / "one_line.txt", tmp_path / "out", "--validation_split_percentage", "0")
    model_args, data_args, _, _ = run_mlm.parse_mlm_arguments(arguments)
    pieces = run_mlm.load_corpus(data_args, model_args)[0]["train"]["text"]
    assert "".join(pieces) == line
    assert len(pieces) >= 10 and max(map(len, pieces)) <= 300
    assert all(piece[-1] in text_corpus.SENTENCE_ENDS for piece in pieces[:-1])


def test_split_long_text_cuts_at_the_limit_without_a_sentence_end():
    assert split_long_text("一二三四五六七", 3) == ["一二三", "四五六", "七"]
    assert split_long_text("一。二三四。五", 4) == ["一。", "二三四。", "五"]
    assert split_long_text("短", 4) == ["短"]


def test_upper_case_extensions_are_read(tmp_path, news_lines):
    (tmp_path / "NEWS.TXT").write_text("\n".join(news_lines[:20]) + "\n", encoding="utf-8")
    model_args, data_args, _, _ = run_mlm.parse_mlm_arguments(run_arguments(tmp_path / "NEWS.TXT", tmp_path / "out"))
    raw_datasets, _ = run_mlm.load_corpus(data_args, model_args)
    assert len(raw_datasets["train"]) + len(raw_datasets["validation"]) == 20


def test_a_full_cache_disk_is_named(tmp_path, news_file, monkeypatch):
    def full_disk(*args, **kwargs):
        raise datasets.exceptions.DatasetGenerationError("An error occurred") from OSError(
            28, "No space left on device"
        )

    monkeypatch.setattr(datasets, "load_dataset", full_disk)
    model_args, data_args, _, _ = run_mlm.parse_mlm_arguments(run_arguments(news_file, tmp_path / "out"))
    with pytest.raises(ScriptError, match=r"^cannot write --cache_dir .*cache \(No space left on device\)"):
        run_mlm.load_corpus(data_args, model_args)


def test_csv_texts_that_pandas_reads_as_missing_are_kept(tmp_path):
    (tmp_path / "news.csv").write_text("text\n新华社北京电\nNA\nnull\n人民日报\n", encoding="utf-8")
    arguments = run_arguments(tmp_path / "news.csv", tmp_path / "out", "--validation_split_percentage", "0")
    model_args, data_args, _, _ = run_mlm.parse_mlm_arguments(arguments)
    assert run_mlm.load_corpus(data_args, model_args)[0]["train"]["text"] == [
        "新华社北京电",
        "NA",
        "null",
        "人民日报",
    ]


def test_line_by_line_truncates(tmp_path, news_file, tokenizer):
    model_args, data_args, _, training_args = run_mlm.parse_mlm_arguments(
        run_arguments(news_file, tmp_path / "out", "--line_by_line")
    )
    examples = run_mlm.tokenize_corpus(
        run_mlm.load_corpus(data_args, model_args)[0], tokenizer, 40, data_args, training_args
    )
    lengths = [len(ids) for ids in examples["train"]["input_ids"]]
    assert len(lengths) == 135 and max(lengths) == 40 and min(lengths) < 40
    assert all(ids[-1] == tokenizer.sep_token_id for ids in examples["train"]["input_ids"])


def test_streaming_and_saved_dataset(tmp_path, news_lines, tokenizer):
    jsonl = tmp_path / "news.jsonl"
    jsonl.write_text("\n".join(json.dumps({"id": i, "body": line}) for i, line in enumerate(news_lines)), "utf-8")
    common = ["--tokenizer_name", str(DEMO_VOCAB), "--text_column_name", "body", "--max_steps", "3"]
    model_args, data_args, _, training_args = run_mlm.parse_mlm_arguments(
        ["--train_file", str(jsonl), "--streaming", *common]
    )
    streamed = run_mlm.tokenize_corpus(
        run_mlm.load_corpus(data_args, model_args)[0], tokenizer, 32, data_args, training_args
    )
    assert [len(example["input_ids"]) for _, example in zip(range(5), streamed["train"], strict=False)] == [32] * 5
    datasets.Dataset.from_list([{"body": line} for line in news_lines]).save_to_disk(tmp_path / "saved")
    model_args, data_args, _, _ = run_mlm.parse_mlm_arguments(["--dataset_name", str(tmp_path / "saved"), *common])
    raw_datasets, _ = run_mlm.load_corpus(data_args, model_args)
    assert (len(raw_datasets["train"]), len(raw_datasets["validation"])) == (285, 15)


# --- bad input: one clear line, no traceback ---


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda args, tmp: args.__setitem__(1, str(tmp / "missing.txt")), "no such file"),
        (lambda args, tmp: (tmp / "empty.txt").touch() or args.__setitem__(1, str(tmp / "empty.txt")), "is empty"),
        (lambda args, tmp: args.extend(["--stages", "64:8"]), "--stages"),
        (lambda args, tmp: args.extend(["--stages", "4:8:2"]), "at least 8"),
        (lambda args, tmp: args.__setitem__(args.index("--stages") + 1, "4:8:2"), "max_seq_length 4 is too short"),
        (
            lambda args, tmp: (
                args.__delitem__(slice(args.index("--stages"), args.index("--stages") + 2))
                or args.extend(["--max_seq_length", "7"])
            ),
            "max_seq_length 7 is too short",
        ),
        (lambda args, tmp: args.extend(["--stages", "32:6:2"]), "not a multiple"),
        (lambda args, tmp: args.extend(["--mlm_probability", "1.5"]), "mlm_probability"),
    ],
)
def test_bad_input_raises_script_error(tmp_path, news_file, change, message):
    arguments = run_arguments(news_file, tmp_path / "out")
    change(arguments, tmp_path)
    with pytest.raises(ScriptError, match=message):
        run_mlm.main(arguments)


def test_unknown_text_column_and_blank_file(tmp_path):
    jsonl = tmp_path / "data.jsonl"
    jsonl.write_text('{"content": "人民日报"}\n', encoding="utf-8")
    with pytest.raises(ScriptError, match=r"no column 'text'.*content"):
        run_mlm.main(run_arguments(jsonl, tmp_path / "out"))
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\n", encoding="utf-8")
    with pytest.raises(ScriptError, match="no text"):
        run_mlm.main(run_arguments(blank, tmp_path / "out"))


def test_vocab_without_mask_token(tmp_path, news_file):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(line for line in DEMO_VOCAB.open(encoding="utf-8") if line.strip() != "[MASK]"), "utf-8")
    arguments = run_arguments(news_file, tmp_path / "out")
    arguments[3] = str(vocab)
    with pytest.raises(ScriptError, match=r"\[MASK\]"):
        run_mlm.main(arguments)


def test_command_line_error_is_one_line(tmp_path, news_file):
    arguments = run_arguments(news_file, tmp_path / "out", "--stages", "128:x:1")
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "run_mlm.py"), *arguments],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: --stages: '128:x:1'")


# --- full runs ---


def test_two_stage_run_saves_a_loadable_model(tmp_path, news_file):
    output_dir = tmp_path / "out"
    table = run_mlm.main(run_arguments(news_file, output_dir))
    assert [(row["stage"], row["max_seq_length"], row["global_batch_size"], row["steps"]) for row in table] == [
        (1, 32, 8, 4),
        (2, 64, 4, 4),
    ]
    results = json.loads((output_dir / "all_results.json").read_text())
    assert {"eval_loss", "eval_accuracy", "perplexity", "train_loss"} <= set(results)
    assert results["eval_loss"] == table[-1]["eval_loss"]
    assert json.loads((output_dir / "stage-2" / "trainer_state.json").read_text())["global_step"] == 4
    assert (output_dir / "loss_curve.png").stat().st_size > 0
    card = (output_dir / "README.md").read_text()
    assert "run_mlm.py" in card
    # the card says what the run did: its lengths and steps, the file it read (no folder of this machine)
    assert (
        "| trained length | 32 then 64 tokens" in card and "8 optimizer steps on inputs of 32 then 64 tokens" in card
    )
    assert "| max_steps | 8 |" in card and "num_train_epochs" not in card and "1536" not in card
    assert "- news.txt" in card and str(tmp_path) not in card
    # the precision the validation scores were computed in, in the results and the card: what the run chose
    chosen = json.loads((output_dir / "stage-2" / "checkpoint-4" / RUN_SETTINGS_FILE).read_text())["mixed_precision"]
    precision = "bf16 autocast" if chosen == "bf16" else "float32"
    assert results["eval_precision"] == precision and f"Results (computed in {precision}):" in card

    model = AutoModelForMaskedLM.from_pretrained(output_dir)
    tokenizer = AutoTokenizer.from_pretrained(output_dir)
    assert model.config.auto_map["AutoModelForMaskedLM"].endswith("RoFormerForMaskedLM")
    assert type(tokenizer).__name__ == "RoFormerJiebaTokenizer"
    assert tokenizer.model_max_length == 64  # the longest trained length: truncation=True cuts there
    checkpoint_tokenizer = AutoTokenizer.from_pretrained(output_dir / "stage-2" / "checkpoint-4")
    assert checkpoint_tokenizer.model_max_length == 64
    final_weights = load_file(output_dir / "model.safetensors")
    stage_weights = load_file(output_dir / "stage-2" / "checkpoint-4" / "model.safetensors")
    assert all(torch.equal(final_weights[name], stage_weights[name]) for name in final_weights)


def test_sparse_prediction_trains_and_evaluates_like_dense(tmp_path, news_file):
    """The head at the masked positions only (the default): the same loss and gradients, so the same run and the
    same metrics as --sparse_prediction false."""
    stages = ["--stages", "32:4:3", "--save_strategy", "no"]
    dense = run_mlm.main(run_arguments(news_file, tmp_path / "dense", *stages, "--sparse_prediction", "false"))
    sparse = run_mlm.main(run_arguments(news_file, tmp_path / "sparse", *stages))
    for run in ("sparse", "dense"):  # a setting of the run, not of the model it saves
        assert "sparse_prediction" not in json.loads((tmp_path / run / "config.json").read_text())
    assert sparse[-1]["eval_accuracy"] == dense[-1]["eval_accuracy"]
    assert sparse[-1]["eval_loss"] == pytest.approx(dense[-1]["eval_loss"], abs=1e-4)
    assert sparse[-1]["train_loss"] == pytest.approx(dense[-1]["train_loss"], abs=1e-4)


def test_sparse_and_dense_evaluation_agree_on_the_same_weights(tmp_path, news_file):
    """Evaluating one checkpoint with the head at the masked positions only and at every position: the same
    masked-token accuracy and loss; and the saved sparse checkpoint still gives logits at every position without
    labels (fill-mask) or with them."""
    trained = ["--stages", "32:4:20", "--save_strategy", "no", "--learning_rate", "1e-2"]
    run_mlm.main(run_arguments(news_file, tmp_path / "trained", *trained))
    evaluate_only = ["--model_name_or_path", str(tmp_path / "trained"), "--do_train", "false", "--stages", "32:4:3"]
    sparse = run_mlm.main(run_arguments(news_file, tmp_path / "sparse", *evaluate_only))[-1]
    dense_only = ["--sparse_prediction", "false"]
    dense = run_mlm.main(run_arguments(news_file, tmp_path / "dense", *evaluate_only, *dense_only))[-1]
    assert sparse["eval_accuracy"] == dense["eval_accuracy"] > 0
    assert sparse["eval_loss"] == pytest.approx(dense["eval_loss"], abs=1e-6)
    card = (tmp_path / "sparse" / "README.md").read_text(encoding="utf-8")  # an evaluation claims no training
    assert "records no training run" in card and "Trained by" not in card and str(tmp_path) not in card
    assert not (tmp_path / "sparse" / "loss_curve.png").exists()
    model = AutoModelForMaskedLM.from_pretrained(tmp_path / "trained")
    assert model.config.sparse_prediction is False
    input_ids = torch.tensor([[2, 10, 11, 3]])
    assert model(input_ids=input_ids).logits.shape == (1, 4, model.config.vocab_size)
    labels = torch.tensor([[-100, 10, -100, -100]])
    assert model(input_ids=input_ids, labels=labels).logits.shape == (1, 4, model.config.vocab_size)


def record_mlm_head_inputs(monkeypatch) -> list[tuple[bool, int]]:
    """(model in training mode, dimensions of the input) at every call of the MLM head from now on: 2 dimensions
    when only the masked positions reach the head (sparse prediction), 3 when every position does."""
    calls = []
    head_forward = RoFormerOnlyMLMHead.forward

    def recording_forward(head: RoFormerOnlyMLMHead, hidden_states: torch.Tensor) -> torch.Tensor:
        calls.append((head.training, hidden_states.dim()))
        return head_forward(head, hidden_states)

    monkeypatch.setattr(RoFormerOnlyMLMHead, "forward", recording_forward)
    return calls


def evaluate_as_transformers_run_mlm(model_dir: Path, texts: list[str], output_dir: Path) -> dict[str, float]:
    """The evaluation of transformers' examples/pytorch/language-modeling/run_mlm.py, written out: the Trainer keeps
    the argmax of the logits (`preprocess_logits_for_metrics`), `compute_metrics` compares it with the labels at the
    masked positions, so both must be (batch, length)."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForMaskedLM.from_pretrained(model_dir)
    eval_dataset = datasets.Dataset.from_dict(dict(tokenizer(texts, truncation=True, max_length=32)))

    def preprocess_logits_for_metrics(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return (logits[0] if isinstance(logits, tuple) else logits).argmax(dim=-1)

    def compute_metrics(eval_predictions) -> dict[str, float]:
        predictions, labels = eval_predictions
        predictions, labels = predictions.reshape(-1), labels.reshape(-1)
        masked = labels != -100
        return {"accuracy": float((predictions[masked] == labels[masked]).mean())}

    trainer = Trainer(
        model=model,
        args=TrainingArguments(
            output_dir=str(output_dir), per_device_eval_batch_size=4, report_to="none", dataloader_pin_memory=False
        ),
        eval_dataset=eval_dataset,
        data_collator=DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, seed=0),
        compute_metrics=compute_metrics,
        preprocess_logits_for_metrics=preprocess_logits_for_metrics,
    )
    return trainer.evaluate()


def test_saved_models_answer_transformers_mlm_evaluation_while_training_stays_sparse(
    tmp_path, news_file, news_lines, monkeypatch
):
    """Sparse prediction is a setting of the run: the model trains with the head at the masked positions only, but
    the final model and every checkpoint load with logits at every position, labels or not."""
    head_calls = record_mlm_head_inputs(monkeypatch)
    output_dir = tmp_path / "run"
    run_mlm.main(run_arguments(news_file, output_dir))
    training_calls = [dimensions for training, dimensions in head_calls if training]
    # 4 steps of 2 batches (gradient accumulation), then 4 of 1: each with the masked tokens only
    assert len(training_calls) == 12 and set(training_calls) == {2}
    saved_configs = [output_dir / "config.json", *output_dir.glob("stage-*/checkpoint-*/config.json")]
    assert len(saved_configs) == 5  # the final model and checkpoints 2 and 4 of each stage
    for config_file in saved_configs:
        assert "sparse_prediction" not in json.loads(config_file.read_text()), config_file
    assert "sparse" not in (output_dir / "README.md").read_text(encoding="utf-8")
    for model_dir in (output_dir, output_dir / "stage-1" / "checkpoint-2"):
        metrics = evaluate_as_transformers_run_mlm(model_dir, news_lines[200:210], tmp_path / "evaluation")
        assert 0 <= metrics["eval_accuracy"] <= 1 and math.isfinite(metrics["eval_loss"])
        model = AutoModelForMaskedLM.from_pretrained(model_dir)
        input_ids = torch.tensor([[2, 10, 11, 12, 3]])
        labels = torch.tensor([[-100, 10, -100, 12, -100]])
        assert model(input_ids=input_ids, labels=labels).logits.shape == (1, 5, model.config.vocab_size)


@pytest.mark.parametrize(("sparse_prediction", "dimensions"), [("true", 2), ("false", 3)])
def test_a_resumed_run_predicts_as_its_own_setting_says(
    tmp_path, news_file, monkeypatch, sparse_prediction, dimensions
):
    """The checkpoint does not say whether the run trained sparse; the resumed run's --sparse_prediction decides."""
    output_dir = tmp_path / "run"
    arguments = run_arguments(news_file, output_dir, "--stages", "32:4:4")
    build_trainer = pretraining.build_stage_trainer

    def build_interrupted_trainer(*args, **kwargs):
        trainer = build_trainer(*args, **kwargs)
        trainer.add_callback(InterruptAt(str(output_dir / "stage-1"), 3))
        return trainer

    monkeypatch.setattr(pretraining, "build_stage_trainer", build_interrupted_trainer)
    with pytest.raises(Interrupt):
        run_mlm.main(arguments)
    monkeypatch.setattr(pretraining, "build_stage_trainer", build_trainer)
    head_calls = record_mlm_head_inputs(monkeypatch)
    run_mlm.main([*arguments, "--resume_from_checkpoint", "true", "--sparse_prediction", sparse_prediction])
    training_calls = [input_dimensions for training, input_dimensions in head_calls if training]
    assert training_calls == [dimensions] * 2  # steps 3 and 4, after checkpoint-2


def test_predicted_token_ids_puts_sparse_predictions_back_in_place():
    labels = torch.tensor([[-100, 5, -100], [7, -100, 2]])
    sparse_logits = torch.nn.functional.one_hot(torch.tensor([5, 3, 2]), 9).float()  # rows of labels != -100
    expected = torch.tensor([[-100, 5, -100], [3, -100, 2]])
    assert torch.equal(predicted_token_ids(sparse_logits, labels), expected)
    dense_logits = torch.nn.functional.one_hot(torch.tensor([[1, 5, 1], [3, 1, 2]]), 9).float()
    assert torch.equal(predicted_token_ids((dense_logits,), labels), torch.tensor([[1, 5, 1], [3, 1, 2]]))


def test_a_bf16_run_saves_float32_weights_and_records_its_precision(tmp_path, news_file):
    """bf16 mixed precision computes in bf16 under autocast; the weights, checkpoints and saved model stay float32,
    and the run's settings and model card say how it trained."""
    skip_unless_bf16_pays()
    output_dir = tmp_path / "out"
    run_mlm.main(run_arguments(news_file, output_dir, "--stages", "32:8:2", "--bf16", "true"))
    for weights in (output_dir / "model.safetensors", output_dir / "stage-1" / "checkpoint-2" / "model.safetensors"):
        assert {tensor.dtype for tensor in load_file(weights).values()} == {torch.float32}
    settings = json.loads((output_dir / "stage-1" / "checkpoint-2" / RUN_SETTINGS_FILE).read_text())
    assert settings["mixed_precision"] == "bf16"
    assert "| mixed_precision | bf16 |" in (output_dir / "README.md").read_text()


def test_bf16_and_activation_checkpointing_pass_through(tmp_path, news_file):
    extra = ["--stages", "32:4:2", "--bf16", "--use_cpu", "--activation_checkpointing"]
    table = run_mlm.main(run_arguments(news_file, tmp_path / "out", *extra))
    assert math.isfinite(table[-1]["train_loss"]) and math.isfinite(table[-1]["eval_loss"])


def test_gradient_accumulation_matches_a_larger_batch(tmp_path, news_file):
    """A global batch of 8 as 1 x 8 or as 2 accumulated x 4 gives the same loss and the same weights (in float32:
    bf16, the default on a CPU that has it, rounds the two half batches' products differently from the whole's)."""
    no_dropout = TINY_MODEL + ",hidden_dropout_prob=0,attention_probs_dropout_prob=0"
    tables, weights = [], []
    for per_device in ("8", "4"):
        output_dir = tmp_path / f"batch-{per_device}"
        arguments = run_arguments(
            news_file, output_dir, "--stages", "32:8:2", "--per_device_train_batch_size", per_device
        )
        arguments[arguments.index(TINY_MODEL)] = no_dropout
        tables.append(run_mlm.main([*arguments, "--do_eval", "False", "--bf16", "false"]))
        weights.append(load_file(output_dir / "model.safetensors"))
    assert tables[0][0]["train_loss"] == pytest.approx(tables[1][0]["train_loss"], rel=1e-5)
    for name, weight in weights[0].items():
        torch.testing.assert_close(weight, weights[1][name], rtol=1e-5, atol=1e-6)


class Interrupt(Exception):
    pass


class InterruptAt(TrainerCallback):
    def __init__(self, output_dir: str, step: int):
        self.output_dir, self.step = output_dir, step

    def on_step_end(self, args, state, control, **kwargs):
        if args.output_dir == self.output_dir and state.global_step == self.step:
            raise Interrupt


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stage", "step", "bf16"),
    [(2, 3, "false"), (2, 1, "false"), (2, 3, "true")],
    ids=["inside-stage", "at-stage-boundary", "inside-stage-bf16"],
)
def test_interrupted_run_resumes_to_the_same_weights(tmp_path, news_file, monkeypatch, stage, step, bf16):
    """Exactly the same weights (CPU, float32 or bf16 mixed precision): resuming restores weights, optimizer,
    schedule, RNG and data order."""
    if bf16 == "true":
        skip_unless_bf16_pays()
    arguments = functools.partial(run_arguments_of_precision, bf16=bf16)
    run_mlm.main(arguments(news_file, tmp_path / "straight"))

    interrupted = tmp_path / "interrupted"
    build_trainer = pretraining.build_stage_trainer

    def build_interrupted_trainer(*args, **kwargs):
        trainer = build_trainer(*args, **kwargs)
        trainer.add_callback(InterruptAt(str(interrupted / f"stage-{stage}"), step))
        return trainer

    monkeypatch.setattr(pretraining, "build_stage_trainer", build_interrupted_trainer)
    with pytest.raises(Interrupt):
        run_mlm.main(arguments(news_file, interrupted))
    monkeypatch.setattr(pretraining, "build_stage_trainer", build_trainer)
    run_mlm.main(arguments(news_file, interrupted, "--resume_from_checkpoint", "True"))

    straight_weights = load_file(tmp_path / "straight" / "model.safetensors")
    resumed_weights = load_file(interrupted / "model.safetensors")
    for name, weight in straight_weights.items():
        assert torch.equal(weight, resumed_weights[name]), name


def test_streamed_evaluation_is_bounded_by_default(tmp_path, news_file, tokenizer, monkeypatch, caplog):
    """`--streaming` without `--max_eval_samples` evaluates the first STREAMING_MAX_EVAL_SAMPLES blocks, and says so."""
    monkeypatch.setattr(run_mlm, "STREAMING_MAX_EVAL_SAMPLES", 3)
    common = ["--train_file", str(news_file), "--tokenizer_name", str(DEMO_VOCAB), "--max_steps", "2"]
    model_args, data_args, _, training_args = run_mlm.parse_mlm_arguments([*common, "--streaming"])
    with caplog.at_level(logging.WARNING):
        run_mlm.bound_streamed_evaluation(data_args)
    assert data_args.max_eval_samples == 3
    assert "--streaming: each evaluation reads the first 3 validation examples only" in caplog.text
    examples = run_mlm.tokenize_corpus(
        run_mlm.load_corpus(data_args, model_args)[0], tokenizer, 16, data_args, training_args
    )
    assert len(list(examples["validation"])) == 3
    for given in (["--streaming", "--max_eval_samples", "5"], []):  # a given number, or no streaming: unchanged
        data_args = run_mlm.parse_mlm_arguments([*common, *given])[1]
        run_mlm.bound_streamed_evaluation(data_args)
        assert data_args.max_eval_samples == (5 if given else None)


def test_fill_mask_guesses_of_a_briefly_trained_model_come_with_what_to_expect():
    line = fill_mask_expectation(0.0837)
    assert line.startswith("(masked-token accuracy 0.084: a model this briefly trained guesses the text's most")
    assert fill_mask_expectation(0.3) is None and fill_mask_expectation(None) is None


CAR_REVIEWS = [
    "油耗",  # too short to read a context in: passed over
    "这款车的油耗比较低，市区开起来也很省心。后排空间一般。",
    "刹车有点软，高速上超车的时候动力明显不够。",
    "内饰做工不错，但是中控屏幕反应太慢了，导航经常卡顿。",
    "隔音效果很好，高速行驶时车内依然安静。",
]


@pytest.mark.parametrize("with_validation", [True, False])
def test_fill_mask_probes_are_sentences_of_the_runs_own_text(tokenizer, news_lines, with_validation):
    """The closing fill-mask guesses read the run's validation text (its training text where it has none), not
    People's Daily whatever the corpus: the first sentence of a text, its middle word masked."""
    corpus = {"train": datasets.Dataset.from_dict({"text": news_lines[:5] if with_validation else CAR_REVIEWS})}
    if with_validation:
        corpus["validation"] = datasets.Dataset.from_dict({"text": CAR_REVIEWS})
    probes = fill_mask_probes(datasets.DatasetDict(corpus), tokenizer)
    assert len(probes) == PROBE_COUNT
    assert probes[0] == "这款车的油耗比较[MASK]，市区开起来也很省心。"  # the first sentence, its middle word masked
    for probe, review in zip(probes, CAR_REVIEWS[1:], strict=False):
        assert probe.count(tokenizer.mask_token) == 1
        before, after = probe.split(tokenizer.mask_token)
        assert review.startswith(before) and after in review and len(before) > 0 and len(after) > 0


def test_what_varies_from_batch_to_batch_is_said_for_torch_compile():
    """`--torch_compile` compiles once for every length where stages differ in length or the sparse head scores a
    different number of tokens in each batch; one fixed shape keeps torch's default (tests/test_compile.py)."""
    from roformer_hf.training.mlm.stages import parse_stages

    two_lengths, one_length = parse_stages("64:16:10,128:16:10"), parse_stages("64:16:10")
    assert pretraining.varying_shapes(two_lengths, sparse_prediction=False) == "stages of 64 and 128 tokens"
    assert pretraining.varying_shapes(one_length, sparse_prediction=True).startswith("sparse prediction scores")
    assert pretraining.varying_shapes(one_length, sparse_prediction=False) is None
