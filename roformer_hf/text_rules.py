"""The rule the original Chinese RoFormer checkpoints were trained on, on text: everything but jieba.

The original checkpoints (ZhuiyiTechnology/roformer, trained with bert4keras) tokenize a text in four steps:

1. when `do_lower_case`: lowercase, NFD-normalise and drop combining marks (category Mn) (`normalize_text`);
2. segment the text with jieba, HMM off (`jieba.cut(text, HMM=False)`; `jieba_rule.py`);
3. a segment found in the vocabulary is one token;
4. any other segment goes through BERT basic tokenization (split on whitespace and punctuation, every CJK character
   on its own, control characters and U+FFFD dropped) and greedy longest-match WordPiece with `##` continuations;
   a word with no match, or longer than 200 characters (bert4keras's `word_maxlen`), is `[UNK]`
   (`tokenize_unknown_segment`).

This module holds steps 1 and 4 and the vocabulary file; it imports nothing from roformer_hf, and the tokenizer's
files carry it for `trust_remote_code=True`.
"""

import functools
import os
import re
import unicodedata

UNKNOWN_CACHE_SIZE = 200_000
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


# ----------------------------------------------------------------------------------------------------------------
# Step 1: normalisation, keeping for every normalised character the index of the original character it came from
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
# Step 4: BERT basic tokenization and WordPiece of the segments missing from the vocabulary
# ----------------------------------------------------------------------------------------------------------------


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
