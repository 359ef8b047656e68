"""
The text-classification pipeline of a classifier fine-tuned by run_classification.py, and the recipe both read
documents with, so that what was evaluated is what is served.

The recipe is the config's `classification_inputs` (`DocumentRecipe`): `truncate` keeps the head, the tail or both of
`max_seq_length` tokens; `chunk` cuts the document into overlapping windows whose logits are pooled (mean or max) into
one row. A model without a recipe is served exactly as transformers' `TextClassificationPipeline` serves it
(docs/serving.md). This module imports nothing of roformer_hf: a classifier with a recipe carries it with its code.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase, TextClassificationPipeline
from transformers.pipelines import PIPELINE_REGISTRY

TRUNCATION_SIDES = ("head", "tail", "head_tail")
LONG_DOC_STRATEGIES = ("truncate", "chunk")
CHUNK_POOLINGS = ("mean", "max")
# The shortest model input the scripts train on and a classifier's recipe accepts: room for [CLS], [SEP] and a few
# tokens of text (run_classification.py's --max_seq_length, run_mlm.py's stage lengths, `classification_inputs`).
MIN_SEQ_LENGTH = 8

TASK = "text-classification"
# Tokenizer options the recipe makes moot: it truncates (or cuts into windows) by itself, and the pipeline pads.
RECIPE_TOKENIZER_OPTIONS = ("truncation", "padding")
# Under the chunk strategy, how many windows of a document go through the model together at least (`batch_size`
# raises it).
WINDOWS_PER_FORWARD = 8


# ----------------------------------------------------------------------------------------------------------------
# The recipe: how a classifier reads a document
# ----------------------------------------------------------------------------------------------------------------


def windows_move_forward(chunk_stride: int, max_seq_length: int) -> bool:
    """Whether windows of `max_seq_length` tokens sharing `chunk_stride` of them move forward through a document: the
    stride at least 0 and less than half the window (the one rule of `classification_inputs` and `--chunk_stride`)."""
    return 0 <= chunk_stride < max_seq_length // 2


@dataclass(frozen=True)
class DocumentRecipe:
    """
    How a classifier reads a document: the `classification_inputs` of its config. Its fields are the input settings
    (`INPUT_SETTINGS`), declared here and nowhere else: run_classification.py's options of the same names, the settings
    a resume must repeat and the pipeline that serves the classifier all read them from here.

    Args:
        max_seq_length (`int`): tokens per model input, special tokens included (the window length when chunking).
        truncation_side (`str`): `"head"`, `"tail"` or `"head_tail"` (see `truncate_token_ids`).
        long_doc_strategy (`str`): `"truncate"` (one input per document) or `"chunk"` (overlapping windows).
        chunk_stride (`int`): tokens shared by consecutive windows.
        chunk_pooling (`str`): `"mean"` or `"max"` over the window logits of a document.
    """

    max_seq_length: int
    truncation_side: str = field(metadata={"choices": TRUNCATION_SIDES})
    long_doc_strategy: str = field(metadata={"choices": LONG_DOC_STRATEGIES})
    chunk_stride: int
    chunk_pooling: str = field(metadata={"choices": CHUNK_POOLINGS})

    @classmethod
    def from_settings(cls, settings: dict) -> "DocumentRecipe":
        """The recipe of a config's `classification_inputs`; a ValueError names what is missing or wrong (its type or
        its value), so that a damaged config fails when it is read rather than at the first document."""
        if not isinstance(settings, dict):
            raise ValueError(
                f"classification_inputs is a {type(settings).__name__} ({str(settings)[:60]}), not a dict: give a dict "
                f"of {', '.join(INPUT_SETTINGS)} (as run_classification.py saves it), or None to read texts as "
                "transformers does."
            )
        missing = [name for name in INPUT_SETTINGS if name not in settings]
        if missing:
            raise ValueError(
                f"classification_inputs lacks {', '.join(missing)}: give all of {', '.join(INPUT_SETTINGS)} (as "
                "run_classification.py saves them), or set it to None to read texts as transformers does."
            )
        recipe = cls(**{name: settings[name] for name in INPUT_SETTINGS})
        recipe.check_choices()
        recipe.check_lengths()
        return recipe

    def check_choices(self) -> None:
        for setting in fields(self):
            allowed, value = setting.metadata.get("choices"), getattr(self, setting.name)
            if allowed is not None and (not isinstance(value, str) or value not in allowed):
                raise ValueError(
                    f"classification_inputs has {setting.name} {value!r}: use one of {', '.join(map(repr, allowed))}."
                )

    def check_lengths(self) -> None:
        """max_seq_length and chunk_stride: whole numbers of tokens (a bool, a float or a string is refused here, not
        by a TypeError of the first document it would cut), in their ranges."""
        stride_range = f"at least 0 and less than half of max_seq_length ({self.max_seq_length})"
        for name, allowed in (("max_seq_length", f"{MIN_SEQ_LENGTH} or more"), ("chunk_stride", stride_range)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(
                    f"classification_inputs has {name} {value!r} (a {type(value).__name__}): use a whole number of "
                    f"tokens, {allowed}."
                )
        if self.max_seq_length < MIN_SEQ_LENGTH:
            raise ValueError(
                f"classification_inputs has max_seq_length {self.max_seq_length}: use {MIN_SEQ_LENGTH} or more."
            )
        if self.reads_in_windows and not windows_move_forward(self.chunk_stride, self.max_seq_length):
            raise ValueError(
                f"classification_inputs has chunk_stride {self.chunk_stride}: it must be {stride_range}, so that "
                "windows move forward."
            )

    @property
    def reads_in_windows(self) -> bool:
        return self.long_doc_strategy == "chunk"


# How documents become model inputs: saved in a fine-tuned classifier's config (`classification_inputs`) by
# run_classification.py, and read again when it evaluates, predicts or is served by a pipeline.
INPUT_SETTINGS = tuple(setting.name for setting in fields(DocumentRecipe))


# ----------------------------------------------------------------------------------------------------------------
# Reading a document: truncation, windows, special tokens, pooling
# ----------------------------------------------------------------------------------------------------------------


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
    """`[CLS] first [SEP]` or `[CLS] first [SEP] second [SEP]`, with token type 0 for the first part, 1 for the second:
    the tokenizer's row (`tokenization.framed`), written here again because a classifier's checkpoint carries this
    module without the tokenizer's file where its model is saved alone."""
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


