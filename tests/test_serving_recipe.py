"""What was evaluated is what is served: a classifier fine-tuned by run_classification.py, served with
`pipeline("text-classification", model=folder)` (roformer_hf imported, or `trust_remote_code=True` without it), gives
the scores of the script's own `--do_predict` on long documents, for every way of reading them (head, tail,
head_tail, chunk with mean or max pooling). A classifier without that recipe is served as transformers serves it."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from conftest import BERT_VOCAB, TINY_WORD_VOCAB, skip_unless_bf16_pays
from test_run_classification import DISTINCT_TINY_MODEL, read_predictions, tiny_run, write_jsonl
from transformers import TextClassificationPipeline, pipeline
from transformers.pipelines import PIPELINE_REGISTRY

import roformer_hf
from roformer_hf.text_classification_pipeline import (
    DocumentRecipe,
    RecipeOrPlainPipeline,
    RoFormerTextClassificationPipeline,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
# How each classifier reads its documents (run_classification.py options), at 48 tokens: the test documents are
# hundreds of tokens long, so every way keeps different tokens.
STRATEGIES = {
    "head": ("--truncation_side", "head"),
    "tail": ("--truncation_side", "tail"),
    "head_tail": ("--truncation_side", "head_tail"),
    "chunk_mean": ("--long_doc_strategy", "chunk", "--chunk_stride", "8", "--chunk_pooling", "mean"),
    "chunk_max": ("--long_doc_strategy", "chunk", "--chunk_stride", "8", "--chunk_pooling", "max"),
}
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def documents(cail_rows) -> list[dict]:
    """Long court documents of both classes and one short text: a batch of mixed lengths."""
    rows = [{"text": row["text"], "label": row["label"]} for row in cail_rows]
    return [rows[20], rows[50], {"text": rows[21]["text"][:30], "label": rows[21]["label"]}, rows[51], rows[22]]


@pytest.fixture(scope="module")
def fine_tuned(tmp_path_factory, roformer_vocab, cail_rows, documents) -> dict[str, Path]:
    """A classifier per strategy, fine-tuned 2 steps at 48 tokens, with its --do_predict on `documents`."""
    folder = tmp_path_factory.mktemp("serving")
    rows = [{"text": row["text"], "label": row["label"]} for row in cail_rows]
    train = write_jsonl(folder / "train.jsonl", rows[:8] + rows[30:38])
    test = write_jsonl(folder / "test.jsonl", documents)
    folders = {}
    for strategy, options in STRATEGIES.items():
        folders[strategy] = folder / strategy
        tiny_run(
            roformer_vocab,
            folders[strategy],
            *("--train_file", str(train), "--test_file", str(test), "--do_train", "--do_predict"),
            *("--max_steps", "2", "--max_seq_length", "48", "--config_overrides", DISTINCT_TINY_MODEL, *options),
        )
    return folders


def predicted_scores(folder: Path) -> list[dict[str, float]]:
    """The label probabilities of every document, as run_classification.py's --do_predict wrote them."""
    return [record["scores"] for record in read_predictions(folder)]


def served_scores(results: list[list[dict]]) -> list[dict[str, float]]:
    """The label probabilities of every document, as the pipeline gave them with `top_k=None`."""
    return [{result["label"]: result["score"] for result in document} for document in results]


def largest_difference(served: list[dict[str, float]], predicted: list[dict[str, float]]) -> float:
    return max(abs(one[label] - other[label]) for one, other in zip(served, predicted, strict=True) for label in one)


