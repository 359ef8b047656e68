"""Tests of roformer_hf/training/classification/long_documents.py: truncation, windows, special tokens, the pooling of
window logits, the encoding of a batch with the real tokenizer, and which input settings a run uses."""

import dataclasses
import itertools

import numpy as np
import pytest
from conftest import REPO_ROOT, TINY

from roformer_hf.text_classification_pipeline import (
    DocumentRecipe,
    add_special_tokens,
    pool_chunk_logits,
    split_into_windows,
    truncate_pair,
    truncate_token_ids,
)
from roformer_hf.training.classification.labels import SINGLE_LABEL, LabelInfo
from roformer_hf.training.classification.long_documents import (
    DEFAULT_RECIPE,
    encode_batch,
    first_per_document,
    resolve_input_settings,
)
from roformer_hf.training.errors import ScriptError
from run_classification import DataArguments

# ----------------------------------------------------------------------------------------------------------------
# Truncation, windows, special tokens
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("side", "expected"),
    [("head", [0, 1, 2, 3, 4, 5, 6, 7]), ("tail", [2, 3, 4, 5, 6, 7, 8, 9]), ("head_tail", [0, 1, 4, 5, 6, 7, 8, 9])],
)
def test_truncate_token_ids(side, expected):
    assert truncate_token_ids(range(10), 8, side) == expected
    assert truncate_token_ids(range(5), 8, side) == [0, 1, 2, 3, 4]


def test_truncate_token_ids_rejects_unknown_side():
    with pytest.raises(ValueError, match="head_tail"):
        truncate_token_ids(range(10), 4, "middle")


@pytest.mark.parametrize(
    ("first_length", "second_length", "expected_lengths"),
    [(3, 4, (3, 4)), (3, 20, (3, 7)), (20, 3, (7, 3)), (20, 20, (5, 5)), (9, 9, (5, 5))],
)
def test_truncate_pair_budget(first_length, second_length, expected_lengths):
    first, second = truncate_pair(list(range(first_length)), list(range(100, 100 + second_length)), 10)
    assert (len(first), len(second)) == expected_lengths
    assert first == list(range(len(first))) and second == list(range(100, 100 + len(second)))


def test_truncate_pair_applies_the_side_to_both_texts():
    first, second = truncate_pair(list(range(20)), list(range(100, 120)), 8, "tail")
    assert first == [16, 17, 18, 19] and second == [116, 117, 118, 119]


def test_split_into_windows_golden():
    assert split_into_windows(range(10), 4, 1) == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
    # The last window moves back to end on the last token: [6..9] instead of [8, 9].
    assert split_into_windows(range(10), 4, 0) == [[0, 1, 2, 3], [4, 5, 6, 7], [6, 7, 8, 9]]
    assert split_into_windows(range(3), 4, 2) == [[0, 1, 2]]
    assert split_into_windows([], 4, 2) == [[]]


@pytest.mark.parametrize("length", [1, 7, 8, 9, 50, 101])
@pytest.mark.parametrize(("window_length", "stride"), [(8, 0), (8, 3), (8, 7), (16, 4)])
def test_split_into_windows_covers_the_document(length, window_length, stride):
    windows = split_into_windows(list(range(length)), window_length, stride)
    assert sorted({token for window in windows for token in window}) == list(range(length))
    assert all(len(window) == min(window_length, length) for window in windows)
    for previous, current in itertools.pairwise(windows[:-1]):  # all but the last window overlap by `stride`
        assert current[0] == previous[0] + window_length - stride


def test_add_special_tokens():
    assert add_special_tokens([5, 6], None, 101, 102) == {"input_ids": [101, 5, 6, 102], "token_type_ids": [0] * 4}
    assert add_special_tokens([5], [7, 8], 101, 102) == {
        "input_ids": [101, 5, 102, 7, 8, 102],
        "token_type_ids": [0, 0, 0, 1, 1, 1],
    }


# ----------------------------------------------------------------------------------------------------------------
# Pooling
# ----------------------------------------------------------------------------------------------------------------


WINDOW_LOGITS = np.array([[1.0, 0.0], [3.0, -2.0], [0.0, 5.0], [2.0, 2.0], [-1.0, 4.0]])
WINDOW_DOCUMENTS = [0, 0, 1, 2, 2]


