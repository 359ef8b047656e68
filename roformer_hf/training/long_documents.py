"""
How run_classification.py reads a document longer than one model input: it keeps the head, the tail or both
(`truncate_token_ids`, `truncate_pair`), or cuts the whole document into overlapping windows (`split_into_windows`)
whose logits are pooled back into one row per document (`pool_chunk_logits`). `encode_batch` applies them to a batch
of documents; `resolve_input_settings` says which of these settings a run uses.
"""

import logging
import math
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Protocol, TypeVar

import numpy as np
from transformers import PreTrainedTokenizerBase

from ..modeling import RoFormerForSequenceClassification
from .errors import ScriptError
from .labels import LabelInfo, encode_label

logger = logging.getLogger(__name__)

# How documents become model inputs: saved in a fine-tuned classifier's config (`classification_inputs`) and read
# again when it evaluates or predicts, unless the command line gives them.
INPUT_SETTINGS = ("max_seq_length", "truncation_side", "long_doc_strategy", "chunk_stride", "chunk_pooling")


def truncate_token_ids(token_ids: Sequence[int], max_length: int, side: str = "head") -> list[int]:
    """
    Shorten `token_ids` to at most `max_length` tokens.

    Args:
        token_ids (`Sequence[int]`): the tokens of one text, without special tokens.
        max_length (`int`): how many tokens to keep.
        side (`str`): `"head"` keeps the start, `"tail"` the end, `"head_tail"` the first quarter of `max_length`
            from the start and the rest from the end (head+tail truncation of Sun et al., 2019).
    """
    token_ids = list(token_ids)
    if len(token_ids) <= max_length:
        return token_ids
    if side == "head":
        return token_ids[:max_length]
    if side == "tail":
        return token_ids[len(token_ids) - max_length :]
    if side == "head_tail":
        head_length = max_length // 4
        return token_ids[:head_length] + token_ids[len(token_ids) - (max_length - head_length) :]
    raise ValueError(f"unknown truncation side {side!r}: use 'head', 'tail' or 'head_tail'.")


