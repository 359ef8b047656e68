"""F1 score, as an `evaluate` metric computed offline with scikit-learn (`evaluate.load("f1")` needs the Hub).

Load it with `roformer_hf.metrics.load("f1")`, or `evaluate.load(<path of this file>)`.
"""

import datasets
import evaluate
from sklearn.metrics import f1_score

DESCRIPTION = """
The F1 score, the harmonic mean of precision and recall, averaged over the classes as `average` says: "macro" (the
mean of the per-class F1, every class weighing the same), "micro" (from the counts of all classes together) or
"weighted". With the "multilabel" configuration, predictions and references are 0/1 vectors per example.
"""
INPUTS = """
Args:
    predictions (`list[int]`, or `list[list[int]]` under "multilabel"): predicted class ids (0/1 vectors).
    references (`list[int]`, or `list[list[int]]` under "multilabel"): true class ids (0/1 vectors).
    average (`str`, defaults to `"macro"`): "macro", "micro" or "weighted".
    zero_division (`float` or `str`, defaults to `"warn"`): the F1 of a class with no prediction and no reference.
Returns:
    `{"f1_<average>": float}`, e.g. `{"f1_macro": 0.73}`.
"""


class F1(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        label = datasets.Value("int32")
        if self.config_name == "multilabel":
            label = datasets.Sequence(label)
        return evaluate.MetricInfo(
            description=DESCRIPTION,
            citation="",
            inputs_description=INPUTS,
            features=datasets.Features({"predictions": label, "references": label}),
            reference_urls=["https://scikit-learn.org/stable/modules/generated/sklearn.metrics.f1_score.html"],
        )

    def _compute(self, predictions, references, average: str = "macro", zero_division="warn") -> dict[str, float]:
        score = f1_score(references, predictions, average=average, zero_division=zero_division)
        return {f"f1_{average}": float(score)}