def largest_log_odds_difference(served: list[dict[str, float]], predicted: list[dict[str, float]]) -> float:
    """The largest difference of log p(criminal) - log p(civil), the logit difference behind the scores: it tells
    readings apart where the tiny classifiers' probabilities are close to 0 or 1."""
    log_odds = [
        [np.log(scores["criminal"]) - np.log(scores["civil"]) for scores in side] for side in (served, predicted)
    ]
    return float(np.max(np.abs(np.subtract(*log_odds))))


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_served_scores_are_the_predicted_ones(fine_tuned, documents, strategy):
    folder = fine_tuned[strategy]
    predicted = predicted_scores(folder)
    classifier = pipeline("text-classification", model=str(folder))
    assert isinstance(classifier, RoFormerTextClassificationPipeline)
    texts = [document["text"] for document in documents]
    one_by_one = served_scores([classifier(text, top_k=None) for text in texts])
    batched = served_scores(classifier(texts, top_k=None, batch_size=3))  # mixed lengths: padded batches
    assert largest_difference(one_by_one, predicted) < TOLERANCE
    assert largest_difference(batched, predicted) < TOLERANCE
    assert largest_log_odds_difference(batched, predicted) < 1e-3  # also where probabilities are close to 0 or 1
    labels = [max(scores, key=scores.get) for scores in predicted]
    assert [result["label"] for result in classifier(texts, batch_size=2)] == labels  # top_k's default: the best
    assert [record["prediction"] for record in read_predictions(folder)] == labels


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_transformers_own_reading_differs(fine_tuned, documents, strategy):
    """What this feature changes: transformers' pipeline reads all tokens, or with truncation=True the head only."""
    folder = fine_tuned[strategy]
    predicted = predicted_scores(folder)
    plain = pipeline("text-classification", model=str(folder), pipeline_class=TextClassificationPipeline)
    texts = [document["text"] for document in documents]
    whole = served_scores(plain(texts, top_k=None))
    assert largest_log_odds_difference(whole, predicted) > 0.1
    head = served_scores(plain(texts, top_k=None, truncation=True))  # the saved tokenizer cuts at 48 tokens
    if strategy == "head":  # transformers' truncation is the head: the one reading it gets right
        assert largest_difference(head, predicted) < TOLERANCE
    else:
        assert largest_log_odds_difference(head, predicted) > 0.1


def test_function_to_apply_and_pairs_follow_transformers(fine_tuned, documents):
    classifier = pipeline("text-classification", model=str(fine_tuned["head_tail"]))
    text = documents[0]["text"]
    logits = classifier(text, top_k=None, function_to_apply="none")
    probabilities = classifier(text, top_k=None)
    softmax = torch.tensor([result["score"] for result in logits]).softmax(-1)
    assert [result["score"] for result in probabilities] == pytest.approx(softmax.tolist(), abs=1e-6)
    assert len(classifier(text, top_k=1)) == 1
    pair = classifier({"text": text, "text_pair": documents[1]["text"]})
    assert set(pair) == {"label", "score"}


def test_options_that_would_read_otherwise_are_refused(fine_tuned, documents):
    text = documents[0]["text"]
    classifier = pipeline("text-classification", model=str(fine_tuned["head_tail"]))
    assert classifier(text, truncation=True) == classifier(text)  # the recipe truncates anyway
    with pytest.raises(ValueError, match="max_length would change: leave them out"):
        classifier(text, max_length=16)
    with pytest.raises(ValueError, match="give a text, a list of texts, or"):
        classifier({"document": text})
    chunked = pipeline("text-classification", model=str(fine_tuned["chunk_mean"]))
    with pytest.raises(ValueError, match="reads single texts: give one text, not a text_pair"):
        chunked({"text": text, "text_pair": "原告"})


def test_a_recipe_checkpoint_names_its_pipeline(fine_tuned):
    config = json.loads((fine_tuned["chunk_max"] / "config.json").read_text())
    assert config["classification_inputs"]["chunk_pooling"] == "max"
    impl = config["custom_pipelines"]["text-classification"]["impl"]
    assert impl == "text_classification_pipeline.RoFormerTextClassificationPipeline"
    # the pipeline's code is one file that imports nothing relatively: transformers copies no other module with it
    pipeline_code = (fine_tuned["head"] / "text_classification_pipeline.py").read_text(encoding="utf-8")
    assert re.search(r"^\s*from \.", pipeline_code, flags=re.MULTILINE) is None
    assert not (fine_tuned["head"] / "document_inputs.py").exists()
    # where roformer_hf is imported its own pipeline serves the task, so no trust_remote_code is asked for
    assert transformers.AutoConfig.from_pretrained(fine_tuned["chunk_max"]).custom_pipelines == {}


