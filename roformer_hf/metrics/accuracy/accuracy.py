"""Accuracy, as an `evaluate` metric computed offline with scikit-learn (`evaluate.load("accuracy")` needs the Hub).

Load it with `roformer_hf.metrics.load("accuracy")`, or `evaluate.load(<path of this file>)`.
"""

import datasets
import evaluate
from sklearn.metrics import accuracy_score

DESCRIPTION = """
The share of predictions equal to their reference: (correct predictions) / (all predictions). With the "multilabel"
configuration, a prediction is a 0/1 vector per example and counts as correct only when the whole vector matches
(exact-match accuracy).
"""
INPUTS = """
Args:
    predictions (`list[int]`, or `list[list[int]]` under "multilabel"): predicted class ids (0/1 vectors).
    references (`list[int]`, or `list[list[int]]` under "multilabel"): true class ids (0/1 vectors).
    normalize (`bool`, defaults to `True`): the share of correct predictions; `False` gives their number.
    sample_weight (`list[float]`, *optional*): a weight per example.
Returns:
    `{"accuracy": float}`.
"""


class Accuracy(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        label = datasets.Value("int32")
        if self.config_name == "multilabel":
            label = datasets.Sequence(label)
        return evaluate.MetricInfo(
            description=DESCRIPTION,
            citation="",
            inputs_description=INPUTS,
            features=datasets.Features({"predictions": label, "references": label}),
            reference_urls=["https://scikit-learn.org/stable/modules/generated/sklearn.metrics.accuracy_score.html"],
        )

    def _compute(self, predictions, references, normalize: bool = True, sample_weight=None) -> dict[str, float]:
        score = accuracy_score(references, predictions, normalize=normalize, sample_weight=sample_weight)
        return {"accuracy": float(score)}
