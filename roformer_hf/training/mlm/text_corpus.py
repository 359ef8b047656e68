"""
Plain text for masked language modelling: reading it (`load_corpus`, through `data.sources`), its text column,
dropping blank texts, cutting long ones, holding out validation text, then (`tokenize_corpus`) tokenizing with jieba
word ids and packing the tokens into blocks.
"""

from functools import partial
from typing import Any

import datasets
from transformers import PreTrainedTokenizerBase, TrainingArguments

from ..data.sources import hold_out_validation, limit_examples, load_splits
from ..errors import ScriptError

# Texts longer than this many characters are cut into pieces before tokenization (not with --line_by_line, where a
# line is an example): the tokenizer's memory follows the length of one text, so a corpus on one line needed several times
# the memory of the same text in lines. Packing joins the pieces again, with [SEP] [CLS] at each cut.
LONG_TEXT_CHARACTERS = 2_000
SENTENCE_ENDS = ("。", "！", "？", "!", "?", "\n")


def keep_text_column(raw_datasets: datasets.DatasetDict, text_column_name: str) -> datasets.DatasetDict:
    """Keep only the column `text_column_name`, named `text`; a missing column raises `ScriptError`."""
    columns = raw_datasets["train"].column_names
    if columns is not None and text_column_name not in columns:
        raise ScriptError(
            f"no column {text_column_name!r} in the data (columns: {', '.join(columns)}): "
            "name the text column with --text_column_name."
        )
    raw_datasets = raw_datasets.select_columns([text_column_name])
    if text_column_name != "text":
        raw_datasets = raw_datasets.rename_column(text_column_name, "text")
    return raw_datasets


def has_text(example: dict[str, Any], index: int, source: str) -> bool:
    """Whether a row holds text (blank lines and empty values are skipped); a number or a list is refused, since
    dropping it would silently lose data the user meant to train on."""
    text = example["text"]
    if text is not None and not isinstance(text, str):
        raise ScriptError(
            f"{source}: data row {index + 1} holds {text!r} ({type(text).__name__}), not text, in the text column: "
            'write every text as a string (in JSON, "123" rather than 123).'
        )
    return text is not None and bool(text.strip())


def split_long_text(text: str, limit: int) -> list[str]:
    """
    `text` cut into pieces of at most `limit` characters, each ending after the last sentence end (`SENTENCE_ENDS`)
    it holds (at `limit` characters where there is none), so that jieba's words are rarely cut.
    """
    pieces, start = [], 0
    while len(text) - start > limit:
        window = text[start : start + limit]
        cut = max(window.rfind(mark) for mark in SENTENCE_ENDS) + 1 or limit
        pieces.append(window[:cut])
        start += cut
    return [*pieces, text[start:]]


def split_long_texts(batch: dict[str, list], limit: int) -> dict[str, list]:
    """Cut every text longer than `limit` characters into pieces (see `split_long_text`), one row each."""
    return {"text": [piece for text in batch["text"] for piece in split_long_text(text, limit)]}


def cut_long_texts(raw_datasets: datasets.DatasetDict) -> datasets.DatasetDict:
    """Every text longer than `LONG_TEXT_CHARACTERS` cut into pieces at sentence ends, one row each."""
    return raw_datasets.map(split_long_texts, batched=True, fn_kwargs={"limit": LONG_TEXT_CHARACTERS})


def tokenize_with_word_ids(batch: dict[str, list], tokenizer: PreTrainedTokenizerBase, max_length: int | None) -> dict:
    """Tokenize a batch of texts with their jieba word ids; truncate to `max_length` when given (line by line)."""
    encoding = tokenizer(
        batch["text"],
        return_word_ids=True,
        return_attention_mask=False,
        return_token_type_ids=False,
        truncation=max_length is not None,
        max_length=max_length,
        verbose=False,  # texts longer than model_max_length are expected: they are packed into blocks
    )
    return {"input_ids": encoding["input_ids"], "word_ids": encoding["word_ids"]}


def pack_into_blocks(batch: dict[str, list], block_length: int) -> dict[str, list]:
    """
    Concatenate tokenized texts and cut them into blocks of `block_length` tokens (the remainder is dropped). Word
    ids are renumbered so that every word of the batch keeps its own id, whichever text it came from.
    """
    input_ids, word_ids, next_word_id = [], [], 0
    for text_input_ids, text_word_ids in zip(batch["input_ids"], batch["word_ids"], strict=True):
        input_ids.extend(text_input_ids)
        word_ids.extend(word_id + next_word_id if word_id >= 0 else -1 for word_id in text_word_ids)
        next_word_id += max(text_word_ids, default=-1) + 1
    total_length = len(input_ids) // block_length * block_length
    starts = range(0, total_length, block_length)
    return {
        "input_ids": [input_ids[start : start + block_length] for start in starts],
        "word_ids": [word_ids[start : start + block_length] for start in starts],
    }


