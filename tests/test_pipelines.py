"""transformers pipelines run on roformer_hf models and the jieba tokenizer, and agree with the models' own outputs.

transformers 5 has no "question-answering" pipeline any more; roformer_hf.question_answering_pipeline provides one for span heads.

Tiny random models over the real 50k vocab: what is checked is the form of the outputs, their agreement with a
direct forward pass, and that character offsets point at the tokens' text.
"""

import pytest
import torch
from transformers import pipeline

import roformer_hf
from roformer_hf.question_answering_pipeline import RoFormerQuestionAnsweringPipeline

TEXT = "原告与被告签订借款合同，约定借款十万元。"
MIXED_TEXT = "2019年3月，张三在New York购买了iPhone手机。"  # digits, Latin words, WordPiece pieces, upper case


def tiny_model(architecture: str, **settings):
    torch.manual_seed(0)
    config = roformer_hf.RoFormerConfig(
        vocab_size=50000,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=48,
        **settings,
    )
    return getattr(roformer_hf, architecture)(config).eval()


def test_fill_mask(tokenizer):
    model = tiny_model("RoFormerForMaskedLM")
    fill_mask = pipeline("fill-mask", model=model, tokenizer=tokenizer)
    text = "今天天气很[MASK]。"
    predictions = fill_mask(text, top_k=5)
    assert len(predictions) == 5
    assert all(prediction.keys() == {"score", "token", "token_str", "sequence"} for prediction in predictions)
    scores = [prediction["score"] for prediction in predictions]
    assert scores == sorted(scores, reverse=True)

    batch = tokenizer(text, return_tensors="pt")
    mask_position = batch["input_ids"][0].tolist().index(tokenizer.mask_token_id)
    with torch.no_grad():
        probabilities = model(**batch).logits[0, mask_position].softmax(-1)
    expected_scores, expected_ids = probabilities.topk(5)
    assert [prediction["token"] for prediction in predictions] == expected_ids.tolist()
    torch.testing.assert_close(torch.tensor(scores), expected_scores, rtol=1e-4, atol=1e-6)

    [good] = fill_mask(text, targets=["好"], top_k=1)
    assert good["token_str"] == "好" and good["sequence"] == "今天天气很好。"


def test_text_classification(tokenizer):
    model = tiny_model("RoFormerForSequenceClassification", id2label={0: "civil", 1: "criminal"})
    classifier = pipeline("text-classification", model=model, tokenizer=tokenizer)
    [best] = classifier(TEXT)
    assert best["label"] in {"civil", "criminal"}
    scores = {entry["label"]: entry["score"] for entry in classifier(TEXT, top_k=None)}
    with torch.no_grad():
        probabilities = model(**tokenizer(TEXT, return_tensors="pt")).logits[0].softmax(-1)
    assert scores == pytest.approx({"civil": probabilities[0].item(), "criminal": probabilities[1].item()}, rel=1e-4)
    assert best["score"] == pytest.approx(max(scores.values()))


@pytest.mark.parametrize("text", [TEXT, MIXED_TEXT])
def test_token_classification_offsets_point_at_the_tokens(tokenizer, text):
    labels = {0: "O", 1: "B-LOC", 2: "I-LOC"}
    model = tiny_model("RoFormerForTokenClassification", id2label=labels)
    tagger = pipeline("token-classification", model=model, tokenizer=tokenizer, ignore_labels=[])
    entities = tagger(text)
    ids = tokenizer(text)["input_ids"][1:-1]  # without [CLS] and [SEP]
    assert [entity["index"] for entity in entities] == list(range(1, len(ids) + 1))
    for entity, token_id in zip(entities, ids, strict=True):
        assert entity["entity"] in labels.values()
        piece = text[entity["start"] : entity["end"]]
        if token_id == tokenizer.unk_token_id:
            assert entity["word"] == piece
        else:
            assert entity["word"].removeprefix("##") == piece.lower()
    covered = "".join(text[entity["start"] : entity["end"]] for entity in entities)
    assert covered == text.replace(" ", "")


def test_token_classification_groups_entities(tokenizer):
    model = tiny_model("RoFormerForTokenClassification", id2label={0: "O", 1: "B-LOC", 2: "I-LOC"})
    tagger = pipeline("token-classification", model=model, tokenizer=tokenizer, aggregation_strategy="simple")
    for group in tagger(TEXT):
        assert group.keys() == {"entity_group", "score", "word", "start", "end"}
        assert group["word"] == TEXT[group["start"] : group["end"]]


