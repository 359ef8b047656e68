"""Accuracy at the masked positions of masked language modelling, as an `evaluate` metric (scikit-learn underneath).

Load it with `roformer_hf.metrics.load("masked_accuracy")`, or `evaluate.load(<path of this file>)`.
"""

import datasets
import evaluate
import numpy as np
from sklearn.metrics import accuracy_score

DESCRIPTION = """
The share of masked tokens whose predicted id is the original one. Predictions and references are token ids of every
position (flattened); positions whose reference is `ignore_index` (-100: not masked, special tokens, padding) are
left out, as the masked language modelling loss leaves them out.
"""
INPUTS = """
Args:
    predictions (`list[int]`): predicted token ids, one per position.
    references (`list[int]`): original token ids at the masked positions, `ignore_index` elsewhere.
    ignore_index (`int`, defaults to -100): the reference of positions that are not predicted.
Returns:
    `{"accuracy": float}` (0.0 when no position is masked).
"""


class MaskedAccuracy(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=DESCRIPTION,
            citation="",
            inputs_description=INPUTS,
            features=datasets.Features(
                {"predictions": datasets.Value("int64"), "references": datasets.Value("int64")}
            ),
        )

    def _compute(self, predictions, references, ignore_index: int = -100) -> dict[str, float]:
        predictions, references = np.asarray(predictions), np.asarray(references)
        masked = references != ignore_index
        if not masked.any():
            return {"accuracy": 0.0}
        return {"accuracy": float(accuracy_score(references[masked], predictions[masked]))}
