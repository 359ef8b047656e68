"""
Whole-word masking for masked language modelling over jieba words: the tokenizer's `word_ids` (kept apart across
texts by `text_corpus.pack_into_blocks`) say which tokens form a word, and a chosen word is masked whole. Also what
evaluation reads at the masked positions: the predicted token ids and the masked-token accuracy.
"""

from dataclasses import dataclass
from typing import Any

import torch
from transformers import EvalPrediction, PreTrainedTokenizerBase, TrainerCallback

from ...metrics import load as load_metric
from ...modeling import slot_count


@dataclass
class WholeWordMaskCollator:
    """
    Pads blocks and masks them for masked language modelling: each jieba word (or each token, without whole-word
    masking) is chosen with `mlm_probability`; the tokens of chosen words become `[MASK]` (80%), a random token
    (10%) or stay (10%), and only they get labels. Special tokens and padding (`word_ids` -1) are never chosen.

    The masks of an example depend only on its own seed: `mask_seed` for validation examples (the same masks at every
    evaluation, so evaluations compare), and `(seed, epoch, example_index)` for training examples (new masks every
    epoch). So a resumed run masks exactly as an uninterrupted one, whatever batches the Trainer fetches to skip
    and whatever the state of the global RNG, and so do dataloader workers and DDP processes. Examples with neither
    key draw from torch's global generator.

    Args:
        tokenizer (`PreTrainedTokenizerBase`): gives the ids of `[PAD]` and `[MASK]` and the vocabulary size.
        mlm_probability (`float`): share of words (or tokens) to predict.
        whole_word_mask (`bool`): choose whole words rather than single tokens.
        mask_replace_probability (`float`): share of chosen tokens replaced by `[MASK]`.
        random_replace_probability (`float`): share of chosen tokens replaced by a random token.
        seed (`int`): seed of the training masks (the Trainer's seed).
        epoch (`int`): the current epoch, set by `EpochCallback`.
        prediction_slot_rate (`float`, *optional*): keep the chosen tokens of a batch within the model's fixed
            prediction slots for this rate (`losses.slot_count`): beyond them (rarely: they hold 6 standard
            deviations more than the expected number), the tokens of the highest draws are left unchosen.
    """

    tokenizer: PreTrainedTokenizerBase
    mlm_probability: float = 0.15
    whole_word_mask: bool = True
    mask_replace_probability: float = 0.8
    random_replace_probability: float = 0.1
    seed: int = 0
    epoch: int = 0
    prediction_slot_rate: float | None = None

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        length = max(len(example["input_ids"]) for example in examples)
        input_ids = torch.full((len(examples), length), self.tokenizer.pad_token_id)
        word_ids = torch.full((len(examples), length), -1)
        attention_mask = torch.zeros((len(examples), length), dtype=torch.long)
        for row, example in enumerate(examples):
            size = len(example["input_ids"])
            input_ids[row, :size] = torch.as_tensor(example["input_ids"])
            word_ids[row, :size] = torch.as_tensor(example["word_ids"])
            attention_mask[row, :size] = 1
        draws = torch.stack([self._draws(length, self._example_seed(example)) for example in examples], dim=1)
        labels = self._keep_within_slots(self._choose(word_ids, draws[0], input_ids), draws[0])
        input_ids = self._replace(input_ids, labels != -100, draws[1:])
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}

    def _example_seed(self, example: dict[str, Any]) -> int | None:
        if "mask_seed" in example:
            return example["mask_seed"]
        if "example_index" in example:
            return ((self.seed * 1_000_003 + self.epoch) * 1_000_000_007 + example["example_index"]) % 2**63
        return None

    @staticmethod
    def _draws(length: int, seed: int | None) -> torch.Tensor:
        generator = None if seed is None else torch.Generator().manual_seed(seed)
        return torch.rand((4, length), generator=generator)  # choice, [MASK] or not, random or kept, random token

    def _choose(self, word_ids: torch.Tensor, choice_draws: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        if self.whole_word_mask:
            # every token of a word takes the draw of the word's rank within its row, so a word is chosen whole
            for row in range(word_ids.shape[0]):
                _, rank = torch.unique(word_ids[row], return_inverse=True)
                choice_draws[row] = choice_draws[row][rank]
        chosen = (choice_draws < self.mlm_probability) & (word_ids >= 0)
        return torch.where(chosen, input_ids, -100)

    def _keep_within_slots(self, labels: torch.Tensor, choice_draws: torch.Tensor) -> torch.Tensor:
        if self.prediction_slot_rate is None:
            return labels
        slots = slot_count(labels.numel(), self.prediction_slot_rate)
        chosen = labels != -100
        if int(chosen.sum()) <= slots:
            return labels
        # the chosen tokens of the lowest draws stay chosen (a word's tokens share a draw, so words stay whole but
        # perhaps the last one)
        keys = torch.where(chosen, choice_draws, 2.0).flatten()
        kept = torch.zeros(labels.numel(), dtype=torch.bool)
        kept[keys.argsort(stable=True)[:slots]] = True
        return torch.where(kept.view_as(labels), labels, -100)

    def _replace(self, input_ids: torch.Tensor, chosen: torch.Tensor, draws: torch.Tensor) -> torch.Tensor:
        to_mask = chosen & (draws[0] < self.mask_replace_probability)
        keep_share = 1.0 - self.mask_replace_probability
        to_random = chosen & ~to_mask & (draws[1] < self.random_replace_probability / max(keep_share, 1e-12))
        random_ids = (draws[2] * len(self.tokenizer)).long()
        input_ids = torch.where(to_mask, self.tokenizer.mask_token_id, input_ids)
        return torch.where(to_random, random_ids, input_ids)


class EpochCallback(TrainerCallback):
    """Tells the collator the epoch, so that every epoch masks the training examples anew."""

    def __init__(self, collator: WholeWordMaskCollator):
        self.collator = collator

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.collator.epoch = int(state.epoch or 0)


def masked_token_accuracy(eval_prediction: EvalPrediction) -> dict[str, float]:
    """Accuracy of the predictions at the masked positions (labels other than -100)."""
    masked_accuracy = load_metric("masked_accuracy")  # roformer_hf's offline evaluate module
    return masked_accuracy.compute(
        predictions=eval_prediction.predictions.ravel(), references=eval_prediction.label_ids.ravel()
    )


def predicted_token_ids(logits: torch.Tensor | tuple, labels: torch.Tensor) -> torch.Tensor:
    """Keep only the arg-max token ids of the logits, so that evaluation does not gather whole vocabularies.

    With `sparse_prediction` the logits hold the labelled positions only, `(N, vocab_size)` (or the fixed prediction
    slots, the labelled positions first): their ids go back to those positions of a `labels`-shaped tensor (-100 elsewhere), so the metrics read both kinds alike.
    """
    predictions = (logits[0] if isinstance(logits, tuple) else logits).argmax(dim=-1)
    if predictions.shape == labels.shape:
        return predictions
    labelled = labels != -100
    # with fixed prediction slots, the labelled tokens fill the first ones, and ignored positions the rest
    predictions = predictions[: int(labelled.sum())]
    return torch.full_like(labels, -100).masked_scatter_(labelled, predictions)
