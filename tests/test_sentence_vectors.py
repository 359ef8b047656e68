"""sentence-transformers on a saved roformer_hf model with a pooler: `SentenceTransformer(folder).encode(texts)` is the
model's own `pooler_output`, with roformer_hf imported and, in a fresh process, with `trust_remote_code=True`."""

import subprocess
import sys

import pytest
import torch
from sentence_transformers import SentenceTransformer

import roformer_hf
from roformer_hf.sentence_vectors import SENTENCE_TRANSFORMERS_FILES

TEXTS = ["今天天气很好，我们去公园散步。", "原告与被告签订借款合同，约定借款十万元。", "好"]


def tiny_config(**settings) -> roformer_hf.RoFormerConfig:
    return roformer_hf.RoFormerConfig(
        vocab_size=50000,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=48,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        **settings,
    )


@pytest.fixture(scope="module")
def tokenizer(roformer_vocab):
    return roformer_hf.RoFormerJiebaTokenizer(vocab_file=str(roformer_vocab))


# What a pooled checkpoint can be: a bare encoder with a tanh pooler, and RoFormer-Sim (a causal LM with a linear
# pooler, saved under the base model prefix `roformer.`, which sentence-transformers loads with AutoModel).
POOLED = {
    "RoFormerModel": {"add_pooling_layer": True},
    "RoFormerForCausalLM": {
        "add_pooling_layer": True,
        "is_decoder": True,
        "prefix_lm": True,
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


CHILD = """
import sys

sys.modules["roformer_hf"] = None  # as if roformer_hf were not installed
import torch
from sentence_transformers import SentenceTransformer

folder, texts, result_file = sys.argv[1], sys.argv[2:-1], sys.argv[-1]
model = SentenceTransformer(folder, device="cpu", trust_remote_code=True)
vectors = model.encode(texts, convert_to_tensor=True)
torch.save({"vectors": vectors, "module": type(model[0].model).__module__}, result_file)
"""


def test_sentence_transformers_with_remote_code_where_roformer_hf_is_missing(pooled_checkpoints, tmp_path):
    folder, pooler_output = pooled_checkpoints["RoFormerForCausalLM"]
    (tmp_path / "child.py").write_text(CHILD)
    environment = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "HF_HUB_OFFLINE": "1",
        "HF_MODULES_CACHE": str(tmp_path / "modules"),
        "HF_HOME": str(tmp_path / "hf_home"),
    }
    command = [sys.executable, "child.py", str(folder), *TEXTS, "result.pt"]
    process = subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr[-3000:]
    result = torch.load(tmp_path / "result.pt", weights_only=False)
    assert result["module"].startswith("transformers_modules.")
    assert (result["vectors"] - pooler_output).abs().max() <= 1e-5


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
