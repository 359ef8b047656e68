"""Extractive question answering as a transformers pipeline.

transformers 5 removed its "question-answering" pipeline (it points to chat models instead), but an encoder with a
span head (`RoFormerForQuestionAnswering`) still answers by pointing into the context. This pipeline does that: the
question and the context go through the tokenizer as a pair, split into overlapping windows when the context is long;
the best span (start <= end, at most `max_answer_len` tokens, inside the context) is mapped back to the context's
characters with the tokenizer's offsets.
"""

import torch
from transformers import Pipeline


def without_unset(params: dict) -> dict:
    return {name: value for name, value in params.items() if value is not None}


class RoFormerQuestionAnsweringPipeline(Pipeline):
    r"""
    Answers a question with a span of the context.

    Example:

    ```python
    >>> from roformer_hf.question_answering_pipeline import RoFormerQuestionAnsweringPipeline
    >>> answerer = RoFormerQuestionAnsweringPipeline(model=model, tokenizer=tokenizer)
    >>> answerer(question="借款多少？", context="原告与被告签订借款合同，约定借款十万元。")
    {'score': 0.93, 'start': 16, 'end': 19, 'answer': '十万元'}
    ```

    Call arguments:
        question (`str` or `list[str]`), context (`str` or `list[str]`):
            One question and its context, or lists of the same length.
        top_k (`int`, defaults to 1):
            Number of answers; with more than one, a list of answers per question, best first.
        max_answer_len (`int`, defaults to 30):
            Longest answer, in tokens.
        max_seq_len (`int`, defaults to 384):
            Length of a window (question, context part and special tokens), in tokens.
        doc_stride (`int`, defaults to 128):
            Tokens of context shared by consecutive windows.

    Returns:
        For every question, a dict (or a list of `top_k` dicts) with `score` (the probability of the span: start
        probability times end probability), `start` and `end` (character offsets into the context) and `answer`
        (`context[start:end]`).
    """

    def _sanitize_parameters(self, top_k=None, max_answer_len=None, max_seq_len=None, doc_stride=None):
        preprocess_params = without_unset({"max_seq_len": max_seq_len, "doc_stride": doc_stride})
        postprocess_params = without_unset({"top_k": top_k, "max_answer_len": max_answer_len})
        return preprocess_params, {}, postprocess_params

    def __call__(self, question: str | list[str], context: str | list[str], **kwargs):
        if isinstance(question, str) != isinstance(context, str):
            raise ValueError("Give one question with one context, or a list of questions with a list of contexts.")
        if isinstance(question, str):
            return super().__call__({"question": question, "context": context}, **kwargs)
        if len(question) != len(context):
            raise ValueError(f"{len(question)} questions but {len(context)} contexts: give one context per question.")
        pairs = [{"question": one, "context": its_context} for one, its_context in zip(question, context, strict=True)]
        return super().__call__(pairs, **kwargs)

    def preprocess(self, inputs: dict, max_seq_len: int = 384, doc_stride: int = 128) -> dict:
        windows = self.tokenizer(
            inputs["question"],
            inputs["context"],
            truncation="only_second",
            max_length=max_seq_len,
            stride=doc_stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            padding=True,
            return_tensors="pt",
        )
        model_inputs = {name: windows[name] for name in self.tokenizer.model_input_names if name in windows}
        return {**model_inputs, "offset_mapping": windows["offset_mapping"], "context": inputs["context"]}

    def _forward(self, inputs: dict) -> dict:
        model_inputs = {name: inputs[name] for name in self.tokenizer.model_input_names if name in inputs}
        outputs = self.model(**model_inputs)
        return {
            "start_logits": outputs.start_logits,  # (windows, seq)
            "end_logits": outputs.end_logits,
            "in_context": (inputs["token_type_ids"] == 1) & (inputs["offset_mapping"][..., 1] > 0),
            "offset_mapping": inputs["offset_mapping"],  # (windows, seq, 2)
            "context": inputs["context"],
        }

    def postprocess(self, outputs: dict, top_k: int = 1, max_answer_len: int = 30) -> dict | list[dict]:
        in_context = outputs["in_context"]
        # The probability of a span is that of its start times that of its end, each a softmax over context tokens.
        start_probabilities = outputs["start_logits"].float().masked_fill(~in_context, -torch.inf).softmax(-1)
        end_probabilities = outputs["end_logits"].float().masked_fill(~in_context, -torch.inf).softmax(-1)
        span_scores = start_probabilities[:, :, None] * end_probabilities[:, None, :]  # (windows, start, end)
        length = torch.arange(span_scores.shape[-1])
        allowed = (length[None, :] >= length[:, None]) & (length[None, :] - length[:, None] < max_answer_len)
        span_scores = span_scores.masked_fill(~allowed, 0.0).nan_to_num(0.0)
        answers = []
        for flat_index in span_scores.flatten().argsort(descending=True):
            window, start, end = torch.unravel_index(flat_index, span_scores.shape)
            if span_scores[window, start, end] == 0:
                break  # no allowed span left
            character_start = int(outputs["offset_mapping"][window, start, 0])
            character_end = int(outputs["offset_mapping"][window, end, 1])
            if any(answer["start"] == character_start and answer["end"] == character_end for answer in answers):
                continue  # the same span seen from an overlapping window
            answers.append(
                {
                    "score": float(span_scores[window, start, end]),
                    "start": character_start,
                    "end": character_end,
                    "answer": outputs["context"][character_start:character_end],
                }
            )
            if len(answers) == top_k:
                break
        return answers[0] if top_k == 1 else answers


__all__ = ["RoFormerQuestionAnsweringPipeline"]
