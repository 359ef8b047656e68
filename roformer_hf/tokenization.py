"""`RoFormerJiebaTokenizer`: the word-level jieba tokenizer of the original Chinese RoFormer checkpoints.

The rule they were trained with (docs/tokenizer.md): 1. normalise the text; 2. segment it with jieba (HMM off); 3. a
segment found in the vocabulary is one token; 4. any other goes through BERT basic tokenization and WordPiece. The file
reads: the vocabulary file, steps 1 and 4, the rows of a batch, what an encoded batch answers (`word_ids()`, ...), then
the tokenizer, which segments (steps 2 and 3). It imports nothing of roformer_hf: a saved tokenizer carries this file
alone, for `trust_remote_code=True`.
"""

import functools
import os
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, ClassVar

import jieba
from tokenizers import normalizers
from transformers import BatchEncoding, PreTrainedTokenizer
from transformers.tokenization_utils_base import PaddingStrategy, TensorType, TruncationStrategy
from transformers.utils import logging

from .configuration import TOKENIZER_FILES, check_model_files

try:
    import rjieba
except ImportError:  # jieba is the reference; rjieba only makes it faster
    rjieba = None

logger = logging.get_logger(__name__)
# The warning about a too-long input goes where transformers' tokenizers log theirs, so that what hears or silences
# theirs (transformers' verbosity, a handler on the "transformers" logger, `assertLogs("transformers")`) does ours.
too_long_logger = logging.get_logger("transformers.tokenization_utils_base")
# The key under which transformers' tokenizers remember, in `deprecation_warnings`, that they gave that warning.
TOO_LONG_WARNED = "sequence-length-is-longer-than-the-specified-maximum"

VOCAB_FILES_NAMES = {"vocab_file": "vocab.txt", "user_dict_file": "user_dict.txt"}
# `model_max_length` of a tokenizer built from a vocab file alone: BERT's length, and that of the last stage of the
# original checkpoints' pretraining. Checkpoints carry their own (the scripts' training length, convert's
# max_position_embeddings); RoFormer reads longer inputs, so raise it to truncate later.
DEFAULT_MODEL_MAX_LENGTH = 512

# Code points that rjieba (jieba-rs) segments as Chinese and jieba (whose Chinese is U+4E00-U+9FD5) does not: the end
# of the unified block, Extension A, the compatibility ideographs and the supplementary-plane extensions B to F.
# jieba cuts its runs of Chinese at them and rjieba does not, which can change the segmentation next to them, so texts
# holding any of them are segmented by jieba itself.
RJIEBA_ONLY_CHINESE = re.compile("[\u9fd6-\u9fff\u3400-\u4dbf\uf900-\ufaff\U00020000-\U0002ebef\U0002f800-\U0002fa1f]")
# jieba's user-dictionary line: a word, then an optional frequency, then an optional part-of-speech tag.
USER_DICT_LINE = re.compile(r"^(.+?)( [0-9]+)?( [a-z]+)?$")


# ----------------------------------------------------------------------------------------------------------------
# The vocabulary file
# ----------------------------------------------------------------------------------------------------------------


def load_vocab(vocab_file: str | os.PathLike) -> dict[str, int]:
    """
    The token ids of a `vocab.txt`: one token a line, the line number (from 0) is the id. Lines may end in `\r\n`,
    and a UTF-8 byte-order mark (which Windows editors write) is not part of the first token.

    Raises `ValueError` naming the line of a token that is on two lines (the tokenizer would have fewer tokens than
    ids, and a saved vocabulary would renumber every later token), of an empty line, or of a token with a space or tab
    at either end (text never holds such a token, so it could never be produced).
    """
    with open(vocab_file, "rb") as reader:
        data = reader.read()
    try:
        text = data.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")  # as open() in text mode reads
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ValueError(
            f"The vocabulary {vocab_file} is not UTF-8: line {line} holds the byte 0x{data[error.start]:02x}, which "
            "no UTF-8 text holds: save the file as UTF-8 (or give the vocab.txt the model was trained with)."
        ) from error
    tokens = text.split("\n")  # one token a line; splitlines() would also split at \x1c, \u2028, ...
    if tokens and tokens[-1] == "":
        tokens.pop()
    vocab: dict[str, int] = {}
    for index, line in enumerate(tokens):
        token = line.removesuffix("\r")
        problem = vocab_line_problem(token, vocab)
        if problem is not None:
            raise ValueError(
                f"The vocabulary {vocab_file} is malformed: line {index + 1} {problem}. A vocabulary holds one "
                "token a line, each on one line only, and a token's line number is its id: fix the file (or give the "
                "vocab.txt the model was trained with)."
            )
        vocab[token] = index
    return vocab


def vocab_line_problem(token: str, vocab: dict[str, int]) -> str | None:
    """What is wrong with a vocabulary line, given the tokens of the lines before it, or `None`."""
    if token in vocab:
        return f"repeats the token {token!r} of line {vocab[token] + 1}"
    if not token:
        return "is empty"
    if token != token.strip(" \t"):  # not str.strip(): BERT-Chinese has the tokens \u2028 and ##\u2028
        return f"holds {token!r}, with a space or tab at an end"
    return None


# ----------------------------------------------------------------------------------------------------------------
# Step 1 of the rule: normalisation, keeping for every normalised character the one of the text it came from
# ----------------------------------------------------------------------------------------------------------------


def character_ranges(code_points: list[int]) -> str:
    """A regex character-class body for sorted code points, as ranges."""
    ranges, start = [], 0
    for index, code_point in enumerate(code_points):
        if index + 1 == len(code_points) or code_points[index + 1] != code_point + 1:
            ranges.append(f"{re.escape(chr(code_points[start]))}-{re.escape(chr(code_point))}")
            start = index + 1
    return "".join(ranges)


# Blocks of everyday Chinese text (Latin, general punctuation and symbols, CJK symbols, kana, CJK ideographs, full
# width forms); their characters other than combining marks can skip the slow normalisation path.
COMMON_BLOCKS = ((0x0000, 0x02FF), (0x2000, 0x2BFF), (0x3000, 0x9FFF), (0xFF00, 0xFFEF))