def add_index(example: dict[str, Any], index: int, name: str) -> dict[str, int]:
    """The row's index as column `name` (`dataset.map(add_index, with_indices=True, fn_kwargs={"name": ...})`)."""
    return {name: index}


def number_examples(examples: datasets.DatasetDict) -> datasets.DatasetDict:
    """
    Number the examples, which seeds their masks (`WholeWordMaskCollator`): training examples by `example_index`
    (new masks every epoch), validation examples by `mask_seed` (the same masks at every evaluation).
    """
    examples["train"] = examples["train"].map(add_index, with_indices=True, fn_kwargs={"name": "example_index"})
    if "validation" in examples:
        examples["validation"] = examples["validation"].map(
            add_index, with_indices=True, fn_kwargs={"name": "mask_seed"}
        )
    return examples


def load_corpus(data_args: Any, model_args: Any) -> tuple[datasets.DatasetDict, str | None]:
    """
    Load the text as a `DatasetDict` (or `IterableDatasetDict` when streaming) with `train` and, when there is
    validation text, `validation` splits holding one column, `text`, without blank texts; and, when the validation
    text is held out of the training text, what it is in words (for the card), else `None`.
    """
    files = {"train": data_args.train_file, "validation": data_args.validation_file}
    raw_datasets, sources = load_splits(
        data_args, files, [data_args.text_column_name], model_args.cache_dir, data_args.streaming
    )
    raw_datasets = keep_text_column(raw_datasets, data_args.text_column_name)
    for split, dataset in raw_datasets.items():
        raw_datasets[split] = dataset.filter(has_text, with_indices=True, fn_kwargs={"source": sources[split]})
    if not data_args.streaming and len(raw_datasets["train"]) == 0:
        raise ScriptError("the training data holds no text (only blank lines or empty values).")
    if not data_args.line_by_line:
        raw_datasets = cut_long_texts(raw_datasets)
    if "validation" not in raw_datasets and data_args.validation_split_percentage > 0:
        # the last rows, in file order: validation text is not a neighbour of training text (see hold_out_validation)
        train, validation = hold_out_validation(raw_datasets["train"], data_args.validation_split_percentage)
        raw_datasets = type(raw_datasets)(train=train, validation=validation)
        percentage = data_args.validation_split_percentage
        part = f"the first {percentage} rows of every 100" if data_args.streaming else f"the last {percentage}%"
        held_out = f"{part} of the training text (in file order), held out: not trained on"
        return raw_datasets, held_out
    return raw_datasets, None


def tokenize_corpus(
    raw_datasets: datasets.DatasetDict,
    tokenizer: PreTrainedTokenizerBase,
    max_seq_length: int,
    data_args: Any,
    training_args: TrainingArguments,
) -> datasets.DatasetDict:
    """
    Turn text into training examples of at most `max_seq_length` tokens with their word ids: packed blocks, or one
    truncated example per line with `--line_by_line`. Validation examples get a `mask_seed`.
    """
    map_options = {}
    if not data_args.streaming:
        map_options = {
            "load_from_cache_file": not data_args.overwrite_cache,
            "num_proc": data_args.preprocessing_num_workers,
        }
    truncation = max_seq_length if data_args.line_by_line else None
    with training_args.main_process_first(desc="tokenization"):
        examples = raw_datasets.map(
            partial(tokenize_with_word_ids, tokenizer=tokenizer, max_length=truncation),
            batched=True,
            remove_columns=["text"],
            **map_options,
        )
        if not data_args.line_by_line:
            examples = examples.map(
                partial(pack_into_blocks, block_length=max_seq_length), batched=True, **map_options
            )
    limits = {"train": data_args.max_train_samples, "validation": data_args.max_eval_samples}
    examples = number_examples(limit_examples(examples, limits, data_args.streaming))
    _check_not_empty(examples, max_seq_length, data_args)
    return examples


def _check_not_empty(examples: datasets.DatasetDict, max_seq_length: int, data_args: Any) -> None:
    if data_args.streaming:
        return
    for split, part in examples.items():
        if len(part) == 0:
            raise ScriptError(
                f"the {split} text gives no example of {max_seq_length} tokens: lower max_seq_length, use "
                "--line_by_line, or give more text."
            )
