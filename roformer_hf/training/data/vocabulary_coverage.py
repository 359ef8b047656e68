"""How much of a run's text its vocabulary covers: the share of the tokens of a sample of the training text that are
the unknown token, and one line when it is high. A word-level vocabulary made for one text (the demo's
`data/demo_vocab.txt`, built from the People's Daily sample: 4.7% `[UNK]` there) maps 15.7% of the CAIL court texts
(`data/cail_sample.jsonl`, first 200) to `[UNK]`; the original 50,000-entry vocabulary
(`data/roformer_chinese_base_vocab.txt`) 0.6% of them, 4.5% of the People's Daily sample. A model cannot learn what it
reads as `[UNK]`.
"""

import logging
from collections.abc import Sequence

import datasets
from transformers import PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

# The share of [UNK] tokens above which a run says so: above what the original vocabulary gives any of the samples.
HIGH_UNKNOWN_SHARE = 0.10
# The texts sampled (the first ones of the training data): enough for a share to a percent, quick to tokenize.
SAMPLED_TEXTS = 200
# The entries of the original vocabulary (data/roformer_chinese_base_vocab.txt): a vocabulary as large that lacks a
# run's text is not helped by the original one.
ORIGINAL_VOCABULARY_SIZE = 50_000


def unknown_token_share(tokenizer: PreTrainedTokenizerBase, texts: Sequence[str]) -> float:
    """The share of the tokens of `texts` (without special tokens) that are the tokenizer's unknown token; 0.0 for a
    tokenizer without one, or for texts without tokens."""
    if tokenizer.unk_token is None:
        return 0.0
    tokens = [token for text in texts for token in tokenizer.tokenize(text)]  # no ids: no warning about lengths
    return sum(token == tokenizer.unk_token for token in tokens) / len(tokens) if tokens else 0.0


def tokenizer_source(model_args) -> str:
    """The option the run's tokenizer came from, for the line: `--tokenizer_name <path>`, else the model's."""
    if model_args.tokenizer_name:
        return f"--tokenizer_name {model_args.tokenizer_name}"
    return f"the tokenizer of --model_name_or_path {model_args.model_name_or_path}"


def first_texts(dataset: datasets.Dataset | datasets.IterableDataset, column: str) -> list[str]:
    """The first `SAMPLED_TEXTS` texts of `column`, read without the rest of the dataset (which may be streamed)."""
    rows = (
        dataset.take(SAMPLED_TEXTS)
        if isinstance(dataset, datasets.IterableDataset)
        else dataset.select(range(min(SAMPLED_TEXTS, len(dataset))))
    )
    return [row[column] for row in rows if isinstance(row[column], str)]


def warn_if_many_unknown(
    tokenizer: PreTrainedTokenizerBase,
    dataset: datasets.Dataset | datasets.IterableDataset,
    column: str,
    vocabulary: str,
    checkpoint: str | None = None,
) -> float:
    """
    Say in one line when more than `HIGH_UNKNOWN_SHARE` of the tokens of the first `SAMPLED_TEXTS` training texts
    are unknown, naming the vocabulary and what to do (`vocabulary_advice`); returns the share.

    Args:
        tokenizer (`PreTrainedTokenizerBase`): the run's tokenizer.
        dataset (`datasets.Dataset` or `datasets.IterableDataset`): the training rows.
        column (`str`): their text column.
        vocabulary (`str`): where the tokenizer came from, for the line (`--tokenizer_name data/demo_vocab.txt`).
        checkpoint (`str`, *optional*): the checkpoint the run starts from (`--model_name_or_path`), whose
            embeddings are those of its vocabulary; `None` for a model trained from scratch.
    """
    share = unknown_token_share(tokenizer, first_texts(dataset, column))
    if share > HIGH_UNKNOWN_SHARE:
        logger.warning(
            f"{share:.1%} of the tokens of the training text are {tokenizer.unk_token} with {vocabulary}, whose "
            f"vocabulary lacks their words and characters: {vocabulary_advice(len(tokenizer), checkpoint)}"
        )
    return share


def vocabulary_advice(vocabulary_size: int, checkpoint: str | None) -> str:
    """What to do about a vocabulary that lacks a run's text: a checkpoint cannot change its vocabulary (its
    embeddings are those of its tokens), and a vocabulary as large as the original one lacks a script or characters
    (a sentence in traditional characters: half its tokens [UNK] with the original) that only a vocabulary built
    from the text has."""
    build = "one built from your text (python -m roformer_hf.build_vocab, docs/tokenizer.md)"
    if checkpoint is not None:
        return (
            f"{checkpoint} reads text through its own vocabulary, so start from a checkpoint whose vocabulary covers "
            f"your text, or pretrain one with run_mlm.py on {build}."
        )
    if vocabulary_size >= ORIGINAL_VOCABULARY_SIZE:
        return f"as large as the original vocabulary, it still lacks your text's script or characters: use {build}."
    return (
        "use the original 50,000-entry vocabulary (data/roformer_chinese_base_vocab.txt: 0.6% on court texts) or "
        f"{build}; data/demo_vocab.txt covers the demo's sample only."
    )


__all__ = [
    "HIGH_UNKNOWN_SHARE",
    "tokenizer_source",
    "unknown_token_share",
    "vocabulary_advice",
    "warn_if_many_unknown",
]