@functools.cache
def combining_marks() -> tuple[dict[int, None], re.Pattern]:
    """
    The characters of category Mn (all below U+20000 or in plane 14) as a `str.translate` table deleting them, and a
    regex finding any character that is not a plain character of the common blocks (a combining mark or a rare one).
    """
    candidates = [*range(0x20000), *range(0xE0000, 0xE1000)]
    marks = {code_point for code_point in candidates if unicodedata.category(chr(code_point)) == "Mn"}
    plain = [
        code_point for low, high in COMMON_BLOCKS for code_point in range(low, high + 1) if code_point not in marks
    ]
    return dict.fromkeys(sorted(marks)), re.compile(f"[^{character_ranges(plain)}]")


def normalize_text(text: str) -> tuple[str, list[int] | None]:
    """
    Lowercase, NFD-normalise and drop combining marks, as the original models did.

    Returns:
        The normalised text and, when its characters do not map one to one onto `text`, the index in `text` of the
        character every normalised character came from (`None` means the identity).
    """
    mark_table, uncommon = combining_marks()
    lowered = text.lower()
    # Fast path (nearly all Chinese text): lowercasing kept the length, only common characters, none to decompose.
    if len(lowered) == len(text) and uncommon.search(lowered) is None and unicodedata.is_normalized("NFD", lowered):
        return lowered, None
    normalized = unicodedata.normalize("NFD", lowered).translate(mark_table)
    # Lowercasing and decomposition work character by character (up to the reordering of combining marks, which
    # stay on their base character), so the per-character lengths give the alignment.
    origin = [
        index
        for index, character in enumerate(text)
        for decomposed in unicodedata.normalize("NFD", character.lower())
        if ord(decomposed) not in mark_table
    ]
    return normalized, origin


# ----------------------------------------------------------------------------------------------------------------
# Step 4 of the rule: BERT basic tokenization and WordPiece of the segments missing from the vocabulary
# ----------------------------------------------------------------------------------------------------------------

# How many segments missing from the vocabulary the tokenizer remembers the tokens of.
UNKNOWN_CACHE_SIZE = 200_000
# The blocks of CJK ideographs, each a word of its own in BERT basic tokenization.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
# bert4keras's `word_maxlen`: a word (after basic tokenization) longer than this is `[UNK]`, not WordPiece pieces.
WORD_MAXLEN = 200


def is_cjk_character(character: str) -> bool:
    code_point = ord(character)
    return any(low <= code_point <= high for low, high in CJK_RANGES)


@functools.cache
def cjk_characters_pattern() -> re.Pattern:
    """A regex matching runs of CJK characters (the ranges BERT splits into one word each)."""
    return re.compile("[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in CJK_RANGES) + "]+")


def is_punctuation(character: str) -> bool:
    code_point = ord(character)
    ascii_symbol = (
        33 <= code_point <= 47 or 58 <= code_point <= 64 or 91 <= code_point <= 96 or 123 <= code_point <= 126
    )
    return ascii_symbol or unicodedata.category(character).startswith("P")


def is_whitespace(character: str) -> bool:
    # str.split() of the original also splits on the line and paragraph separators.
    return character in " \t\n\r\u2028\u2029" or unicodedata.category(character) == "Zs"


def is_dropped(character: str) -> bool:
    return character in "\x00\ufffd" or unicodedata.category(character) in ("Cc", "Cf")


SPLIT, SPACE, DROP, KEEP = range(4)


@functools.lru_cache(maxsize=1 << 16)
def character_class(character: str) -> int:
    """How basic tokenization treats a character: a word of its own, a separator, dropped, or part of a word."""
    if is_punctuation(character) or is_cjk_character(character):
        return SPLIT
    if is_whitespace(character):
        return SPACE
    return DROP if is_dropped(character) else KEEP


def basic_words(segment: str) -> list[list[int]]:
    """
    BERT basic tokenization of a segment: the words, each as the positions (in `segment`) of its characters.
    Dropped characters leave no gap, as in the original (`"a\\x01b"` is the word `"ab"`).
    """
    words, current = [], []
    for position, character in enumerate(segment):
        kind = character_class(character)
        if kind == KEEP:
            current.append(position)
        elif kind != DROP:
            if current:
                words.append(current)
            current = []
            if kind == SPLIT:
                words.append([position])
    if current:
        words.append(current)
    return words


def wordpiece(word: str, vocab: dict[str, int], longest_token: int) -> list[tuple[int, int]] | None:
    """
    Greedy longest-match WordPiece.

    Returns:
        The `(start, end)` character spans of the pieces in `word`, or `None` when some part of the word matches no
        vocabulary entry (the word is then `[UNK]`).
    """
    spans, start = [], 0
    while start < len(word):
        prefix = "##" if start > 0 else ""
        # No entry is longer than the longest vocabulary token: this bound keeps long words linear.
        end = min(len(word), start + longest_token)
        while end > start and prefix + word[start:end] not in vocab:
            end -= 1
        if end == start:
            return None
        spans.append((start, end))
        start = end
    return spans


def tokenize_unknown_segment(
    segment: str, vocab: dict[str, int], unk_token_id: int, longest_token: int
) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """The ids of a segment missing from the vocabulary, and their character spans in the segment."""
    if cjk_characters_pattern().fullmatch(segment):  # the common case: every character is a word of its own
        ids = tuple(vocab.get(character, unk_token_id) for character in segment)
        return ids, tuple((position, position + 1) for position in range(len(segment)))
    ids, spans = [], []
    for positions in basic_words(segment):
        first, last = positions[0], positions[-1]
        contiguous = last - first + 1 == len(positions)
        word = segment[first : last + 1] if contiguous else "".join(map(segment.__getitem__, positions))
        if word in vocab:
            pieces = [(0, len(word))]
        else:  # bert4keras leaves a word longer than word_maxlen whole, so it is [UNK]
            pieces = wordpiece(word, vocab, longest_token) if len(word) <= WORD_MAXLEN else None
        if pieces is None:
            ids.append(unk_token_id)
            spans.append((first, last + 1))
            continue
        for start, end in pieces:
            ids.append(vocab[("##" if start > 0 else "") + word[start:end]])
            spans.append((positions[start], positions[end - 1] + 1))
    return tuple(ids), tuple(spans)


class SegmentIds(dict):
    """
    The ids of a jieba segment under the rule: vocabulary words are filled in up front, any other segment is
    tokenized on first use (basic tokenization + WordPiece) and remembered, up to `UNKNOWN_CACHE_SIZE` of them.
    """

    def __init__(self, vocab: dict[str, int], unk_token_id: int, longest_token: int):
        super().__init__((token, (index,)) for token, index in vocab.items())
        self.vocab, self.unk_token_id, self.longest_token = vocab, unk_token_id, longest_token
        self.limit = len(self) + UNKNOWN_CACHE_SIZE

    def __missing__(self, segment: str) -> tuple[int, ...]:
        ids = tokenize_unknown_segment(segment, self.vocab, self.unk_token_id, self.longest_token)[0]
        if len(self) < self.limit:
            self[segment] = ids
        return ids


