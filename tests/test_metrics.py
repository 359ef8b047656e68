"""Tests of roformer_hf.metrics: the scripts' metrics as offline `evaluate` modules, against scikit-learn."""

import os
import subprocess
import sys
from pathlib import Path

import evaluate
import numpy as np
import pytest
from conftest import HANG_GUARD_S
from sklearn.metrics import accuracy_score, f1_score, mean_absolute_error, mean_squared_error
from transformers import EvalPrediction

from roformer_hf import metrics
from roformer_hf.training.classification.classification_scores import compute_task_metrics
from roformer_hf.training.classification.labels import SINGLE_LABEL
from roformer_hf.training.mlm.whole_word_masking import masked_token_accuracy

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def classes() -> tuple[np.ndarray, np.ndarray]:
    """Predicted and true classes of 200 examples of 5 classes, 60% correct."""
    generator = np.random.default_rng(0)
    references = generator.integers(0, 5, 200)
    predictions = np.where(generator.random(200) < 0.6, references, generator.integers(0, 5, 200))
    return predictions, references


def test_accuracy_and_f1_match_scikit_learn(classes):
    predictions, references = classes
    assert metrics.load("accuracy").compute(predictions=predictions, references=references) == {
        "accuracy": pytest.approx(accuracy_score(references, predictions), abs=1e-12)
    }
    f1 = metrics.load("f1")
    for average in ("macro", "micro", "weighted"):
        result = f1.compute(predictions=predictions, references=references, average=average)
        assert result == {f"f1_{average}": pytest.approx(f1_score(references, predictions, average=average))}


def test_multilabel_accuracy_and_f1_match_scikit_learn():
    generator = np.random.default_rng(1)
    references = generator.integers(0, 2, (50, 4))
    predictions = np.where(generator.random((50, 4)) < 0.7, references, 1 - references)
    accuracy = metrics.load("accuracy", "multilabel").compute(predictions=predictions, references=references)
    assert 0 < accuracy["accuracy"] == pytest.approx(accuracy_score(references, predictions))
    f1 = metrics.load("f1", "multilabel").compute(predictions=predictions, references=references, average="micro")
    assert f1["f1_micro"] == pytest.approx(f1_score(references, predictions, average="micro"))


def test_masked_accuracy_leaves_out_unmasked_positions():
    references = np.array([[-100, 5, -100, 7], [3, -100, -100, 9]])
    predictions = np.array([[5, 5, 0, 1], [3, 2, 2, 9]])  # right at 3 of the 4 masked positions, wrong elsewhere
    result = metrics.load("masked_accuracy").compute(predictions=predictions.ravel(), references=references.ravel())
    assert result == {"accuracy": 0.75}


def test_regression_matches_scikit_learn_and_numpy():
    generator = np.random.default_rng(2)
    references = generator.normal(size=100)
    predictions = references + generator.normal(scale=0.5, size=100)
    result = metrics.load("regression").compute(predictions=predictions, references=references)
    assert result["mse"] == pytest.approx(mean_squared_error(references, predictions))
    assert result["mae"] == pytest.approx(mean_absolute_error(references, predictions))
    assert result["pearson"] == pytest.approx(np.corrcoef(predictions, references)[0, 1])
    constant = metrics.load("regression").compute(predictions=[1.0, 1.0], references=[1.0, 2.0])
    assert np.isnan(constant["pearson"])


def test_combine_accuracy_and_f1(classes):
    predictions, references = classes
    combined = evaluate.combine([metrics.load("accuracy"), metrics.load("f1")])
    assert combined.compute(predictions=predictions, references=references) == {
        "accuracy": pytest.approx(accuracy_score(references, predictions)),
        "f1_macro": pytest.approx(f1_score(references, predictions, average="macro")),
    }


def test_scripts_report_the_metrics_scikit_learn_gives(classes):
    """The names and numbers the scripts reported when they called scikit-learn themselves."""
    predictions, references = classes
    logits = np.eye(5)[predictions]
    single = compute_task_metrics(logits, references, SINGLE_LABEL)
    assert single == {
        "accuracy": pytest.approx(accuracy_score(references, predictions)),
        "f1_macro": pytest.approx(f1_score(references, predictions, average="macro")),
    }
    labels = np.where(np.arange(20).reshape(4, 5) % 3 == 0, references[:20].reshape(4, 5), -100)
    masked = labels != -100
    token_predictions = predictions[:20].reshape(4, 5)
    mlm = masked_token_accuracy(EvalPrediction(predictions=token_predictions, label_ids=labels))
    assert mlm == {"accuracy": pytest.approx(accuracy_score(labels[masked], token_predictions[masked]))}


def test_unknown_metric_is_named():
    with pytest.raises(ValueError, match="unknown metric 'bleu'"):
        metrics.load("bleu")


@pytest.mark.slow
def test_metrics_load_offline_in_a_fresh_cache_from_two_processes(tmp_path):
    """Two processes that load every metric at once into an empty module cache, with the Hub out of reach."""
    code = (
        "from roformer_hf import metrics\n"
        "for name in metrics.METRIC_NAMES:\n"
        "    metric = metrics.load(name)\n"
        "print(metrics.load('accuracy').compute(predictions=[1, 0], references=[1, 1])['accuracy'])\n"
    )
    environment = {
        **os.environ,
        "HF_HOME": str(tmp_path / "hf_home"),
        "HF_MODULES_CACHE": str(tmp_path / "hf_home" / "modules"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "PYTHONPATH": str(REPO_ROOT),
    }
    processes = [
        subprocess.Popen([sys.executable, "-c", code], env=environment, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=HANG_GUARD_S)[0] for process in processes]
    assert [process.returncode for process in processes] == [0, 0]
    assert [output.strip().splitlines()[-1] for output in outputs] == ["0.5", "0.5"]
    assert (tmp_path / "hf_home" / "modules" / "evaluate_modules" / "metrics").is_dir()


def test_metric_scripts_are_package_data():
    """A wheel carries every metric script: setup.cfg lists the subpackage, and its package data pattern matches them."""
    import configparser

    setup = configparser.ConfigParser()
    setup.read(REPO_ROOT / "setup.cfg")
    packages = [name.strip() for name in setup["options"]["packages"].replace("\n", ",").split(",") if name.strip()]
    assert "roformer_hf.metrics" in packages
    pattern = setup["options.package_data"]["roformer_hf.metrics"].strip()
    shipped = {path.relative_to(metrics.METRICS_DIR) for path in metrics.METRICS_DIR.glob(pattern)}
    assert shipped == {Path(name) / f"{name}.py" for name in metrics.METRIC_NAMES}
