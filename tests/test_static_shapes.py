"""Static shapes for compiled training (`roformer_hf.training.static_shapes`, `roformer_hf.modeling`): padding
a partial batch changes neither loss nor gradients, the fixed prediction slots give the loss of the labelled tokens,
and a compiled run of either script compiles one graph per shape and mode, never again (dynamo's counters, with the
"aot_eager" backend, which traces as inductor does without generating kernels)."""

import json

import pytest
import torch
from conftest import CAIL_SAMPLE, PEOPLES_DAILY_SAMPLE, ROFORMER_VOCAB, TINY
from torch._dynamo.utils import counters
from transformers import TrainerCallback

import run_classification
import run_mlm
from roformer_hf import RoFormerConfig, RoFormerForMaskedLM, RoFormerForSequenceClassification
from roformer_hf.modeling import labelled_tokens, slot_count
from roformer_hf.training.mlm import pretraining
from roformer_hf.training.mlm.whole_word_masking import WholeWordMaskCollator, predicted_token_ids
from roformer_hf.training.static_shapes import StaticShapes, length_buckets

ATOL = 1e-6
TINY_MODEL = "hidden_size=32,num_hidden_layers=1,num_attention_heads=2,intermediate_size=64"
NO_DROPOUT = {**TINY, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


def test_length_buckets():
    assert length_buckets(512) == (64, 128, 256, 512)
    assert length_buckets(100) == (64, 100)
    assert length_buckets(48) == (48,)
    shapes = StaticShapes(length_buckets(512), pad_token_id=0)
    assert [shapes.length_for(length) for length in (1, 64, 65, 300, 512, 600)] == [64, 64, 128, 512, 512, 600]


def test_slot_count():
    assert slot_count(32 * 512, 0.15) == 2736  # 2,458 expected
    assert slot_count(64, 0.15) == 32
    assert slot_count(8, 0.5) == 8  # never more slots than tokens
    assert all(slot_count(tokens, 0.15) % 8 == 0 for tokens in (64, 1000, 4096))


def partial_batch(rows: int = 3, length: int = 20) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, TINY["vocab_size"], (rows, length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 15:] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def loss_and_gradients(model: torch.nn.Module, batch: dict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    loss = model(**batch).loss
    loss.backward()
    return loss.detach(), {name: parameter.grad.clone() for name, parameter in model.named_parameters()}


def assert_same_loss_and_gradients(model: torch.nn.Module, batch: dict, padded: dict) -> None:
    expected_loss, expected = loss_and_gradients(model, batch)
    actual_loss, actual = loss_and_gradients(model, padded)
    torch.testing.assert_close(actual_loss, expected_loss, atol=ATOL, rtol=0)
    for name, gradient in expected.items():
        torch.testing.assert_close(actual[name], gradient, atol=ATOL, rtol=1e-5, msg=name)


def test_padding_a_partial_classification_batch_changes_neither_loss_nor_gradients():
    torch.manual_seed(0)
    model = RoFormerForSequenceClassification(RoFormerConfig(**NO_DROPOUT, num_labels=3)).train()
    batch = {**partial_batch(), "labels": torch.tensor([2, 0, 1])}
    padded = StaticShapes(length_buckets(128, smallest=32), pad_token_id=0).pad(batch, rows=8)
    assert padded["input_ids"].shape == (8, 32)
    assert padded["labels"].tolist() == [2, 0, 1] + [-100] * 5
    assert_same_loss_and_gradients(model, batch, padded)


@pytest.mark.parametrize("slot_rate", [None, 0.15], ids=["labelled", "slots"])
def test_padding_a_partial_mlm_batch_changes_neither_loss_nor_gradients(slot_rate):
    """Also: the fixed slots give the loss and gradients of the labelled tokens alone."""
    torch.manual_seed(0)
    model = RoFormerForMaskedLM(RoFormerConfig(**NO_DROPOUT, sparse_prediction=True)).train()
    batch = partial_batch()
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, [2, 3]], labels[2, 9] = 7, 11
    batch["labels"] = labels
    padded = StaticShapes((64,), pad_token_id=0).pad(batch, rows=8)
    assert padded["labels"].shape == (8, 64) and (padded["labels"] != -100).sum() == 3
    expected = loss_and_gradients(model, batch)
    model.config.prediction_slot_rate = slot_rate
    actual = loss_and_gradients(model, padded)
    torch.testing.assert_close(actual[0], expected[0], atol=ATOL, rtol=0)
    for name, gradient in expected[1].items():
        torch.testing.assert_close(actual[1][name], gradient, atol=ATOL, rtol=1e-5, msg=name)


def test_slots_hold_the_labelled_tokens_first_in_order():
    hidden_states = torch.arange(2 * 8, dtype=torch.float).view(2, 8, 1)
    labels = torch.full((2, 8), -100)
    labels[0, 5], labels[1, 1], labels[1, 6] = 3, 4, 5
    states, slot_labels = labelled_tokens(hidden_states, labels, 0.15)
    assert slot_labels.shape == (slot_count(16, 0.15),)
    assert slot_labels[:3].tolist() == [3, 4, 5] and (slot_labels[3:] == -100).all()
    assert states[:3, 0].tolist() == [5.0, 9.0, 14.0]
    predictions = predicted_token_ids(torch.nn.functional.one_hot(slot_labels.clamp(min=0), 10).float(), labels)
    assert predictions.tolist() == labels.tolist()


def test_the_collator_keeps_the_chosen_tokens_within_the_slots(tokenizer):
    examples = [
        {"input_ids": list(range(10, 74)), "word_ids": [word // 2 for word in range(64)], "example_index": index}
        for index in range(4)
    ]
    uncapped = WholeWordMaskCollator(tokenizer, mlm_probability=0.5, seed=3)(examples)["labels"]
    capped = WholeWordMaskCollator(tokenizer, mlm_probability=0.5, seed=3, prediction_slot_rate=0.05)(examples)
    slots = slot_count(4 * 64, 0.05)
    assert (uncapped != -100).sum() > slots
    assert (capped["labels"] != -100).sum() == slots
    assert ((capped["labels"] == -100) | (capped["labels"] == uncapped)).all()  # a subset of the chosen tokens
    # at the run's own rate the slots hold every chosen token: the masks are those of the uncapped collator
    at_rate = WholeWordMaskCollator(tokenizer, mlm_probability=0.5, seed=3, prediction_slot_rate=0.5)(examples)
    assert torch.equal(at_rate["labels"], uncapped)


# --- one compile per shape, in the scripts ---


class GraphsPerEpoch(TrainerCallback):
    """Records dynamo's count of compiled graphs as every epoch begins (the Trainer evaluates after on_epoch_end)."""

    def __init__(self):
        self.graphs = []

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.graphs.append(counters["stats"]["unique_graphs"])


def recording(build, recorder: GraphsPerEpoch):
    def build_and_record(*args, **kwargs):
        trainer = build(*args, **kwargs)
        trainer.add_callback(recorder)
        return trainer

    return build_and_record


COMPILED = ("--torch_compile", "true", "--torch_compile_backend", "aot_eager", "--report_to", "none")


def mlm_arguments(tmp_path) -> list[str]:
    """Two epochs of 13 blocks in batches of 4 (the last of 1 row), evaluation on 6 blocks in batches of 4."""
    text = tmp_path / "news.txt"
    text.write_text("".join(PEOPLES_DAILY_SAMPLE.open(encoding="utf-8").readlines()[:150]), encoding="utf-8")
    return [
        *("--train_file", str(text), "--tokenizer_name", str(ROFORMER_VOCAB.parent / "demo_vocab.txt")),
        *("--config_overrides", TINY_MODEL),
        *("--max_seq_length", "32", "--max_train_samples", "13", "--max_eval_samples", "6", "--num_train_epochs", "2"),
        *("--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "4", "--eval_strategy", "epoch"),
        *("--save_strategy", "no", "--output_dir", str(tmp_path / "out"), "--cache_dir", str(tmp_path / "cache")),
        *COMPILED,
    ]


def test_run_mlm_compiles_one_training_and_one_evaluation_graph(tmp_path, monkeypatch, caplog):
    """Sparse prediction, a partial last batch, evaluation: two graphs, both compiled before the second epoch."""
    recorder = GraphsPerEpoch()
    monkeypatch.setattr(pretraining, "build_stage_trainer", recording(pretraining.build_stage_trainer, recorder))
    with caplog.at_level("WARNING", logger="roformer_hf.training.static_shapes"):
        run_mlm.main(mlm_arguments(tmp_path))
    [line] = [record.getMessage() for record in caplog.records if record.name.endswith("static_shapes")]
    assert "batches of 4 rows (the last padded" in line and f"{slot_count(4 * 32, 0.15)} slots" in line
    # run_mlm evaluates before training (the eval graph), the first epoch compiles training's graph, then no more
    assert recorder.graphs == [1, 2]
    assert counters["stats"]["unique_graphs"] == 2


def test_without_static_shapes_run_mlm_compiles_again_and_breaks_its_graph(tmp_path):
    """What the static shapes remove: the sparse head's labelled count breaks the graph, the last batch recompiles."""
    run_mlm.main([*mlm_arguments(tmp_path), "--static_shapes", "false"])
    assert counters["stats"]["unique_graphs"] > 2
    assert sum(counters["graph_break"].values()) > 0


def documents_of_mixed_lengths(count: int) -> list[dict]:
    rows = [json.loads(line) for line in CAIL_SAMPLE.read_text(encoding="utf-8").splitlines()][:count]
    return [{**row, "text": row["text"][: 10 + 25 * (index % 5)]} for index, row in enumerate(rows)]


def test_run_classification_compiles_once_per_length_bucket(tmp_path, monkeypatch, caplog):
    """Documents of 10 to 110 characters, cut at 128 tokens: buckets 64 and 128; two epochs of 11 documents in batches
    of 4, evaluation on 7: at most one graph per bucket for training and one for evaluation, all in the first epoch."""
    recorder = GraphsPerEpoch()
    build = run_classification.build_classification_trainer
    monkeypatch.setattr(run_classification, "build_classification_trainer", recording(build, recorder))
    rows = documents_of_mixed_lengths(18)
    train, validation = tmp_path / "train.jsonl", tmp_path / "validation.jsonl"
    train.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows[:11]), encoding="utf-8")
    validation.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows[11:]), encoding="utf-8")
    arguments = [
        *("--tokenizer_name", str(ROFORMER_VOCAB), "--train_file", str(train), "--validation_file", str(validation)),
        *("--config_overrides", TINY_MODEL),
        *("--do_train", "--do_eval", "--max_seq_length", "128", "--num_train_epochs", "2", "--eval_strategy", "epoch"),
        *("--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "4", "--save_strategy", "no"),
        *("--output_dir", str(tmp_path / "out"), "--use_cpu", "true", "--bf16", "false", "--disable_tqdm", "true"),
        *COMPILED,
    ]
    with caplog.at_level("WARNING", logger="roformer_hf.training.static_shapes"):
        run_classification.main(arguments)
    [line] = [record.getMessage() for record in caplog.records if record.name.endswith("static_shapes")]
    assert "lengths padded to 64, 128 tokens" in line
    before, after_first_epoch = recorder.graphs
    assert before == 0 and 2 <= after_first_epoch <= 4  # training and evaluation at lengths 64 and 128
    assert counters["stats"]["unique_graphs"] == after_first_epoch  # nothing new in the second epoch


@pytest.mark.slow
def test_reduce_overhead_on_the_cpu_trains_and_evaluates(tmp_path, caplog):
    """`--torch_compile_mode reduce-overhead` with inductor on a CPU (a few minutes on 2 busy cores): torch compiles it
    as its default mode (no CUDA graphs there); the run is the eager run's, to float tolerance."""
    rows = documents_of_mixed_lengths(12)
    train, validation = tmp_path / "train.jsonl", tmp_path / "validation.jsonl"
    train.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows[:7]), encoding="utf-8")
    validation.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows[7:]), encoding="utf-8")

    def run(name: str, *extra: str) -> dict:
        model = f"{TINY_MODEL},hidden_dropout_prob=0,attention_probs_dropout_prob=0"
        return run_classification.main(
            [
                *("--tokenizer_name", str(ROFORMER_VOCAB), "--train_file", str(train)),
                *("--validation_file", str(validation), "--do_train", "--do_eval", "--max_seq_length", "64"),
                *("--config_overrides", model, "--num_train_epochs", "1", "--per_device_train_batch_size", "4"),
                *("--per_device_eval_batch_size", "4", "--save_strategy", "no", "--output_dir", str(tmp_path / name)),
                *("--use_cpu", "true", "--bf16", "false", "--report_to", "none", "--disable_tqdm", "true"),
                *("--seed", "3", "--static_shapes", "true", *extra),
            ]
        )

    eager = run("eager")
    with caplog.at_level("WARNING", logger="roformer_hf.training.static_shapes"):
        compiled = run("compiled", "--torch_compile", "true", "--torch_compile_mode", "reduce-overhead")
    assert any("CUDA graphs exist on CUDA only" in record.getMessage() for record in caplog.records)
    assert counters["stats"]["unique_graphs"] == 2  # training and evaluation at 64 tokens
    assert compiled["eval_loss"] == pytest.approx(eager["eval_loss"], abs=1e-4)


def test_sparse_prediction_in_slots_compiles_into_one_graph():
    """Without slots the labelled count breaks the graph (test_compile.py); with them fullgraph=True holds."""
    torch.manual_seed(0)
    model = RoFormerForMaskedLM(RoFormerConfig(**NO_DROPOUT, sparse_prediction=True, prediction_slot_rate=0.15))
    batch = partial_batch()
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, 2], labels[1, 4] = 7, 9
    expected = model(**batch, labels=labels).loss
    actual = torch.compile(model, fullgraph=True, backend="aot_eager")(**batch, labels=labels).loss
    torch.testing.assert_close(actual, expected, atol=ATOL, rtol=0)
