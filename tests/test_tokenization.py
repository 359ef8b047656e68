"""RoFormerJiebaTokenizer: exactly the rule of the original checkpoints, checked against a reference written here."""

import functools
import itertools
import json
import multiprocessing
import os
import pickle
import subprocess
import sys
import unicodedata

import jieba
import pytest
import transformers
from conftest import (
    CAIL_SAMPLE,
    DATA_DIR,
    REPO_ROOT,
    ROFORMER_VOCAB,
    first_texts,
    full_data_present,
    long_documents,
    peoples_daily_file,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer, PreTrainedTokenizer

import roformer_hf
from roformer_hf import RoFormerJiebaTokenizer

EXAMPLE = "永和服装饰品有限公司,今天天气非常好"
EXAMPLE_IDS = [101, 22943, 21332, 34431, 45904, 117, 306, 1231, 1231, 2653, 33994, 1266, 102]
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


# ---------------------------------------------------------------------------------------------------------------
# The rule, written independently: plain jieba, then bert4keras-style basic tokenization and Google's WordPiece
# ---------------------------------------------------------------------------------------------------------------


class ReferenceRule:
    def __init__(self, vocab_file):
        with open(vocab_file, encoding="utf-8") as reader:
            self.vocab = {line.rstrip("\n"): index for index, line in enumerate(reader)}
        self.jieba = jieba.Tokenizer()
        self.wordpiece = functools.lru_cache(maxsize=None)(self._wordpiece)

    @staticmethod
    def normalize(text):
        text = unicodedata.normalize("NFD", text.lower())
        return "".join(character for character in text if unicodedata.category(character) != "Mn")

    @staticmethod
    def basic_tokenize(text):
        spaced = ""
        for character in text:
            code_point, category = ord(character), unicodedata.category(character)
            punctuation = code_point in range(33, 48) or code_point in range(58, 65) or category[0] == "P"
            punctuation = punctuation or code_point in range(91, 97) or code_point in range(123, 127)
            cjk = any(
                low <= code_point <= high
                for low, high in [
                    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
                    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
                ]
            )  # fmt: skip
            if punctuation or cjk:
                spaced += " " + character + " "
            elif character in " \t\n\r" or category == "Zs":
                spaced += " "
            elif code_point in (0, 0xFFFD) or category in ("Cc", "Cf"):
                continue
            else:
                spaced += character
        return spaced.split()

    def _wordpiece(self, word):
        if len(word) > 200:  # bert4keras's word_maxlen: the word stays whole, so it is [UNK] unless in the vocab
            return (word if word in self.vocab else "[UNK]",)
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    pieces.append(piece)
                    start = end
                    break
            else:
                return ("[UNK]",)
        return tuple(pieces)

    def tokens(self, text):
        tokens = []
        for segment in self.jieba.cut(self.normalize(text), HMM=False):
            if segment in self.vocab:
                tokens.append(segment)
            else:
                tokens.extend(piece for word in self.basic_tokenize(segment) for piece in self.wordpiece(word))
        return tokens

    def ids_of_many(self, texts):
        """`ids` of every text, in worker processes (forked, so they share this jieba dictionary)."""
        global _SHARED_REFERENCE
        _SHARED_REFERENCE = self
        self.jieba.check_initialized()
        with multiprocessing.get_context("fork").Pool(min(4, os.cpu_count() or 1)) as pool:
            return pool.map(reference_ids, texts, chunksize=64)

    def ids(self, text):
        return [101] + [self.vocab[token] for token in self.tokens(text)] + [102]


_SHARED_REFERENCE = None


def reference_ids(text):
    return _SHARED_REFERENCE.ids(text)


@pytest.fixture(scope="module")
def reference(roformer_vocab):
    return ReferenceRule(roformer_vocab)


@pytest.fixture(scope="module")
def peoples_daily():
    """People's Daily, one paragraph a line: the whole month where the full data is present, else the shipped sample
    (its first 1,200 paragraphs), so that a fresh clone tests the tokenizer on real text too."""
    return peoples_daily_file().read_text(encoding="utf-8").splitlines()


def encode_in_batches(tokenizer, texts, batch_size=1000):
    ids = []
    for start in range(0, len(texts), batch_size):
        ids += tokenizer(texts[start : start + batch_size])["input_ids"]
    return ids


# ---------------------------------------------------------------------------------------------------------------
# Golden values and agreement with the reference on the real corpora
# ---------------------------------------------------------------------------------------------------------------


def test_example_of_the_issue(tokenizer, reference):
    assert tokenizer(EXAMPLE)["input_ids"] == EXAMPLE_IDS
    assert reference.ids(EXAMPLE) == EXAMPLE_IDS
    assert tokenizer.tokenize(EXAMPLE) == [
        "永和",
        "服装",
        "饰品",
        "有限公司",
        ",",
        "今",
        "天",
        "天",
        "气",
        "非常",
        "好",
    ]
    assert tokenizer(EXAMPLE)["token_type_ids"] == [0] * len(EXAMPLE_IDS)


def test_special_token_ids_of_the_real_vocab(tokenizer):
    assert [tokenizer.pad_token_id, tokenizer.unk_token_id, tokenizer.cls_token_id] == [0, 100, 101]
    assert [tokenizer.sep_token_id, tokenizer.mask_token_id, tokenizer.vocab_size, len(tokenizer)] == [102, 103] + [
        50000
    ] * 2


@pytest.mark.slow
def test_every_line_of_peoples_daily_follows_the_rule(tokenizer, reference, peoples_daily):
    assert tokenizer.segmenter == "rjieba"
    expected = reference.ids_of_many(peoples_daily)
    ours = encode_in_batches(tokenizer, peoples_daily)
    assert [line for line, ids, want in zip(peoples_daily, ours, expected, strict=True) if ids != want] == []


@pytest.mark.slow
def test_every_classification_document_follows_the_rule(tokenizer, reference, data_dir):
    documents = [
        json.loads(line)["text"]
        for path in sorted((data_dir / "cls").glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    assert len(documents) == 420 + 1050 + 2000 + 7765
    expected = reference.ids_of_many(documents)
    ours = encode_in_batches(tokenizer, documents, batch_size=200)
    assert [text[:50] for text, ids, want in zip(documents, ours, expected, strict=True) if ids != want] == []


def test_jieba_path_gives_the_same_ids(roformer_vocab, tokenizer, reference, peoples_daily):
    with_jieba = RoFormerJiebaTokenizer(str(roformer_vocab), use_rjieba=False)
    assert with_jieba.segmenter == "jieba"
    sample = peoples_daily[::40]
    assert encode_in_batches(with_jieba, sample) == encode_in_batches(tokenizer, sample)
    assert with_jieba(sample[:20])["input_ids"] == [reference.ids(line) for line in sample[:20]]


def test_lone_surrogates_fall_back_to_jieba(tokenizer, reference):
    text = "今天\ud800天气"  # rjieba needs UTF-8, which a lone surrogate is not
    assert tokenizer(text)["input_ids"] == reference.ids(text)


# ---------------------------------------------------------------------------------------------------------------
# Properties on arbitrary Unicode
# ---------------------------------------------------------------------------------------------------------------

FRAGMENTS = [
    "今天",
    "天气",
    "中国人民",
    "有限公司",
    "Héllo",
    "İstanbul",
    "ΣΑΣ",
    "①",
    "\u3000",
    "e\u0301",
    "１２月",
    "abc",
]
arbitrary_texts = st.lists(st.one_of(st.text(max_size=6), st.sampled_from(FRAGMENTS)), max_size=8).map("".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=arbitrary_texts)
def test_arbitrary_text_follows_the_rule(tokenizer, reference, text):
    # The rule knows no special tokens: "[MASK]" written in the text is text for it.
    assert tokenizer(text, split_special_tokens=True)["input_ids"] == reference.ids(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(st.one_of(arbitrary_texts, st.sampled_from(SPECIAL_TOKENS)), max_size=3).map("".join))
def test_offsets_and_word_ids_are_well_formed(tokenizer, text):
    encoding = tokenizer(text, return_offsets_mapping=True, return_word_ids=True, return_special_tokens_mask=True)
    ids, offsets, word_ids = encoding["input_ids"], encoding["offset_mapping"], encoding["word_ids"]
    assert all(0 <= token_id < len(tokenizer) for token_id in ids)
    assert len(ids) == len(offsets) == len(word_ids)
    assert ids == tokenizer(text)["input_ids"]  # the offsets path and the fast path agree
    inner = [
        (start, end)
        for (start, end), special in zip(offsets, encoding["special_tokens_mask"], strict=True)
        if not special
    ]
    assert all(0 <= start < end <= len(text) for start, end in inner)
    assert [start for start, _ in inner] == sorted(start for start, _ in inner)
    assert [end for _, end in inner] == sorted(end for _, end in inner)
    words = [word for word in word_ids if word != -1]
    assert words == sorted(words) and (not words or words[0] == 0)
    assert set(words) == set(range(len(set(words))))


# ---------------------------------------------------------------------------------------------------------------
# What transformers users expect: offsets, word ids, pairs, truncation, windows, padding, decoding
# ---------------------------------------------------------------------------------------------------------------


def test_offsets_point_into_the_original_text(tokenizer, reference, peoples_daily):
    texts = [*peoples_daily[:200], "Héllo WÖRLD, İstanbul 今天天气非常好"]
    encodings = tokenizer(texts, return_offsets_mapping=True, add_special_tokens=False)
    for text, ids, offsets in zip(texts, encodings["input_ids"], encodings["offset_mapping"], strict=True):
        for token, (start, end) in zip(tokenizer.convert_ids_to_tokens(ids), offsets, strict=True):
            if token != "[UNK]":
                assert reference.normalize(text[start:end]) == token.removeprefix("##")
    last = tokenizer(texts[-1], return_offsets_mapping=True)["offset_mapping"]
    assert last[:5] == [(0, 0), (0, 5), (6, 11), (11, 12), (13, 15)]  # [CLS] héllo wörld , is...


def test_word_ids_mark_jieba_words(tokenizer):
    encoding = tokenizer(EXAMPLE, "今天很好", return_word_ids=True)
    # 永和 服装 饰品 有限公司 , 今天天气(4 characters, one word) 非常 好 | 今天 很 好
    assert encoding["word_ids"] == [-1, 0, 1, 2, 3, 4, 5, 5, 5, 5, 6, 7, -1, 8, 9, 10, -1]
    padded = tokenizer(["今天", EXAMPLE], return_word_ids=True, padding=True)
    assert padded["word_ids"][0] == [-1, 0, -1] + [-1] * 10


def test_pairs_have_token_type_ids(tokenizer):
    encoding = tokenizer("今天", "天气", return_special_tokens_mask=True)
    assert encoding["input_ids"] == [101, tokenizer.vocab["今天"], 102, tokenizer.vocab["天气"], 102]
    assert encoding["token_type_ids"] == [0, 0, 0, 1, 1]
    assert encoding["special_tokens_mask"] == [1, 0, 1, 0, 1]
    batch = tokenizer([("今天", "天气"), ("好", "非常")])
    assert batch["input_ids"][0] == encoding["input_ids"]


@pytest.mark.parametrize(
    ("first_length", "second_length", "strategy", "expected"),
    [
        (20, 3, "longest_first", (12, 3)),
        (10, 10, "longest_first", (8, 7)),
        (3, 20, "only_second", (3, 12)),
        (20, 3, "only_first", (12, 3)),
    ],
)
def test_pair_truncation(tokenizer, first_length, second_length, strategy, expected):
    first, second = "。" * first_length, "，" * second_length  # one token per character
    encoding = tokenizer(first, second, truncation=strategy, max_length=18)
    assert encoding["token_type_ids"].count(0) - 2 == expected[0]
    assert encoding["token_type_ids"].count(1) - 1 == expected[1]


def test_overflowing_windows_with_stride(tokenizer, peoples_daily):
    text = peoples_daily[5]
    whole = tokenizer(text, add_special_tokens=False)["input_ids"]
    windows = tokenizer(
        [text, "好"], max_length=32, truncation=True, stride=8, return_overflowing_tokens=True, padding=True
    )
    count = windows["overflow_to_sample_mapping"].count(0)
    assert windows["overflow_to_sample_mapping"] == [0] * count + [1]
    rows = [[token for token in row if token not in (0, 101, 102)] for row in windows["input_ids"][:count]]
    assert all(len(row) == 30 for row in rows[:-1]) and all(len(row) == 32 for row in windows["input_ids"])
    for previous, row in itertools.pairwise(rows):
        assert previous[-8:] == row[:8]
    assert rows[0] + [token for row in rows[1:] for token in row[8:]] == whole


def test_overflow_on_pairs_windows_the_chosen_text(tokenizer):
    question, context = "今天天气", "。" * 40
    encoding = tokenizer(
        [question], [context], max_length=20, truncation="only_second", stride=4, return_overflowing_tokens=True
    )
    # room for 20 - 3 special - 4 question = 13 context tokens a window: windows start at 0, 9, 18, 27
    assert len(encoding["input_ids"]) == 4 and len(encoding["input_ids"][-1]) == 20
    assert all(row[:6] == encoding["input_ids"][0][:6] for row in encoding["input_ids"])
    with pytest.raises(
        ValueError, match=r"^Not possible to return overflowing tokens .*='only_first' or 'only_second'"
    ):
        tokenizer(question, context, max_length=20, truncation="longest_first", return_overflowing_tokens=True)


def test_padding_options_and_tensors(tokenizer):
    left = tokenizer(["今天", EXAMPLE], padding="max_length", max_length=16, padding_side="left")
    assert left["input_ids"][0] == [0] * 13 + [101, tokenizer.vocab["今天"], 102]
    assert left["attention_mask"][0] == [0] * 13 + [1] * 3
    multiple = tokenizer(["今天"], padding=True, pad_to_multiple_of=8, return_offsets_mapping=True)
    assert len(multiple["input_ids"][0]) == len(multiple["offset_mapping"][0]) == 8
    tensors = tokenizer(["今天", EXAMPLE], padding=True, return_tensors="pt", return_word_ids=True)
    assert tensors["input_ids"].shape == tensors["word_ids"].shape == (2, len(EXAMPLE_IDS))
    single = tokenizer(EXAMPLE, return_tensors="pt")
    assert single["input_ids"].tolist() == [EXAMPLE_IDS]
    collated = tokenizer.pad([tokenizer("今天", return_word_ids=True), tokenizer(EXAMPLE, return_word_ids=True)])
    assert collated["word_ids"][0] == [-1, 0, -1] + [-1] * 10


def test_truncation_to_max_length(tokenizer, peoples_daily):
    encoding = tokenizer(peoples_daily[:50], truncation=True, max_length=24)
    assert max(map(len, encoding["input_ids"])) == 24
    assert all(row[-1] == 102 for row in encoding["input_ids"])


def test_decode(tokenizer, peoples_daily):
    assert tokenizer.decode(EXAMPLE_IDS, skip_special_tokens=True) == "永和服装饰品有限公司,今天天气非常好"
    assert tokenizer.decode(tokenizer("Hello world 你好")["input_ids"]) == "[CLS] hello world你好 [SEP]"
    lines = peoples_daily[:300]
    encodings = tokenizer(lines)["input_ids"]
    decoded = tokenizer.batch_decode(encodings, skip_special_tokens=True)
    for line, ids, text in zip(lines, encodings, decoded, strict=True):
        if tokenizer.unk_token_id not in ids:
            assert "".join(text.split()) == "".join(ReferenceRule.normalize(line).split())


def test_special_tokens_in_text(tokenizer):
    assert tokenizer("今天[MASK]好")["input_ids"] == [101, tokenizer.vocab["今天"], 103, tokenizer.vocab["好"], 102]
    assert 103 not in tokenizer("今天[MASK]好", split_special_tokens=True)["input_ids"]


def test_pre_split_words(tokenizer):
    encoding = tokenizer(["永和服装", "今天"], is_split_into_words=True, return_word_ids=True)
    # each given word gets the whole rule on its own; word_ids index the given words
    assert tokenizer.convert_ids_to_tokens(encoding["input_ids"]) == ["[CLS]", "永和", "服装", "今天", "[SEP]"]
    assert encoding["word_ids"] == [-1, 0, 0, 1, -1]


# ---------------------------------------------------------------------------------------------------------------
# Our batch encoding (`_encode_plus`, kept because it is 2-6x faster) against transformers' own on real text
# ---------------------------------------------------------------------------------------------------------------


class TransformersEncoding(RoFormerJiebaTokenizer):
    """The same tokenizer encoding text by text through transformers' `PreTrainedTokenizer._encode_plus`."""

    _encode_plus = PreTrainedTokenizer._encode_plus


@pytest.fixture(scope="module")
def real_texts(peoples_daily):
    lines = [line for line in peoples_daily if line.strip()]
    questions = [line for line in lines if len(line) < 30]
    return {
        "lines": lines[:64],
        "long": long_documents(6),  # Fudan articles where the full data is present
        "cail": first_texts(CAIL_SAMPLE, 8),
        "pairs": list(zip(questions[:16], lines[:16], strict=True)),  # short first texts leave room for only_second
        "long first pairs": list(zip(lines[:16], questions[:16], strict=True)),
    }


def as_lists(encoding):
    return {key: value.tolist() if hasattr(value, "tolist") else value for key, value in encoding.items()}


ENCODING_CALLS = {
    "one line": ("lines", {}),
    "lines": ("lines", {"return_special_tokens_mask": True, "return_length": True}),
    "no special tokens, no masks": ("lines", {"add_special_tokens": False, "return_token_type_ids": False,
                                              "return_attention_mask": False}),
    "truncation": ("long", {"truncation": True, "max_length": 128}),
    "padding to max_length, tensors": ("cail", {"truncation": True, "max_length": 256, "padding": "max_length",
                                                "return_tensors": "pt"}),
    "longest padding, left side, multiple of 8": ("lines", {"padding": True, "pad_to_multiple_of": 8,
                                                            "padding_side": "left"}),
    "pairs": ("pairs", {"return_special_tokens_mask": True}),
    "pairs, longest_first": ("pairs", {"truncation": "longest_first", "max_length": 40}),
    "pairs, only_first": ("long first pairs", {"truncation": "only_first", "max_length": 48}),
    "pairs, only_second, padding": ("pairs", {"truncation": "only_second", "max_length": 48, "padding": True}),
    "pre-split words": ("lines", {"is_split_into_words": True}),
}  # fmt: skip


@pytest.mark.parametrize("truncation_side", ["right", "left"])
@pytest.mark.parametrize("call", list(ENCODING_CALLS))
def test_batch_encoding_matches_transformers_own(roformer_vocab, real_texts, call, truncation_side):
    ours = RoFormerJiebaTokenizer(str(roformer_vocab), truncation_side=truncation_side)
    theirs = TransformersEncoding(str(roformer_vocab), truncation_side=truncation_side)
    corpus, options = ENCODING_CALLS[call]
    texts = real_texts[corpus]
    if call == "one line":
        texts = texts[3]
    elif options.get("is_split_into_words"):
        texts = [line.split("，") for line in texts]
        if 1 in theirs([["今天", "很好"]], is_split_into_words=True)["token_type_ids"][0]:
            pytest.skip(
                f"transformers {transformers.__version__}'s own _encode_plus reads a batch's pre-split words as a "
                "pair of texts (a [SEP] between them): no reference"
            )
    expected = as_lists(theirs(texts, **options))
    assert as_lists(ours(texts, **options)) == expected
    assert set(expected) == expected_keys(options)  # neither path dropped a list the other returns


def expected_keys(options):
    keys = {"input_ids", "token_type_ids", "attention_mask"}
    keys |= {"special_tokens_mask"} if options.get("return_special_tokens_mask") else set()
    keys |= {"length"} if options.get("return_length") else set()
    return {key for key in keys if options.get(f"return_{key}", True) is not False}


def joined(windows, stride):
    """The tokens that consecutive windows (in text order, each overlapping the previous one by `stride`) cover."""
    return windows[0] + [token for window in windows[1:] for token in window[stride:]]


@pytest.mark.parametrize("truncation_side", ["right", "left"])
def test_overflowing_windows_cover_what_transformers_cuts_off(roformer_vocab, real_texts, truncation_side):
    ours = RoFormerJiebaTokenizer(str(roformer_vocab), truncation_side=truncation_side)
    theirs = TransformersEncoding(str(roformer_vocab), truncation_side=truncation_side)
    options = {"truncation": True, "max_length": 130, "stride": 16, "return_overflowing_tokens": True}
    for text in real_texts["long"]:
        windows = ours([text], **options)["input_ids"]
        truncated = theirs(text, **options)
        assert len(windows) > 2 and windows[0] == truncated["input_ids"]  # the first window: transformers' row
        # transformers returns what it cut off (and `stride` tokens of the kept text) as one list; our further
        # windows, put in text order, cover exactly that.
        further = [window[1:-1] for window in windows[1:]]
        in_text_order = further if truncation_side == "right" else further[::-1]
        assert joined(in_text_order, 16) == truncated["overflowing_tokens"]


@pytest.mark.parametrize("truncation_side", ["right", "left"])
@pytest.mark.parametrize("truncation", ["only_first", "only_second", "longest_first"])
def test_one_text_with_overflow_is_answered_as_transformers_python_tokenizers_answer(
    roformer_vocab, real_texts, truncation, truncation_side
):
    """One text (or pair), lists: the first window in `input_ids` and what it left out in `overflowing_tokens`, key
    for key what transformers' Python tokenizers return. Tensors, or offsets (which only fast tokenizers return), give
    every window as a row instead, as fast tokenizers do."""
    ours = RoFormerJiebaTokenizer(str(roformer_vocab), truncation_side=truncation_side)
    theirs = TransformersEncoding(str(roformer_vocab), truncation_side=truncation_side)
    options = {"truncation": truncation, "stride": 16, "return_overflowing_tokens": True}
    options |= {"return_special_tokens_mask": True, "return_length": True}
    long_text, short_text = real_texts["long"][0], real_texts["lines"][0]
    texts = (long_text,) if truncation == "longest_first" else (long_text, short_text)
    if truncation == "only_second":
        texts = texts[::-1]
    for max_length in (130, 100_000):  # cut, and not cut (no overflowing_tokens then)
        expected = theirs(*texts, max_length=max_length, **options)
        assert ("overflowing_tokens" in expected) == (max_length == 130)
        assert dict(ours(*texts, max_length=max_length, **options)) == dict(expected)
    rows = ours(*texts, max_length=130, return_tensors="pt", padding=True, **options)
    assert len(rows["input_ids"]) > 2 and rows["overflow_to_sample_mapping"].tolist() == [0] * len(rows["input_ids"])
    with_offsets = ours(*texts, max_length=130, return_offsets_mapping=True, **options)
    assert with_offsets["input_ids"] == ours(*[[text] for text in texts], max_length=130, **options)["input_ids"]
    assert len(with_offsets["offset_mapping"]) == len(rows["input_ids"])


# ---------------------------------------------------------------------------------------------------------------
# Pickling, save/load, AutoTokenizer, remote code, original checkpoint folders
# ---------------------------------------------------------------------------------------------------------------


def test_pickle_round_trip(tokenizer, peoples_daily):
    tokenizer.jieba_tokenizer.check_initialized()  # the jieba instance holds a lock; pickling must drop it
    restored = pickle.loads(pickle.dumps(tokenizer))
    assert encode_in_batches(restored, peoples_daily[:300]) == encode_in_batches(tokenizer, peoples_daily[:300])


def test_datasets_map_with_worker_processes(tokenizer, peoples_daily):
    datasets = pytest.importorskip("datasets")
    dataset = datasets.Dataset.from_dict({"text": peoples_daily[:40]})
    mapped = dataset.map(lambda batch: tokenizer(batch["text"]), batched=True, batch_size=10, num_proc=2)
    assert mapped["input_ids"] == tokenizer(peoples_daily[:40])["input_ids"]


def run_in_fresh_python(code, tmp_path):
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules")}
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environment, cwd=tmp_path, check=False
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_save_and_load_with_auto_tokenizer_in_a_fresh_process(tokenizer, tmp_path, peoples_daily):
    tokenizer.save_pretrained(tmp_path / "saved")
    config = json.loads((tmp_path / "saved" / "tokenizer_config.json").read_text())
    assert config["auto_map"]["AutoTokenizer"][0] == "tokenization.RoFormerJiebaTokenizer"
    texts = [EXAMPLE, *peoples_daily[:50]]
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    # One fresh interpreter: AutoTokenizer through the folder's own copy of the code (as from the Hub,
    # trust_remote_code=True), then, once roformer_hf is imported, through its registration.
    code = """
import json
from transformers import AutoTokenizer, PreTrainedTokenizer
texts = json.load(open("texts.json"))
remote = AutoTokenizer.from_pretrained("saved", trust_remote_code=True)
import roformer_hf
registered = AutoTokenizer.from_pretrained("saved")
print(json.dumps([type(registered).__module__, registered(texts)["input_ids"], type(remote).__module__,
                  remote(texts)["input_ids"]]))
"""
    registered_module, registered_ids, remote_module, remote_ids = run_in_fresh_python(code, tmp_path)
    assert registered_module == "roformer_hf.tokenization" and remote_module.startswith("transformers_modules")
    assert registered_ids == remote_ids == tokenizer(texts)["input_ids"]


# Earlier layouts of the tokenizer's code, each the last commit before it changed, and the files its checkpoints carry:
# 68c410c's one file, and f5f3415's five (the rule split into four modules beside tokenization.py).
EARLIER_TOKENIZER_LAYOUTS = {
    "68c410c": ("tokenization.py",),
    "f5f3415": ("tokenization.py", "text_rules.py", "jieba_rule.py", "batch_rows.py", "encodings.py"),
}


def earlier_tokenizer_sources(commit: str) -> dict[str, str]:
    """The tokenizer's code as checkpoints saved at `commit` carry it, from the repository's history."""
    sources = {}
    for name in EARLIER_TOKENIZER_LAYOUTS[commit]:
        command = ["git", "show", f"{commit}:roformer_hf/{name}"]
        completed = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            pytest.skip(f"commit {commit} is not in this clone's history (a shallow clone?)")
        sources[name] = completed.stdout
    return sources


@pytest.mark.parametrize("commit", sorted(EARLIER_TOKENIZER_LAYOUTS))
def test_a_tokenizer_saved_with_earlier_code_encodes_as_this_one(tokenizer, tmp_path, peoples_daily, commit):
    """A tokenizer saved with the code of an earlier layout loads with that code where roformer_hf is missing
    (`trust_remote_code=True`), and with this one once roformer_hf is imported, and both encode as this one does."""
    tokenizer.save_pretrained(tmp_path / "saved")
    saved = tmp_path / "saved"
    assert {path.name for path in saved.glob("*.py")} == {
        "tokenization.py",
        "configuration.py",
    }  # configuration.py: check_model_files
    for name, source in earlier_tokenizer_sources(commit).items():
        (saved / name).write_text(source, encoding="utf-8")
    texts = [EXAMPLE, "Ｈéllo，世界！ 永和服装", *peoples_daily[:50]]
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    code = """
import json
import sys
sys.modules["roformer_hf"] = None  # as if roformer_hf were not installed
from transformers import AutoTokenizer
texts = json.load(open("texts.json"))
def encoded(tokenizer):
    batch = tokenizer(texts, text_pair=["今天天气"] * len(texts), return_offsets_mapping=True, truncation="only_first",
                      max_length=48, stride=8, return_overflowing_tokens=True, padding=True)
    return [batch["input_ids"], batch["offset_mapping"], [batch.word_ids(i) for i in range(len(batch["input_ids"]))]]
old = AutoTokenizer.from_pretrained("saved", trust_remote_code=True)
old_encoded = encoded(old)
del sys.modules["roformer_hf"]
import roformer_hf
new = AutoTokenizer.from_pretrained("saved")
print(json.dumps([type(old).__module__, type(new).__module__, old_encoded, encoded(new)]))
"""
    old_module, new_module, old_encoded, new_encoded = run_in_fresh_python(code, tmp_path)
    assert old_module.startswith("transformers_modules") and new_module == "roformer_hf.tokenization"
    assert old_encoded == new_encoded


def test_folder_with_only_the_original_vocab(roformer_vocab, tmp_path):
    (tmp_path / "vocab.txt").write_bytes(roformer_vocab.read_bytes())
    loaded = RoFormerJiebaTokenizer.from_pretrained(tmp_path)
    assert loaded(EXAMPLE)["input_ids"] == EXAMPLE_IDS


def test_registration_leaves_transformers_roformer_alone():
    from transformers import RoFormerConfig as TransformersRoFormerConfig
    from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING

    assert TOKENIZER_MAPPING[roformer_hf.RoFormerConfig] is RoFormerJiebaTokenizer
    assert TOKENIZER_MAPPING[TransformersRoFormerConfig].__name__ == "RoFormerTokenizer"


# ---------------------------------------------------------------------------------------------------------------
# User dictionaries
# ---------------------------------------------------------------------------------------------------------------

USER_TEXT = "永和服装饰品有限公司"


def test_user_dict_file_changes_segmentation_and_survives_save_load(roformer_vocab, tmp_path):
    (tmp_path / "words.txt").write_text("服装饰品 100000 n\n", encoding="utf-8")
    plain = RoFormerJiebaTokenizer(str(roformer_vocab))
    custom = RoFormerJiebaTokenizer(str(roformer_vocab), user_dict_file=str(tmp_path / "words.txt"))
    assert plain.tokenize(USER_TEXT)[1:3] == ["服装", "饰品"]
    # "服装饰品" is no vocab entry: jieba keeps it whole, then basic tokenization splits it into characters
    assert custom.tokenize(USER_TEXT)[1:5] == ["服", "装", "饰", "品"]
    assert custom.segmenter == "jieba" and plain.segmenter == "rjieba"
    custom.save_pretrained(tmp_path / "saved")
    assert (tmp_path / "saved" / "user_dict.txt").read_text(encoding="utf-8") == "服装饰品 100000 n\n"
    reloaded = AutoTokenizer.from_pretrained(tmp_path / "saved")
    assert reloaded.tokenize(USER_TEXT) == custom.tokenize(USER_TEXT)
    assert pickle.loads(pickle.dumps(custom)).tokenize(USER_TEXT) == custom.tokenize(USER_TEXT)


def test_add_word_and_del_word(roformer_vocab, tmp_path):
    custom = RoFormerJiebaTokenizer(str(roformer_vocab))
    text = "今天天气非常好"  # jieba keeps "今天天气" whole; no vocab entry, so it becomes 4 characters
    assert custom.tokenize(text) == ["今", "天", "天", "气", "非常", "好"]
    custom.del_word("今天天气")
    assert custom.tokenize(text) == ["今天", "天气", "非常", "好"]
    custom.add_word("非常好")
    assert custom.tokenize(text) == ["今天", "天气", "非", "常", "好"]
    custom.save_pretrained(tmp_path)
    reloaded = RoFormerJiebaTokenizer.from_pretrained(tmp_path)
    assert reloaded.user_words == custom.user_words == [("今天天气", 0, None), ("非常好", 25, None)]
    assert reloaded.tokenize(text) == custom.tokenize(text)
    assert jieba.lcut(text, HMM=False)[0] == "今天天气"  # jieba's global dictionary is untouched


# ---------------------------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------------------------


def test_missing_vocab_file(tmp_path):
    with pytest.raises(ValueError, match=r"vocab\.txt"):
        RoFormerJiebaTokenizer(str(tmp_path / "missing.txt"))


@pytest.mark.parametrize("missing", SPECIAL_TOKENS)
def test_vocab_without_a_special_token(roformer_vocab, tmp_path, missing):
    lines = roformer_vocab.read_text(encoding="utf-8").splitlines()
    (tmp_path / "vocab.txt").write_text("\n".join(line for line in lines if line != missing), encoding="utf-8")
    with pytest.raises(ValueError, match=r"lacks the special token\(s\) " + missing.replace("[", r"\[")):
        RoFormerJiebaTokenizer(str(tmp_path / "vocab.txt"))


def test_vocab_with_a_byte_order_mark_reads_as_without(roformer_vocab, tokenizer, tmp_path):
    """Windows editors save UTF-8 with a byte-order mark; it is not part of the first token ([PAD], id 0)."""
    (tmp_path / "vocab.txt").write_bytes(b"\xef\xbb\xbf" + roformer_vocab.read_bytes())
    with_mark = RoFormerJiebaTokenizer(str(tmp_path / "vocab.txt"))
    assert with_mark.get_vocab() == tokenizer.get_vocab() and with_mark.pad_token_id == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda lines: [*lines[:3000], lines[2766], *lines[3000:]], r"line 3001 repeats the token '.+' of line 2767"),
        (lambda lines: [*lines[:10], "", *lines[10:]], "line 11 is empty"),
        (lambda lines: [*lines[:20], lines[20] + "\t", *lines[21:]], r"line 21 holds '.+\\t', with a space or tab"),
    ],
)
def test_malformed_vocab_is_refused_with_the_line(roformer_vocab, tmp_path, change, message):
    """A repeated token would leave fewer tokens than ids (a saved vocab.txt then renumbers every later token)."""
    lines = roformer_vocab.read_text(encoding="utf-8").split("\n")[:-1]
    (tmp_path / "vocab.txt").write_text("\n".join(change(lines)) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="is malformed: " + message):
        RoFormerJiebaTokenizer(str(tmp_path / "vocab.txt"))