def needs_space(previous: str, token: str, special: set[str]) -> bool:
    """Whether decoding puts a space between two tokens: around special tokens and between Latin words."""
    if previous in special or token in special:
        return True
    last, first = previous[-1], token[0]
    return last.isalnum() and first.isalnum() and not is_cjk_character(last) and not is_cjk_character(first)


# ----------------------------------------------------------------------------------------------------------------
# The rows of a batch from encoded texts: which texts make a sample, truncation windows, special tokens
# ----------------------------------------------------------------------------------------------------------------

# The lists an encoded row can hold, in the order `_encode_plus` returns them.
ROW_KEYS = ("input_ids", "token_type_ids", "special_tokens_mask", "offset_mapping", "word_ids")


@dataclass
class TextEncoding:
    """The tokens of one text before special tokens: ids, and on request character spans and jieba word indices."""

    ids: list[int]
    offsets: list[tuple[int, int]] | None = None
    word_ids: list[int] | None = None

    def __len__(self) -> int:
        return len(self.ids)


def framed(values: list, first_part: bool, special: bool, opening: object, closing: object) -> list:
    """
    A part of a row as special tokens frame it: the row is `[CLS] first [SEP]`, or `[CLS] first [SEP] second [SEP]`
    for a pair (with `add_special_tokens`; bare parts without). Every list of a row (its ids, offsets, word ids, ...)
    follows this one layout, each with its own values at `[CLS]` (`opening`) and `[SEP]` (`closing`).
    """
    return [opening] * (special and first_part) + values + [closing] * special


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


# ----------------------------------------------------------------------------------------------------------------
# What an encoded batch answers: the alignment API of `tokenizers.Encoding`
# ----------------------------------------------------------------------------------------------------------------


class RowEncoding:
    """
    One encoded row answering what transformers' `BatchEncoding` asks a `tokenizers.Encoding`: `tokens()`,
    `word_ids()`, `sequence_ids()`, `char_to_token()`, ..., as fast tokenizers answer (docs/tokenizer.md).
    """

    # Our overflow windows are rows of the batch (with `overflow_to_sample_mapping`), not nested encodings.
    overflowing: ClassVar[list] = []

    def __init__(self, ids, tokens, type_ids, offsets, word_ids, sequence_ids, attention_mask, n_sequences):
        self.ids, self.tokens, self.type_ids, self.offsets = ids, tokens, type_ids, offsets
        self.word_ids, self.sequence_ids, self.attention_mask = word_ids, sequence_ids, attention_mask
        self.n_sequences = n_sequences
        self.special_tokens_mask = [int(sequence is None) for sequence in sequence_ids]

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"RowEncoding(num_tokens={len(self)}, n_sequences={self.n_sequences})"

    @property
    def words(self) -> list[int | None]:
        """The old name of `word_ids`, kept by `tokenizers.Encoding`."""
        return self.word_ids

    def sequence_range(self, sequence_index: int) -> range:
        """The token positions of a sequence; all positions when the row has no such sequence, as tokenizers does."""
        positions = [index for index, sequence in enumerate(self.sequence_ids) if sequence == sequence_index]
        return range(positions[0], positions[-1] + 1) if positions else range(len(self))

    def token_to_sequence(self, token_index: int) -> int | None:
        return self.sequence_ids[token_index] if 0 <= token_index < len(self) else None

    def token_to_word(self, token_index: int) -> int | None:
        return self.word_ids[token_index] if 0 <= token_index < len(self) else None

    def token_to_chars(self, token_index: int) -> tuple[int, int] | None:
        if self.token_to_sequence(token_index) is None:
            return None
        return tuple(self.offsets[token_index])

    def word_to_tokens(self, word_index: int, sequence_index: int = 0) -> tuple[int, int] | None:
        tokens = [index for index in self.sequence_range(sequence_index) if self.word_ids[index] == word_index]
        return (tokens[0], tokens[-1] + 1) if tokens else None

    def word_to_chars(self, word_index: int, sequence_index: int = 0) -> tuple[int, int] | None:
        tokens = self.word_to_tokens(word_index, sequence_index)
        if tokens is None:
            return None
        return self.offsets[tokens[0]][0], self.offsets[tokens[1] - 1][1]

    def char_to_token(self, char_index: int, sequence_index: int = 0) -> int | None:
        for index in self.sequence_range(sequence_index):
            start, end = self.offsets[index]
            if start <= char_index < end:
                return index
        return None

    def char_to_word(self, char_index: int, sequence_index: int = 0) -> int | None:
        token_index = self.char_to_token(char_index, sequence_index)
        return None if token_index is None else self.word_ids[token_index]