# --do_predict in bf16, and the way of serving that gives its scores (docs/scripts.md, "Precision of the scores").
BF16_PREDICTIONS = {
    "bf16 autocast": (("--bf16", "true"), {}),  # served under torch.autocast, float32 weights
    "bfloat16": (("--bf16", "true", "--bf16_full_eval", "true"), {"dtype": torch.bfloat16}),
}


@pytest.mark.parametrize("precision", list(BF16_PREDICTIONS))
def test_bf16_predictions_are_served_in_their_own_precision(fine_tuned, documents, roformer_vocab, precision):
    """Each precision's --do_predict scores, served in the same precision, within 1e-5; served in float32 they
    differ by more (bf16 keeps 8 bits of mantissa)."""
    skip_unless_bf16_pays()
    flags, pipeline_options = BF16_PREDICTIONS[precision]
    folder, output_dir = fine_tuned["head"], fine_tuned["head"].parent / f"predict-{precision.replace(' ', '-')}"
    tiny_run(
        roformer_vocab,
        output_dir,
        *("--model_name_or_path", str(folder), "--test_file", str(folder.parent / "test.jsonl"), "--do_predict"),
        *("--max_seq_length", "48", "--config_overrides", DISTINCT_TINY_MODEL, *flags),
    )
    assert json.loads((output_dir / "all_results.json").read_text())["test_precision"] == precision
    predicted = predicted_scores(output_dir)
    texts = [document["text"] for document in documents]
    classifier = pipeline("text-classification", model=str(folder), **pipeline_options)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16 autocast"):
        served = served_scores(classifier(texts, top_k=None, batch_size=8))  # --do_predict's batch
    assert largest_difference(served, predicted) < TOLERANCE
    in_float32 = served_scores(pipeline("text-classification", model=str(folder))(texts, top_k=None))
    assert largest_difference(in_float32, predicted) > TOLERANCE


# Serves the checkpoints in a fresh interpreter where roformer_hf cannot be imported, with trust_remote_code=True.
CHILD = """
import json
import sys

sys.modules["roformer_hf"] = None  # as if roformer_hf were not installed
sys.modules["rjieba"] = None

import transformers

folders, texts = json.loads(sys.argv[1]), json.loads(sys.argv[2])
results = {}
for strategy, folder in folders.items():
    classifier = transformers.pipeline("text-classification", model=folder, trust_remote_code=True)
    results[strategy] = {
        "module": type(classifier).__module__,
        "one_by_one": [classifier(text, top_k=None) for text in texts],
        "batched": classifier(texts, top_k=None, batch_size=3),
    }
print(json.dumps(results))
"""


# Loads a checkpoint and saves it again where roformer_hf cannot be imported, as a user of remote code would.
RESAVE = """
import sys

sys.modules["roformer_hf"] = None
sys.modules["rjieba"] = None

import transformers

source, target = sys.argv[1:]
for auto_class in (transformers.AutoModelForSequenceClassification, transformers.AutoTokenizer):
    auto_class.from_pretrained(source, trust_remote_code=True).save_pretrained(target)
"""


