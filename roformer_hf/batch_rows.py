"""The rows of a batch from encoded texts: which texts make a sample, truncation windows, special tokens.

Pure functions of token counts and encodings (no tokenizer state), used by `RoFormerJiebaTokenizer._encode_plus`.
"""

from typing import Any

from transformers.tokenization_utils_base import TruncationStrategy

from .encodings import TextEncoding, framed

# The lists an encoded row can hold, in the order `_encode_plus` returns them.
ROW_KEYS = ("input_ids", "token_type_ids", "special_tokens_mask", "offset_mapping", "word_ids")


def split_samples(text, text_pair, is_split_into_words: bool) -> tuple[bool, list[tuple[Any, Any]]]:
    """Whether the input is a batch, and its (text, text_pair) samples."""
    if isinstance(text, str) or (is_split_into_words and not (text and isinstance(text[0], (list, tuple)))):
        if text_pair is not None and not isinstance(text_pair, (str, list, tuple)):
            raise TypeError(f"text_pair must be a str like text, got {type(text_pair).__name__}.")
        return False, [(text, text_pair)]
    if not isinstance(text, (list, tuple)):
        raise TypeError(
            f"RoFormerJiebaTokenizer encodes a str or a list of str, got {type(text).__name__}: convert the input "
            "to str first."
        )
    if text_pair is None:
        samples = [split_pair(item, is_split_into_words) for item in text]
    elif isinstance(text_pair, (list, tuple)) and len(text_pair) == len(text):
        samples = list(zip(text, text_pair, strict=True))
    else:
        raise ValueError("text is a batch, so text_pair must be a batch (a list) of the same length.")
    return True, samples


def split_pair(item, is_split_into_words: bool) -> tuple[Any, Any]:
    """A batch item: a text or a (text, text_pair) pair; with `is_split_into_words`, a list of words or a pair of
    such lists."""
    is_pair = isinstance(item, (list, tuple)) and (
        not is_split_into_words or (len(item) > 0 and isinstance(item[0], (list, tuple)))
    )
    if not is_pair:
        return item, None
    if len(item) != 2:
        raise ValueError(f"A batch item must be a text or a (text, text_pair) pair, got {len(item)} elements.")
    return item[0], item[1]


def truncation_windows(
    first_length: int,
    second_length: int | None,
    strategy: TruncationStrategy,
    max_length: int | None,
    stride: int,
    overflow: bool,
    special_tokens: int,
) -> list[tuple[tuple[int, int], tuple[int, int] | None]]:
    """The token ranges `(start, end)` of the first and second text kept in each output row, counted from the
    start of each text (`windows_from_the_end` turns them round for `truncation_side="left"`); `special_tokens` is
    how many special tokens a row adds around its texts."""
    whole_second = None if second_length is None else (0, second_length)
    if strategy == TruncationStrategy.DO_NOT_TRUNCATE or max_length is None:
        return [((0, first_length), whole_second)]
    budget = require_room(max_length - special_tokens)
    if second_length is None:
        if strategy == TruncationStrategy.ONLY_SECOND:
            raise ValueError("truncation='only_second' needs a text_pair: use truncation=True for single texts.")
        return [(window, None) for window in sliding_windows(first_length, budget, stride, overflow)]
    if first_length + second_length <= budget:
        return [((0, first_length), whole_second)]
    if strategy == TruncationStrategy.LONGEST_FIRST:
        if overflow:
            raise ValueError(  # transformers' Python tokenizers' words, which their tests look for; then ours
                "Not possible to return overflowing tokens for pair of sequences with the `longest_first`. Please "
                "select another truncation strategy than `longest_first`, for instance `only_second` or `only_first`. "
                "(return_overflowing_tokens for a pair needs truncation='only_first' or 'only_second': which text to "
                "cut into windows.)"
            )
        # The longer text loses tokens until both are equally long, then both lose in turn (the second first).
        first_kept = min(first_length, max(budget - second_length, (budget + 1) // 2))
        return [((0, first_kept), (0, min(second_length, budget - first_kept)))]
    if strategy == TruncationStrategy.ONLY_FIRST:
        windows = sliding_windows(first_length, budget - second_length, stride, overflow)
        return [(window, whole_second) for window in windows]
    windows = sliding_windows(second_length, budget - first_length, stride, overflow)
    return [((0, first_length), window) for window in windows]


def build_row(
    first: TextEncoding,
    first_window: tuple[int, int],
    second: TextEncoding | None,
    second_window: tuple[int, int] | None,
    options: dict[str, Any],
) -> dict[str, list]:
    """One output row: `[CLS] first [SEP] (second [SEP])` and the requested companions of `input_ids`."""
    special = options["add_special_tokens"]
    parts = [(first, first_window, 0)] + ([(second, second_window, 1)] if second is not None else [])
    row = {key: [] for key in ROW_KEYS if key == "input_ids" or options[key]}
    next_word = 0
    for encoding, (start, end), type_id in parts:
        frame = {"first_part": type_id == 0, "special": special}
        ids = framed(
            encoding.ids[start:end], **frame, opening=options["cls_token_id"], closing=options["sep_token_id"]
        )
        row["input_ids"] += ids
        if "token_type_ids" in row:
            row["token_type_ids"] += [type_id] * len(ids)
        if "special_tokens_mask" in row:
            row["special_tokens_mask"] += framed([0] * (end - start), **frame, opening=1, closing=1)
        if "offset_mapping" in row:
            row["offset_mapping"] += framed(encoding.offsets[start:end], **frame, opening=(0, 0), closing=(0, 0))
        if "word_ids" in row:
            words = [word - encoding.word_ids[start] + next_word for word in encoding.word_ids[start:end]]
            row["word_ids"] += framed(words, **frame, opening=-1, closing=-1)
            next_word = words[-1] + 1 if words else next_word
    if options["length"]:
        row["length"] = len(row["input_ids"])
    return row


def require_room(size: int) -> int:
    """`size`, the room truncation leaves for a text, when there is some."""
    if size <= 0:
        raise ValueError(
            f"max_length leaves no room for the text ({size} tokens once special tokens and the other text are "
            "counted): raise max_length."
        )
    return size


def windows_from_the_end(
    windows: list[tuple[tuple[int, int], tuple[int, int] | None]], first_length: int, second_length: int | None
) -> list[tuple[tuple[int, int], tuple[int, int] | None]]:
    """The same (first, second) token windows, counted from the end of each text instead of its start."""

    def turned(window: tuple[int, int], length: int) -> tuple[int, int]:
        start, end = window
        return length - end, length - start

    return [
        (turned(first, first_length), None if second is None else turned(second, second_length))
        for first, second in windows
    ]


def sliding_windows(length: int, size: int, stride: int, overflow: bool) -> list[tuple[int, int]]:
    """Ranges of at most `size` tokens covering `length` tokens, each overlapping the previous one by `stride`."""
    require_room(size)
    if length <= size:
        return [(0, length)]
    if not overflow:
        return [(0, size)]
    if not 0 <= stride < size:
        raise ValueError(
            f"stride ({stride}) must be at least 0 and smaller than the room for each window ({size} tokens, "
            "max_length less the special tokens): windows share that many tokens."
        )
    windows, start = [], 0
    while True:
        end = min(start + size, length)
        windows.append((start, end))
        if end == length:
            return windows
        start = end - stride