class RowEncodings(Sequence):
    """
    The `RowEncoding` of every row of a batch, each built on first use (a second pass over the text, with offsets,
    which most calls never ask for). Pickling builds them all and keeps only the rows.
    """

    def __init__(self, tokenizer, samples: list, rows: list, batch_input_ids: list[list[int]], options: dict):
        self.tokenizer, self.samples, self.rows, self.batch_input_ids = tokenizer, samples, rows, batch_input_ids
        self.options = options
        self.built: dict[int, RowEncoding] = {}
        self.texts: dict[int, tuple[TextEncoding, TextEncoding | None]] = {}

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"row {index} is out of range: the batch has {len(self)} rows.")
        if index not in self.built:
            self.built[index] = self.build(index)
        return self.built[index]

    def __reduce__(self):
        return list, (list(self),)

    def text_encodings(self, sample_index: int) -> tuple[TextEncoding, TextEncoding | None]:
        """A sample's texts encoded with offsets and word indices (once for all its overflow windows)."""
        if sample_index not in self.texts:
            tokenizer, options = self.tokenizer, self.options
            encode = tokenizer._encode_words if options["is_split_into_words"] else tokenizer.encode_text
            matcher = (None, {}) if options["split_special_tokens"] else tokenizer._added_tokens_matcher()
            first, second = self.samples[sample_index]
            self.texts[sample_index] = tuple(
                None if text is None else encode(text, True, options["split_special_tokens"], matcher)
                for text in (first, second)
            )
        return self.texts[sample_index]

    def build(self, index: int) -> RowEncoding:
        """Row `index`: `[CLS] first [SEP] (second [SEP])` as `build_row` builds it (`framed`), then its padding."""
        sample_index, first_window, second_window = self.rows[index]
        first, second = self.text_encodings(sample_index)
        parts = [(first, first_window, 0)] + ([(second, second_window, 1)] if second is not None else [])
        special, tokenizer = self.options["add_special_tokens"], self.tokenizer
        ids, type_ids, offsets, word_ids, sequence_ids = [], [], [], [], []
        for encoding, (start, end), sequence in parts:
            frame = {"first_part": sequence == 0, "special": special}
            part_ids = framed(
                encoding.ids[start:end], **frame, opening=tokenizer.cls_token_id, closing=tokenizer.sep_token_id
            )
            ids += part_ids
            type_ids += [sequence] * len(part_ids)
            offsets += framed(encoding.offsets[start:end], **frame, opening=(0, 0), closing=(0, 0))
            word_ids += framed(encoding.word_ids[start:end], **frame, opening=None, closing=None)
            sequence_ids += framed([sequence] * (end - start), **frame, opening=None, closing=None)
        padding = self.padding_length(index, ids)
        attention_mask = [1] * len(ids)
        lists = [ids, type_ids, offsets, word_ids, sequence_ids, attention_mask]
        fillers = [tokenizer.pad_token_id, tokenizer.pad_token_type_id, (0, 0), None, None, 0]
        if padding:
            before = self.options["padding_side"] == "left"
            lists = [
                [filler] * padding + values if before else values + [filler] * padding
                for values, filler in zip(lists, fillers, strict=True)
            ]
        ids, type_ids, offsets, word_ids, sequence_ids, attention_mask = lists
        tokens = tokenizer.convert_ids_to_tokens(ids)
        return RowEncoding(ids, tokens, type_ids, offsets, word_ids, sequence_ids, attention_mask, len(parts))

    def padding_length(self, index: int, ids: list[int]) -> int:
        """How many padding tokens row `index` got; checks that its tokens are those encoded again."""
        row_ids = list(self.batch_input_ids[index])
        padding = len(row_ids) - len(ids)
        unpadded = row_ids[padding:] if self.options["padding_side"] == "left" else row_ids[: len(ids)]
        if padding < 0 or unpadded != ids or self.options["state"] != self.tokenizer._alignment_state():
            raise RuntimeError(
                "The tokenizer changed (user words, added tokens or settings) after this batch was encoded, so its "
                "alignment (word_ids, offsets, ...) cannot be rebuilt: encode the texts again."
            )
        return padding


class WordPieceScheme:
    """The subword convention of the rule, shaped as the `tokenizers.Tokenizer` attributes transformers reads."""

    continuing_subword_prefix = "##"

    @property
    def model(self) -> "WordPieceScheme":
        return self


WORDPIECE_SCHEME = WordPieceScheme()


# ----------------------------------------------------------------------------------------------------------------
# The tokenizer
# ----------------------------------------------------------------------------------------------------------------


def check_model_max_length(model_max_length: Any) -> None:
    """Refuse a `model_max_length` (given, or read from a saved tokenizer's tokenizer_config.json) that is no number of
    tokens: a negative one made every `truncation=True` call fail with a message that named no setting."""
    if model_max_length is None:  # transformers' "no limit"
        return
    is_number = isinstance(model_max_length, (int, float)) and not isinstance(model_max_length, bool)
    if not (is_number and model_max_length >= 1):  # NaN too
        raise ValueError(
            f"model_max_length must be a number of tokens of at least 1, got {model_max_length!r}: set it to the "
            "length the model was trained with (in tokenizer_config.json, for a saved tokenizer), or leave it out "
            f"for {DEFAULT_MODEL_MAX_LENGTH}."
        )


