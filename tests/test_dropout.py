"""dropout.RoFormerDropout: the hidden states' dropout keeps each element with probability 1 - p,
independently, scales the kept ones by 1 / (1 - p), masks the gradient the same way, and replays its masks under the
same seed (gradient checkpointing)."""

import math

import pytest
import torch
from conftest import enable_activation_checkpointing

from roformer_hf import RoFormerConfig, RoFormerForSequenceClassification
from roformer_hf.modeling import RoFormerDropout, draw_keep_mask, rounded_probability


def binomial_bound(count: int, probability: float) -> float:
    """Six standard deviations of a Binomial(count, probability): a bound a correct mask exceeds once in 10^9."""
    return 6 * math.sqrt(count * probability * (1 - probability))


@pytest.mark.parametrize("probability", [0.1, 0.5, 0.9])
def test_keep_mask_drops_each_element_with_the_rounded_probability(probability):
    numel = 400_003  # not a multiple of the 4 elements one random word serves
    kept = draw_keep_mask(numel, rounded_probability(probability), seed=7).double()
    dropped = numel - kept.sum().item()
    assert abs(dropped - numel * probability) < binomial_bound(numel, probability)
    # Each of the four 16-bit lanes of a random word drops with the same probability.
    for lane in range(4):
        lane_count = kept[lane::4].numel()
        lane_dropped = lane_count - kept[lane::4].sum().item()
        assert abs(lane_dropped - lane_count * probability) < binomial_bound(lane_count, probability)


def test_keep_decisions_are_independent_between_neighbours_and_seeds():
    """Neighbours share a random word (lag 1-3) or not (lag 4); masks of two seeds are unrelated: the fraction of pairs
    both kept is (1 - p)^2 within binomial noise."""
    numel, probability = 400_000, 0.25
    kept = draw_keep_mask(numel, probability, seed=3).bool()
    pairs = [(kept[:-lag], kept[lag:]) for lag in (1, 2, 3, 4)]
    pairs.append((kept, draw_keep_mask(numel, probability, seed=4).bool()))
    both = (1 - probability) ** 2
    for first, second in pairs:
        count = first.numel()
        assert abs((first & second).sum().item() - count * both) < binomial_bound(count, both)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_scales_kept_elements_and_masks_their_gradient(dtype):
    dropout = RoFormerDropout(0.1).train()
    hidden_states = (torch.rand(8, 64, 32) + 0.5).to(dtype).requires_grad_()  # no zeros: a zero output is a drop
    output = dropout(hidden_states)
    kept = output != 0
    scale = 1 / (1 - rounded_probability(0.1))
    assert output.dtype == dtype
    torch.testing.assert_close(output[kept], (hidden_states.detach()[kept].float() * scale).to(dtype))
    upstream = torch.randn_like(output)
    output.backward(upstream)
    expected = torch.where(kept, upstream.float() * scale, 0.0).to(dtype)
    torch.testing.assert_close(hidden_states.grad, expected)


def test_dropout_is_unbiased_and_drawn_from_torch_seed():
    dropout = RoFormerDropout(0.3).train()
    ones = torch.ones(200_000)
    torch.manual_seed(5)
    first = dropout(ones)
    torch.manual_seed(5)
    assert torch.equal(dropout(ones), first)  # torch.manual_seed fixes the masks
    assert not torch.equal(dropout(ones), first)  # and the next call draws new ones
    # Mean 1: the kept share times the scale; each element is 0 or 1 / (1 - p).
    assert abs(first.double().mean().item() - 1) < 6 * math.sqrt(0.3 / 0.7 / ones.numel())
    assert dropout.eval()(ones) is ones


def test_dropout_gradcheck():
    dropout = RoFormerDropout(0.4).train()

    def same_masks(hidden_states):
        torch.manual_seed(0)
        return dropout(hidden_states)

    assert torch.autograd.gradcheck(same_masks, torch.randn(3, 5, dtype=torch.float64, requires_grad=True))


def test_gradient_checkpointing_replays_the_dropout_masks():
    """Recomputing a layer in the backward pass draws the same masks, so the gradients are those of a plain run."""
    config = RoFormerConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        hidden_dropout_prob=0.2,
        attention_probs_dropout_prob=0.1,
        num_labels=2,
    )
    torch.manual_seed(0)
    model = RoFormerForSequenceClassification(config).train()
    batch = {"input_ids": torch.randint(5, config.vocab_size, (2, 24)), "labels": torch.tensor([0, 1])}

    def gradients() -> dict[str, torch.Tensor]:
        model.zero_grad(set_to_none=True)
        torch.manual_seed(1)
        model(**batch).loss.backward()
        return {name: parameter.grad.clone() for name, parameter in model.named_parameters()}

    plain = gradients()
    enable_activation_checkpointing(model)
    checkpointed = gradients()
    for name, gradient in plain.items():
        torch.testing.assert_close(checkpointed[name], gradient, msg=name)
