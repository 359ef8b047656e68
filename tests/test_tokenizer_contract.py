"""RoFormerJiebaTokenizer keeps transformers' fast-tokenizer contract: its `BatchEncoding`s answer `tokens()`,
`word_ids()`, `sequence_ids()`, `char_to_token()`, ... as `BertTokenizerFast` and transformers' own
`RoFormerTokenizerFast` do, on real text, for single texts, pairs, batches, pre-split words and overflow windows."""

import itertools
import pickle
import unittest

import pytest
from conftest import BERT_VOCAB, PEOPLES_DAILY_SAMPLE, long_documents
from transformers import AutoTokenizer, BertTokenizerFast, RoFormerTokenizerFast

import roformer_hf  # noqa: F401  (registers AutoTokenizer)
from roformer_hf import RoFormerJiebaTokenizer
from roformer_hf.tokenization import load_vocab

EXAMPLE = "永和服装饰品有限公司,今天天气非常好"


@pytest.fixture(scope="module")
def transformers_roformer(tokenizer):
    """transformers' RoFormer tokenizer built from the same vocab: the same ids, and a real fast tokenizer."""
    return RoFormerTokenizerFast(vocab=dict(tokenizer.vocab))


@pytest.fixture(scope="module")
def lines():
    text = PEOPLES_DAILY_SAMPLE.read_text(encoding="utf-8")  # the full file's first paragraphs
    return [line for line in text.splitlines() if line.strip()][:300]


def alignment(encoding, row: int) -> dict:
    """Everything the alignment API says about one row, asked through `BatchEncoding`'s methods."""
    size = len(encoding["input_ids"][row])
    characters = max((end for start, end in encoding[row].offsets), default=0) + 1
    return {
        "tokens": encoding.tokens(row),
        "sequence_ids": encoding.sequence_ids(row),
        "offsets": [tuple(span) for span in encoding[row].offsets],
        "special_tokens_mask": encoding[row].special_tokens_mask,
        "attention_mask": encoding[row].attention_mask,
        "token_to_sequence": [encoding.token_to_sequence(row, index) for index in range(size)],
        "token_to_chars": [encoding.token_to_chars(row, index) for index in range(size)],
        "char_to_token": [
            [encoding.char_to_token(row, char, sequence_index=sequence) for char in range(characters)]
            for sequence in (0, 1)
        ],
    }


def word_alignment(encoding, row: int) -> dict:
    """What the alignment API says about the words of one row."""
    word_ids = encoding.word_ids(row)
    pairs = zip(encoding.sequence_ids(row), word_ids, strict=True)
    words = sorted({(sequence, word) for sequence, word in pairs if word is not None})
    characters = max((end for start, end in encoding[row].offsets), default=0) + 1
    return {
        "word_ids": word_ids,
        "token_to_word": [encoding.token_to_word(row, index) for index in range(len(word_ids))],
        "word_to_tokens": [encoding.word_to_tokens(row, word, sequence_index=sequence) for sequence, word in words],
        "word_to_chars": [encoding.word_to_chars(row, word, sequence_index=sequence) for sequence, word in words],
        "char_to_word": [encoding.char_to_word(row, char) for char in range(characters)],
    }


def test_golden_example_of_a_pair(tokenizer):
    encoding = tokenizer(EXAMPLE, "今天很好")
    assert encoding.is_fast and encoding.n_sequences == 2
    assert encoding.tokens() == [
        "[CLS]", "永和", "服装", "饰品", "有限公司", ",", "今", "天", "天", "气", "非常", "好", "[SEP]",
        "今天", "很", "好", "[SEP]",
    ]  # fmt: skip
    # "今天天气" is one jieba word missing from the vocab: its four characters share word 5
    assert encoding.word_ids() == [None, 0, 1, 2, 3, 4, 5, 5, 5, 5, 6, 7, None, 0, 1, 2, None]
    assert encoding.sequence_ids() == [None] + [0] * 11 + [None] + [1] * 3 + [None]
    assert encoding.word_to_tokens(5) == (6, 10)
    assert encoding.word_to_chars(5) == (11, 15)
    assert encoding.token_to_chars(10) == (15, 17)
    assert encoding.char_to_token(16) == 10
    assert encoding.char_to_word(16) == 6
    assert encoding.char_to_token(1, sequence_index=1) == 13
    assert encoding.word_to_chars(0, sequence_index=1) == (0, 2)
    assert encoding.token_to_word(0) is None and encoding.token_to_chars(12) is None


@pytest.mark.parametrize(
    "call",
    [
        {},
        {"padding": "max_length", "max_length": 200, "truncation": True},
        {"padding": True, "padding_side": "left", "return_tensors": "pt"},
        {"truncation": True, "max_length": 24, "stride": 6, "return_overflowing_tokens": True, "padding": True},
    ],
    ids=["batch", "pad-to-max-length", "left-padding-tensors", "overflow-windows"],
)
def test_alignment_equals_transformers_roformer_on_real_text(tokenizer, transformers_roformer, lines, call):
    ours, theirs = tokenizer(lines[:40], **call), transformers_roformer(lines[:40], **call)
    assert [list(row) for row in ours["input_ids"]] == [list(row) for row in theirs["input_ids"]]
    assert len(ours.encodings) == len(theirs.encodings)
    for row in range(len(ours.encodings)):
        assert alignment(ours, row) == alignment(theirs, row)
        assert_words_coarsen(ours, theirs, row)


