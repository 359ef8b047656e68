"""What an encoded batch answers: the alignment API of `tokenizers.Encoding` for `RoFormerJiebaTokenizer`.

transformers' `BatchEncoding` asks a fast tokenizer's encodings for `tokens()`, `word_ids()`, `sequence_ids()`,
`char_to_token()`, ...; `RowEncoding` answers them for one row, `RowEncodings` builds the rows of a batch on first use,
and `WordPieceScheme` is the one attribute of a `tokenizers.Tokenizer` backend that transformers reads of ours.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar


def framed(values: list, first_part: bool, special: bool, opening: object, closing: object) -> list:
    """
    A part of a row as special tokens frame it: the row is `[CLS] first [SEP]`, or `[CLS] first [SEP] second [SEP]`
    for a pair (with `add_special_tokens`; bare parts without). Every list of a row (its ids, offsets, word ids, ...)
    follows this one layout, each with its own values at `[CLS]` (`opening`) and `[SEP]` (`closing`).
    """
    return [opening] * (special and first_part) + values + [closing] * special


@dataclass
class TextEncoding:
    """The tokens of one text before special tokens: ids, and on request character spans and jieba word indices."""

    ids: list[int]
    offsets: list[tuple[int, int]] | None = None
    word_ids: list[int] | None = None

    def __len__(self) -> int:
        return len(self.ids)


class RowEncoding:
    """
    One encoded row with the alignment API of `tokenizers.Encoding`, the object transformers' `BatchEncoding` asks
    for `tokens()`, `word_ids()`, `sequence_ids()`, `char_to_token()`, `token_to_chars()`, `word_to_chars()`, ...

    As in transformers' fast tokenizers: special and padding tokens have no word, sequence or characters (`None`);
    words are counted per sequence (the second text of a pair starts again at 0) and keep their number in the whole
    text in every overflow window; offsets point into the original text (into each given word with
    `is_split_into_words=True`). A word is a jieba word, or a given word with `is_split_into_words=True`: all the
    tokens of a word missing from the vocabulary (its characters or `##` pieces) share its index.
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
    The `RowEncoding` of every row of a batch, each built on first use: aligning needs a second pass over the text
    with offsets, which most calls (preparing training data) never ask for, so encoding stays as fast as without.
    Pickling (what `BatchEncoding` pickles) builds them all and keeps only the rows.
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
        """Row `index`: `[CLS] first [SEP] (second [SEP])` as `batch_rows.build_row` builds it (`framed`), then its
        padding."""
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
