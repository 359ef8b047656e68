"""transformers' common model tests (`ModelTesterMixin`, `ConfigTester`) run against roformer_hf's classes.

Used when the transformers source at hand has no `tests/models/roformer` (the PyPI sdist ships only the common
mixins): `tests/run_transformers_suite.py` copies this file to `tests/models/roformer_hf/test_roformer_hf_common.py`
beside the mixins, so the relative imports below resolve there. Not collected by this project's own pytest run.

The tester is ours: a tiny configuration (the shapes of `tests/conftest.py`'s TINY, dropout on, as the common tests
expect of a trainable model) and random inputs with every row attending to at least its last token. The test class
inherits GenerationTesterMixin as a generative model's test must (transformers checks it); from the sdist that mixin
is the script's stand-in, without tests: generate is covered by this project's own tests. The classes come through
`roformer_hf_imports`, so that the script's `--against transformers` runs the same tests on transformers' RoFormer.
"""

import unittest

import torch
from roformer_hf_imports import (
    RoFormerConfig,
    RoFormerForCausalLM,
    RoFormerForMaskedLM,
    RoFormerForMultipleChoice,
    RoFormerForQuestionAnswering,
    RoFormerForSequenceClassification,
    RoFormerForTokenClassification,
    RoFormerModel,
)

from ...generation.test_utils import GenerationTesterMixin
from ...test_configuration_common import ConfigTester
from ...test_modeling_common import ModelTesterMixin, ids_tensor, random_attention_mask


class RoFormerHFTester:
    """Builds the tiny configuration and the inputs the common tests feed every head."""

    def __init__(self, parent: unittest.TestCase):
        self.parent = parent
        self.batch_size = 3
        self.seq_length = 7
        self.vocab_size = 99
        self.hidden_size = 32
        self.num_hidden_layers = 2
        self.num_attention_heads = 4
        self.intermediate_size = 37
        self.type_vocab_size = 2
        self.num_labels = 3
        self.num_choices = 4
        self.is_training = True

    def get_config(self) -> RoFormerConfig:
        return RoFormerConfig(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            intermediate_size=self.intermediate_size,
            type_vocab_size=self.type_vocab_size,
            max_position_embeddings=64,
            num_labels=self.num_labels,
            num_choices=self.num_choices,
        )

    def prepare_config_and_inputs_for_common(self) -> tuple[RoFormerConfig, dict[str, torch.Tensor]]:
        shape = [self.batch_size, self.seq_length]
        # ids from 1: id 0 is the pad id, which a generate test may treat as padding.
        input_ids = ids_tensor(shape, self.vocab_size - 1) + 1
        inputs = {
            "input_ids": input_ids,
            "token_type_ids": ids_tensor(shape, self.type_vocab_size),
            "attention_mask": random_attention_mask(shape),  # the last column always 1: no row fully masked
        }
        return self.get_config(), inputs


class RoFormerHFCommonTest(ModelTesterMixin, GenerationTesterMixin, unittest.TestCase):
    all_model_classes = (
        RoFormerModel,
        RoFormerForMaskedLM,
        RoFormerForCausalLM,
        RoFormerForMultipleChoice,
        RoFormerForQuestionAnswering,
        RoFormerForSequenceClassification,
        RoFormerForTokenClassification,
    )
    all_generative_model_classes = (RoFormerForCausalLM,)

    def setUp(self):
        self.model_tester = RoFormerHFTester(self)
        self.config_tester = ConfigTester(self, config_class=RoFormerConfig, hidden_size=37)

    def test_config(self):
        self.config_tester.run_common_tests()
