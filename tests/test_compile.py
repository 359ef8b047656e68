"""torch.compile(fullgraph=True): the model and its heads compile into one graph each (no graph break), in eval and
train, and the compiled model gives the numbers of the eager one. The "aot_eager" backend traces forward and backward
as inductor would, without generating kernels, so these tests take seconds; one test runs inductor itself."""

import os

import pytest
import torch
from conftest import TINY
from transformers import DynamicCache

from roformer_hf import (
    RoFormerConfig,
    RoFormerForCausalLM,
    RoFormerForMaskedLM,
    RoFormerForSequenceClassification,
    RoFormerForTokenClassification,
    RoFormerModel,
)
from roformer_hf.modeling import cache_of

ATOL = 1e-5


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()  # compiled graphs of one test must not serve another's model
    yield
    torch._dynamo.reset()


def padded_batch(vocab_size: int = TINY["vocab_size"]) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(1, vocab_size, (2, 9), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 6:] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def compiled(model: torch.nn.Module, backend: str = "aot_eager") -> torch.nn.Module:
    return torch.compile(model, fullgraph=True, backend=backend)


def gradients(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: parameter.grad for name, parameter in model.named_parameters() if parameter.grad is not None}


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
def test_base_model_with_padding_matches_eager(attn_implementation):
    model = RoFormerModel(RoFormerConfig(**TINY, add_pooling_layer=True, attn_implementation=attn_implementation))
    model.eval()
    with torch.no_grad():
        expected = model(**padded_batch())
        actual = compiled(model)(**padded_batch())
    torch.testing.assert_close(actual.last_hidden_state, expected.last_hidden_state, atol=ATOL, rtol=0)
    torch.testing.assert_close(actual.pooler_output, expected.pooler_output, atol=ATOL, rtol=0)


def test_hidden_states_are_captured_under_compile():
    model = RoFormerModel(RoFormerConfig(**TINY)).eval()
    with torch.no_grad():
        # The first call installs transformers' capturing hooks, which dynamo cannot do (a lock).
        expected = model(**padded_batch(), output_hidden_states=True).hidden_states
        actual = compiled(model)(**padded_batch(), output_hidden_states=True).hidden_states
    assert len(actual) == TINY["num_hidden_layers"] + 1
    for got, want in zip(actual, expected, strict=True):
        torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


def test_masked_lm_loss_and_gradients_match_eager_in_training():
    torch.manual_seed(0)
    model = RoFormerForMaskedLM(RoFormerConfig(**TINY)).train()
    batch = padded_batch()
    labels = torch.full_like(batch["input_ids"], -100)
    labels[:, [1, 4]] = batch["input_ids"][:, [1, 4]]
    expected_loss = model(**batch, labels=labels).loss
    expected_loss.backward()
    expected_gradients = gradients(model)
    model.zero_grad(set_to_none=True)
    actual_loss = compiled(model)(**batch, labels=labels).loss
    actual_loss.backward()
    torch.testing.assert_close(actual_loss, expected_loss, atol=ATOL, rtol=0)
    actual_gradients = gradients(model)
    assert actual_gradients.keys() == expected_gradients.keys()
    for name, gradient in actual_gradients.items():
        torch.testing.assert_close(gradient, expected_gradients[name], atol=ATOL, rtol=0, msg=name)


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_sequence_classification_matches_eager(training):
    """The head's [CLS]-only last layer and the classification loss compile too."""
    model = RoFormerForSequenceClassification(RoFormerConfig(**TINY, num_labels=3)).train(training)
    labels = torch.tensor([2, 0])
    expected = model(**padded_batch(), labels=labels)
    actual = compiled(model)(**padded_batch(), labels=labels)
    torch.testing.assert_close(actual.logits, expected.logits, atol=ATOL, rtol=0)
    torch.testing.assert_close(actual.loss, expected.loss, atol=ATOL, rtol=0)


def test_training_with_attention_dropout_compiles_into_one_graph():
    """The default attention dropout (0.1) in train mode on the CPU: eager runs blockwise attention (numpy's
    generator, which dynamo cannot trace); the compiled graph keeps SDPA and its dropout."""
    torch.manual_seed(0)
    config = RoFormerConfig(**{**TINY, "attention_probs_dropout_prob": 0.1}, num_labels=3)
    model = RoFormerForSequenceClassification(config).train()
    loss = compiled(model)(**padded_batch(), labels=torch.tensor([2, 0])).loss
    loss.backward()
    assert torch.isfinite(loss)
    assert gradients(model).keys() == {name for name, _ in model.named_parameters()}
    assert all(torch.isfinite(gradient).all() for gradient in gradients(model).values())