def tokenize_texts(tokenizer: PreTrainedTokenizerBase, texts: list[str]) -> list[list[int]]:
    """Token ids of whole texts, without special tokens and without truncation."""
    return tokenizer(
        texts, add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False, verbose=False
    )["input_ids"]


def document_parts(
    first_ids: list[int], second_ids: list[int] | None, body_length: int, recipe: DocumentRecipe
) -> list[tuple[list[int], list[int] | None]]:
    """The (first, second) token ids of every model input of one document: its windows, or its truncated text(s)."""
    if recipe.reads_in_windows:
        return [(window, None) for window in split_into_windows(first_ids, body_length, recipe.chunk_stride)]
    if second_ids is not None:
        return [truncate_pair(first_ids, second_ids, body_length, recipe.truncation_side)]
    return [(truncate_token_ids(first_ids, body_length, recipe.truncation_side), None)]


def document_model_inputs(
    first_ids: list[int], second_ids: list[int] | None, recipe: DocumentRecipe, cls_token_id: int, sep_token_id: int
) -> list[dict[str, list[int]]]:
    """
    The model inputs of one document as the recipe reads it: one, or one per window, each `[CLS] first [SEP]` (or
    `[CLS] first [SEP] second [SEP]`) of at most `recipe.max_seq_length` tokens, with its `input_ids`,
    `token_type_ids` and `attention_mask`.
    """
    body_length = recipe.max_seq_length - (3 if second_ids is not None else 2)
    model_inputs = []
    for first_part, second_part in document_parts(first_ids, second_ids, body_length, recipe):
        encoded = add_special_tokens(first_part, second_part, cls_token_id, sep_token_id)
        model_inputs.append({**encoded, "attention_mask": [1] * len(encoded["input_ids"])})
    return model_inputs


# ----------------------------------------------------------------------------------------------------------------
# The pipeline
# ----------------------------------------------------------------------------------------------------------------