def test_pool_chunk_logits_mean_and_max_by_hand():
    mean = pool_chunk_logits(WINDOW_LOGITS, WINDOW_DOCUMENTS, "mean")
    np.testing.assert_allclose(mean, [[2.0, -1.0], [0.0, 5.0], [0.5, 3.0]])
    maximum = pool_chunk_logits(WINDOW_LOGITS, WINDOW_DOCUMENTS, "max")
    np.testing.assert_allclose(maximum, [[3.0, 0.0], [0.0, 5.0], [2.0, 4.0]])


def test_pool_chunk_logits_ignores_window_order():
    order = [4, 2, 0, 3, 1]
    shuffled = pool_chunk_logits(WINDOW_LOGITS[order], np.array(WINDOW_DOCUMENTS)[order], "mean")
    np.testing.assert_allclose(shuffled, pool_chunk_logits(WINDOW_LOGITS, WINDOW_DOCUMENTS, "mean"))


def test_pool_chunk_logits_rejects_a_document_without_windows():
    with pytest.raises(ValueError, match="no window"):
        pool_chunk_logits(WINDOW_LOGITS, [0, 0, 2, 2, 2], "mean")
    with pytest.raises(ValueError, match="document ids"):
        pool_chunk_logits(WINDOW_LOGITS, [0, 1], "max")


def test_first_per_document():
    np.testing.assert_array_equal(first_per_document(np.array([7, 7, 3, 5, 5]), WINDOW_DOCUMENTS), [7, 3, 5])


# ----------------------------------------------------------------------------------------------------------------
# Encoding a batch with the real tokenizer
# ----------------------------------------------------------------------------------------------------------------


def encode_one(tokenizer, text, data_args, pair=None) -> dict:
    batch = {"text": [text], "label": ["civil"], **({"pair": [pair]} if pair is not None else {})}
    return encode_batch(batch, [0], tokenizer, LabelInfo(SINGLE_LABEL, ["civil", "criminal"]), data_args)


def test_head_tail_truncation_keeps_the_start_and_the_end(tokenizer, cail_rows):
    text = cail_rows[0]["text"]
    token_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(token_ids) > 64
    encoded = encode_one(tokenizer, text, DataArguments(max_seq_length=66, truncation_side="head_tail"))
    # 64 tokens besides [CLS] and [SEP]: the first 16 and the last 48.
    expected = [tokenizer.cls_token_id, *token_ids[:16], *token_ids[-48:], tokenizer.sep_token_id]
    assert encoded["input_ids"] == [expected] and encoded["labels"] == [0]


def test_head_truncation_matches_the_tokenizer(tokenizer, cail_rows):
    text = cail_rows[1]["text"]
    encoded = encode_one(tokenizer, text, DataArguments(max_seq_length=40))
    reference = tokenizer(text, truncation=True, max_length=40)
    assert encoded["input_ids"][0] == reference["input_ids"]
    assert encoded["token_type_ids"][0] == reference["token_type_ids"]


def test_pair_encoding_matches_the_tokenizer(tokenizer, cail_rows):
    text, casename = cail_rows[2]["text"][:30], cail_rows[2]["casename"]
    encoded = encode_one(tokenizer, text, DataArguments(text_pair_column_name="pair"), pair=casename)
    reference = tokenizer(text, casename)
    assert encoded["input_ids"][0] == reference["input_ids"]
    assert encoded["token_type_ids"][0] == reference["token_type_ids"]


def test_chunk_encoding_covers_the_document(tokenizer, cail_rows):
    text = cail_rows[3]["text"]
    token_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    data_args = DataArguments(max_seq_length=34, long_doc_strategy="chunk", chunk_stride=8)
    encoded = encode_one(tokenizer, text, data_args)
    windows = split_into_windows(token_ids, 32, 8)
    assert len(windows) > 2
    assert encoded["input_ids"] == [[tokenizer.cls_token_id, *window, tokenizer.sep_token_id] for window in windows]
    assert encoded["document_index"] == [0] * len(windows) and encoded["labels"] == [0] * len(windows)


# ----------------------------------------------------------------------------------------------------------------
# Which input settings a run uses
# ----------------------------------------------------------------------------------------------------------------


