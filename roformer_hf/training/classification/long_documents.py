"""
How run_classification.py reads a document longer than one model input, with the pieces it shares with the served
pipeline (`roformer_hf.text_classification_pipeline`: head, tail or both, `truncate_token_ids`, `truncate_pair`; or
overlapping windows, `split_into_windows`, whose logits `pool_chunk_logits` pools back into one row per document).
`encode_batch` applies them to a batch of documents; `resolve_input_settings` says which of these settings a run uses.
"""

import logging
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

import numpy as np
from transformers import PreTrainedTokenizerBase

from ...modeling import RoFormerForSequenceClassification
from ...text_classification_pipeline import (
    INPUT_SETTINGS,
    DocumentRecipe,
    document_model_inputs,
    pool_chunk_logits,
    tokenize_texts,
)
from ..errors import ScriptError
from .labels import LabelInfo, encode_label

logger = logging.getLogger(__name__)

# The input settings of a run that gives none and fine-tunes a checkpoint that recorded none
# (`resolve_input_settings`): run_classification.py's DataArguments take them as their defaults, and --help shows them.
DEFAULT_RECIPE = DocumentRecipe(
    max_seq_length=1024, truncation_side="head", long_doc_strategy="truncate", chunk_stride=128, chunk_pooling="mean"
)


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
    """What this module reads of run_classification.py's `DataArguments`: the columns, and how to cut documents (its
    `recipe()`, once every input setting is known: `resolve_input_settings`)."""

    text_column_name: str
    text_pair_column_name: str | None
    label_column_name: str

    def recipe(self) -> DocumentRecipe: ...


Reading = TypeVar("Reading", bound=DocumentReading)


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
    labels = batch.get(data_args.label_column_name)
    features: dict[str, list] = {"input_ids": [], "token_type_ids": [], "attention_mask": [], "document_index": []}
    features.update({"length": [], **({"labels": []} if labels is not None else {})})
    cls_token_id, sep_token_id, recipe = tokenizer.cls_token_id, tokenizer.sep_token_id, data_args.recipe()
    for position, (first_ids, second_ids) in enumerate(zip(first_texts, second_texts, strict=True)):
        for encoded in document_model_inputs(first_ids, second_ids, recipe, cls_token_id, sep_token_id):
            for name, ids in encoded.items():  # input_ids, token_type_ids, attention_mask
                features[name].append(ids)
            features["document_index"].append(indices[position])
            features["length"].append(len(encoded["input_ids"]))
            if labels is not None:
                features["labels"].append(encode_label(labels[position], label_info))
    return features


def resolve_input_settings(
    data_args: Reading,
    given: Collection[str],
    model: RoFormerForSequenceClassification,
    model_name: str | None,
    training: bool,
) -> Reading:
    """
    The input settings (`INPUT_SETTINGS`) of this run: those the command line gives, else those the checkpoint was
    fine-tuned with (its config's `classification_inputs`), else the defaults of `data_args`. They are written into
    `model.config.classification_inputs`, so the saved classifier remembers how it read its documents.

    Args:
        data_args (`DataArguments`): the script's data arguments.
        given (`Collection[str]`): the input settings the command line gave (`cli.ParsedArguments.given`).
        model (`RoFormerForSequenceClassification`): the classifier, whose config receives the settings.
        model_name (`str`, *optional*): what the warnings call the checkpoint.
        training (`bool`): whether the run fine-tunes (a checkpoint without saved settings is then expected).

    Returns:
        A copy of `data_args` with every input setting decided.
    """
    saved = model.config.classification_inputs or {}
    settings = {}
    for name in INPUT_SETTINGS:
        value, trained_with = getattr(data_args, name), saved.get(name)
        if name in given and trained_with is not None and value != trained_with:
            logger.warning(
                f"--{name} {value} differs from the {trained_with} that {model_name} was fine-tuned with: documents "
                f"are read differently than in training, which can change the results (leave out --{name} to use "
                f"{trained_with})."
            )
        settings[name] = value if name in given or trained_with is None else trained_with
    if not training and not saved and not set(INPUT_SETTINGS) <= set(given):
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
