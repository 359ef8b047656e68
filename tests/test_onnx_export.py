"""Export: `torch.export` and `torch.onnx.export(..., dynamo=True)` of every encoder head keep the batch and sequence
axes dynamic, and onnxruntime then gives torch's numbers at 16 and at 4,096 tokens (a length the example never had).
The ONNX tests skip where onnxruntime or onnxscript is missing (both are in the `test` extra)."""

import pytest
import torch
from conftest import TINY

from roformer_hf import (
    RoFormerConfig,
    RoFormerForMaskedLM,
    RoFormerForMultipleChoice,
    RoFormerForQuestionAnswering,
    RoFormerForSequenceClassification,
    RoFormerForTokenClassification,
    RoFormerModel,
)
from roformer_hf.modeling import starts_at_first_position

ATOL = 1e-4
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAMES = {
    RoFormerModel: ["last_hidden_state", "pooler_output"],
    RoFormerForMaskedLM: ["logits"],
    RoFormerForSequenceClassification: ["logits"],
    RoFormerForTokenClassification: ["logits"],
    RoFormerForQuestionAnswering: ["start_logits", "end_logits"],
    RoFormerForMultipleChoice: ["logits"],
}
# The example the exporter traces: 2 texts of 16 tokens (3 choices each for multiple choice).
EXAMPLE_BATCH, EXAMPLE_LENGTH, EXAMPLE_CHOICES = 2, 16, 3


def tiny_model(model_class: type) -> torch.nn.Module:
    """A tiny model with a pooler, so that the pooler's path is exported too."""
    torch.manual_seed(0)
    return model_class(RoFormerConfig(**TINY, num_labels=3, add_pooling_layer=True)).eval()


def padded_inputs(model_class: type, batch_size: int, length: int, num_choices: int = 2) -> dict[str, torch.Tensor]:
    """Random ids; the last row ends in padding; the second half of each row is token type 1."""
    shape = (batch_size, num_choices, length) if model_class is RoFormerForMultipleChoice else (batch_size, length)
    generator = torch.Generator().manual_seed(length)
    input_ids = torch.randint(1, TINY["vocab_size"], shape, generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[-1, ..., length * 3 // 4 :] = 0
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[..., length // 2 :] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}


def dynamic_axes(model_class: type) -> dict[str, dict[int, str]]:
    axes = {0: "batch", 1: "sequence"}
    if model_class is RoFormerForMultipleChoice:
        axes = {0: "batch", 1: "choices", 2: "sequence"}
    return dict.fromkeys(INPUT_NAMES, axes)


def expected_outputs(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    with torch.no_grad():
        outputs = model(**inputs)
    return [outputs[name] for name in OUTPUT_NAMES[type(model)]]


def example_inputs(model_class: type) -> dict[str, torch.Tensor]:
    return padded_inputs(model_class, EXAMPLE_BATCH, EXAMPLE_LENGTH, EXAMPLE_CHOICES)


HEADS = list(OUTPUT_NAMES)


@pytest.mark.slow  # seconds per head: the exporter traces, decomposes and optimises the graph
@pytest.mark.parametrize("model_class", HEADS, ids=lambda model_class: model_class.__name__)
def test_onnx_export_runs_in_onnxruntime_at_any_batch_and_length(model_class, tmp_path):
    onnxruntime = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")  # torch.onnx.export(dynamo=True) translates the graph with it
    model = tiny_model(model_class)
    program = torch.onnx.export(
        model,
        (),
        kwargs=example_inputs(model_class),
        dynamic_shapes=dynamic_axes(model_class),
        input_names=list(INPUT_NAMES),
        output_names=OUTPUT_NAMES[model_class],
        dynamo=True,
        verbose=False,
    )
    program.save(tmp_path / "model.onnx")
    session = onnxruntime.InferenceSession(tmp_path / "model.onnx", providers=["CPUExecutionProvider"])
    # Other batch sizes, choice counts and lengths than the example's: each axis must have stayed dynamic.
    for batch_size, length in [(3, 16), (1, 4096)]:
        inputs = padded_inputs(model_class, batch_size, length)
        actual = session.run(OUTPUT_NAMES[model_class], {name: tensor.numpy() for name, tensor in inputs.items()})
        for name, got, want in zip(OUTPUT_NAMES[model_class], actual, expected_outputs(model, inputs), strict=True):
            torch.testing.assert_close(torch.from_numpy(got), want, atol=ATOL, rtol=0, msg=f"{name} at {length}")


@pytest.mark.parametrize("add_pooling_layer", [False, True], ids=["no_pooler", "pooler"])
def test_classifier_exports_with_a_symbolic_length(add_pooling_layer):
    """The classifier's [CLS]-only last layer once fixed the exported length to the example's (`range(seq_len)`);
    `torch.export` reports such a specialisation as an error."""
    config = RoFormerConfig(**TINY, num_labels=3, add_pooling_layer=add_pooling_layer)
    model = RoFormerForSequenceClassification(config).eval()
    axes = {0: torch.export.Dim("batch"), 1: torch.export.Dim("sequence")}
    inputs = padded_inputs(RoFormerForSequenceClassification, EXAMPLE_BATCH, EXAMPLE_LENGTH)
    exported = torch.export.export(model, (), inputs, dynamic_shapes=dict.fromkeys(INPUT_NAMES, axes))
    longer = padded_inputs(RoFormerForSequenceClassification, 3, 40)
    with torch.no_grad():
        torch.testing.assert_close(exported.module()(**longer).logits, model(**longer).logits, atol=1e-5, rtol=0)


def test_starts_at_first_position_reads_slices_as_range_does():
    """The length-free reading of a slice agrees with `range(seq_len)[positions]` for every small slice."""
    bounds = [None, *range(-6, 7)]
    for seq_len in range(6):
        for positions in (
            slice(start, stop, step) for start in bounds for stop in bounds for step in (None, -2, -1, 1, 2)
        ):
            expected = range(seq_len)[positions][:1] == range(1)
            assert starts_at_first_position(positions, seq_len) == expected, (positions, seq_len)
