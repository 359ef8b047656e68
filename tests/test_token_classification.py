"""Token classification (NER) and QA preprocessing end to end, as the transformers docs write them: word labels
aligned with `word_ids()`, `pipeline("token-classification", aggregation_strategy=...)`, and QA features from
`sequence_ids()` and `offset_mapping`, with RoFormerJiebaTokenizer (word level) and BertTokenizerFast (character
level), against transformers' own RoFormerTokenizerFast on the same text."""

import datasets
import numpy as np
import pytest
import torch
from conftest import BERT_VOCAB, CAIL_SAMPLE, PEOPLES_DAILY_SAMPLE, TINY_WORD_VOCAB
from transformers import (
    BertTokenizerFast,
    DataCollatorForTokenClassification,
    RoFormerTokenizerFast,
    Trainer,
    TrainingArguments,
    pipeline,
)

from roformer_hf import RoFormerConfig, RoFormerForTokenClassification, RoFormerJiebaTokenizer
from roformer_hf.tokenization import load_vocab

LABELS = ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
# A toy gazetteer: the NER labels of these tests come from it (the recipe, not the model's accuracy, is under test).
PLACES = ("中国", "北京", "香港", "澳门", "台湾", "上海", "世界")
STRATEGIES = ["simple", "first", "average", "max"]


@pytest.fixture(scope="module")
def bert_tokenizer():
    return BertTokenizerFast(vocab=load_vocab(BERT_VOCAB))


@pytest.fixture(scope="module")
def lines():
    text = PEOPLES_DAILY_SAMPLE.read_text(encoding="utf-8")
    return [line for line in text.splitlines() if 20 < len(line) < 150][:64]


def tiny_tagger(vocab_size: int, seed: int = 0) -> RoFormerForTokenClassification:
    torch.manual_seed(seed)
    config = RoFormerConfig(
        **{**TINY_WORD_VOCAB, "vocab_size": vocab_size},
        num_labels=len(LABELS),
        id2label=dict(enumerate(LABELS)),
        label2id={label: index for index, label in enumerate(LABELS)},
    )
    return RoFormerForTokenClassification(config).eval()


def gazetteer_tags(words: list[str]) -> list[int]:
    """B-LOC/I-LOC for the characters of the places in the gazetteer, word by word (words may be characters)."""
    text = "".join(words)
    tags = [0] * len(text)
    for place in PLACES:
        start = text.find(place)
        while start != -1:
            tags[start : start + len(place)] = [1] + [2] * (len(place) - 1)
            start = text.find(place, start + len(place))
    starts = np.cumsum([0] + [len(word) for word in words[:-1]])
    return [tags[start] for start in starts]


def ner_dataset(lines: list[str], split) -> datasets.Dataset:
    words = [split(line) for line in lines]
    return datasets.Dataset.from_dict({"tokens": words, "ner_tags": [gazetteer_tags(row) for row in words]})


def make_tokenize_and_align_labels(tokenizer):
    """The transformers docs' `tokenize_and_align_labels`, as written there."""

    def tokenize_and_align_labels(examples):
        tokenized_inputs = tokenizer(examples["tokens"], truncation=True, is_split_into_words=True)

        labels = []
        for i, label in enumerate(examples["ner_tags"]):
            word_ids = tokenized_inputs.word_ids(batch_index=i)  # Map tokens to their respective word.
            previous_word_idx = None
            label_ids = []
            for word_idx in word_ids:  # Set the special tokens to -100.
                if word_idx is None:
                    label_ids.append(-100)
                elif word_idx != previous_word_idx:  # Only label the first token of a given word.
                    label_ids.append(label[word_idx])
                else:
                    label_ids.append(-100)
                previous_word_idx = word_idx
            labels.append(label_ids)

        tokenized_inputs["labels"] = labels
        return tokenized_inputs

    return tokenize_and_align_labels


