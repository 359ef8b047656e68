"""The metrics of roformer_hf's scripts as `evaluate` metric modules shipped inside the package: offline, no Hub.

`evaluate.load("accuracy")` downloads the metric's script from the Hub. These modules are the same kind of script
(an `evaluate.Metric` with `_info` and `_compute`, scikit-learn underneath), stored in this folder, so
`evaluate.load(<local path>)` reads them from disk; `load` below does that. They work wherever `evaluate`'s modules
do, e.g. in `evaluate.combine`:

```python
>>> import evaluate
>>> from roformer_hf import metrics
>>> accuracy_and_f1 = evaluate.combine([metrics.load("accuracy"), metrics.load("f1")])
>>> accuracy_and_f1.compute(predictions=[0, 1, 1], references=[0, 1, 0])
{'accuracy': 0.6666666666666666, 'f1_macro': 0.6666666666666666}
```

| name | returns | what it measures |
| --- | --- | --- |
| `accuracy` | `accuracy` | share of correct class ids (config `"multilabel"`: exact match of 0/1 vectors) |
| `masked_accuracy` | `accuracy` | share of correct token ids where the reference is not -100 (MLM) |
| `f1` | `f1_<average>` | F1 averaged as `average` says (`"macro"` by default; config `"multilabel"` for 0/1 vectors) |
| `regression` | `mse`, `mae`, `pearson` | errors and correlation of predicted values |
"""

from pathlib import Path

METRICS_DIR = Path(__file__).resolve().parent
METRIC_NAMES = ("accuracy", "f1", "masked_accuracy", "regression")


def metric_path(name: str) -> Path:
    """
    The path of the script of metric `name`, for `evaluate.load(str(path))`.

    Args:
        name (`str`): one of `METRIC_NAMES`.
    """
    if name not in METRIC_NAMES:
        raise ValueError(f"unknown metric {name!r}: roformer_hf ships {', '.join(METRIC_NAMES)}.")
    return METRICS_DIR / name / f"{name}.py"


def load(name: str, config_name: str | None = None, **load_options):
    """
    Load one of roformer_hf's metrics with `evaluate.load`, from the package's own files (no Hub access).

    The metric keeps its predictions in memory (`keep_in_memory=True`) rather than in cache files under
    `~/.cache/huggingface/metrics`, so processes of a distributed run that each compute it share no files;
    `evaluate.load` copies the script into its module cache (`HF_MODULES_CACHE`, under a file lock).

    Args:
        name (`str`): `"accuracy"`, `"f1"`, `"masked_accuracy"` or `"regression"`.
        config_name (`str`, *optional*): `"multilabel"` for `accuracy` and `f1` on 0/1 vectors.
        load_options: further keyword arguments of `evaluate.load` (e.g. `keep_in_memory=False`).

    Returns:
        `evaluate.EvaluationModule`: call `.compute(predictions=..., references=...)`.
    """
    import evaluate

    load_options.setdefault("keep_in_memory", True)
    return evaluate.load(str(metric_path(name)), config_name, **load_options)


__all__ = ["METRIC_NAMES", "load", "metric_path"]
