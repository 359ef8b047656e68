"""Inputs at the edges of the contract: tiny max_length, left truncation, pre-split pairs, saved user dictionaries,
very long words, rare ideographs (tokenizer); wrong types, shapes, empty inputs and out-of-range labels (models)."""

import pytest
import torch
from conftest import TINY
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_tokenization import ReferenceRule
from transformers import AutoTokenizer

import roformer_hf
from roformer_hf import RoFormerConfig, RoFormerJiebaTokenizer, RoFormerModel, tokenization

# ---------------------------------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------------------------------

PUNCTUATION = "。，、；：？！"  # one token per character


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
    windows = left_tokenizer([PUNCTUATION], truncation=True, max_length=5, stride=1, return_overflowing_tokens=True)
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
    monkeypatch.setattr(tokenization.rjieba, "cut", lambda *args, **kwargs: calls.append(args) or [])
    assert tokenizer(text)["input_ids"] == reference.ids(text)
    assert calls == []
    tokenizer("今天天气")
    assert len(calls) == 1  # other text still goes to rjieba


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(st.one_of(RJIEBA_ONLY_CHINESE, CHINESE_FRAGMENTS), min_size=1, max_size=10).map("".join))
def test_text_with_rare_ideographs_follows_jieba(tokenizer, reference, text):
    assert tokenizer(text, split_special_tokens=True)["input_ids"] == reference.ids(text)


# ---------------------------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------------------------

INPUT_IDS = torch.tensor([[5, 6, 7], [8, 9, 10]])  # (batch_size 2, seq_len 3)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return RoFormerModel(RoFormerConfig(**TINY)).eval()


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"position_ids": torch.arange(3).repeat(3, 1)}, r"position_ids has shape \(3, 3\).*pass \(2, 3\) positions"),
        ({"position_ids": torch.zeros(3, 3, 2, dtype=torch.long)}, "position_ids has shape"),
        ({"position_ids": torch.tensor(0)}, "position_ids has shape"),
        ({"attention_mask": torch.zeros(2, 1, 3, 4)}, r"4-D attention_mask has shape \(2, 1, 3, 4\).*\(2, 1, 3, 3\)"),
        ({"attention_mask": torch.zeros(2, 1, 4, 3)}, r"needs \(2, 1, 3, 3\)"),
        ({"attention_mask": torch.zeros(3, 1, 3, 3)}, r"needs \(2, 1, 3, 3\)"),
        ({"attention_mask": torch.zeros(2, 3, 3, 3)}, r"needs \(2, 1, 3, 3\)"),
        (
            {"attention_mask": [[1, 1, 1], [1, 1, 0]]},
            r"attention_mask must be a tensor, got a list.*return_tensors='pt'",
        ),
        ({"token_type_ids": [[0, 0, 0], [0, 0, 0]]}, "token_type_ids must be a tensor"),
        ({"input_ids": [[5, 6, 7]]}, r"input_ids must be a LongTensor.*got a list.*return_tensors='pt'"),
        ({"input_ids": INPUT_IDS.float()}, r"LongTensor.*torch.float32.*return_tensors='pt'"),
        ({"input_ids": INPUT_IDS.bool()}, r"LongTensor.*torch.bool"),
        ({"input_ids": torch.zeros(2, 0, dtype=torch.long)}, r"shape \(2, 0\).*at least one sequence of at least one"),
        ({"input_ids": torch.zeros(0, 3, dtype=torch.long)}, r"shape \(0, 3\).*skip empty batches"),
        ({"input_ids": None, "inputs_embeds": torch.zeros(0, 3, 32)}, r"shape \(0, 3\)"),
    ],
)
def test_bad_model_inputs_raise_value_errors_naming_the_fix(model, inputs, message):
    with pytest.raises(ValueError, match=message):
        model(**{"input_ids": INPUT_IDS, **inputs})


@pytest.mark.parametrize(
    "inputs",
    [
        {"position_ids": torch.arange(3)[None]},  # one row for the whole batch
        {"attention_mask": torch.zeros(1, 1, 3, 3)},
        {"attention_mask": torch.zeros(2, 4, 3, 3)},
        {"attention_mask": torch.zeros(2, 1, 1, 3)},
        {"input_ids": INPUT_IDS.int()},
    ],
)
def test_inputs_that_broadcast_or_convert_are_accepted(model, inputs):
    expected = model(INPUT_IDS).last_hidden_state
    torch.testing.assert_close(model(**{"input_ids": INPUT_IDS, **inputs}).last_hidden_state, expected)