def test_feature_extraction(tokenizer):
    model = tiny_model("RoFormerModel")
    extractor = pipeline("feature-extraction", model=model, tokenizer=tokenizer)
    features = extractor(TEXT, return_tensors=True)
    batch = tokenizer(TEXT, return_tensors="pt")
    with torch.no_grad():
        hidden_states = model(**batch).last_hidden_state
    assert features.shape == (1, batch["input_ids"].shape[1], 32)
    torch.testing.assert_close(features, hidden_states)


def test_pipeline_loads_a_saved_checkpoint_by_path(tokenizer, tmp_path):
    model = tiny_model("RoFormerForMaskedLM")
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    fill_mask = pipeline("fill-mask", model=str(tmp_path))  # roformer_hf is imported: no remote code needed
    assert len(fill_mask("今天天气很[MASK]。", top_k=3)) == 3


def best_span_by_brute_force(model, tokenizer, question, context, max_answer_len):
    """The (start, end) characters of the best span, from the model's logits, by trying every span."""
    batch = tokenizer(question, context, return_offsets_mapping=True, return_tensors="pt")
    offsets = batch.pop("offset_mapping")[0]
    with torch.no_grad():
        outputs = model(**batch)
    in_context = [
        index for index, kind in enumerate(batch["token_type_ids"][0]) if kind == 1 and offsets[index, 1] > 0
    ]
    start_probabilities = outputs.start_logits[0, in_context].softmax(-1)
    end_probabilities = outputs.end_logits[0, in_context].softmax(-1)
    spans = [
        (start_probabilities[i] * end_probabilities[j], in_context[i], in_context[j])
        for i in range(len(in_context))
        for j in range(i, min(i + max_answer_len, len(in_context)))
    ]
    score, start, end = max(spans)
    return float(score), int(offsets[start, 0]), int(offsets[end, 1])


def test_question_answering_points_into_the_context(tokenizer):
    model = tiny_model("RoFormerForQuestionAnswering")
    answerer = RoFormerQuestionAnsweringPipeline(model=model, tokenizer=tokenizer)
    answer = answerer(question="借款多少？", context=TEXT, max_answer_len=5)
    assert answer.keys() == {"score", "start", "end", "answer"}
    assert answer["answer"] == TEXT[answer["start"] : answer["end"]] != ""
    score, start, end = best_span_by_brute_force(model, tokenizer, "借款多少？", TEXT, max_answer_len=5)
    assert (answer["start"], answer["end"]) == (start, end)
    assert answer["score"] == pytest.approx(score, rel=1e-4)

    answers = answerer(question="借款多少？", context=TEXT, top_k=3, max_answer_len=5)
    assert answers[0] == answer and len(answers) == 3
    assert [entry["score"] for entry in answers] == sorted((entry["score"] for entry in answers), reverse=True)
    batched = answerer(question=["借款多少？", "谁签订了合同？"], context=[TEXT, MIXED_TEXT])
    assert [entry["answer"] for entry in batched] == [
        context[entry["start"] : entry["end"]] for entry, context in zip(batched, [TEXT, MIXED_TEXT], strict=True)
    ]


def test_question_answering_reads_long_contexts_in_windows(tokenizer):
    model = tiny_model("RoFormerForQuestionAnswering")
    answerer = RoFormerQuestionAnsweringPipeline(model=model, tokenizer=tokenizer)
    context = MIXED_TEXT + TEXT * 6
    assert len(tokenizer("借款多少？", context)["input_ids"]) > 40
    answers = answerer(question="借款多少？", context=context, max_seq_len=24, doc_stride=8, top_k=5)
    assert len({(entry["start"], entry["end"]) for entry in answers}) == 5
    assert all(entry["answer"] == context[entry["start"] : entry["end"]] for entry in answers)
    assert max(entry["end"] for entry in answers) <= len(context)


def test_question_answering_needs_matching_questions_and_contexts(tokenizer):
    answerer = RoFormerQuestionAnsweringPipeline(model=tiny_model("RoFormerForQuestionAnswering"), tokenizer=tokenizer)
    with pytest.raises(ValueError, match="one context per question"):
        answerer(question=["借款多少？", "谁？"], context=[TEXT])