@pytest.mark.parametrize("truncation", ["only_second", "only_first"])
def test_pairs_and_their_overflow_windows_equal_transformers_roformer(
    tokenizer, transformers_roformer, lines, truncation
):
    questions = [line[:12] for line in lines[:20]]
    contexts = lines[20:40]
    first, second = (questions, contexts) if truncation == "only_second" else (contexts, questions)
    call = {"truncation": truncation, "max_length": 48, "stride": 8, "return_overflowing_tokens": True}
    ours, theirs = tokenizer(first, second, **call), transformers_roformer(first, second, **call)
    assert ours["input_ids"] == theirs["input_ids"]
    assert ours["overflow_to_sample_mapping"] == theirs["overflow_to_sample_mapping"]
    for row in range(len(ours["input_ids"])):
        assert alignment(ours, row) == alignment(theirs, row)
        assert_words_coarsen(ours, theirs, row)


def assert_words_coarsen(ours, theirs, row: int) -> None:
    """Our words are jieba words: transformers' RoFormer splits those missing from the vocab into one word per
    character, so every word of theirs lies inside one of ours; ours are contiguous, None exactly where theirs is."""
    our_words, their_words = ours.word_ids(row), theirs.word_ids(row)
    assert [word is None for word in our_words] == [word is None for word in their_words]
    pairs = list(zip(our_words, their_words, ours.sequence_ids(row), strict=True))
    for (our_word, their_word, sequence), (next_ours, next_theirs, next_sequence) in itertools.pairwise(pairs):
        if their_word is not None and (their_word, sequence) == (next_theirs, next_sequence):
            assert our_word == next_ours
        if our_word is not None and next_ours is not None and sequence == next_sequence:
            assert next_ours in (our_word, our_word + 1)


@pytest.fixture(scope="module")
def char_level():
    """Ours over the BERT-Chinese vocab, and BertTokenizerFast over the same vocab: both character level."""
    return RoFormerJiebaTokenizer(str(BERT_VOCAB)), BertTokenizerFast(vocab=load_vocab(BERT_VOCAB))


def rows_with_the_same_ids(ours, theirs) -> list[int]:
    """Rows where both tokenized alike (jieba keeps a few digit runs whole that BERT splits into ## pieces)."""
    return [
        row
        for row, (a, b) in enumerate(zip(ours["input_ids"], theirs["input_ids"], strict=True))
        if list(a) == list(b)
    ]


def test_alignment_equals_bert_fast_on_real_text(char_level, lines):
    ours_tokenizer, bert = char_level
    ours, theirs = ours_tokenizer(lines[:60], lines[60:120]), bert(lines[:60], lines[60:120])
    same = rows_with_the_same_ids(ours, theirs)
    assert len(same) >= 20
    for row in same:
        assert alignment(ours, row) == alignment(theirs, row)


def test_pre_split_words_equal_bert_fast(char_level, lines):
    """The token-classification recipe's input: one word per character (Chinese NER corpora), or longer words."""
    ours_tokenizer, bert = char_level
    batches = [
        [list(line) for line in lines[:40]],
        [line.split("，") for line in lines[40:80]],
    ]
    for words in batches:
        ours = ours_tokenizer(words, is_split_into_words=True, truncation=True, max_length=64, padding=True)
        theirs = bert(words, is_split_into_words=True, truncation=True, max_length=64, padding=True)
        same = rows_with_the_same_ids(ours, theirs)
        assert len(same) >= 20
        for row in same:
            assert alignment(ours, row) == alignment(theirs, row)
            assert word_alignment(ours, row) == word_alignment(theirs, row)


def test_word_ids_agree_with_return_word_ids(tokenizer, lines):
    """`word_ids()` (per sequence, as transformers) and our `return_word_ids` key (one count per row, -1 for special
    tokens, used by whole-word masking) group the same tokens into words."""
    encoding = tokenizer(lines[:30], lines[30:60], return_word_ids=True, padding=True)
    for row, key in enumerate(encoding["word_ids"]):
        api = list(zip(encoding.sequence_ids(row), encoding.word_ids(row), strict=True))
        assert [word == -1 for word in key] == [word is None for _, word in api]
        words = sorted({pair for pair in api if pair[1] is not None})
        assert [key[index] for index, pair in enumerate(api) if pair[1] is not None] == [
            words.index(pair) for pair in api if pair[1] is not None
        ]


def test_overflow_windows_keep_word_numbers_and_offsets_of_the_whole_text(tokenizer, lines):
    text = "".join(lines[:12])
    whole = tokenizer(text)
    windows = tokenizer([text], truncation=True, max_length=64, stride=16, return_overflowing_tokens=True)
    assert len(windows["input_ids"]) > 2
    words, offsets = whole.word_ids()[1:-1], whole[0].offsets[1:-1]
    position = 0
    for row in range(len(windows["input_ids"])):
        size = len(windows["input_ids"][row]) - 2
        start = position if row == 0 else position - 16
        assert windows.word_ids(row)[1:-1] == words[start : start + size]
        assert windows[row].offsets[1:-1] == offsets[start : start + size]
        position = start + size