@pytest.mark.parametrize("words", ["characters", "jieba words"])
@pytest.mark.parametrize("which", ["ours", "bert"])
def test_token_classification_recipe_trains(which, words, tokenizer, bert_tokenizer, lines, tmp_path):
    chosen = tokenizer if which == "ours" else bert_tokenizer
    split = list if words == "characters" else tokenizer.segment
    raw = ner_dataset(lines, split)
    tokenized = raw.map(make_tokenize_and_align_labels(chosen), batched=True, remove_columns=raw.column_names)
    for example, row in zip(tokenized, raw, strict=True):
        labelled = [label for label in example["labels"] if label != -100]
        assert labelled == row["ner_tags"]  # the first token of every word carries the word's label, in order
        if words == "jieba words" and which == "ours":  # words longer than one token exist and are labelled once
            assert len(example["input_ids"]) - 2 >= len(labelled)
    model = tiny_tagger(len(chosen))
    trainer = Trainer(
        model=model.train(),
        args=TrainingArguments(
            str(tmp_path), max_steps=3, per_device_train_batch_size=8, report_to="none", use_cpu=True, logging_steps=1
        ),
        train_dataset=tokenized,
        data_collator=DataCollatorForTokenClassification(chosen),
        processing_class=chosen,
    )
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 3 and all(np.isfinite(losses))


def entity_view(entities: list[dict]) -> list[tuple]:
    return [
        (entity["entity_group"], entity["start"], entity["end"], round(float(entity["score"]), 5))
        for entity in entities
    ]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_pipeline_spans_are_slices_and_equal_transformers_roformer(strategy, tokenizer, lines):
    """Ours and transformers' RoFormerTokenizerFast over the same vocab give the same ids, so the same spans."""
    model = tiny_tagger(len(tokenizer))
    theirs = RoFormerTokenizerFast(vocab=dict(tokenizer.vocab))
    ours_pipeline = pipeline("token-classification", model=model, tokenizer=tokenizer, aggregation_strategy=strategy)
    their_pipeline = pipeline("token-classification", model=model, tokenizer=theirs, aggregation_strategy=strategy)
    texts = [*lines[:12], "我们用transformers训练模型，在香港发布。"]  # "transformers" is several ## pieces
    for text in texts:
        ours, expected = ours_pipeline(text), their_pipeline(text)
        assert len(ours) > 1
        assert entity_view(ours) == entity_view(expected)
        # "simple" groups tokens, not words: a group may start at a word's ## piece, which keeps its "##"
        assert all(text[entity["start"] : entity["end"]] == entity["word"].removeprefix("##") for entity in ours)
        if strategy != "simple":
            assert all(text[entity["start"] : entity["end"]] == entity["word"] for entity in ours)


def test_pipeline_with_stride_tags_long_texts_in_windows_like_transformers_roformer(roformer_vocab, lines):
    tokenizer = RoFormerJiebaTokenizer(str(roformer_vocab), model_max_length=32)
    theirs = RoFormerTokenizerFast(vocab=dict(tokenizer.vocab), model_max_length=32)
    model = tiny_tagger(len(tokenizer))
    text = "".join(lines[:6])
    tag = {
        name: pipeline("token-classification", model=model, tokenizer=chosen, aggregation_strategy="first", stride=8)
        for name, chosen in (("ours", tokenizer), ("theirs", theirs))
    }
    ours = tag["ours"](text)
    assert max(entity["end"] for entity in ours) > len(text) - 5  # the windows reach the end of the text
    assert entity_view(ours) == entity_view(tag["theirs"](text))
    assert all(text[entity["start"] : entity["end"]] == entity["word"] for entity in ours)


def test_first_average_max_keep_words_whole(tokenizer):
    """`##` pieces join their word: every span starts and ends at word boundaries of the text."""
    model = tiny_tagger(len(tokenizer), seed=3)
    text = "我们用transformers训练模型"
    encoding = tokenizer(text)
    piece_starts = {
        start
        for (start, _), token in zip(encoding[0].offsets, encoding.tokens(), strict=True)
        if token.startswith("##")
    }
    assert piece_starts
    for strategy in ("first", "average", "max"):
        tagger = pipeline("token-classification", model=model, tokenizer=tokenizer, aggregation_strategy=strategy)
        for entity in tagger(text):
            assert entity["start"] not in piece_starts and entity["end"] not in piece_starts


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_char_level_pipeline_equals_transformers_roformer(strategy, bert_tokenizer, lines):
    """BertTokenizerFast (character level) and transformers' RoFormerTokenizerFast over the same BERT-Chinese vocab,
    on the same model: the same spans wherever they tokenize a text alike."""
    model = tiny_tagger(len(bert_tokenizer))
    theirs = RoFormerTokenizerFast(vocab=load_vocab(BERT_VOCAB))
    bert_pipeline = pipeline(
        "token-classification", model=model, tokenizer=bert_tokenizer, aggregation_strategy=strategy
    )
    their_pipeline = pipeline("token-classification", model=model, tokenizer=theirs, aggregation_strategy=strategy)
    compared = 0
    for text in lines[:16]:
        if bert_tokenizer(text)["input_ids"] != theirs(text)["input_ids"]:
            continue
        compared += 1
        entities = bert_pipeline(text)
        assert entity_view(entities) == entity_view(their_pipeline(text))
        assert all(text[entity["start"] : entity["end"]] == entity["word"].replace(" ", "") for entity in entities)
    assert compared >= 8


