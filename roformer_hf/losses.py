"""The losses of RoFormer's classification, tagging, multiple-choice and question-answering heads, computed from
their labels after the label checks of `input_checks.py` (the LM heads use transformers' `loss_function`), and the tokens the MLM loss is computed on (sparse prediction,
in a fixed number of slots for static shapes). No loss reads a value back to the host: under `torch.compile` a
training forward with its loss is one graph.
"""

import math

import torch
from torch.nn import functional as F

from .configuration import RoFormerConfig
from .input_checks import CHOICE_LABELS_FIX, CLASS_LABELS_FIX, check_labels


def check_multi_hot_labels(labels: torch.Tensor, logits: torch.Tensor) -> None:
    """Multi-label targets are one 0/1 value per class: refuse another shape, e.g. class ids given as floats."""
    if labels.shape != logits.shape:
        raise ValueError(
            f"multi-label classification needs labels of shape {tuple(logits.shape)} (batch_size, num_labels), one "
            f"0/1 value per class, got {tuple(labels.shape)}: for one class per example give the class ids as "
            "integers (torch.long), which makes the task single-label."
        )


def sequence_classification_loss(config: RoFormerConfig, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The loss of `config.problem_type`, inferred as transformers does when unset (and then stored in the config,
    once the labels gave a loss: labels refused by a first call leave the config as it was; not under
    `torch.compile`, where each call infers it again rather than change what the graph was compiled for).

    "regression" (one label: mean squared error), "single_label_classification" (integer labels: cross-entropy) or
    "multi_label_classification" (float multi-hot labels: binary cross-entropy with logits).
    """
    num_labels = logits.shape[-1]
    problem_type = config.problem_type
    if problem_type is None:
        if num_labels == 1:
            problem_type = "regression"
        elif labels.dtype in (torch.long, torch.int):
            problem_type = "single_label_classification"
        else:
            problem_type = "multi_label_classification"
    labels = labels.to(logits.device)
    if problem_type == "regression":
        predictions, targets = (logits.squeeze(-1), labels.squeeze(-1)) if num_labels == 1 else (logits, labels)
        loss = F.mse_loss(predictions, targets.to(logits.dtype))
    elif problem_type == "single_label_classification":
        check_labels(labels, num_labels, CLASS_LABELS_FIX)
        loss = F.cross_entropy(logits.view(-1, num_labels), labels.view(-1))
    else:
        check_multi_hot_labels(labels, logits)
        loss = F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
    if not torch.compiler.is_compiling():  # a compiled graph would be recompiled for the changed config
        config.problem_type = problem_type
    return loss


def span_loss(
    start_logits: torch.Tensor, end_logits: torch.Tensor, start_positions: torch.Tensor, end_positions: torch.Tensor
) -> torch.Tensor:
    """The mean of the start and end cross-entropies of extractive question answering. A position past the end marks
    an answer cut off by truncation and is ignored, as in transformers."""
    ignored_index = start_logits.shape[1]
    start_positions = start_positions.view(-1).clamp(0, ignored_index).to(start_logits.device)
    end_positions = end_positions.view(-1).clamp(0, ignored_index).to(end_logits.device)
    start_loss = F.cross_entropy(start_logits, start_positions, ignore_index=ignored_index)
    end_loss = F.cross_entropy(end_logits, end_positions, ignore_index=ignored_index)
    return (start_loss + end_loss) / 2


def token_classification_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over every token's tag, `logits` `(B, T, num_labels)`; labels of -100 are left out."""
    num_labels = logits.shape[-1]
    check_labels(labels, num_labels, CLASS_LABELS_FIX)
    return F.cross_entropy(logits.view(-1, num_labels), labels.view(-1).to(logits.device))


def multiple_choice_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the choices, `logits` `(B, num_choices)`, `labels` the index of the right one."""
    check_labels(labels, logits.shape[-1], CHOICE_LABELS_FIX)
    return F.cross_entropy(logits, labels.to(logits.device))


__all__ = ["multiple_choice_loss", "sequence_classification_loss", "span_loss", "token_classification_loss"]


# Sparse MLM prediction in a fixed number of slots: the head scores a number of tokens that depends only on the
# batch's shape (its worst case at the masking rate), not on how many tokens the masking chose, so that
# `torch.compile` and CUDA graphs see one shape per batch shape. The masking collator keeps the chosen tokens within
# the slots; the slots it leaves empty hold ignored positions (label -100), which the loss skips.
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