@pytest.mark.parametrize("bad", [42, None, b"bytes", ["ok", 3]])
def test_non_string_input(tokenizer, bad):
    with pytest.raises(TypeError, match="str"):
        tokenizer(bad) if bad is not None else tokenizer([bad])


def test_missing_user_dict(roformer_vocab, tmp_path):
    with pytest.raises(ValueError, match="user dict"):
        RoFormerJiebaTokenizer(str(roformer_vocab), user_dict_file=str(tmp_path / "nothing.txt"))


def test_the_shipped_original_vocab_is_the_original():
    """data/roformer_chinese_base_vocab.txt: 50,000 entries with the special tokens at the original checkpoints' ids
    (their embeddings' rows), and the same bytes as the full data's copy where that folder is present."""
    lines = ROFORMER_VOCAB.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 50_000
    assert {lines[index]: index for index in (0, 100, 101, 102, 103)} == {
        "[PAD]": 0,
        "[UNK]": 100,
        "[CLS]": 101,
        "[SEP]": 102,
        "[MASK]": 103,
    }
    full_copy = DATA_DIR / "vocab" / "roformer_chinese_base_vocab.txt"
    if full_data_present():
        assert full_copy.read_bytes() == ROFORMER_VOCAB.read_bytes()


@pytest.mark.parametrize("stride", [-1, 6, 20])
def test_a_stride_out_of_range_names_both_bounds(tokenizer, stride):
    """A negative stride was told it "must be smaller than" the window, which it was: the line names both bounds."""
    with pytest.raises(ValueError, match=rf"stride \({stride}\) must be at least 0 and smaller than the room"):
        tokenizer(
            "今天天气很好我们去公园玩吧今天天气很好",
            max_length=8,
            truncation=True,
            stride=stride,
            return_overflowing_tokens=True,
        )