def make_preprocess_function(tokenizer):
    """The transformers docs' question-answering `preprocess_function`, as written there."""

    def preprocess_function(examples):
        questions = [q.strip() for q in examples["question"]]
        inputs = tokenizer(
            questions,
            examples["context"],
            max_length=384,
            truncation="only_second",
            return_offsets_mapping=True,
            padding="max_length",
        )

        offset_mapping = inputs.pop("offset_mapping")
        answers = examples["answers"]
        start_positions = []
        end_positions = []

        for i, offset in enumerate(offset_mapping):
            answer = answers[i]
            start_char = answer["answer_start"][0]
            end_char = answer["answer_start"][0] + len(answer["text"][0])
            sequence_ids = inputs.sequence_ids(i)

            # Find the start and end of the context
            idx = 0
            while sequence_ids[idx] != 1:
                idx += 1
            context_start = idx
            while sequence_ids[idx] == 1:
                idx += 1
            context_end = idx - 1

            # If the answer is not fully inside the context, label it (0, 0)
            if offset[context_start][0] > end_char or offset[context_end][1] < start_char:
                start_positions.append(0)
                end_positions.append(0)
            else:
                # Otherwise it's the start and end token positions
                idx = context_start
                while idx <= context_end and offset[idx][0] <= start_char:
                    idx += 1
                start_positions.append(idx - 1)

                idx = context_end
                while idx >= context_start and offset[idx][1] >= end_char:
                    idx -= 1
                end_positions.append(idx + 1)

        inputs["start_positions"] = start_positions
        inputs["end_positions"] = end_positions
        return inputs

    return preprocess_function


@pytest.fixture(scope="module")
def qa_dataset():
    """CAIL court texts as contexts; the answer is a stretch of the context, the question another text's opening."""
    import json

    rows = [json.loads(line) for line in CAIL_SAMPLE.read_text(encoding="utf-8").splitlines()[:24]]
    contexts = [row["text"] for row in rows]
    answer_starts = [len(context) // 7 * (index % 7) for index, context in enumerate(contexts)]  # some past 384 tokens
    return datasets.Dataset.from_dict(
        {
            "question": [rows[index - 1]["text"][:15] for index in range(len(rows))],
            "context": contexts,
            "answers": [
                {"text": [context[start : start + 6]], "answer_start": [start]}
                for context, start in zip(contexts, answer_starts, strict=True)
            ],
        }
    )


def test_question_answering_preprocessing_equals_transformers_roformer(tokenizer, qa_dataset):
    ours = qa_dataset.map(make_preprocess_function(tokenizer), batched=True, remove_columns=qa_dataset.column_names)
    theirs_tokenizer = RoFormerTokenizerFast(vocab=dict(tokenizer.vocab))
    theirs = qa_dataset.map(
        make_preprocess_function(theirs_tokenizer), batched=True, remove_columns=qa_dataset.column_names
    )
    assert ours["input_ids"] == theirs["input_ids"]
    assert ours["start_positions"] == theirs["start_positions"]
    assert ours["end_positions"] == theirs["end_positions"]
    found = 0
    for example, row in zip(ours, qa_dataset, strict=True):
        if example["start_positions"] == 0:
            continue  # the answer was truncated away: the recipe labels it (0, 0)
        found += 1
        encoding = tokenizer(row["question"].strip(), row["context"], max_length=384, truncation="only_second")
        start = encoding.token_to_chars(example["start_positions"]).start
        end = encoding.token_to_chars(example["end_positions"]).end
        answer_start = row["answers"]["answer_start"][0]
        assert start <= answer_start and answer_start + 6 <= end  # the labelled tokens cover the answer
    assert 0 < found < len(qa_dataset)