class RoFormerTextClassificationPipeline(TextClassificationPipeline):
    r"""
    transformers' `TextClassificationPipeline` (same call arguments: `top_k`, `function_to_apply`, `batch_size`, text
    pairs as `{"text": ..., "text_pair": ...}`), reading documents with the model's `classification_inputs`.

    Example:

    ```python
    >>> from transformers import pipeline
    >>> classifier = pipeline("text-classification", model="outputs/run_classification")  # after import roformer_hf
    >>> classifier("原告与被告签订借款合同，约定借款十万元。" * 100, top_k=None)
    [{'label': 'civil', 'score': 0.97}, {'label': 'criminal', 'score': 0.03}]
    ```
    """

    # How roformer_hf's config recognises this pipeline in transformers' registry (see `serve_recipes`).
    reads_classification_inputs = True

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # Built directly (not through the registry), it may be given any model: only ours declare a recipe.
        settings = getattr(self.model.config, "classification_inputs", None)
        self.recipe = DocumentRecipe.from_settings(settings) if settings else None

    @property
    def reads_in_windows(self) -> bool:
        return self.recipe is not None and self.recipe.reads_in_windows

    def get_iterator(self, inputs, num_workers, batch_size, preprocess_params, forward_params, postprocess_params):
        if not self.reads_in_windows:
            return super().get_iterator(
                inputs, num_workers, batch_size, preprocess_params, forward_params, postprocess_params
            )
        # One document at a time: its windows are the batch (see _forward), so there is nothing to pad or regroup.
        forward_params = {**forward_params, "windows_per_forward": max(batch_size, WINDOWS_PER_FORWARD)}
        return (self.run_single(text, preprocess_params, forward_params, postprocess_params) for text in inputs)

    def preprocess(self, inputs, **tokenizer_kwargs):
        if self.recipe is None:
            return super().preprocess(inputs, **tokenizer_kwargs)
        check_tokenizer_options(tokenizer_kwargs, self.recipe)
        text, text_pair = text_and_pair(inputs)
        encoded = self.encode_document(text, text_pair)
        if not self.reads_in_windows:
            return encoded[0]
        # The windows of a document are equally long (split_into_windows), so they stack without padding.
        return {name: torch.cat([window[name] for window in encoded]) for name in encoded[0]}  # (windows, length)

    def encode_document(self, text: str, text_pair: str | None) -> list[dict[str, torch.Tensor]]:
        """The model inputs of one document (one, or one per window), each of batch size 1, as run_classification.py
        makes them (`long_documents.encode_batch`)."""
        if text_pair is not None and self.reads_in_windows:
            raise ValueError(
                "this classifier was fine-tuned with long_doc_strategy 'chunk', which reads single texts: give one "
                "text, not a text_pair."
            )
        first_ids = tokenize_texts(self.tokenizer, [text])[0]
        second_ids = tokenize_texts(self.tokenizer, [text_pair])[0] if text_pair is not None else None
        model_inputs = document_model_inputs(
            first_ids, second_ids, self.recipe, self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        )
        return [{name: torch.tensor([ids]) for name, ids in model_input.items()} for model_input in model_inputs]

    def _forward(self, model_inputs, windows_per_forward: int = WINDOWS_PER_FORWARD):
        if not self.reads_in_windows:
            return super()._forward(model_inputs)
        num_windows = len(model_inputs["input_ids"])
        window_logits = []
        for start in range(0, num_windows, windows_per_forward):
            windows = {name: rows[start : start + windows_per_forward] for name, rows in model_inputs.items()}
            window_logits.append(super()._forward(windows).logits.float().cpu())
        # pooled as run_classification.py pools them (in float64), back to one row: the document's logits
        pooled = pool_chunk_logits(torch.cat(window_logits).numpy(), [0] * num_windows, self.recipe.chunk_pooling)
        return {"logits": torch.from_numpy(pooled)}  # (1, num_labels)


class RecipeOrPlainPipeline(RoFormerTextClassificationPipeline):
    """
    What `serve_recipes` registers for "text-classification": building it builds `RoFormerTextClassificationPipeline`
    for a model whose config has a recipe (`classification_inputs`), and transformers' `TextClassificationPipeline`
    for any other model, so that importing roformer_hf changes nothing for them. A subclass of ours, so that
    `pipeline()` finds the class attributes it reads on the registered class.
    """

    def __new__(cls, *args, **kwargs):
        model = kwargs.get("model", args[0] if args else None)
        has_recipe = bool(getattr(getattr(model, "config", None), "classification_inputs", None))
        # An object of another class than `cls`: Python does not call __init__ on it again.
        return (RoFormerTextClassificationPipeline if has_recipe else TextClassificationPipeline)(*args, **kwargs)


def text_and_pair(inputs) -> tuple[str, str | None]:
    """The text (and second text) of one pipeline input: a string, or a dict with "text" and "text_pair"."""
    if isinstance(inputs, str):
        return inputs, None
    if isinstance(inputs, dict) and isinstance(inputs.get("text"), str) and set(inputs) <= {"text", "text_pair"}:
        return inputs["text"], inputs.get("text_pair")
    raise ValueError(
        f"cannot classify {type(inputs).__name__} {str(inputs)[:60]!r}: give a text, a list of texts, or "
        '{"text": ..., "text_pair": ...} for a pair of texts.'
    )


def check_tokenizer_options(tokenizer_kwargs: dict, recipe: DocumentRecipe) -> None:
    """Refuse tokenizer options that would read documents otherwise than the recipe the model was fine-tuned with.
    `truncation=False` asks for the whole document: the windows of `chunk` read it, `truncate` would not."""
    conflicting = sorted(set(tokenizer_kwargs) - set(RECIPE_TOKENIZER_OPTIONS))
    if tokenizer_kwargs.get("truncation") in (False, "do_not_truncate") and not recipe.reads_in_windows:
        conflicting.append(f"truncation={tokenizer_kwargs['truncation']!r}")
    if conflicting:
        raise ValueError(
            f"this classifier reads documents as it was fine-tuned ({recipe.long_doc_strategy}, max_seq_length "
            f"{recipe.max_seq_length}, truncation_side {recipe.truncation_side}), which {', '.join(conflicting)} "
            "would change: leave them out, or set model.config.classification_inputs = None to tokenize as "
            "transformers does."
        )


def serve_recipes() -> None:
    """
    Serve the task "text-classification" with `RecipeOrPlainPipeline`: a classifier with a recipe is read as it was
    fine-tuned, every other model by transformers' own pipeline. Called by `import roformer_hf`; keeps the task's
    model classes and default model.
    """
    entry = PIPELINE_REGISTRY.supported_tasks[TASK]
    PIPELINE_REGISTRY.supported_tasks[TASK] = {**entry, "impl": RecipeOrPlainPipeline}


__all__ = ["RoFormerTextClassificationPipeline", "serve_recipes"]
