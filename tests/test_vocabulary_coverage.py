"""vocabulary_coverage.py: the share of [UNK] tokens of a run's training text, and the one line when it is high (the
demo vocabulary on court texts), none with the original vocabulary."""

import datasets
import pytest
from conftest import REPO_ROOT

from roformer_hf import RoFormerJiebaTokenizer
from roformer_hf.training.data.vocabulary_coverage import HIGH_UNKNOWN_SHARE, unknown_token_share, warn_if_many_unknown

DEMO_VOCAB = REPO_ROOT / "data" / "demo_vocab.txt"
ORIGINAL_VOCAB = REPO_ROOT / "data" / "roformer_chinese_base_vocab.txt"


@pytest.fixture(scope="module")
def court_texts(cail_rows) -> datasets.Dataset:
    return datasets.Dataset.from_dict({"text": [row["text"] for row in cail_rows]})


def test_the_share_counts_unknown_tokens():
    tokenizer = RoFormerJiebaTokenizer(str(DEMO_VOCAB))
    tokens = tokenizer.tokenize("今天天气很好。")
    assert unknown_token_share(tokenizer, ["今天天气很好。"]) == tokens.count("[UNK]") / len(tokens)
    assert unknown_token_share(tokenizer, ["龘龘"]) == 1.0 and unknown_token_share(tokenizer, []) == 0.0


def test_the_demo_vocabulary_on_court_texts_gets_one_line(court_texts, caplog):
    demo = RoFormerJiebaTokenizer(str(DEMO_VOCAB))
    with caplog.at_level("WARNING", logger="roformer_hf.training.data.vocabulary_coverage"):
        share = warn_if_many_unknown(demo, court_texts, "text", f"--tokenizer_name {DEMO_VOCAB}")
    assert share > HIGH_UNKNOWN_SHARE
    [record] = caplog.records
    assert record.getMessage().startswith(f"{share:.1%} of the tokens of the training text are [UNK] with ")
    assert "data/roformer_chinese_base_vocab.txt" in record.getMessage()


def test_the_original_vocabulary_on_court_texts_says_nothing(court_texts, caplog):
    original = RoFormerJiebaTokenizer(str(ORIGINAL_VOCAB))
    with caplog.at_level("WARNING", logger="roformer_hf.training.data.vocabulary_coverage"):
        share = warn_if_many_unknown(original, court_texts.to_iterable_dataset(), "text", "the original")
    assert share < 0.01 and not caplog.records


TRADITIONAL = ["法院認為被告違反契約，判決賠償損害。", "本院認為，原告請求有理由，應予准許。"]


def test_the_line_advises_what_the_run_can_change(caplog):
    """The original vocabulary lacks traditional characters: a run with it is not told to use it; a run from a
    checkpoint cannot swap its vocabulary, and is told so."""
    original = RoFormerJiebaTokenizer(str(ORIGINAL_VOCAB))
    texts = datasets.Dataset.from_dict({"text": TRADITIONAL})
    with caplog.at_level("WARNING", logger="roformer_hf.training.data.vocabulary_coverage"):
        share = warn_if_many_unknown(original, texts, "text", f"--tokenizer_name {ORIGINAL_VOCAB}")
        warn_if_many_unknown(original, texts, "text", "the tokenizer of --model_name_or_path me/model", "me/model")
    from_scratch, from_checkpoint = (record.getMessage() for record in caplog.records)
    assert share > 0.3 and "\n" not in from_scratch + from_checkpoint
    assert from_scratch.endswith(
        "as large as the original vocabulary, it still lacks your text's script or characters: use one built from "
        "your text (python -m roformer_hf.build_vocab, docs/tokenizer.md)."
    )
    assert "me/model reads text through its own vocabulary, so start from a checkpoint whose" in from_checkpoint
    assert "use the original 50,000-entry vocabulary" not in from_scratch + from_checkpoint