def test_compiled_attention_dropout_drops():
    """With every attention probability dropped, attention outputs zeros: eager (blockwise) and compiled (SDPA)
    training then agree exactly, and differ from evaluation."""
    model = RoFormerModel(RoFormerConfig(**{**TINY, "attention_probs_dropout_prob": 1.0})).train()
    with torch.no_grad():
        expected = model(**padded_batch()).last_hidden_state
        actual = compiled(model)(**padded_batch()).last_hidden_state
        evaluated = model.eval()(**padded_batch()).last_hidden_state
    torch.testing.assert_close(actual, expected, atol=ATOL, rtol=0)
    assert not torch.allclose(actual, evaluated, atol=1e-2)


def test_decoder_with_cache_matches_reading_the_whole_text():
    model = RoFormerForCausalLM(RoFormerConfig(**TINY, is_decoder=True)).eval()
    batch = padded_batch()
    step = compiled(model)
    with torch.no_grad():
        prompt = step(
            input_ids=batch["input_ids"][:, :5],
            attention_mask=batch["attention_mask"][:, :5],
            cache=DynamicCache(config=model.config),
            use_cache=True,
        )
        continued = step(
            input_ids=batch["input_ids"][:, 5:],
            attention_mask=batch["attention_mask"],
            cache=cache_of(prompt),
            use_cache=True,
        )
        whole = model(**batch, use_cache=False)
    torch.testing.assert_close(continued.logits, whole.logits[:, 5:], atol=ATOL, rtol=0)


def test_sparse_prediction_compiles_with_a_graph_break():
    """Scoring only the labelled tokens makes shapes depend on the labels: documented as the one place without
    fullgraph; compiled with graph breaks it still gives the eager loss."""
    model = RoFormerForMaskedLM(RoFormerConfig(**TINY, sparse_prediction=True)).eval()
    batch = padded_batch()
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, 2] = 7
    with torch.no_grad():
        expected = model(**batch, labels=labels).loss
        actual = torch.compile(model, backend="aot_eager")(**batch, labels=labels).loss
    torch.testing.assert_close(actual, expected, atol=ATOL, rtol=0)


def test_value_checks_stay_in_eager_mode():
    """Out-of-range ids still get their clear error on the CPU; compiling skips only the reading of values."""
    model = RoFormerModel(RoFormerConfig(**TINY)).eval()
    bad = padded_batch()
    bad["input_ids"][0, 0] = TINY["vocab_size"]
    with pytest.raises(ValueError, match="vocabulary has ids 0 to"):
        model(**bad)
    # Shape checks run under compile too; fullgraph reports the ValueError inside its own exception.
    with pytest.raises((ValueError, torch._dynamo.exc.Unsupported), match="input_ids must have shape"):
        compiled(model)(input_ids=bad["input_ids"][0])


def training_labels(head: str, batch: dict[str, torch.Tensor], seed: int) -> torch.Tensor:
    """Labels of a training batch for `head`: other values for another seed, the same shape."""
    generator = torch.Generator().manual_seed(seed)
    if head == "classification":
        return torch.randint(0, 3, (batch["input_ids"].shape[0],), generator=generator)
    labels = torch.randint(
        0, 3 if head == "token" else TINY["vocab_size"], batch["input_ids"].shape, generator=generator
    )
    ignored = torch.rand(labels.shape, generator=generator) < 0.5  # -100: left out of the loss (MLM: not masked)
    ignored[:, 0] = seed % 2 == 0  # a different set of positions in each call
    return labels.masked_fill(ignored | (batch["attention_mask"] == 0), -100)


TRAINING_HEADS = {
    "classification": RoFormerForSequenceClassification,
    "mlm": RoFormerForMaskedLM,
    "token": RoFormerForTokenClassification,
}


