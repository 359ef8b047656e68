"""Conversion from a Hub id: `python -m roformer_hf.conversion.convert junnyu/... out/` on a Hugging Face cache
filled with snapshots of the reference checkpoints (roformer 0.4.3's, tests/fixtures/reference), offline.

The converted checkpoints must load into our classes through every public entry point (Auto classes, AutoTokenizer,
pipeline) and give the reference's outputs; the tokenizer must follow the vocabulary (word-level: jieba, char-level:
BERT's, id for id).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import huggingface_hub
import pytest
import torch
import transformers
from conftest import BERT_VOCAB, HANG_GUARD_S, short_texts
from safetensors.torch import load_file
from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer, BertTokenizer, pipeline

import roformer_hf
from roformer_hf.configuration import AUTO_MAP
from roformer_hf.conversion.convert import ConversionError, convert, is_word_level, main

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "reference"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
# Hub id -> reference family, the Auto class of its head and our class it must give.
HUB_IDS = {
    "junnyu/roformer_v2_chinese_char_base": ("v2", AutoModelForMaskedLM, roformer_hf.RoFormerForMaskedLM),
    "junnyu/roformer_chinese_sim_char_base": ("sim", AutoModelForCausalLM, roformer_hf.RoFormerForCausalLM),
}
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # ids 0-4, as in the fixtures' batches


def char_vocab(size: int) -> list[str]:
    """A char-level vocabulary of `size` entries: the special tokens, Chinese characters and their ## pieces."""
    characters = [chr(0x4E00 + index) for index in range((size - len(SPECIAL_TOKENS) + 1) // 2)]
    pieces = [f"##{character}" for character in characters]
    return (SPECIAL_TOKENS + characters + pieces)[:size]


def add_snapshot(cache: Path, repo_id: str, family: str, commit: str = COMMIT) -> Path:
    """A snapshot of the reference checkpoint `family` in huggingface_hub's cache layout, as a download leaves it:
    `models--{owner}--{name}/snapshots/{commit}/` with the Hub's files, and `refs/main` naming the commit."""
    repo_folder = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo_folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    config = json.loads((FIXTURES / family / "config.json").read_text())
    shutil.copy(FIXTURES / family / "config.json", snapshot / "config.json")
    torch.save(load_file(FIXTURES / family / "weights.safetensors"), snapshot / "pytorch_model.bin")
    (snapshot / "vocab.txt").write_text("\n".join(char_vocab(config["vocab_size"])) + "\n", encoding="utf-8")
    tokenizer_config = {"do_lower_case": True, "model_max_length": 1536, "tokenizer_class": "RoFormerTokenizer"}
    (snapshot / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    (repo_folder / "refs").mkdir()
    (repo_folder / "refs" / "main").write_text(commit)
    return snapshot


def fill_cache(cache: Path) -> Path:
    for repo_id, (family, _, _) in HUB_IDS.items():
        add_snapshot(cache, repo_id, family)
    return cache


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """huggingface_hub's cache, offline, holding a snapshot of every Hub id of HUB_IDS."""
    cache = fill_cache(tmp_path / "hub")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return cache


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, Path]:
    """Every Hub id of HUB_IDS converted from an offline cache, once for the tests that only read the output."""
    root = tmp_path_factory.mktemp("converted")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(fill_cache(root / "hub")))
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        return {repo_id: convert(repo_id, root / repo_id.split("/")[1]) for repo_id in HUB_IDS}


def reference(family: str) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The reference batch and outputs of `family`."""
    inputs = json.loads((FIXTURES / family / "inputs.json").read_text())
    return {name: torch.tensor(values) for name, values in inputs.items()}, load_file(
        FIXTURES / family / "outputs.safetensors"
    )


@pytest.mark.parametrize("repo_id", list(HUB_IDS))
def test_hub_ids_convert_into_our_classes(converted, repo_id):
    family, auto_class, our_class = HUB_IDS[repo_id]
    output = converted[repo_id]
    config = json.loads((output / "config.json").read_text())
    source_config = json.loads((FIXTURES / family / "config.json").read_text())
    assert config["model_type"] == "roformer_hf"
    for field in ("norm_type", "use_bias", "pooler_activation"):
        assert config.get(field, getattr(roformer_hf.RoFormerConfig(), field)) == source_config[field], field
    assert config.get("add_pooling_layer", False) == (family == "sim")  # the source has pooler weights
    assert config.get("decoder_mask", "causal") == ("unilm" if family == "sim" else "causal")  # Sim is a UniLM
    if family == "sim":  # generation stops at [SEP]
        assert config["eos_token_id"] == AutoTokenizer.from_pretrained(output).sep_token_id
    assert config["architectures"] == [our_class.__name__]
    assert set(config["auto_map"]) == set(AUTO_MAP)
    assert (output / "model.safetensors").is_file() and (output / "modeling.py").is_file()
    assert type(auto_class.from_pretrained(output)) is our_class
    # AutoModel keeps the pooler of a converted Sim (its sentence vector), and gives none to V2
    base_model = AutoModel.from_pretrained(output)
    assert type(base_model) is roformer_hf.RoFormerModel and (base_model.pooler is not None) == (family == "sim")
    assert (output / "modules.json").is_file() == (family == "sim")  # SentenceTransformer(output) reads the pooler
    assert f"base_model: {repo_id}" in (output / "README.md").read_text()


@pytest.mark.parametrize("repo_id", list(HUB_IDS))
def test_converted_hub_ids_give_the_reference_outputs(converted, repo_id):
    family, auto_class, _ = HUB_IDS[repo_id]
    model = auto_class.from_pretrained(converted[repo_id]).eval()
    batch, expected = reference(family)
    with torch.no_grad():
        outputs = model(**batch)
    padding = ~batch["attention_mask"][..., None].bool()
    assert (outputs.logits - expected["logits"]).masked_fill(padding, 0).abs().max() <= 1e-5
    if "pooler_output" in expected:
        assert (outputs.pooler_output - expected["pooler_output"]).abs().max() <= 1e-5


def test_a_converted_checkpoint_gives_our_classes_through_autotokenizer_and_pipeline(converted):
    output = converted["junnyu/roformer_v2_chinese_char_base"]
    tokenizer = AutoTokenizer.from_pretrained(output)
    assert isinstance(tokenizer, BertTokenizer)  # a char-level vocabulary: BERT's tokenization
    assert tokenizer.model_max_length == 1536  # the source's, not "no limit"
    fill_mask = pipeline("fill-mask", model=str(output))
    assert type(fill_mask.model) is roformer_hf.RoFormerForMaskedLM and isinstance(fill_mask.tokenizer, BertTokenizer)
    predictions = fill_mask(f"{char_vocab(20)[7]}[MASK]{char_vocab(20)[9]}", top_k=3)
    assert len(predictions) == 3 and all(prediction["token"] < tokenizer.vocab_size for prediction in predictions)


def test_a_sim_hub_id_loads_right_without_conversion(hub_cache):
    """Our classes on the Hub id itself (the published layout, offline from the cache): RoFormer-Sim attends as a
    UniLM and keeps its pooler, as after conversion."""
    batch, expected = reference("sim")
    model = roformer_hf.RoFormerModel.from_pretrained("junnyu/roformer_chinese_sim_char_base").eval()
    assert model.config.decoder_mask == "unilm" and model.pooler is not None
    with torch.no_grad():
        pooler_output = model(**batch).pooler_output
    assert (pooler_output - expected["pooler_output"]).abs().max() <= 1e-5


SIM_TEXTS = ["".join(char_vocab(60)[5:12]), "".join(char_vocab(60)[20:24]), char_vocab(60)[30]]


def sim_pooler_output(folder: Path) -> torch.Tensor:
    """The sentence vectors of SIM_TEXTS by the converted Sim's own pooler."""
    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModelForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():
        return model(**tokenizer(SIM_TEXTS, padding=True, return_tensors="pt")).pooler_output


def test_a_converted_sim_is_a_sentence_transformer(converted):
    from sentence_transformers import SentenceTransformer

    output = converted["junnyu/roformer_chinese_sim_char_base"]
    vectors = SentenceTransformer(str(output), device="cpu").encode(SIM_TEXTS, convert_to_tensor=True)
    pooler_output = sim_pooler_output(output)
    assert (vectors - pooler_output).abs().max() <= 1e-5
    assert (pooler_output[0] - pooler_output[1]).abs().max() > 1e-3  # a vector of the sentence, not of [CLS] alone


# Runs where roformer_hf cannot be imported: the converted V2 through the Auto classes and a pipeline, the converted
# Sim through sentence-transformers.
CHILD = """
import sys

sys.modules["roformer_hf"] = None
import torch
import transformers
from sentence_transformers import SentenceTransformer

folder, sim_folder, texts, result_file = sys.argv[1], sys.argv[2], sys.argv[3:-1], sys.argv[-1]
sentence_model = SentenceTransformer(sim_folder, device="cpu", trust_remote_code=True)
vectors = sentence_model.encode(texts, convert_to_tensor=True)
tokenizer = transformers.AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
model = transformers.AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True).eval()
batch = tokenizer(["一丁七", "万丈"], padding=True, return_tensors="pt")
with torch.no_grad():
    logits = model(**batch).logits
fill_mask = transformers.pipeline("fill-mask", model=folder, trust_remote_code=True)
torch.save(
    {
        "tokenizer": type(tokenizer).__name__,
        "model": f"{type(model).__module__}.{type(model).__name__}",
        "pipeline_model": type(fill_mask.model).__module__,
        "input_ids": batch["input_ids"],
        "logits": logits,
        "sentence_module": type(sentence_model[0].model).__module__,
        "vectors": vectors,
    },
    result_file,
)
"""


def test_converted_checkpoints_load_with_remote_code_where_roformer_hf_is_missing(converted, tmp_path):
    output, sim_output = (
        converted["junnyu/roformer_v2_chinese_char_base"],
        converted["junnyu/roformer_chinese_sim_char_base"],
    )
    (tmp_path / "child.py").write_text(CHILD)
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    environment |= {"HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HOME": str(tmp_path / "hf_home")}
    command = [sys.executable, "child.py", str(output), str(sim_output), *SIM_TEXTS, "result.pt"]
    process = subprocess.run(
        command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert process.returncode == 0, process.stderr[-3000:]
    result = torch.load(tmp_path / "result.pt", weights_only=False)
    assert result["tokenizer"] == "BertTokenizer"
    assert result["model"].startswith("transformers_modules.") and result["model"].endswith(".RoFormerForMaskedLM")
    assert result["pipeline_model"].startswith("transformers_modules.")
    batch = AutoTokenizer.from_pretrained(output)(["一丁七", "万丈"], padding=True, return_tensors="pt")
    assert torch.equal(result["input_ids"], batch["input_ids"])
    with torch.no_grad():
        logits = AutoModelForMaskedLM.from_pretrained(output).eval()(**batch).logits
    assert (result["logits"] - logits).abs().max() <= 1e-5
    assert result["sentence_module"].startswith("transformers_modules.")
    assert (result["vectors"] - sim_pooler_output(sim_output)).abs().max() <= 1e-5


def test_a_transformers_multiple_choice_checkpoint_keeps_its_pooling(tmp_path):
    """transformers' RoFormerForMultipleChoice pools the last position, padding or not: so does the conversion."""
    torch.manual_seed(0)
    config = transformers.RoFormerConfig(
        vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48
    )
    original = transformers.RoFormerForMultipleChoice(config).eval()
    original.save_pretrained(tmp_path / "source")
    (tmp_path / "source" / "vocab.txt").write_text("\n".join(char_vocab(120)) + "\n", encoding="utf-8")
    output = convert(tmp_path / "source", tmp_path / "converted")
    assert json.loads((output / "config.json").read_text())["multiple_choice_pooling"] == "last_position"
    input_ids = torch.tensor([[[2, 7, 8, 9, 3], [2, 10, 11, 3, 0]]])  # the second choice right-padded
    inputs = {"input_ids": input_ids, "attention_mask": (input_ids != 0).long()}
    with torch.no_grad():
        expected = original(**inputs).logits
        logits = transformers.AutoModelForMultipleChoice.from_pretrained(output).eval()(**inputs).logits
    assert (logits - expected).abs().max() <= 1e-5


def test_a_revision_converts_that_snapshot(hub_cache, tmp_path):
    repo_id = "junnyu/roformer_v2_chinese_char_base"
    other_commit = "f" * 40
    snapshot = add_snapshot(tmp_path / "other", repo_id, "v1_word", commit=other_commit)
    shutil.copytree(snapshot, hub_cache / f"models--{repo_id.replace('/', '--')}" / "snapshots" / other_commit)
    output = convert(repo_id, tmp_path / "converted", revision=other_commit)
    assert json.loads((output / "config.json").read_text())["embedding_size"] == 24  # v1_word's, not v2's
    with pytest.raises(ConversionError, match=r"revision nope\).*not in the Hugging Face cache"):
        convert(repo_id, tmp_path / "again", revision="nope")


def test_command_line_converts_a_hub_id_from_the_cache_offline(tmp_path):
    """As a user runs it: the cache and offline mode come from the environment."""
    add_snapshot(tmp_path / "hub", "junnyu/roformer_v2_chinese_char_base", "v2")
    environment = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "roformer_hf.conversion.convert", "junnyu/roformer_v2_chinese_char_base", "out"]
    process = subprocess.run(
        command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert process.returncode == 0, process.stderr[-3000:]
    assert process.stdout.startswith("Wrote the roformer_hf checkpoint")
    model = AutoModelForMaskedLM.from_pretrained(tmp_path / "out").eval()
    batch, expected = reference("v2")
    with torch.no_grad():
        logits = model(**batch).logits
    padding = ~batch["attention_mask"][..., None].bool()
    assert (logits - expected["logits"]).masked_fill(padding, 0).abs().max() <= 1e-5


# ----------------------------------------------------------------------------------------------------------------
# Bad input: one line, exit status 1
# ----------------------------------------------------------------------------------------------------------------


def run_main(capsys, *argv: str) -> str:
    """The error line of `python -m roformer_hf.conversion.convert argv`, which must fail with exactly one line."""
    assert main(list(argv)) == 1
    error = capsys.readouterr().err
    assert error.startswith("error: ") and error.count("\n") == 1, error
    return error


def test_an_unknown_hub_id_offline_is_one_line(hub_cache, tmp_path, capsys):
    error = run_main(capsys, "junnyu/no_such_model", str(tmp_path / "out"))
    assert "junnyu/no_such_model" in error and "not in the Hugging Face cache" in error


def test_a_snapshot_without_vocab_is_one_line(hub_cache, tmp_path, capsys):
    snapshot = hub_cache / "models--junnyu--roformer_v2_chinese_char_base" / "snapshots" / COMMIT
    (snapshot / "vocab.txt").unlink()
    assert "vocab.txt" in run_main(capsys, "junnyu/roformer_v2_chinese_char_base", str(tmp_path / "out"))


@pytest.mark.parametrize(
    ("change", "message"),
    [({"model_type": "bert"}, "model_type 'bert', not 'roformer'"), ({"norm_type": "batch_norm"}, "batch_norm")],
)
def test_a_config_roformer_hf_cannot_build_is_one_line(hub_cache, tmp_path, capsys, change, message):
    snapshot = hub_cache / "models--junnyu--roformer_v2_chinese_char_base" / "snapshots" / COMMIT
    config = json.loads((snapshot / "config.json").read_text())
    (snapshot / "config.json").write_text(json.dumps({**config, **change}))
    assert message in run_main(capsys, "junnyu/roformer_v2_chinese_char_base", str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_revision_of_a_local_folder_is_one_line(tmp_path, capsys):
    assert "--revision applies to Hub model ids" in run_main(capsys, str(tmp_path), "out", "--revision", "main")


# ----------------------------------------------------------------------------------------------------------------
# The tokenizer follows the vocabulary
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bert_vocab() -> Path:
    return BERT_VOCAB


def test_vocabularies_are_told_apart(roformer_vocab, bert_vocab):
    assert is_word_level(roformer_vocab.read_text(encoding="utf-8").split("\n"))
    assert not is_word_level(bert_vocab.read_text(encoding="utf-8").split("\n"))
    assert not is_word_level(char_vocab(120))


def transformers_checkpoint(folder: Path, vocab: Path, tokenizer_config: dict | None = None) -> Path:
    """A tiny transformers RoFormer MLM over `vocab`, saved as on the Hub, with a tokenizer_config.json if given."""
    torch.manual_seed(0)
    config = transformers.RoFormerConfig(
        vocab_size=len(vocab.read_text(encoding="utf-8").rstrip("\n").split("\n")),
        embedding_size=8,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=24,
        max_position_embeddings=1536,
    )
    transformers.RoFormerForMaskedLM(config).save_pretrained(folder)
    shutil.copy(vocab, folder / "vocab.txt")
    if tokenizer_config is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return folder


def test_a_char_vocab_gets_bert_tokenization_id_for_id(bert_vocab, tmp_path):
    source = transformers_checkpoint(tmp_path / "source", bert_vocab)
    output = convert(source, tmp_path / "converted")
    tokenizer = AutoTokenizer.from_pretrained(output)
    assert type(tokenizer) is BertTokenizer
    assert tokenizer.model_max_length == 1536  # no tokenizer_config.json: the config's max_position_embeddings
    texts = short_texts(2000)  # ChnSentiCorp reviews where the full data is present
    assert len(texts) == 2000
    assert tokenizer(texts)["input_ids"] == BertTokenizer(vocab=str(bert_vocab))(texts)["input_ids"]


def test_the_source_tokenizer_settings_are_kept(bert_vocab, tmp_path):
    source = transformers_checkpoint(
        tmp_path / "source", bert_vocab, {"do_lower_case": False, "model_max_length": 512}
    )
    tokenizer = AutoTokenizer.from_pretrained(convert(source, tmp_path / "converted"))
    assert tokenizer.model_max_length == 512
    assert tokenizer.tokenize("RoFormer") == BertTokenizer(vocab=str(bert_vocab), do_lower_case=False).tokenize(
        "RoFormer"
    )
    assert tokenizer.tokenize("RoFormer") != BertTokenizer(vocab=str(bert_vocab)).tokenize("RoFormer")


def test_a_word_vocab_gets_the_jieba_tokenizer(roformer_vocab, tmp_path):
    source = transformers_checkpoint(tmp_path / "source", roformer_vocab, {"model_max_length": 1536})
    tokenizer = AutoTokenizer.from_pretrained(convert(source, tmp_path / "converted"))
    assert type(tokenizer) is roformer_hf.RoFormerJiebaTokenizer
    assert tokenizer.model_max_length == 1536
    assert "借款" in tokenizer.tokenize("原告与被告签订借款合同")  # words, not characters
    texts = short_texts(200)
    expected = roformer_hf.RoFormerJiebaTokenizer(vocab_file=str(roformer_vocab))(texts)["input_ids"]
    assert tokenizer(texts)["input_ids"] == expected