def test_single_text_lowercased_offsets_point_into_the_original(tokenizer):
    text = "RoFormer模型在Café里"
    encoding = tokenizer(text)
    for index, token in enumerate(encoding.tokens()):
        span = encoding.token_to_chars(index)
        if span is not None and token != "[UNK]":
            assert text[span.start : span.end].lower().replace("é", "e") == token.removeprefix("##")
    assert encoding.char_to_token(text.index("模")) == encoding.tokens().index("模型")


def test_alignment_survives_pickling_and_tells_a_changed_tokenizer(roformer_vocab):
    tokenizer = RoFormerJiebaTokenizer(str(roformer_vocab))
    encoding = tokenizer([EXAMPLE, "今天"], padding=True)
    restored = pickle.loads(pickle.dumps(encoding))
    assert restored.word_ids(0) == encoding.word_ids(0)
    assert restored.tokens(1) == ["[CLS]", "今天", "[SEP]"] + ["[PAD]"] * 10
    stale = tokenizer(EXAMPLE)
    tokenizer.add_word("服装饰品")  # a word the vocab lacks: its characters replace "服装", "饰品" in the text above
    with pytest.raises(RuntimeError, match="encode the texts again"):
        stale.word_ids()
    assert tokenizer(EXAMPLE).word_ids()[1:7] == [0, 1, 1, 1, 1, 2]


def test_encodings_carry_the_returned_ids_and_offsets(tokenizer, lines):
    """The encoding API costs nothing in the outputs: ids and the other keys are those of plain calls."""
    plain = tokenizer(lines[:50], return_offsets_mapping=True)
    assert plain.encodings is not None and len(plain.encodings) == 50
    assert [plain[row].ids for row in range(50)] == plain["input_ids"]
    assert [plain[row].offsets for row in range(50)] == plain["offset_mapping"]


# ---------------------------------------------------------------------------------------------------------------
# A default length: truncation=True truncates
# ---------------------------------------------------------------------------------------------------------------


def test_truncation_true_truncates_a_long_document(tokenizer, roformer_vocab, tmp_path):
    (text,) = long_documents(1)
    assert len(tokenizer(text)["input_ids"]) > 2000
    assert tokenizer.model_max_length == 512  # built from a vocab file: the original checkpoints' last length
    assert len(tokenizer(text, truncation=True)["input_ids"]) == 512
    batch = tokenizer([text] * 2, truncation=True, padding=True, return_tensors="pt")
    assert batch["input_ids"].shape == (2, 512)
    # a folder holding only the original vocab.txt gets the same default; a saved tokenizer keeps its own length
    (tmp_path / "original").mkdir()
    (tmp_path / "original" / "vocab.txt").write_bytes(roformer_vocab.read_bytes())
    assert RoFormerJiebaTokenizer.from_pretrained(tmp_path / "original").model_max_length == 512
    longer = RoFormerJiebaTokenizer(str(roformer_vocab), model_max_length=1024)
    longer.save_pretrained(tmp_path / "saved")
    reloaded = AutoTokenizer.from_pretrained(tmp_path / "saved")
    assert len(reloaded(text, truncation=True)["input_ids"]) == 1024


def test_a_too_long_input_is_logged_where_transformers_tokenizers_log_it(roformer_vocab):
    """What hears transformers' warning about a too-long input (`assertLogs("transformers")`, as transformers' own
    tokenizer tests do, or transformers' verbosity) hears ours, once per tokenizer as theirs: a fresh tokenizer, or
    one whose `deprecation_warnings` is emptied, warns again. It starts with their words and goes on with what to do."""
    ours = RoFormerJiebaTokenizer(str(roformer_vocab), model_max_length=8)
    theirs = RoFormerTokenizerFast(vocab=dict(ours.vocab), model_max_length=8)
    transformers_logs = unittest.TestCase()
    with transformers_logs.assertLogs("transformers", level="WARNING") as their_logs:
        theirs(EXAMPLE)
    for tokenizer in (ours, RoFormerJiebaTokenizer(str(roformer_vocab), model_max_length=8)):
        with transformers_logs.assertLogs("transformers", level="WARNING") as our_logs:
            tokenizer([EXAMPLE], padding=True)
        (record,) = our_logs.records
        assert record.name == their_logs.records[0].name
        their_words = their_logs.records[0].getMessage().split(" (")[0]
        assert record.getMessage().startswith(f"{their_words} (13 > 8 tokens, model_max_length")
        assert "pass truncation=True" in record.getMessage()
        with transformers_logs.assertNoLogs("transformers", level="WARNING"):
            tokenizer(EXAMPLE)
        tokenizer.deprecation_warnings = {}
        with transformers_logs.assertLogs("transformers", level="WARNING"):
            tokenizer(EXAMPLE)
