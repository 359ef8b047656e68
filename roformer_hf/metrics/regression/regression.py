"""Regression metrics (mean squared and absolute error, Pearson correlation) as one `evaluate` metric, computed
offline with scikit-learn and NumPy.

Load it with `roformer_hf.metrics.load("regression")`, or `evaluate.load(<path of this file>)`.
"""

import datasets
import evaluate
import numpy as np
from sklearn.metrics import mean_absolute_error, mean_squared_error

DESCRIPTION = """
How close predicted values are to the true ones: the mean squared error, the mean absolute error and Pearson's
correlation coefficient (NaN when the predictions or the references are all equal, where it is undefined).
"""
INPUTS = """
Args:
    predictions (`list[float]`): predicted values.
    references (`list[float]`): true values.
Returns:
    `{"mse": float, "mae": float, "pearson": float}`.
"""


class Regression(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=DESCRIPTION,
            citation="",
            inputs_description=INPUTS,
            features=datasets.Features(
                {"predictions": datasets.Value("float64"), "references": datasets.Value("float64")}
            ),
        )

    def _compute(self, predictions, references) -> dict[str, float]:
        predictions, references = np.asarray(predictions, dtype=np.float64), np.asarray(references, dtype=np.float64)
        constant = predictions.std() == 0 or references.std() == 0
        return {
            "mse": float(mean_squared_error(references, predictions)),
            "mae": float(mean_absolute_error(references, predictions)),
            "pearson": float("nan") if constant else float(np.corrcoef(predictions, references)[0, 1]),
        }