def test_resolve_input_settings_order():
    """Command line first, then the checkpoint's saved settings, then the defaults. The options given are the parser's
    report (`ParsedArguments.given`), no longer None in the dataclass (issue 50.5): a given value equal to the default
    still wins over the checkpoint's."""
    from roformer_hf import RoFormerConfig, RoFormerForSequenceClassification

    config = RoFormerConfig(
        **TINY, classification_inputs={"max_seq_length": 48, "truncation_side": "tail", "chunk_pooling": "max"}
    )
    model = RoFormerForSequenceClassification(config)
    data_args = DataArguments(max_seq_length=300, long_doc_strategy="chunk")
    given = {"max_seq_length", "long_doc_strategy", "chunk_pooling"}
    resolved = resolve_input_settings(data_args, given, model, "fine-tuned", training=False)
    assert (resolved.max_seq_length, resolved.truncation_side, resolved.long_doc_strategy) == (300, "tail", "chunk")
    assert (resolved.chunk_stride, resolved.chunk_pooling) == (128, "mean")
    assert model.config.classification_inputs["max_seq_length"] == 300
    data_args.chunk_stride = 150  # not less than half of 300: DataArguments' own check, now that the length is known
    with pytest.raises(ScriptError, match="chunk_stride"):
        resolve_input_settings(data_args, {*given, "chunk_stride"}, model, "fine-tuned", training=False)


# --- benchmarks/longdoc_experiment.py: the split pretraining never sees ---


def longdoc_experiment():
    import importlib.util

    spec = importlib.util.spec_from_file_location("longdoc", REPO_ROOT / "benchmarks" / "longdoc_experiment.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_long_document_split_is_stratified_and_never_pretrained_on(tmp_path):
    experiment = longdoc_experiment()
    if not experiment.FUDAN.exists():
        pytest.skip(f"{experiment.FUDAN} is not here")
    documents = experiment.fudan_documents(with_more=True)
    assert len(documents) > len(experiment.read_jsonl(experiment.FUDAN))  # the second file's documents too
    train_file, validation_file = experiment.split_fudan(tmp_path, 0.2, seed=0, per_class=10)
    train, validation = experiment.read_jsonl(train_file), experiment.read_jsonl(validation_file)
    labels = {row["label"] for row in documents}
    assert len(train) == 8 * len(labels) and len(validation) == 2 * len(labels)
    assert {row["label"] for row in validation} == labels
    corpus_files = experiment.write_pretraining_corpus(tmp_path, train_file, max_paragraphs=50)
    pretrained_texts = {row["text"] for path in corpus_files for row in experiment.read_jsonl(path)}
    assert {row["text"] for row in train} <= pretrained_texts
    assert not {row["text"] for row in validation} & pretrained_texts


@pytest.mark.slow
def test_the_long_document_experiment_dry_run_writes_its_table(tmp_path):
    """The whole pipeline, tiny, on the CPU (about 2 minutes on 2 busy cores): pretraining, three settings, naive
    Bayes, the markdown table with every setting."""
    experiment = longdoc_experiment()
    if not experiment.FUDAN.exists():
        pytest.skip(f"{experiment.FUDAN} is not here")
    experiment.main(["--tiny", "--output_dir", str(tmp_path)])
    table = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert "| naive Bayes, character 1-2-grams of the first 3,000 characters | 1 |" in table
    for setting in ("max_seq_length 64 (head)", "max_seq_length 128 (head)", "chunks of 64 tokens, mean-pooled"):
        assert f"| RoFormer, {setting}" in table
    assert "| pretraining (eval loss" in table


def test_the_command_line_takes_the_input_settings_from_the_recipe():
    """One declaration: every field of `DocumentRecipe` is an option of run_classification.py, with the recipe's
    choices and `DEFAULT_RECIPE`'s value as its default; the defaults are a recipe a classifier's config accepts."""
    options = {option.name: option for option in dataclasses.fields(DataArguments)}
    for setting in dataclasses.fields(DocumentRecipe):
        option = options[setting.name]
        assert option.default == getattr(DEFAULT_RECIPE, setting.name)
        assert option.metadata.get("choices") == (list(setting.metadata["choices"]) if setting.metadata else None)
    assert DocumentRecipe.from_settings(dataclasses.asdict(DEFAULT_RECIPE)) == DEFAULT_RECIPE
    assert DataArguments().recipe() == DEFAULT_RECIPE