@pytest.mark.parametrize(
    "head", ["RoFormerForMaskedLM", "RoFormerForSequenceClassification", "RoFormerForQuestionAnswering"]
)
@pytest.mark.parametrize("shape", [(2, 0), (0, 3)])
def test_heads_refuse_empty_inputs(head, shape):
    model = getattr(roformer_hf, head)(RoFormerConfig(**TINY)).eval()
    with pytest.raises(ValueError, match="at least one sequence of at least one token"):
        model(torch.zeros(shape, dtype=torch.long))


@pytest.mark.parametrize("input_ids", [INPUT_IDS.tolist(), INPUT_IDS], ids=["list", "2-D"])
def test_multiple_choice_refuses_inputs_without_a_choice_dimension(input_ids):
    model = roformer_hf.RoFormerForMultipleChoice(RoFormerConfig(**TINY)).eval()
    with pytest.raises(ValueError, match=r"shape \(batch_size, num_choices, seq_len\)"):
        model(input_ids)


def multiple_choice_inputs():
    return {"input_ids": INPUT_IDS[:, None].repeat(1, 2, 1)}  # (batch_size 2, num_choices 2, seq_len 3)


LABELS = [
    ("RoFormerForMaskedLM", {}, {"labels": torch.tensor([[99, -100, -100], [5, 6, 7]])}, r"\[0, 99\).*got 99"),
    ("RoFormerForMaskedLM", {}, {"labels": torch.tensor([[-1, -100, -100], [5, 6, 7]])}, "got -1.*token ids"),
    ("RoFormerForMaskedLM", {"sparse_prediction": True}, {"labels": torch.full((2, 3), 120)}, "got 120"),
    ("RoFormerForCausalLM", {"is_decoder": True}, {"labels": torch.tensor([[5, 99, 7], [5, 6, 7]])}, "got 99"),
    ("RoFormerForSequenceClassification", {"num_labels": 3}, {"labels": torch.tensor([3, 0])}, "got 3.*num_labels"),
    ("RoFormerForSequenceClassification", {"num_labels": 3}, {"labels": torch.tensor([-2, 0])}, "got -2"),
    ("RoFormerForTokenClassification", {"num_labels": 3}, {"labels": torch.tensor([[0, 3, 0], [0, 0, 0]])}, "got 3"),
    (
        "RoFormerForTokenClassification",
        {"num_labels": 3},
        {"labels": torch.zeros(2, 3)},
        "LongTensor.*float32.*dtype=torch.long",
    ),
    ("RoFormerForMultipleChoice", {}, {"labels": torch.tensor([0, 2])}, r"\[0, 2\).*got 2.*index of the right choice"),
]


@pytest.mark.parametrize(("head", "settings", "labels", "message"), LABELS)
def test_out_of_range_labels_raise_value_errors(head, settings, labels, message):
    model = getattr(roformer_hf, head)(RoFormerConfig(**{**TINY, **settings})).eval()
    inputs = multiple_choice_inputs() if head == "RoFormerForMultipleChoice" else {"input_ids": INPUT_IDS}
    with pytest.raises(ValueError, match=message):
        model(**inputs, **labels)


@pytest.mark.parametrize(
    ("head", "labels"),
    [
        ("RoFormerForMaskedLM", torch.tensor([[98, -100, 0], [-100, -100, -100]])),
        ("RoFormerForSequenceClassification", torch.tensor([2, -100])),
        ("RoFormerForTokenClassification", torch.tensor([[2, -100, 0], [1, 1, 1]])),
        ("RoFormerForMultipleChoice", torch.tensor([1, -100])),
    ],
)
def test_labels_at_the_ends_of_the_range_and_ignored_ones_are_accepted(head, labels):
    model = getattr(roformer_hf, head)(RoFormerConfig(**{**TINY, "num_labels": 3})).eval()
    inputs = multiple_choice_inputs() if head == "RoFormerForMultipleChoice" else {"input_ids": INPUT_IDS}
    assert torch.isfinite(model(**inputs, labels=labels).loss)


def test_question_answering_positions_outside_the_input_are_ignored_as_in_transformers():
    """Positions are clamped to [0, seq_len] and seq_len is ignored (answers cut off by truncation), so no error."""
    model = roformer_hf.RoFormerForQuestionAnswering(RoFormerConfig(**TINY)).eval()
    inside = model(INPUT_IDS, start_positions=torch.tensor([1, 3]), end_positions=torch.tensor([2, 3])).loss
    outside = model(INPUT_IDS, start_positions=torch.tensor([1, 50]), end_positions=torch.tensor([2, 70])).loss
    torch.testing.assert_close(outside, inside)
