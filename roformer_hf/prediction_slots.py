"""
Sparse MLM prediction in a fixed number of slots: the head scores a number of tokens that depends only on the batch's
shape (its worst case at the masking rate), not on how many tokens the masking chose, so that `torch.compile` and CUDA
graphs see one shape per batch shape. The masking collator keeps the chosen tokens within the slots; the slots it
leaves empty hold ignored positions (label -100), which the loss skips.
"""

import math

import torch

# Slot counts are rounded up to a multiple of this (tensor cores' tile; also fewer distinct shapes).
SLOT_MULTIPLE = 8
# Headroom above the expected number of chosen tokens, in standard deviations of that number (binomial over tokens):
# whole words are chosen together, which widens the spread about 1.5 times, so this is about 4 of the words'.
SLOT_HEADROOM_STDS = 6.0


def slot_count(tokens: int, rate: float) -> int:
    """
    The number of prediction slots for a batch of `tokens` token positions masked at `rate`: the expected number of
    chosen tokens plus `SLOT_HEADROOM_STDS` standard deviations, rounded up to a multiple of `SLOT_MULTIPLE`, at most
    `tokens`. 32 x 512 tokens at 0.15: 2,736 slots (2,458 expected).

    Args:
        tokens (`int`): positions of the batch (rows x length, padding included).
        rate (`float`): the masking rate (run_mlm.py's `--mlm_probability`).
    """
    expected = rate * tokens
    spread = math.sqrt(tokens * rate * (1.0 - rate))
    slots = math.ceil((expected + SLOT_HEADROOM_STDS * spread) / SLOT_MULTIPLE) * SLOT_MULTIPLE
    return min(tokens, slots)


def labelled_tokens(
    hidden_states: torch.Tensor, labels: torch.Tensor, slot_rate: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """
    The hidden states and labels of the tokens the MLM head scores. Without `slot_rate`: the labelled tokens, `(N, H)`
    and `(N,)`, N read from the labels (a shape `torch.compile` cannot know). With it: `slot_count(B x T, slot_rate)`
    slots, the labelled tokens first in the order of `labels[labels != -100]`, then ignored positions (label -100);
    the caller keeps the labelled tokens within the slots (`WholeWordMaskCollator`'s `prediction_slot_rate`).
    """
    if slot_rate is None:
        labelled = labels != -100
        return hidden_states[labelled], labels[labelled]
    flat_labels = labels.flatten()
    # a stable sort of "is ignored" puts the labelled positions first, in order, without reading their number
    order = (flat_labels == -100).to(torch.int32).argsort(stable=True)[: slot_count(flat_labels.numel(), slot_rate)]
    return hidden_states.flatten(0, 1)[order], flat_labels[order]