def truncate_pair(
    first_ids: Sequence[int], second_ids: Sequence[int], max_length: int, side: str = "head"
) -> tuple[list[int], list[int]]:
    """
    Shorten two texts to at most `max_length` tokens together: the shorter keeps all its tokens if it fits in half,
    the longer gets the rest; each is cut with `truncate_token_ids(side=side)`.
    """
    if len(first_ids) + len(second_ids) <= max_length or len(first_ids) <= max_length // 2:
        budget_first = len(first_ids)
    else:  # the first text is long: it gets what the second leaves, but at least half
        budget_first = max(max_length - len(second_ids), max_length - max_length // 2)
    first = truncate_token_ids(first_ids, budget_first, side)
    second = truncate_token_ids(second_ids, max_length - len(first), side)
    return first, second


def split_into_windows(token_ids: Sequence[int], window_length: int, stride: int) -> list[list[int]]:
    """
    Cut a document into overlapping windows that cover all of it.

    Consecutive windows share `stride` tokens; the last window is moved back so that it ends on the document's last
    token and is as long as the others (unless the whole document is shorter than one window).

    Args:
        token_ids (`Sequence[int]`): the tokens of the document, without special tokens.
        window_length (`int`): tokens per window.
        stride (`int`): tokens shared by consecutive windows, `0 <= stride < window_length`.

    Returns:
        `list[list[int]]`: at least one window (an empty document gives one empty window).
    """
    if not 0 <= stride < window_length:
        raise ValueError(f"stride must be in [0, window_length={window_length}), got {stride}.")
    token_ids = list(token_ids)
    if len(token_ids) <= window_length:
        return [token_ids]
    step = window_length - stride
    num_windows = 1 + math.ceil((len(token_ids) - window_length) / step)
    starts = [min(index * step, len(token_ids) - window_length) for index in range(num_windows)]
    return [token_ids[start : start + window_length] for start in starts]


def add_special_tokens(
    first_ids: list[int], second_ids: list[int] | None, cls_token_id: int, sep_token_id: int
) -> dict[str, list[int]]:
    """`[CLS] first [SEP]` or `[CLS] first [SEP] second [SEP]`, with token type 0 for the first part, 1 for the second."""
    input_ids = [cls_token_id, *first_ids, sep_token_id]
    token_type_ids = [0] * len(input_ids)
    if second_ids is not None:
        input_ids += [*second_ids, sep_token_id]
        token_type_ids += [1] * (len(second_ids) + 1)
    return {"input_ids": input_ids, "token_type_ids": token_type_ids}


def pool_chunk_logits(logits: np.ndarray, document_ids: Sequence[int], pooling: str = "mean") -> np.ndarray:
    """
    Pool the logits of the windows of every document into one row per document.

    Args:
        logits (`np.ndarray` of shape `(num_windows, num_labels)`): the logits of every window.
        document_ids (`Sequence[int]` of length `num_windows`): the document of every window, numbered from 0
            (every number up to the largest must occur).
        pooling (`str`): `"mean"` or `"max"` (element-wise over the windows of a document).

    Returns:
        `np.ndarray` of shape `(num_documents, num_labels)`, row `d` for document `d`.
    """
    logits = np.asarray(logits, dtype=np.float64)
    document_ids = np.asarray(document_ids)
    if logits.shape[0] != document_ids.shape[0]:
        raise ValueError(f"{logits.shape[0]} windows of logits but {document_ids.shape[0]} document ids.")
    num_documents = int(document_ids.max()) + 1 if document_ids.size else 0
    if pooling == "mean":
        sums = np.zeros((num_documents, logits.shape[1]))
        np.add.at(sums, document_ids, logits)
        counts = np.bincount(document_ids, minlength=num_documents)
        if (counts == 0).any():
            raise ValueError(f"document {int(np.argmin(counts))} has no window.")
        return sums / counts[:, None]
    if pooling == "max":
        pooled = np.full((num_documents, logits.shape[1]), -np.inf)
        np.maximum.at(pooled, document_ids, logits)
        if np.isinf(pooled).all(axis=1).any():
            raise ValueError("a document has no window.")
        return pooled
    raise ValueError(f"unknown pooling {pooling!r}: use 'mean' or 'max'.")


def first_per_document(values: np.ndarray, document_ids: Sequence[int]) -> np.ndarray:
    """The value of the first window of every document (windows of a document carry the document's label)."""
    document_ids = np.asarray(document_ids)
    _, first_windows = np.unique(document_ids, return_index=True)
    return np.asarray(values)[first_windows]


def pool_documents(
    logits: np.ndarray, labels: np.ndarray | None, document_ids: Sequence[int], pooling: str
) -> tuple[np.ndarray, np.ndarray | None]:
    """The logits and labels of windows as those of their documents: pooled logits, each document's first label."""
    labels = first_per_document(labels, document_ids) if labels is not None else None
    return pool_chunk_logits(logits, document_ids, pooling), labels


class DocumentReading(Protocol):
    """What this module reads of run_classification.py's `DataArguments`: the columns and how to cut documents."""

    text_column_name: str
    text_pair_column_name: str | None
    label_column_name: str
    max_seq_length: int
    truncation_side: str
    long_doc_strategy: str
    chunk_stride: int
    chunk_pooling: str


Reading = TypeVar("Reading", bound=DocumentReading)


def tokenize_texts(tokenizer: PreTrainedTokenizerBase, texts: list[str]) -> list[list[int]]:
    """Token ids of whole texts, without special tokens and without truncation."""
    return tokenizer(
        texts, add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False, verbose=False
    )["input_ids"]


def document_parts(
    first_ids: list[int], second_ids: list[int] | None, body_length: int, reading: DocumentReading
) -> list[tuple[list[int], list[int] | None]]:
    """The (first, second) token ids of every model input of one document: its windows, or its truncated text(s)."""
    if reading.long_doc_strategy == "chunk":
        return [(window, None) for window in split_into_windows(first_ids, body_length, reading.chunk_stride)]
    if second_ids is not None:
        return [truncate_pair(first_ids, second_ids, body_length, reading.truncation_side)]
    return [(truncate_token_ids(first_ids, body_length, reading.truncation_side), None)]


def encode_batch(
    batch: dict[str, list],
    indices: list[int],
    tokenizer: PreTrainedTokenizerBase,
    label_info: LabelInfo,
    data_args: DocumentReading,
) -> dict[str, list]:
    """
    Turn documents into model inputs: one truncated input per document, or (chunk strategy) one input per window.
    Every input keeps the index of its document in `document_index`, and its length in `length` (group_by_length).

    Args:
        batch (`dict[str, list]`): a batch of rows, as `datasets.Dataset.map(batched=True)` gives it.
        indices (`list[int]`): the rows' indices in their dataset (`with_indices=True`).
        tokenizer (`PreTrainedTokenizerBase`): the model's tokenizer.
        label_info (`LabelInfo`): the task, to encode the labels (when the batch has a label column).
        data_args (`DocumentReading`): the text and label columns, and how to cut long documents.
    """
    first_texts = tokenize_texts(tokenizer, batch[data_args.text_column_name])
    pair_column = data_args.text_pair_column_name
    second_texts = tokenize_texts(tokenizer, batch[pair_column]) if pair_column else [None] * len(first_texts)
    body_length = data_args.max_seq_length - (3 if pair_column else 2)
    labels = batch.get(data_args.label_column_name)
    features: dict[str, list] = {"input_ids": [], "token_type_ids": [], "attention_mask": [], "document_index": []}
    features.update({"length": [], **({"labels": []} if labels is not None else {})})
    for position, (first_ids, second_ids) in enumerate(zip(first_texts, second_texts, strict=True)):
        for first_part, second_part in document_parts(first_ids, second_ids, body_length, data_args):
            encoded = add_special_tokens(first_part, second_part, tokenizer.cls_token_id, tokenizer.sep_token_id)
            features["input_ids"].append(encoded["input_ids"])
            features["token_type_ids"].append(encoded["token_type_ids"])
            features["attention_mask"].append([1] * len(encoded["input_ids"]))
            features["document_index"].append(indices[position])
            features["length"].append(len(encoded["input_ids"]))
            if labels is not None:
                features["labels"].append(encode_label(labels[position], label_info))
    return features


def resolve_input_settings(
    data_args: Reading, model: RoFormerForSequenceClassification, model_name: str | None, training: bool
) -> Reading:
    """
    The input settings (`INPUT_SETTINGS`) of this run: those the command line gives, else those the checkpoint was
    fine-tuned with (its config's `classification_inputs`), else the defaults of `data_args`' dataclass
    (run_classification.py's `DataArguments`). They are written into `model.config.classification_inputs`, so the
    saved classifier remembers how it read its documents.

    Args:
        data_args (`DataArguments`): the script's data arguments, `None` for each input setting not given.
        model (`RoFormerForSequenceClassification`): the classifier, whose config receives the settings.
        model_name (`str`, *optional*): what the warnings call the checkpoint.
        training (`bool`): whether the run fine-tunes (a checkpoint without saved settings is then expected).

    Returns:
        A copy of `data_args` with every input setting filled in.
    """
    saved = model.config.classification_inputs or {}
    defaults = {data_field.name: data_field.default for data_field in fields(data_args)}
    settings = {}
    for name in INPUT_SETTINGS:
        given, trained_with = getattr(data_args, name), saved.get(name)
        if given is not None and trained_with is not None and given != trained_with:
            logger.warning(
                f"--{name} {given} differs from the {trained_with} that {model_name} was fine-tuned with: documents "
                f"are read differently than in training, which can change the results (leave out --{name} to use "
                f"{trained_with})."
            )
        settings[name] = next(value for value in (given, trained_with, defaults[name]) if value is not None)
    if not training and not saved and any(getattr(data_args, name) is None for name in INPUT_SETTINGS):
        logger.warning(
            f"{model_name} does not record how it read documents when fine-tuned (max_seq_length, truncation_side, "
            "long_doc_strategy): using the options given and the defaults for the others."
        )
    try:
        data_args = replace(data_args, **settings)
    except ValueError as error:  # the dataclass' own checks, now that every setting is known
        raise ScriptError(f"invalid arguments: {error}") from error
    model.config.classification_inputs = settings
    if data_args.max_seq_length > model.config.max_position_embeddings:
        logger.info(
            f"max_seq_length {data_args.max_seq_length} exceeds max_position_embeddings "
            f"{model.config.max_position_embeddings}: fine for RoPE, which has no length cap."
        )
    return data_args