class RoFormerJiebaTokenizer(PreTrainedTokenizer):
    r"""
    The word-level tokenizer of the original Chinese RoFormer checkpoints: jieba words found in the vocabulary are one
    token, every other word falls back to BERT basic tokenization and WordPiece (docs/tokenizer.md gives the exact
    rule). Encoding, padding, truncation, overflowing windows, offsets, decoding, pickling and
    `save_pretrained`/`from_pretrained` work as with any transformers tokenizer.

    Args:
        vocab_file (`str`):
            Path of the `vocab.txt` (one token a line, the line number is the id).
        do_lower_case (`bool`, *optional*, defaults to `True`):
            Lowercase, NFD-normalise and drop combining marks before segmentation.
        user_dict_file (`str`, *optional*):
            A jieba user dictionary (`word [frequency] [tag]` a line) whose words change the segmentation.
            `save_pretrained` writes the user words to `user_dict.txt`, which `from_pretrained` reads back.
        use_rjieba (`bool`, *optional*, defaults to `True`):
            Segment with rjieba (same segmentation as jieba, faster: docs/tokenizer.md) while the tokenizer has no user
            words. `False` always uses jieba.
        unk_token, sep_token, pad_token, cls_token, mask_token (`str`, *optional*):
            The special tokens, `[UNK]`, `[SEP]`, `[PAD]`, `[CLS]` and `[MASK]` by default; each must be in the vocab.
        model_max_length (`int`, *optional*, defaults to 512):
            The length `truncation=True` cuts to: the length the model was trained with. Saved checkpoints carry
            their own; RoFormer reads longer inputs, so raise it to keep more.

    The returned `BatchEncoding`s answer `word_ids()`, `char_to_token()`, ... as fast tokenizers' do (a word is a jieba
    word), and `return_word_ids=True` adds a `"word_ids"` list for whole-word masking (docs/tokenizer.md).

    Example:

    ```python
    >>> tokenizer = RoFormerJiebaTokenizer("vocab.txt")
    >>> tokenizer.tokenize("今天天气非常好")
    ['今', '天', '天', '气', '非常', '好']
    ```
    """

    vocab_files_names = VOCAB_FILES_NAMES
    model_input_names: ClassVar[list[str]] = ["input_ids", "token_type_ids", "attention_mask"]

    def __init__(
        self,
        vocab_file: str | os.PathLike | None = None,
        do_lower_case: bool = True,
        user_dict_file: str | os.PathLike | None = None,
        use_rjieba: bool = True,
        unk_token: str = "[UNK]",
        sep_token: str = "[SEP]",
        pad_token: str = "[PAD]",
        cls_token: str = "[CLS]",
        mask_token: str = "[MASK]",
        **kwargs,
    ):
        if vocab_file is None or not os.path.isfile(vocab_file):
            raise ValueError(
                f"RoFormerJiebaTokenizer needs a vocabulary file, and {vocab_file!r} is not one: pass the path of a "
                "`vocab.txt` (one token a line), or load a folder holding one with `from_pretrained`."
            )
        self.vocab = load_vocab(vocab_file)
        self.ids_to_tokens = {index: token for token, index in self.vocab.items()}
        special_tokens = (unk_token, sep_token, pad_token, cls_token, mask_token)
        missing = [str(token) for token in special_tokens if str(token) not in self.vocab]
        if missing:
            raise ValueError(
                f"The vocabulary {vocab_file} lacks the special token(s) {', '.join(missing)}: add them as lines of "
                "the vocab file (BERT vocabularies have them near the top), or name the tokens it uses instead, e.g. "
                "`unk_token=...`."
            )
        self.do_lower_case = do_lower_case
        self.use_rjieba = use_rjieba
        self.longest_token = max(map(len, self.vocab))
        self.unk_token_id_in_vocab = self.vocab[str(unk_token)]
        self.user_words: list[tuple[str, int, str | None]] = []
        self._jieba = None
        self._unknown_cache: dict[str, tuple] = {}
        self._segment_ids = None  # a SegmentIds, built on first use
        self._added_tokens_matcher_cache: tuple[tuple, Any] = ((), None)
        kwargs.setdefault("model_max_length", DEFAULT_MODEL_MAX_LENGTH)
        check_model_max_length(kwargs["model_max_length"])
        super().__init__(
            vocab_file=vocab_file,
            user_dict_file=user_dict_file,
            do_lower_case=do_lower_case,
            use_rjieba=use_rjieba,
            unk_token=unk_token,
            sep_token=sep_token,
            pad_token=pad_token,
            cls_token=cls_token,
            mask_token=mask_token,
            special_tokens_pattern="cls_sep",
            token_type_ids_pattern="bert_style",
            **kwargs,
        )
        if user_dict_file is not None:
            self.load_user_dict(user_dict_file)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *init_inputs, **kwargs):
        """As transformers' `from_pretrained`, once the folder's tokenizer files read (a damaged one is named)."""
        check_model_files(pretrained_model_name_or_path, TOKENIZER_FILES, kwargs.get("subfolder"))
        return super().from_pretrained(pretrained_model_name_or_path, *init_inputs, **kwargs)

    # ------------------------------------------------------------------------------------------------------------
    # Steps 2 and 3 of the rule: jieba segmentation (rjieba where it segments alike), user words
    # ------------------------------------------------------------------------------------------------------------

    @property
    def segmenter(self) -> str:
        """`"rjieba"` or `"jieba"`: which segmenter encodes text now."""
        if self.use_rjieba and rjieba is not None and not self.user_words:
            return "rjieba"
        return "jieba"

    @property
    def jieba_tokenizer(self):
        """
        The tokenizer's own `jieba.Tokenizer` (never jieba's global one), holding the user words. Add words with
        `add_word`/`load_user_dict`, not on this object: words added here directly are not saved, and the rjieba
        path ignores them.
        """
        if self._jieba is None:
            self._jieba = jieba.Tokenizer()
            for word, frequency, tag in self.user_words:
                self._jieba.add_word(word, frequency, tag)
        return self._jieba

    def segment(self, text: str) -> list[str]:
        """The jieba words (HMM off) of an already normalised text."""
        if self.segmenter == "rjieba" and RJIEBA_ONLY_CHINESE.search(text) is None:
            try:
                return rjieba.cut(text, hmm=False)
            except UnicodeEncodeError:  # rjieba takes UTF-8, which lone surrogates are not: jieba takes them
                pass
        return list(self.jieba_tokenizer.cut(text, HMM=False))

    def add_word(self, word: str, frequency: int | None = None, tag: str | None = None) -> None:
        """
        Add a word to the segmentation dictionary, as `jieba.add_word` does. It changes segmentation (the word also
        needs to be in the vocabulary to become one token) and is saved by `save_pretrained`.

        Args:
            word (`str`): the word; lowercase it yourself when `do_lower_case`, as text is lowercased before jieba.
            frequency (`int`, *optional*): its jieba frequency; `None` lets jieba pick one that keeps it whole.
            tag (`str`, *optional*): its part-of-speech tag.
        """
        if not isinstance(word, str) or not word.strip():
            raise ValueError(f"add_word needs a non-empty word, got {word!r}.")
        self.jieba_tokenizer.add_word(word, frequency, tag)
        # Store the frequency jieba settled on, so that a reload replays exactly the same dictionary.
        self.user_words.append((word, self.jieba_tokenizer.FREQ[word], tag))

    def del_word(self, word: str) -> None:
        """Remove a word from segmentation (jieba's `del_word`: frequency 0), saved like `add_word`."""
        self.add_word(word, 0)

    def load_user_dict(self, user_dict_file: str | os.PathLike) -> None:
        """Add every word of a jieba user dictionary file (`word [frequency] [tag]` a line), as `add_word` does."""
        if not os.path.isfile(user_dict_file):
            raise ValueError(
                f"The user dictionary {user_dict_file} does not exist: pass the path of a jieba user dict."
            )
        with open(user_dict_file, encoding="utf-8") as reader:
            for line in reader:
                match = USER_DICT_LINE.match(line.strip().lstrip("\ufeff"))
                if match is None:
                    continue
                word, frequency, tag = match.groups()
                self.add_word(word, int(frequency) if frequency else None, tag.strip() if tag else None)

    # ------------------------------------------------------------------------------------------------------------
    # The rule, on one text
    # ------------------------------------------------------------------------------------------------------------

    def _unknown_segment(self, segment: str) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
        cached = self._unknown_cache.get(segment)
        if cached is None:
            if len(self._unknown_cache) >= UNKNOWN_CACHE_SIZE:
                self._unknown_cache.clear()
            cached = tokenize_unknown_segment(segment, self.vocab, self.unk_token_id_in_vocab, self.longest_token)
            self._unknown_cache[segment] = cached
        return cached

    def normalize(self, text: str) -> str:
        """Step 1 of the rule: the text jieba sees (lowercased, NFD, without combining marks when `do_lower_case`)."""
        return normalize_text(text)[0] if self.do_lower_case else text

    def _encode_chunk_ids(self, text: str) -> list[int]:
        """Fast path of the rule: ids only. The loop over segments runs in C (`map`, `chain`) but for new words."""
        if self._segment_ids is None:
            self._segment_ids = SegmentIds(self.vocab, self.unk_token_id_in_vocab, self.longest_token)
        segments = self.segment(self.normalize(text))
        return list(chain.from_iterable(map(self._segment_ids.__getitem__, segments)))

    def _encode_chunk(self, text: str, start: int, first_word: int) -> TextEncoding:
        """The rule with offsets (shifted by `start`) and word indices (counting from `first_word`)."""
        normalized, origin = normalize_text(text) if self.do_lower_case else (text, None)
        encoding = TextEncoding([], [], [])
        position, word = 0, first_word
        for segment in self.segment(normalized):
            token_id = self.vocab.get(segment)
            if token_id is not None:
                ids, spans = (token_id,), ((0, len(segment)),)
            else:
                ids, spans = self._unknown_segment(segment)
            for span_start, span_end in spans:
                begin, end = position + span_start, position + span_end
                if origin is not None:
                    begin, end = origin[begin], origin[end - 1] + 1
                encoding.offsets.append((start + begin, start + end))
            encoding.ids.extend(ids)
            encoding.word_ids.extend([word] * len(ids))
            word += bool(ids)
            position += len(segment)
        return encoding

    def _alignment_state(self) -> tuple:
        """What changes how a text is segmented: `RowEncodings` checks it is unchanged when it encodes again."""
        return len(self.user_words), len(self.added_tokens_decoder), self.do_lower_case, self.segmenter

    def _added_tokens_matcher(self) -> tuple[re.Pattern | None, dict[str, int]]:
        """A regex matching added (and special) tokens written in raw text, longest first, and their ids."""
        added = self.added_tokens_decoder
        key = tuple((index, token.content, token.normalized, token.special) for index, token in added.items())
        if key != self._added_tokens_matcher_cache[0]:
            alternatives, ids = [], {}
            for index, token in sorted(added.items(), key=lambda item: -len(item[1].content)):
                escaped = re.escape(token.content)
                # A normalised (non-special) token was lowercased when added: match it in any case.
                ignore_case = token.normalized and not token.special and self.do_lower_case
                alternatives.append(f"(?i:{escaped})" if ignore_case else escaped)
                ids[token.content] = index
            pattern = re.compile("|".join(alternatives)) if alternatives else None
            self._added_tokens_matcher_cache = (key, (pattern, ids))
        return self._added_tokens_matcher_cache[1]

    def encode_text(
        self, text: str, with_offsets: bool = False, split_special_tokens: bool = False, matcher: Any = None
    ) -> TextEncoding:
        """
        Encode one text with the rule, without special tokens around it.

        Args:
            text (`str`): the text.
            with_offsets (`bool`): also compute character offsets into `text` and jieba word indices.
            split_special_tokens (`bool`): treat special and added tokens written in the text as plain text.
            matcher: the result of `_added_tokens_matcher()`, computed once per batch by the caller.

        Returns:
            `TextEncoding`
        """
        if not isinstance(text, str):
            raise TypeError(
                f"RoFormerJiebaTokenizer encodes text (str), got {type(text).__name__}: pass a str, a list of str for "
                "a batch, or a list of words with `is_split_into_words=True`."
            )
        pattern, added_ids = (None, {}) if split_special_tokens else (matcher or self._added_tokens_matcher())
        if pattern is not None and pattern.search(text) is not None:
            encoding = self._encode_with_added_tokens(text, pattern, added_ids)
            return encoding if with_offsets else TextEncoding(encoding.ids)
        if with_offsets:
            return self._encode_chunk(text, 0, 0)
        return TextEncoding(self._encode_chunk_ids(text))

    def _encode_with_added_tokens(self, text: str, pattern: re.Pattern, added_ids: dict[str, int]) -> TextEncoding:
        encoding = TextEncoding([], [], [])
        position, word = 0, 0
        for match in [*pattern.finditer(text), None]:
            end = match.start() if match is not None else len(text)
            if end > position:
                chunk = self._encode_chunk(text[position:end], position, word)
                encoding.ids += chunk.ids
                encoding.offsets += chunk.offsets
                encoding.word_ids += chunk.word_ids
                word = chunk.word_ids[-1] + 1 if chunk.word_ids else word
            if match is None:
                break
            token = match.group()
            encoding.ids.append(added_ids[token] if token in added_ids else added_ids[token.lower()])
            encoding.offsets.append(match.span())
            encoding.word_ids.append(word)
            word += 1
            position = match.end()
        return encoding

    def _encode_words(self, words: list[str], with_offsets: bool, split_special_tokens: bool, matcher) -> TextEncoding:
        """Encode pre-split words (`is_split_into_words=True`): the whole rule on each word, word ids index the words."""
        if not isinstance(words, (list, tuple)):
            raise TypeError(f"With is_split_into_words=True, every text must be a list of words, got {type(words)}.")
        encoding = TextEncoding([], [], [])
        for index, word in enumerate(words):
            part = self.encode_text(word, True, split_special_tokens, matcher)
            encoding.ids += part.ids
            encoding.offsets += part.offsets  # relative to each word, as transformers' fast tokenizers do
            encoding.word_ids += [index] * len(part.ids)
        return encoding if with_offsets else TextEncoding(encoding.ids)

    # ------------------------------------------------------------------------------------------------------------
    # Vocabulary
    # ------------------------------------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def is_fast(self) -> bool:
        """
        True: like transformers' fast tokenizers it returns offsets and its `BatchEncoding`s answer `word_ids()`,
        `sequence_ids()`, `char_to_token()`, ... (see `RowEncoding`); transformers reads `is_fast` to decide whether
        to ask for them (token-classification pipeline, whole-word-mask collator).
        """
        return True

    @property
    def _tokenizer(self) -> "WordPieceScheme":
        """
        What transformers' token-classification pipeline reads of a fast tokenizer's backend to tell a word's `##`
        continuation pieces from new words (`tokenizer._tokenizer.model.continuing_subword_prefix`). Without it the
        pipeline guesses from spaces, and in Chinese text every token after the first would continue one word.
        """
        return WORDPIECE_SCHEME

    @property
    def backend_tokenizer(self) -> "LowerCasingNormalizer":
        """
        What sentence-transformers' `models.Transformer(path, do_lower_case=True)` reads of a fast tokenizer's backend
        to add lower-casing (`backend_tokenizer.normalizer`): this tokenizer's own lower-casing, `do_lower_case`. It
        raised "has no attribute backend_tokenizer", which named nothing the user could change.
        """
        return LowerCasingNormalizer(self)

    def get_vocab(self) -> dict[str, int]:
        return {**self.vocab, **self.added_tokens_encoder}

    def _tokenize(self, text: str, **kwargs) -> list[str]:
        return [self.ids_to_tokens[token_id] for token_id in self._encode_chunk_ids(text)]

    def _convert_token_to_id(self, token: str) -> int:
        return self.vocab.get(token, self.unk_token_id_in_vocab)

    def _convert_id_to_token(self, index: int) -> str:
        return self.ids_to_tokens.get(index, str(self.unk_token))

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        """Join tokens as Chinese is written: no spaces, except between two Latin words or around special tokens."""
        special = set(self.all_special_tokens)
        pieces: list[str] = []
        for token in tokens:
            if token.startswith("##") and pieces and pieces[-1] not in special:
                pieces[-1] += token[2:]
                continue
            if pieces and needs_space(pieces[-1], token, special):
                pieces.append(" ")
            pieces.append(token)
        return "".join(pieces)

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        """Write `vocab.txt` and, when the tokenizer has user words, `user_dict.txt` (jieba's user-dict format)."""
        prefix = f"{filename_prefix}-" if filename_prefix else ""
        vocab_path = os.path.join(save_directory, prefix + VOCAB_FILES_NAMES["vocab_file"])
        with open(vocab_path, "w", encoding="utf-8") as writer:
            writer.writelines(f"{token}\n" for token, _ in sorted(self.vocab.items(), key=lambda item: item[1]))
        if not self.user_words:
            return (vocab_path,)
        user_dict_path = os.path.join(save_directory, prefix + VOCAB_FILES_NAMES["user_dict_file"])
        with open(user_dict_path, "w", encoding="utf-8") as writer:
            for word, frequency, tag in self.user_words:
                writer.write(" ".join([word, str(frequency), *([tag] if tag else [])]) + "\n")
        return vocab_path, user_dict_path

    def __getstate__(self) -> dict[str, Any]:
        # jieba's Tokenizer holds a lock and cannot be pickled: workers rebuild it (with the user words) on first use.
        state = self.__dict__.copy()
        state["_jieba"] = None
        state["_unknown_cache"] = {}
        state["_segment_ids"] = None
        return state

    # ------------------------------------------------------------------------------------------------------------
    # Encoding a batch: special tokens, truncation, overflowing windows, padding
    # ------------------------------------------------------------------------------------------------------------

    def _encode_plus(
        self,
        text,
        text_pair=None,
        add_special_tokens: bool = True,
        padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
        truncation_strategy: TruncationStrategy = TruncationStrategy.DO_NOT_TRUNCATE,
        max_length: int | None = None,
        stride: int = 0,
        is_split_into_words: bool = False,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_tensors: str | TensorType | None = None,
        return_token_type_ids: bool | None = None,
        return_attention_mask: bool | None = None,
        return_overflowing_tokens: bool = False,
        return_special_tokens_mask: bool = False,
        return_offsets_mapping: bool = False,
        return_length: bool = False,
        verbose: bool = True,
        split_special_tokens: bool = False,
        return_word_ids: bool = False,
        **kwargs,
    ) -> BatchEncoding:
        """
        transformers' `PreTrainedTokenizer._encode_plus`, done batch-wise (every text encoded once, then cut into rows,
        padded by transformers' `pad`): faster on batches of real text (docs/tokenizer.md), and with offsets, word ids
        and overflowing windows as rows, which transformers' slow path lacks. `tests/test_tokenization.py` checks that
        both give the same encodings where both apply.
        """
        if kwargs:
            logger.warning(f"RoFormerJiebaTokenizer ignores the unknown keyword arguments {sorted(kwargs)}.")
        batched, samples = split_samples(text, text_pair, is_split_into_words)
        options = {
            "add_special_tokens": add_special_tokens,
            "token_type_ids": return_token_type_ids is not False,
            "special_tokens_mask": return_special_tokens_mask,
            "offset_mapping": return_offsets_mapping,
            "word_ids": return_word_ids,
            "length": return_length,
            "is_split_into_words": is_split_into_words,
            "split_special_tokens": split_special_tokens,
        }
        truncation = (truncation_strategy, max_length, stride, return_overflowing_tokens)
        rows, row_windows, texts = self._rows(samples, options, truncation)
        if verbose:
            self._warn_if_too_long(rows["input_ids"], truncation_strategy)
        cut_off = {}
        fast_only = return_offsets_mapping or return_word_ids
        if not batched and return_overflowing_tokens and return_tensors is None and not fast_only:
            rows, row_windows, cut_off = self._first_window_only(rows, row_windows, texts[0], truncation, options)
            return_overflowing_tokens = False
        padding = {"padding": padding_strategy, "max_length": max_length, "pad_to_multiple_of": pad_to_multiple_of}
        rows = self._padded_rows(rows, return_attention_mask, **padding, padding_side=padding_side)
        alignment = {**options, "padding_side": padding_side or self.padding_side, "state": self._alignment_state()}
        encodings = RowEncodings(self, samples, row_windows, rows["input_ids"], alignment)
        n_sequences = (1 if samples[0][1] is None else 2) if samples else None
        if not batched and not return_overflowing_tokens and return_tensors is None:
            rows = {key: value[0] for key, value in rows.items()} | cut_off
        return BatchEncoding(rows, encoding=encodings, tensor_type=return_tensors, n_sequences=n_sequences)

    def _first_window_only(
        self, rows: dict[str, list], row_windows: list, text: Any, truncation: tuple, options: dict[str, Any]
    ) -> tuple[dict[str, list], list, dict[str, Any]]:
        """One text as lists: the first window and what it cut off, as transformers' Python tokenizers answer. (A
        batch, tensors, or offsets, which only fast tokenizers return, get every window as a row, as fast tokenizers
        answer.)"""
        strategy, max_length, stride, _ = truncation
        cut_off = self._cut_off(text, row_windows[0], strategy, stride, max_length, options["add_special_tokens"])
        rows = {key: value[:1] for key, value in rows.items() if key != "overflow_to_sample_mapping"}
        return rows, row_windows[:1], cut_off

    def _padded_rows(self, rows: dict[str, list], return_attention_mask: bool | None, **padding) -> dict[str, list]:
        """`rows` padded by transformers' `pad` (which refuses an empty batch: that gets an empty attention mask)."""
        if rows["input_ids"]:
            return self.pad(rows, return_attention_mask=return_attention_mask, **padding)
        if return_attention_mask is not False:
            rows["attention_mask"] = []
        return rows

    def _rows(
        self, samples: list[tuple[Any, Any]], options: dict[str, Any], truncation: tuple
    ) -> tuple[dict[str, list], list[tuple], list[tuple]]:
        """
        The unpadded rows of a batch: every sample encoded once, then cut into its truncation windows; for every row,
        the sample and the token windows of its texts it holds (what `RowEncodings` aligns); and every sample's
        encoded (first, second) texts.
        """
        truncation_strategy, max_length, stride, return_overflowing_tokens = truncation
        with_offsets = options["offset_mapping"] or options["word_ids"]
        encode = self._encode_words if options["is_split_into_words"] else self.encode_text
        matcher = (None, {}) if options["split_special_tokens"] else self._added_tokens_matcher()
        options = {**options, "cls_token_id": self.cls_token_id, "sep_token_id": self.sep_token_id}
        add_special = options["add_special_tokens"]
        special_tokens = {pair: self.num_special_tokens_to_add(pair) if add_special else 0 for pair in (False, True)}
        rows: dict[str, list] = {"input_ids": []}
        row_windows, texts = [], []
        for sample_index, (first, second) in enumerate(samples):
            first = encode(first, with_offsets, options["split_special_tokens"], matcher)
            second = None if second is None else encode(second, with_offsets, options["split_special_tokens"], matcher)
            texts.append((first, second))
            first_length, second_length = len(first), None if second is None else len(second)
            windows = truncation_windows(
                first_length, second_length, truncation_strategy, max_length, stride, return_overflowing_tokens,
                special_tokens[second is not None],
            )  # fmt: skip
            if self.truncation_side == "left":
                windows = windows_from_the_end(windows, first_length, second_length)
            for first_window, second_window in windows:
                for key, value in build_row(first, first_window, second, second_window, options).items():
                    rows.setdefault(key, []).append(value)
                row_windows.append((sample_index, first_window, second_window))
                if return_overflowing_tokens:
                    rows.setdefault("overflow_to_sample_mapping", []).append(sample_index)
        return rows, row_windows, texts

    def _cut_off(
        self, texts: tuple, row_window: tuple, strategy: TruncationStrategy, stride: int, max_length: int | None,
        add_special_tokens: bool,
    ) -> dict[str, Any]:  # fmt: skip
        """
        What transformers' Python tokenizers add to one text's encoding with `return_overflowing_tokens=True`: the
        tokens the first window left out of the cut text plus `stride` kept tokens beside them (`overflowing_tokens`),
        and `num_truncated_tokens`; nothing when nothing was cut.
        """
        first, second = texts
        cut_second = strategy == TruncationStrategy.ONLY_SECOND
        ids = (second if cut_second else first).ids
        start, end = row_window[2] if cut_second else row_window[1]
        if end - start == len(ids):
            return {}
        overflowing = ids[:start + stride] if start else ids[max(end - stride, 0):]  # fmt: skip
        special = self.num_special_tokens_to_add(second is not None) if add_special_tokens else 0
        total = len(first) + (0 if second is None else len(second)) + special
        return {"overflowing_tokens": overflowing, "num_truncated_tokens": total - max_length}

    def _warn_if_too_long(self, rows: list[list[int]], strategy: TruncationStrategy) -> None:
        """Warns once per tokenizer, as transformers' tokenizers do (emptying `deprecation_warnings` warns again)."""
        if strategy != TruncationStrategy.DO_NOT_TRUNCATE or all(len(row) <= self.model_max_length for row in rows):
            return
        if not self.deprecation_warnings.get(TOO_LONG_WARNED):
            longest = max(len(row) for row in rows)
            too_long_logger.warning(
                # transformers' tokenizers' first words, which code that watches for this warning looks for; then ours
                "Token indices sequence length is longer than the specified maximum sequence length for this model "
                f"({longest} > {self.model_max_length} tokens, model_max_length, the length the model was trained "
                "with): RoFormer reads it whole; pass truncation=True to cut it to model_max_length (or "
                "return_overflowing_tokens=True with a stride for windows), or raise tokenizer.model_max_length."
            )
        self.deprecation_warnings[TOO_LONG_WARNED] = True

    def _pad(
        self,
        encoded_inputs: dict[str, Any],
        max_length: int | None = None,
        padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_attention_mask: bool | None = None,
    ) -> dict:
        """transformers' padding, extended to `offset_mapping` ((0, 0)) and `word_ids` (-1)."""
        length = len(encoded_inputs["input_ids"])
        padded = super()._pad(
            encoded_inputs, max_length, padding_strategy, pad_to_multiple_of, padding_side, return_attention_mask
        )
        difference = len(padded["input_ids"]) - length
        side = padding_side or self.padding_side
        for key, filler in (("offset_mapping", (0, 0)), ("word_ids", -1)):
            if difference and key in padded:
                filling = [filler] * difference
                padded[key] = list(padded[key]) + filling if side == "right" else filling + list(padded[key])
        return padded


class LowerCasingNormalizer:
    """The `normalizer` of a `tokenizers` backend as far as `RoFormerJiebaTokenizer` has one: `Lowercase()` while it
    lower-cases (`do_lower_case`: lower-cased, accents stripped); setting one that only lower-cases turns it on."""

    def __init__(self, tokenizer: RoFormerJiebaTokenizer):
        self.tokenizer = tokenizer

    @property
    def normalizer(self) -> "normalizers.Normalizer | None":
        return normalizers.Lowercase() if self.tokenizer.do_lower_case else None

    @normalizer.setter
    def normalizer(self, normalizer: "normalizers.Normalizer") -> None:
        steps = list(normalizer) if isinstance(normalizer, normalizers.Sequence) else [normalizer]
        if not steps or not all(isinstance(step, normalizers.Lowercase) for step in steps):
            raise ValueError(
                f"{type(self.tokenizer).__name__} normalizes text only by lower-casing it (do_lower_case=True, its "
                f"default), not with {normalizer!r}: set do_lower_case instead."
            )
        self.tokenizer.do_lower_case = True


__all__ = ["RoFormerJiebaTokenizer"]
