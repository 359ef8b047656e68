"""Steps 2 and 3 of the rule (see `text_rules.py`): jieba segmentation, user words, and the rule on one text.

Segmentation uses rjieba (jieba-rs) when the tokenizer has no user words: on People's Daily and on the three
classification corpora it gives jieba's segmentation exactly, and faster (docs/tokenizer.md#speed). With user words (or
`use_rjieba=False`, or rjieba missing) the tokenizer segments with its own `jieba.Tokenizer` instance, the reference;
so it does for texts that rjieba cannot take (lone surrogates) or reads differently (ideographs that rjieba counts as
Chinese and jieba does not: U+9FD6-U+9FFF, Extension A, compatibility ideographs, Extensions B-F).
"""

import os
import re
from itertools import chain
from typing import Any

import jieba

from .encodings import TextEncoding
from .text_rules import UNKNOWN_CACHE_SIZE, SegmentIds, normalize_text, tokenize_unknown_segment

try:
    import rjieba
except ImportError:  # jieba is the reference; rjieba only makes it faster
    rjieba = None

# Code points that rjieba (jieba-rs) segments as Chinese and jieba (whose Chinese is U+4E00-U+9FD5) does not: the end
# of the unified block, Extension A, the compatibility ideographs and the supplementary-plane extensions B to F.
# jieba cuts its runs of Chinese at them and rjieba does not, which can change the segmentation next to them, so texts
# holding any of them are segmented by jieba itself.
RJIEBA_ONLY_CHINESE = re.compile("[\u9fd6-\u9fff\u3400-\u4dbf\uf900-\ufaff\U00020000-\U0002ebef\U0002f800-\U0002fa1f]")
# jieba's user-dictionary line: a word, then an optional frequency, then an optional part-of-speech tag.
USER_DICT_LINE = re.compile(r"^(.+?)( [0-9]+)?( [a-z]+)?$")


class JiebaRuleMixin:
    """
    The rule on one text, for `RoFormerJiebaTokenizer`: segmentation (rjieba or the tokenizer's own jieba), the user
    words, and the encoding of a text into ids, character offsets and word indices.

    The tokenizer's `__init__` sets the state it reads: `vocab`, `do_lower_case`, `use_rjieba`, `user_words`,
    `longest_token`, `unk_token_id_in_vocab` and the caches `_jieba`, `_unknown_cache`, `_segment_ids`,
    `_added_tokens_matcher_cache`; `added_tokens_decoder` is transformers'.
    """

    # ------------------------------------------------------------------------------------------------------------
    # Segmentation and user words
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
