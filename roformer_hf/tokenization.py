"""Word-level jieba tokenizer of the original Chinese RoFormer checkpoints: `RoFormerJiebaTokenizer`.

The tokenizer in four files, each one concern (the tokenizer's files carry all of them for `trust_remote_code=True`;
none imports anything else of roformer_hf):

- `text_rules.py`: the rule on text: normalisation, BERT basic tokenization, WordPiece, the vocabulary file;
- `jieba_rule.py`: segmentation (rjieba or jieba), user words, and the rule applied to one text (`JiebaRuleMixin`);
- `batch_rows.py`: the rows of a batch from encoded texts (pairs, truncation windows, special tokens);
- `encodings.py`: what an encoded batch answers (`word_ids()`, `char_to_token()`, ...), as fast tokenizers do;

and here the tokenizer itself: transformers' `PreTrainedTokenizer` API over them.
"""

import os
from typing import Any, ClassVar

from tokenizers import normalizers
from transformers import BatchEncoding, PreTrainedTokenizer
from transformers.tokenization_utils_base import PaddingStrategy, TensorType, TruncationStrategy
from transformers.utils import logging

from .batch_rows import build_row, split_samples, truncation_windows, windows_from_the_end
from .configuration import TOKENIZER_FILES, check_model_files
from .encodings import WORDPIECE_SCHEME, RowEncodings, WordPieceScheme
from .jieba_rule import JiebaRuleMixin
from .text_rules import load_vocab, needs_space

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


class RoFormerJiebaTokenizer(JiebaRuleMixin, PreTrainedTokenizer):
    r"""
    The word-level tokenizer of the original Chinese RoFormer checkpoints: jieba words found in the vocabulary are one
    token, every other word falls back to BERT basic tokenization and WordPiece (see `text_rules.py` for the
    exact rule). Encoding, padding, truncation, overflowing windows, offsets, decoding, pickling and
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

    The returned `BatchEncoding`s answer `tokens()`, `word_ids()`, `sequence_ids()`, `char_to_token()`,
    `token_to_chars()`, `word_to_chars()`, ... as those of transformers' fast tokenizers do (see `RowEncoding`): a
    word is a jieba word, or a given word with `is_split_into_words=True`. Calling the tokenizer also accepts
    `return_word_ids=True`, which adds a `"word_ids"` list for whole-word masking: word indices counted once per row
    (the second text of a pair continuing the count), -1 for special tokens and padding.

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
        self._segment_ids = None  # a text_rules.SegmentIds, built on first use
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
