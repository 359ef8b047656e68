"""transformers' common tokenizer tests (`TokenizerTesterMixin`) run against roformer_hf's tokenizer.

transformers' own RoFormer tokenizer test reads checkpoints from the Hub, and the PyPI sdist ships only the common
mixins, so `tests/run_transformers_suite.py` copies this file to `tests/models/roformer_hf/` beside them (the relative
import below resolves there) with the vocabulary of the original Chinese checkpoints (`data/`) as `vocab.txt` beside
it. Not collected by this project's own pytest run.

The tester is ours: the tokenizer under test is read from a folder holding only that `vocab.txt`, as a user reads an
original checkpoint's, and saved to the folder the mixin's tests load it from. The class comes through
`roformer_hf_imports`, so the script's `--against transformers` runs the same tests on transformers' RoFormer tokenizer.
"""

import shutil
import tempfile
import unittest
from pathlib import Path

from roformer_hf_imports import RoFormerJiebaTokenizer

from ...test_tokenization_common import TokenizerTesterMixin

VOCAB = Path(__file__).resolve().parents[3] / "vocab.txt"  # the staged folder's root


class RoFormerHFTokenizationTest(TokenizerTesterMixin, unittest.TestCase):
    tokenizer_class = RoFormerJiebaTokenizer
    space_between_special_tokens = True  # decode joins tokens with spaces, as BERT's tokenizers do
    test_seq2seq = False  # an encoder's tokenizer: no target texts

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()  # makes cls.tmpdirname, the folder get_tokenizer() reads
        with tempfile.TemporaryDirectory() as original:
            shutil.copy(VOCAB, Path(original) / "vocab.txt")
            cls.tokenizer_class.from_pretrained(original).save_pretrained(cls.tmpdirname)