def without_roformer_hf(script: str, *arguments: str, cwd: Path) -> str:
    """Runs `script` in a fresh interpreter (where it hides roformer_hf); its standard output."""
    completed = subprocess.run(
        [sys.executable, "-c", script, *arguments], cwd=cwd, capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


def test_remote_code_serves_the_recipe_without_roformer_hf(fine_tuned, documents, tmp_path):
    served = ("head_tail", "chunk_max")
    folders = {strategy: str(fine_tuned[strategy]) for strategy in served}
    texts = [document["text"] for document in documents]
    stdout = without_roformer_hf(CHILD, json.dumps(folders), json.dumps(texts, ensure_ascii=False), cwd=tmp_path)
    results = json.loads(stdout.strip().splitlines()[-1])
    for strategy in served:
        predicted = predicted_scores(fine_tuned[strategy])
        assert results[strategy]["module"].startswith("transformers_modules.")
        assert largest_difference(served_scores(results[strategy]["one_by_one"]), predicted) < TOLERANCE
        assert largest_difference(served_scores(results[strategy]["batched"]), predicted) < TOLERANCE


def test_a_copy_saved_by_remote_code_keeps_its_pipeline(fine_tuned, documents, tmp_path):
    """Loaded with trust_remote_code where roformer_hf is missing and saved again, a recipe classifier keeps the code
    of its pipeline (which that process never loaded), so the copy is served as the original was evaluated."""
    source, copy = fine_tuned["chunk_max"], tmp_path / "copy"
    without_roformer_hf(RESAVE, str(source), str(copy), cwd=tmp_path)
    name = "text_classification_pipeline.py"
    assert (copy / name).read_bytes() == (source / name).read_bytes()
    texts = [document["text"] for document in documents]
    stdout = without_roformer_hf(
        CHILD, json.dumps({"copy": str(copy)}), json.dumps(texts, ensure_ascii=False), cwd=tmp_path
    )
    served = json.loads(stdout.strip().splitlines()[-1])["copy"]
    assert served["module"].startswith("transformers_modules.")
    assert largest_difference(served_scores(served["one_by_one"]), predicted_scores(source)) < TOLERANCE


# The commit whose checkpoints carried the pipeline's code as two files (and the tokenizer's as five).
TWO_FILE_PIPELINE_COMMIT = "f5f3415"

# Loads a checkpoint and saves it again with the roformer_hf of the folder first on sys.path (argv[1]).
SAVE_WITH_PACKAGE = """
import sys

sys.path.insert(0, sys.argv[1])
import roformer_hf

assert roformer_hf.__file__.startswith(sys.argv[1]), roformer_hf.__file__
source, target = sys.argv[2:]
roformer_hf.RoFormerForSequenceClassification.from_pretrained(source).save_pretrained(target)
roformer_hf.RoFormerJiebaTokenizer.from_pretrained(source).save_pretrained(target)
"""


def test_a_classifier_saved_with_the_two_pipeline_files_is_served_both_ways(fine_tuned, documents, tmp_path):
    """A recipe classifier saved by f5f3415's roformer_hf (its pipeline in two files, its tokenizer in five) serves
    its --do_predict scores with its own code where roformer_hf is missing, and with this roformer_hf's pipeline."""
    archive = subprocess.run(
        ["git", "archive", TWO_FILE_PIPELINE_COMMIT, "roformer_hf"], cwd=REPO_ROOT, capture_output=True, check=False
    )
    if archive.returncode != 0:
        pytest.skip(f"commit {TWO_FILE_PIPELINE_COMMIT} is not in this clone's history (a shallow clone?)")
    package = tmp_path / "package"
    package.mkdir()
    subprocess.run(["tar", "-x", "-C", str(package)], input=archive.stdout, check=True)
    source, saved = fine_tuned["chunk_max"], tmp_path / "saved"
    without_roformer_hf(SAVE_WITH_PACKAGE, str(package), str(source), str(saved), cwd=tmp_path)
    assert {"text_classification_pipeline.py", "document_inputs.py", "text_rules.py"} <= {
        path.name for path in saved.glob("*.py")
    }
    texts = [document["text"] for document in documents]
    stdout = without_roformer_hf(CHILD, json.dumps({"saved": str(saved)}), json.dumps(texts), cwd=tmp_path)
    remote = json.loads(stdout.strip().splitlines()[-1])["saved"]
    assert remote["module"].startswith("transformers_modules.")
    predicted = predicted_scores(source)
    assert largest_difference(served_scores(remote["batched"]), predicted) < TOLERANCE
    classifier = pipeline("text-classification", model=str(saved))
    assert isinstance(classifier, RoFormerTextClassificationPipeline)
    assert largest_difference(served_scores(classifier(texts, top_k=None, batch_size=3)), predicted) < TOLERANCE


def test_a_classifier_without_recipe_is_served_as_transformers_serves_it(tokenizer, tmp_path, cail_rows):
    """A classifier fine-tuned with a plain Trainer: no classification_inputs, no custom_pipelines, and the same
    outputs as transformers' own TextClassificationPipeline, whatever the options."""
    torch.manual_seed(0)
    config = roformer_hf.RoFormerConfig(**TINY_WORD_VOCAB, initializer_range=0.5, id2label={0: "civil", 1: "criminal"})
    roformer_hf.RoFormerForSequenceClassification(config).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    assert "custom_pipelines" not in json.loads((tmp_path / "config.json").read_text())
    assert not (tmp_path / "text_classification_pipeline.py").exists()
    ours = pipeline("text-classification", model=str(tmp_path))
    theirs = pipeline("text-classification", model=str(tmp_path), pipeline_class=TextClassificationPipeline)
    assert type(ours) is TextClassificationPipeline  # transformers' own object, as without roformer_hf
    texts = [cail_rows[0]["text"], cail_rows[40]["text"][:50], cail_rows[41]["text"]]
    for options in ({}, {"top_k": None}, {"truncation": True, "max_length": 32}, {"function_to_apply": "sigmoid"}):
        assert ours(texts, batch_size=2, **options) == theirs(texts, batch_size=2, **options)
        assert ours(texts[0], **options) == theirs(texts[0], **options)
    scores = [result["score"] for result in ours(texts)]
    assert np.ptp(scores) > 1e-3  # the texts are told apart, so equal outputs say something


def test_bert_is_served_by_transformers_own_pipeline(tmp_path, cail_rows):
    """Importing roformer_hf leaves every other model's text-classification pipeline as transformers builds it."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    (tmp_path / "vocab.txt").write_bytes(BERT_VOCAB.read_bytes())
    config = BertConfig(vocab_size=21128, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_labels=2)
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(tmp_path)
    BertTokenizer(str(tmp_path / "vocab.txt")).save_pretrained(tmp_path)
    served = pipeline("text-classification", model=str(tmp_path))
    assert PIPELINE_REGISTRY.supported_tasks["text-classification"]["impl"] is RecipeOrPlainPipeline
    assert type(served) is TextClassificationPipeline
    texts = [row["text"][:200] for row in cail_rows[:3]]
    assert served(texts) == TextClassificationPipeline(model=served.model, tokenizer=served.tokenizer)(texts)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"chunk_pooling": None}, "classification_inputs lacks chunk_pooling: give all of"),
        ({"chunk_pooling": "median"}, "chunk_pooling 'median': use one of 'mean', 'max'"),
        ({"long_doc_strategy": "chunk", "chunk_stride": 64}, "chunk_stride 64: it must be at least 0 and less than"),
        ({"max_seq_length": 4}, "max_seq_length 4: use 8 or more"),
    ],
)
def test_a_broken_recipe_is_named(change, message):
    settings = {"max_seq_length": 128, "truncation_side": "head", "long_doc_strategy": "truncate"}
    settings = {**settings, "chunk_stride": 32, "chunk_pooling": "mean", **change}
    settings = {name: value for name, value in settings.items() if value is not None}
    with pytest.raises(ValueError, match=message):
        DocumentRecipe.from_settings(settings)
