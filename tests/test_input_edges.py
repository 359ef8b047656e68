"""Inputs at the edges of the contract: tiny max_length, left truncation, pre-split pairs, saved user dictionaries,
very long words, rare ideographs (tokenizer); wrong types, shapes, empty inputs and out-of-range labels (models)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_tokenization import ReferenceRule
from transformers import AutoTokenizer

from roformer_hf import RoFormerJiebaTokenizer
from roformer_hf import tokenization as tokenization_module

# ---------------------------------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------------------------------

PUNCTUATION = "。，、；：？！"  # one token per character


@pytest.fixture(scope="module")
def tokenizer(roformer_vocab):
    return RoFormerJiebaTokenizer(str(roformer_vocab))


@pytest.fixture(scope="module")
def left_tokenizer(roformer_vocab):
    return RoFormerJiebaTokenizer(str(roformer_vocab), truncation_side="left")


@pytest.fixture(scope="module")
def reference(roformer_vocab):
    return ReferenceRule(roformer_vocab)


@pytest.mark.parametrize("strategy", ["longest_first", "only_first", "only_second"])
@pytest.mark.parametrize("max_length", [0, 1, 2, 3])
def test_pair_truncation_without_room_for_the_texts_raises(tokenizer, strategy, max_length):
    # [CLS] first [SEP] second [SEP]: with 3 tokens or fewer no token of either text fits, as 2 for a single text.
    with pytest.raises(ValueError, match="max_length leaves no room for the text"):
        tokenizer("今天天气", "非常好", truncation=strategy, max_length=max_length, return_special_tokens_mask=True)


@pytest.mark.parametrize("max_length", [4, 5, 9])
def test_pair_truncation_fits_max_length_with_matching_companions(tokenizer, max_length):
    encoding = tokenizer(PUNCTUATION, PUNCTUATION, truncation="longest_first", max_length=max_length,
                         return_special_tokens_mask=True, return_offsets_mapping=True)  # fmt: skip
    assert len(encoding["input_ids"]) == max_length
    for key in ("token_type_ids", "special_tokens_mask", "offset_mapping", "attention_mask"):
        assert len(encoding[key]) == max_length, key


def set_left_truncation(tokenizer):
    tokenizer.truncation_side = "left"
    return tokenizer


@pytest.mark.parametrize("make", ["init_argument", "attribute"])
@pytest.mark.parametrize("add_special_tokens", [True, False])
@pytest.mark.parametrize("with_offsets", [False, True])
def test_left_truncation_keeps_the_last_tokens(roformer_vocab, make, add_special_tokens, with_offsets):
    if make == "init_argument":
        left = RoFormerJiebaTokenizer(str(roformer_vocab), truncation_side="left")
    else:
        left = set_left_truncation(RoFormerJiebaTokenizer(str(roformer_vocab)))
    whole = left(PUNCTUATION, add_special_tokens=False)["input_ids"]
    special = 2 if add_special_tokens else 0
    options = {"truncation": True, "add_special_tokens": add_special_tokens, "return_offsets_mapping": with_offsets}
    single = left(PUNCTUATION, max_length=4 + special, **options)
    assert [token for token in single["input_ids"] if token not in (101, 102)] == whole[-4:]
    if with_offsets:
        assert [span for span in single["offset_mapping"] if span != (0, 0)] == [(3, 4), (4, 5), (5, 6), (6, 7)]
    batch = left([PUNCTUATION, "好"], max_length=4 + special, **options)
    assert batch["input_ids"][0] == single["input_ids"]
    pair = left(PUNCTUATION, PUNCTUATION[::-1], max_length=8 + (3 if add_special_tokens else 0), **options)
    first, second = whole, left(PUNCTUATION[::-1], add_special_tokens=False)["input_ids"]
    expected = [101, *first[-4:], 102, *second[-4:], 102] if add_special_tokens else first[-4:] + second[-4:]
    assert pair["input_ids"] == expected


def test_left_truncation_windows_start_from_the_end(left_tokenizer):
    whole = left_tokenizer(PUNCTUATION, add_special_tokens=False)["input_ids"]
    windows = left_tokenizer(PUNCTUATION, truncation=True, max_length=5, stride=1, return_overflowing_tokens=True)
    assert [row[1:-1] for row in windows["input_ids"]] == [whole[4:], whole[2:5], whole[0:3]]
    only_second = left_tokenizer("好", PUNCTUATION, truncation="only_second", max_length=7)
    assert only_second["input_ids"][3:-1] == whole[-3:]


def test_batch_of_pre_split_pairs_works_like_single_pairs(tokenizer):
    pairs = [(["永和", "服装"], ["今天", "天气"]), (["非常"], ["好", "。"])]
    options = {"is_split_into_words": True, "return_word_ids": True, "return_offsets_mapping": True}
    batch = tokenizer(pairs, **options)
    for index, (first, second) in enumerate(pairs):
        single = tokenizer(first, second, **options)
        for key, value in single.items():
            assert batch[key][index] == value, key
    assert batch["token_type_ids"][1] == [0, 0, 0, 1, 1, 1]
    # A batch of word lists (no pairs) still reads every list as one text.
    assert tokenizer([["今天", "天气"], ["好"]], is_split_into_words=True)["input_ids"][1] == [101, 1266, 102]


def test_user_dict_file_is_an_init_argument_that_survives_save_and_load(roformer_vocab, tmp_path):
    (tmp_path / "words.txt").write_text("服装饰品 100000 n\n", encoding="utf-8")
    custom = RoFormerJiebaTokenizer(str(roformer_vocab), user_dict_file=str(tmp_path / "words.txt"))
    assert custom.init_kwargs["user_dict_file"] == str(tmp_path / "words.txt")
    text = "永和服装饰品有限公司"
    expected = custom(text)["input_ids"]
    rebuilt = type(custom)(**custom.init_kwargs)
    assert rebuilt(text)["input_ids"] == expected and rebuilt.user_words == custom.user_words
    custom.save_pretrained(tmp_path / "saved")
    (tmp_path / "words.txt").unlink()  # the saved folder must not depend on the original file
    reloaded = AutoTokenizer.from_pretrained(tmp_path / "saved")
    saved_dict = reloaded.init_kwargs["user_dict_file"]
    assert saved_dict.startswith(str(tmp_path / "saved")) and saved_dict.endswith("user_dict.txt")
    assert reloaded(text)["input_ids"] == expected
    assert type(reloaded)(**reloaded.init_kwargs)(text)["input_ids"] == expected


def test_words_longer_than_word_maxlen_are_unknown(tokenizer, reference):
    unk = tokenizer.unk_token_id
    assert tokenizer("a" * 201, add_special_tokens=False)["input_ids"] == [unk]
    assert unk not in tokenizer("a" * 200, add_special_tokens=False)["input_ids"]  # WordPiece pieces up to 200
    text = "今天" + "b" * 300 + " hello 天气"
    encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    assert encoding["input_ids"].count(unk) == 1
    assert encoding["offset_mapping"][encoding["input_ids"].index(unk)] == (2, 302)
    assert tokenizer(text)["input_ids"] == reference.ids(text)


# Code points that rjieba reads as Chinese and jieba does not (jieba's Chinese is U+4E00-U+9FD5).
RJIEBA_ONLY_CHINESE = st.one_of(
    st.characters(min_codepoint=0x9FD6, max_codepoint=0x9FFF),
    st.characters(min_codepoint=0x3400, max_codepoint=0x4DBF),
    st.characters(min_codepoint=0xF900, max_codepoint=0xFAFF),
    st.characters(min_codepoint=0x20000, max_codepoint=0x2EBEF),
    st.characters(min_codepoint=0x2F800, max_codepoint=0x2FA1F),
)
CHINESE_FRAGMENTS = st.sampled_from(["今天", "天气非常好", "中国人民", "有限公司", "服装饰品", "abc", "1.5%", " "])


@pytest.mark.parametrize(
    "text", ["今天\u9fd6天气", "中国\u3400人民", "有限\ufa0e公司", "服装\U00020000饰品", "好\U0002b820"]
)
def test_rjieba_is_not_used_on_ideographs_jieba_does_not_count_as_chinese(tokenizer, reference, monkeypatch, text):
    assert tokenizer.segmenter == "rjieba"
    calls = []
    monkeypatch.setattr(tokenization_module.rjieba, "cut", lambda *args, **kwargs: calls.append(args) or [])
    assert tokenizer(text)["input_ids"] == reference.ids(text)
    assert calls == []
    tokenizer("今天天气")
    assert len(calls) == 1  # other text still goes to rjieba


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(st.one_of(RJIEBA_ONLY_CHINESE, CHINESE_FRAGMENTS), min_size=1, max_size=10).map("".join))
def test_text_with_rare_ideographs_follows_jieba(tokenizer, reference, text):
    assert tokenizer(text, split_special_tokens=True)["input_ids"] == reference.ids(text)
