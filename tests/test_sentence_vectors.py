"""sentence-transformers on a saved roformer_hf model with a pooler: `SentenceTransformer(folder).encode(texts)` is the
model's own `pooler_output`. (With `trust_remote_code=True` where roformer_hf is missing: tests/test_convert_hub.py.)"""

import pytest
import torch
from conftest import TINY_WORD_VOCAB
from sentence_transformers import SentenceTransformer

import roformer_hf
from roformer_hf.hub.sentence_transformers_files import SENTENCE_TRANSFORMERS_FILES

TEXTS = ["今天天气很好，我们去公园散步。", "原告与被告签订借款合同，约定借款十万元。", "好"]


def tiny_config(**settings) -> roformer_hf.RoFormerConfig:
    return roformer_hf.RoFormerConfig(
        **TINY_WORD_VOCAB, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **settings
    )


# What a pooled checkpoint can be: a bare encoder with a tanh pooler, and RoFormer-Sim (a causal LM with a linear
# pooler, saved under the base model prefix `roformer.`, which sentence-transformers loads with AutoModel).
POOLED = {
    "RoFormerModel": {"add_pooling_layer": True},
    "RoFormerForCausalLM": {
        "add_pooling_layer": True,
        "is_decoder": True,
        "decoder_mask": "unilm",
        "pooler_activation": "linear",
    },
}


@pytest.fixture(scope="module")
def pooled_checkpoints(tmp_path_factory, tokenizer):
    """Each pooled model saved with the tokenizer, and its pooler_output on TEXTS."""
    saved = {}
    for architecture, settings in POOLED.items():
        torch.manual_seed(0)
        model = getattr(roformer_hf, architecture)(tiny_config(**settings)).eval()
        folder = tmp_path_factory.mktemp(architecture)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        with torch.no_grad():
            saved[architecture] = folder, model(**tokenizer(TEXTS, padding=True, return_tensors="pt")).pooler_output
    return saved


@pytest.mark.parametrize("architecture", list(POOLED))
def test_sentence_transformers_encodes_texts_as_the_pooler_output(pooled_checkpoints, architecture):
    folder, pooler_output = pooled_checkpoints[architecture]
    model = SentenceTransformer(str(folder), device="cpu")
    assert type(model[0].model) is roformer_hf.RoFormerModel
    assert model.similarity_fn_name == "cosine"
    vectors = model.encode(TEXTS, convert_to_tensor=True, batch_size=2)  # batches of other padding than the reference
    assert vectors.shape == pooler_output.shape
    assert (vectors - pooler_output).abs().max() <= 1e-5
    assert (vectors[0] - vectors[1]).abs().max() > 1e-3  # a vector of the sentence, not of [CLS] alone


def test_a_model_without_pooler_is_saved_without_sentence_transformers_files(tmp_path):
    roformer_hf.RoFormerForMaskedLM(tiny_config()).save_pretrained(tmp_path)
    assert not any((tmp_path / name).exists() for name in SENTENCE_TRANSFORMERS_FILES)


def test_a_sentence_transformers_pipeline_of_the_user_survives_its_save(pooled_checkpoints, tokenizer, tmp_path):
    """sentence-transformers' own `save` calls our `save_pretrained`: the user's modules (here mean pooling) stay."""
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    folder, _ = pooled_checkpoints["RoFormerModel"]
    transformer = Transformer(str(folder))
    mean_pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    SentenceTransformer(modules=[transformer, mean_pooling], device="cpu").save(str(tmp_path / "mean"))
    vectors = SentenceTransformer(str(tmp_path / "mean"), device="cpu").encode(TEXTS, convert_to_tensor=True)
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden_states = roformer_hf.RoFormerModel.from_pretrained(folder)(**batch).last_hidden_state
    mask = batch["attention_mask"][..., None]
    assert (vectors - (hidden_states * mask).sum(1) / mask.sum(1)).abs().max() <= 1e-5


@pytest.mark.parametrize("lower_cased_by_the_tokenizer", [True, False])
def test_do_lower_case_of_sentence_transformers_is_the_tokenizer_s_own(
    tmp_path, roformer_vocab, lower_cased_by_the_tokenizer
):
    """`Transformer(path, do_lower_case=True)` raised "RoFormerJiebaTokenizer has no attribute backend_tokenizer"
    (the tokenizer says `is_fast`): it keeps or turns on the tokenizer's own lower-casing, `do_lower_case`."""
    from sentence_transformers.sentence_transformer.modules import Transformer

    roformer_hf.RoFormerModel(tiny_config(add_pooling_layer=True)).save_pretrained(tmp_path)
    tokenizer = roformer_hf.RoFormerJiebaTokenizer(str(roformer_vocab), do_lower_case=lower_cased_by_the_tokenizer)
    tokenizer.save_pretrained(tmp_path)
    transformer = Transformer(str(tmp_path), do_lower_case=True)
    assert transformer.tokenizer.do_lower_case
    assert transformer.tokenizer.tokenize("BERT模型") == transformer.tokenizer.tokenize("bert模型")


def test_a_normalizer_other_than_lower_casing_is_refused_in_one_line(tokenizer):
    from tokenizers import normalizers

    with pytest.raises(ValueError, match=r"^RoFormerJiebaTokenizer normalizes text only by lower-casing it"):
        tokenizer.backend_tokenizer.normalizer = normalizers.NFKC()