@pytest.mark.parametrize("head", sorted(TRAINING_HEADS))
def test_a_training_forward_with_its_loss_is_one_graph_compiled_once(head):
    """Forward and loss with labels in train mode (dropout on): one graph (fullgraph=True raises on a graph break:
    a `.item()`, a data-dependent branch, a check that reads values), and a second call with other labels of the same
    shape runs it again without recompiling (dynamo's counters; `error_on_recompile` raises on one). The
    classification head infers `problem_type` from the labels in each compiled call rather than store it in the
    config, which would change what the graph was compiled for."""
    torch.manual_seed(0)
    config = RoFormerConfig(**{**TINY, "attention_probs_dropout_prob": 0.1, "hidden_dropout_prob": 0.1}, num_labels=3)
    model = TRAINING_HEADS[head](config).train()
    step = compiled(model)
    batch = padded_batch()
    torch._dynamo.utils.counters.clear()
    first = step(**batch, labels=training_labels(head, batch, seed=0)).loss
    first.backward()
    compiled_once = {name: dict(counts) for name, counts in torch._dynamo.utils.counters.items()}
    assert compiled_once["stats"]["unique_graphs"] == 1, compiled_once
    with torch._dynamo.config.patch(error_on_recompile=True):
        second = step(**batch, labels=training_labels(head, batch, seed=1)).loss
    second.backward()
    assert {name: dict(counts) for name, counts in torch._dynamo.utils.counters.items()} == compiled_once
    assert torch.isfinite(first) and torch.isfinite(second) and not torch.equal(first, second)
    assert model.config.problem_type is None


@pytest.mark.slow
def test_inductor_matches_eager():
    """The default backend, generating kernels (about 50 s on a busy 2-core machine)."""
    model = RoFormerModel(RoFormerConfig(**TINY)).eval()
    with torch.no_grad():
        expected = model(**padded_batch()).last_hidden_state
        actual = torch.compile(model, fullgraph=True)(**padded_batch()).last_hidden_state
    torch.testing.assert_close(actual, expected, atol=ATOL, rtol=0)


# --- the scripts' --torch_compile where the lengths of the batches vary ---


def dynamo_dynamic_of_a_trainer_built(training_args, varying: str | None) -> bool | None:
    """The `dynamic` a Trainer's accelerator will compile with, when built inside `compiled_for_every_length`."""
    from transformers import Trainer

    from roformer_hf.training.machine.launch import compiled_for_every_length

    model = RoFormerForSequenceClassification(RoFormerConfig(**TINY))
    with compiled_for_every_length(training_args, varying):
        trainer = Trainer(model=model, args=training_args)
    return trainer.accelerator.state.dynamo_plugin.dynamic


@pytest.mark.parametrize(
    ("torch_compile", "varying", "expected"),
    [(True, "batches padded to their longest text", True), (True, None, None), (False, "batches padded", None)],
)
def test_the_scripts_compile_once_for_every_length_where_lengths_vary(
    tmp_path, monkeypatch, caplog, torch_compile, varying, expected
):
    """Stages of several lengths or batches padded to their longest: one dynamic compilation (50 s on the demo's model
    where torch's default took 31 s + 35 s), said in one line; the variable is set only while the Trainer is built."""
    from transformers import TrainingArguments

    from roformer_hf.training.machine.launch import DYNAMIC_COMPILE_VARIABLE

    monkeypatch.delenv(DYNAMIC_COMPILE_VARIABLE, raising=False)
    arguments = TrainingArguments(tmp_path, torch_compile=torch_compile, use_cpu=True, report_to="none")
    with caplog.at_level("WARNING", logger="roformer_hf.training.machine.launch"):
        assert dynamo_dynamic_of_a_trainer_built(arguments, varying) is expected
    assert DYNAMIC_COMPILE_VARIABLE not in os.environ
    # ours only: transformers warns of its own about torch_compile without a GPU, once per process
    ours = [record.getMessage() for record in caplog.records if record.name == "roformer_hf.training.machine.launch"]
    if expected:
        [line] = ours
        assert line.startswith("--torch_compile compiles the model once for every length (batches padded to")
    else:
        assert ours == []


def test_a_dynamic_setting_the_user_gave_wins(tmp_path, monkeypatch):
    from transformers import TrainingArguments

    from roformer_hf.training.machine.launch import DYNAMIC_COMPILE_VARIABLE

    monkeypatch.setenv(DYNAMIC_COMPILE_VARIABLE, "false")
    arguments = TrainingArguments(tmp_path, torch_compile=True, use_cpu=True, report_to="none")
    assert dynamo_dynamic_of_a_trainer_built(arguments, "batches padded to their longest text") is False
    assert os.environ[DYNAMIC_COMPILE_VARIABLE] == "false"
