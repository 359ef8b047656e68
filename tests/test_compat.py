"""The installed transformers release, whichever of the supported range it is (README, "Supported transformers"):
the cache under both of its names, and no deprecated transformers API on our side, warned or logged."""

import logging
import warnings
from contextlib import contextmanager

import pytest
import torch
import transformers
from conftest import TINY, enable_activation_checkpointing
from packaging.version import Version
from transformers import DynamicCache

from roformer_hf import RoFormerConfig, RoFormerForCausalLM, RoFormerForMaskedLM, RoFormerModel
from roformer_hf.modeling import CACHE_NAME, cache_of

CONFIGS = {
    "causal": {"is_decoder": True},
    "unilm": {"is_decoder": True, "decoder_mask": "unilm"},
}


def decoder(kind: str, attn_implementation: str = "sdpa") -> RoFormerForCausalLM:
    torch.manual_seed(0)
    model = RoFormerForCausalLM(RoFormerConfig(**TINY, **CONFIGS[kind])).eval()
    model.set_attn_implementation(attn_implementation)
    return model


def test_the_cache_name_is_the_installed_releases():
    """`generate` hands the cache over, and reads it back, under this name: `cache` from 5.24 on."""
    renamed = Version(transformers.__version__) >= Version("5.24")
    assert CACHE_NAME == ("cache" if renamed else "past_key_values")  # noqa: SIM300 (the name under test first)
    output = decoder("causal")(torch.tensor([[5, 6, 7]]), use_cache=True)
    assert isinstance(output[CACHE_NAME], DynamicCache) and cache_of(output) is output[CACHE_NAME]


@pytest.mark.parametrize("name", ["cache", "past_key_values"])
def test_either_name_continues_from_the_cache(name):
    model = decoder("causal")
    input_ids = torch.randint(1, TINY["vocab_size"], (1, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        whole = model(input_ids).logits
        first = model(input_ids[:, :5], use_cache=True)
        rest = model(input_ids[:, 5:], **{name: cache_of(first)}).logits
    torch.testing.assert_close(torch.cat([first.logits, rest], dim=1), whole, atol=1e-5, rtol=1e-5)


def test_both_names_at_once_are_refused():
    model = decoder("causal")
    with pytest.raises(ValueError, match="pass it once, as cache"):
        model(torch.tensor([[5]]), cache=DynamicCache(config=model.config), past_key_values=DynamicCache())


@contextmanager
def deprecations_recorded():
    """Every warning raised and every message transformers logs inside, with its once-only log cache emptied (a
    deprecation logged by an earlier test would not be logged again)."""
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    transformers_logger = logging.getLogger("transformers")
    logging.Logger.warning_once.cache_clear()
    transformers_logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield caught, records
    finally:
        transformers_logger.removeHandler(handler)


def deprecation_notices(caught: list, records: list) -> list[str]:
    warned = [
        f"{warning.category.__name__} at {warning.filename}:{warning.lineno}: {warning.message}"
        for warning in caught
        if issubclass(warning.category, (DeprecationWarning, FutureWarning))
        and ("transformers" in warning.filename or "roformer_hf" in warning.filename)
    ]
    logged = [record.getMessage() for record in records if "deprecat" in record.getMessage().lower()]
    return warned + logged


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("kind", list(CONFIGS))
def test_generation_uses_no_deprecated_api(kind, attn_implementation):
    """generate with the cache and without, stepping a cache by hand, and reading it from the output: nothing
    deprecated on the installed release (on 5.24, `past_key_values` anywhere warns or logs)."""
    model = decoder(kind, attn_implementation)
    prompt = torch.randint(1, TINY["vocab_size"], (2, 5), generator=torch.Generator().manual_seed(2))
    with deprecations_recorded() as (caught, records), torch.no_grad():
        for use_cache in (True, False):
            model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=4, do_sample=False,
                           use_cache=use_cache, pad_token_id=0)  # fmt: skip
        first = model(prompt, use_cache=True)
        model(prompt[:, :1], token_type_ids=torch.ones_like(prompt[:, :1]), cache=cache_of(first))
    assert deprecation_notices(caught, records) == []


def test_training_and_saving_use_no_deprecated_api(tmp_path):
    """A training step of a decoder with activation checkpointing (which keeps no cache), an encoder with padding,
    and a save and load."""
    model = decoder("unilm").train()
    input_ids = torch.randint(1, TINY["vocab_size"], (2, 6), generator=torch.Generator().manual_seed(3))
    with deprecations_recorded() as (caught, records):
        enable_activation_checkpointing(model)
        output = model(input_ids, labels=input_ids)
        output.loss.backward()
        assert cache_of(output) is None
        encoder = RoFormerModel(RoFormerConfig(**TINY)).eval()
        encoder(input_ids, attention_mask=torch.tensor([[1] * 6, [1] * 4 + [0] * 2]))
        masked_lm = RoFormerForMaskedLM(RoFormerConfig(**TINY))
        masked_lm.save_pretrained(tmp_path)
        RoFormerForMaskedLM.from_pretrained(tmp_path)
    assert deprecation_notices(caught, records) == []


def test_a_script_load_names_no_layer_as_not_sharded(tmp_path):
    """The scripts keep transformers' load report off by raising modeling_utils' logger to ERROR, which turns on its
    tensor-parallel check: without `load_report_at_info_only` quieting it too, every layer is named "not sharded"."""
    from roformer_hf.compat import LOAD_REPORT_LOGGER, TENSOR_PARALLEL_LOGGERS
    from roformer_hf.training.building import load_report_at_info_only

    config = RoFormerConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2)
    RoFormerForMaskedLM(config).save_pretrained(tmp_path)
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    loggers = [logging.getLogger(name) for name in (LOAD_REPORT_LOGGER, *TENSOR_PARALLEL_LOGGERS)]
    levels = [logger.level for logger in loggers]
    for logger in loggers[1:]:
        logger.addHandler(handler)
    try:
        loggers[0].setLevel(logging.WARNING)  # the scripts' default level, as setup_logging leaves it
        with load_report_at_info_only():
            RoFormerForMaskedLM.from_pretrained(tmp_path)
        quiet = [record.getMessage() for record in records]
        loggers[0].setLevel(logging.ERROR)  # the same load without quieting the check
        RoFormerForMaskedLM.from_pretrained(tmp_path)
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
            logger.removeHandler(handler)
    assert quiet == []
    assert any("were not sharded" in record.getMessage() for record in records)  # the check ran, and is what we quiet
