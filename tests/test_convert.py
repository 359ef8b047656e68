"""Conversion of original checkpoints: bert4keras names, transformers RoFormer folders, bert4keras TF checkpoints.

The converted models are compared with transformers' own RoFormer holding the same weights, an independent
implementation.
"""

import json
import shutil
import sys

import pytest
import torch
import transformers
from safetensors.torch import load_file
from transformers import AutoModelForMaskedLM
from transformers import RoFormerConfig as TransformersRoFormerConfig
from transformers import RoFormerForMaskedLM as TransformersRoFormerForMaskedLM

import roformer_hf
from roformer_hf.conversion.conversion_sources import (
    bert4keras_to_roformer_hf,
    bert4keras_to_state_dict,
    roformer_hf_to_bert4keras,
    state_dict_to_bert4keras,
)
from roformer_hf.conversion.convert import ConversionError, convert, main

TEXTS = ["今天天气很好，我们去公园散步。", "原告与被告签订借款合同，约定借款十万元。"]
NAME_PAIRS = [
    ("bert/embeddings/word_embeddings", "roformer.embeddings.word_embeddings.weight"),
    ("bert/embeddings/token_type_embeddings", "roformer.embeddings.token_type_embeddings.weight"),
    ("bert/embeddings/LayerNorm/gamma", "roformer.embeddings.LayerNorm.weight"),
    ("bert/embeddings/LayerNorm/beta", "roformer.embeddings.LayerNorm.bias"),
    ("bert/encoder/embedding_hidden_mapping_in/kernel", "roformer.embeddings_project.weight"),
    ("bert/encoder/embedding_hidden_mapping_in/bias", "roformer.embeddings_project.bias"),
    ("bert/encoder/layer_0/attention/self/query/kernel", "roformer.encoder.layer.0.attention.self.query.weight"),
    ("bert/encoder/layer_0/attention/self/key/bias", "roformer.encoder.layer.0.attention.self.key.bias"),
    ("bert/encoder/layer_0/attention/self/value/kernel", "roformer.encoder.layer.0.attention.self.value.weight"),
    ("bert/encoder/layer_1/attention/output/dense/kernel", "roformer.encoder.layer.1.attention.output.dense.weight"),
    (
        "bert/encoder/layer_11/attention/output/LayerNorm/gamma",
        "roformer.encoder.layer.11.attention.output.LayerNorm.weight",
    ),
    ("bert/encoder/layer_2/intermediate/dense/kernel", "roformer.encoder.layer.2.intermediate.dense.weight"),
    ("bert/encoder/layer_2/output/dense/bias", "roformer.encoder.layer.2.output.dense.bias"),
    ("bert/encoder/layer_23/output/LayerNorm/beta", "roformer.encoder.layer.23.output.LayerNorm.bias"),
    ("cls/predictions/transform/dense/kernel", "cls.predictions.transform.dense.weight"),
    ("cls/predictions/transform/LayerNorm/gamma", "cls.predictions.transform.LayerNorm.weight"),
    ("cls/predictions/output_bias", "cls.predictions.bias"),
]


def transformers_mlm(embedding_size: int = 16, seed: int = 0) -> TransformersRoFormerForMaskedLM:
    """A random transformers RoFormer MLM over the real 50k vocab, with embeddings narrower than the encoder."""
    torch.manual_seed(seed)
    config = TransformersRoFormerConfig(
        vocab_size=50000,
        embedding_size=embedding_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=48,
        max_position_embeddings=128,
        hidden_act="gelu",
    )
    model = TransformersRoFormerForMaskedLM(config).eval()
    # Non-zero biases and layer-norm parameters, so that a swapped gamma/beta or a lost bias shows.
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name:
                parameter.add_(torch.randn_like(parameter) * 0.1)
    return model


def logits_of(model, tokenizer) -> torch.Tensor:
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch).logits
    return logits * batch["attention_mask"][..., None]


# ----------------------------------------------------------------------------------------------------------------
# Names
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("bert4keras_name", "our_name"), NAME_PAIRS)
def test_names_map_both_ways(bert4keras_name, our_name):
    assert bert4keras_to_roformer_hf(bert4keras_name) == our_name
    assert roformer_hf_to_bert4keras(our_name) == bert4keras_name


@pytest.mark.parametrize(
    "bert4keras_name",
    [
        "bert/embeddings/position_embeddings",
        "bert/encoder/layer_0/attention/self/query/gamma",
        "bert/encoder/layer_0/attention/output/LayerNorm/kernel",
        "bert/encoder/layer_0/attention/self/rotary/kernel",
        "bert/encoder/layer_x/output/dense/kernel",
        "bert/pooler/dense/kernel",
        "cls/seq_relationship/output_weights",
        "global_step",
    ],
)
def test_foreign_bert4keras_names_have_no_counterpart(bert4keras_name):
    assert bert4keras_to_roformer_hf(bert4keras_name) is None


@pytest.mark.parametrize(
    "our_name",
    ["roformer.encoder.embed_positions.weight", "classifier.out_proj.weight", "cls.predictions.decoder.weight"],
)
def test_our_names_without_bert4keras_counterpart(our_name):
    assert roformer_hf_to_bert4keras(our_name) is None


def test_every_mlm_parameter_round_trips():
    config = roformer_hf.RoFormerConfig(
        vocab_size=100, embedding_size=16, hidden_size=32, num_hidden_layers=3, num_attention_heads=2
    )
    names = [name for name in roformer_hf.RoFormerForMaskedLM(config).state_dict() if "decoder" not in name]
    assert all(bert4keras_to_roformer_hf(roformer_hf_to_bert4keras(name)) == name for name in names)
    assert len({roformer_hf_to_bert4keras(name) for name in names}) == len(names)


def test_state_dicts_round_trip_with_transposed_kernels():
    state_dict = {k: v for k, v in transformers_mlm().state_dict().items() if "embed_positions" not in k}
    variables = state_dict_to_bert4keras(state_dict)
    kernel = variables["bert/encoder/layer_0/intermediate/dense/kernel"]
    assert kernel.shape == (32, 48)  # TF keeps (in, out)
    assert variables["bert/embeddings/word_embeddings"].shape == (50000, 16)
    assert "cls.predictions.decoder.weight" not in variables
    restored = bert4keras_to_state_dict(variables)
    assert restored.keys() == state_dict.keys() - {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    assert all(torch.equal(restored[name], state_dict[name]) for name in restored)


def test_task_heads_have_no_bert4keras_names():
    with pytest.raises(ConversionError, match="classifier"):
        state_dict_to_bert4keras({"classifier.dense.weight": torch.zeros(2, 2)})


# ----------------------------------------------------------------------------------------------------------------
# transformers "roformer" checkpoint folders
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def transformers_checkpoint(tmp_path_factory, roformer_vocab):
    """A transformers RoFormer MLM saved as the original checkpoints are on the Hub: config.json, weights, vocab.txt."""
    folder = tmp_path_factory.mktemp("transformers_roformer")
    model = transformers_mlm()
    model.save_pretrained(folder)
    shutil.copy(roformer_vocab, folder / "vocab.txt")
    return folder, model


@pytest.mark.parametrize("weights", ["model.safetensors", "pytorch_model.bin"])
def test_transformers_checkpoint_converts_with_identical_outputs(
    transformers_checkpoint, tokenizer, tmp_path, weights
):
    source, original = transformers_checkpoint
    if weights == "pytorch_model.bin":  # the format of the original checkpoints on the Hub
        source = shutil.copytree(source, tmp_path / "bin", ignore=shutil.ignore_patterns("*.safetensors"))
        torch.save(original.state_dict(), source / "pytorch_model.bin")
    output = convert(source, tmp_path / "converted")

    converted = AutoModelForMaskedLM.from_pretrained(output).eval()
    assert isinstance(converted, roformer_hf.RoFormerForMaskedLM)
    converted_tokenizer = roformer_hf.RoFormerJiebaTokenizer.from_pretrained(output)
    assert converted_tokenizer(TEXTS)["input_ids"] == tokenizer(TEXTS)["input_ids"]
    torch.testing.assert_close(logits_of(converted, tokenizer), logits_of(original, tokenizer), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "architecture",
    [
        "RoFormerModel",
        "RoFormerForSequenceClassification",
        "RoFormerForTokenClassification",
        "RoFormerForQuestionAnswering",
    ],
)
def test_transformers_heads_convert_with_identical_outputs(roformer_vocab, tokenizer, tmp_path, architecture):
    torch.manual_seed(0)
    config = TransformersRoFormerConfig(
        vocab_size=50000, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48
    )
    original = getattr(transformers, architecture)(config).eval()
    original.save_pretrained(tmp_path / "source")
    shutil.copy(roformer_vocab, tmp_path / "source" / "vocab.txt")
    output = convert(tmp_path / "source", tmp_path / "converted")
    assert json.loads((output / "config.json").read_text())["architectures"] == [architecture]
    converted = getattr(roformer_hf, architecture).from_pretrained(output).eval()
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected, actual = original(**batch), converted(**batch)
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], rtol=1e-5, atol=1e-5, msg=name)


def test_transformers_conversion_writes_a_roformer_hf_checkpoint(transformers_checkpoint, tmp_path):
    output = convert(transformers_checkpoint[0], tmp_path / "converted")
    config = json.loads((output / "config.json").read_text())
    assert config["model_type"] == "roformer_hf"
    assert config["embedding_size"] == 16
    assert config["architectures"] == ["RoFormerForMaskedLM"]
    assert "AutoModelForMaskedLM" in config["auto_map"]
    assert not any("embed_positions" in name for name in load_file(output / "model.safetensors"))
    assert (output / "vocab.txt").is_file()
    assert (output / "modeling.py").is_file()
    assert "from the original checkpoint `transformers_roformer" in (output / "README.md").read_text()
    assert not list(tmp_path.glob(".converted*")), "the staging folder is left behind"


def test_output_is_replaced_only_with_overwrite(transformers_checkpoint, tmp_path):
    output = tmp_path / "converted"
    convert(transformers_checkpoint[0], output)
    (output / "tokenizer.json").write_text("{}")  # as a char-level conversion writes: an earlier conversion's file
    with pytest.raises(ConversionError, match="--overwrite"):
        convert(transformers_checkpoint[0], output)
    convert(transformers_checkpoint[0], output, overwrite=True)
    assert not (output / "tokenizer.json").exists()
    assert (output / "model.safetensors").is_file()
    assert not list(tmp_path.glob(".converted*")), "the staging folder is left behind"


def user_files(folder) -> dict:
    """Every file under `folder` by its relative path, with its bytes."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


@pytest.mark.parametrize("with_earlier_conversion", [False, True])
def test_overwrite_keeps_a_users_other_files(transformers_checkpoint, tmp_path, monkeypatch, with_earlier_conversion):
    """`convert ../ckpt . --overwrite` inside a project, or into a converted checkpoint holding notes of the user,
    is refused naming the user's files, which stay byte-identical."""
    project = tmp_path / "project"
    if with_earlier_conversion:
        convert(transformers_checkpoint[0], project)
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("print('mine')\n")
    (project / "notes.md").write_text("# my notes\n")
    before = user_files(project)
    monkeypatch.chdir(project)
    with pytest.raises(ConversionError, match=r"holds files that no conversion wrote \(notes\.md, src\)"):
        convert(transformers_checkpoint[0], ".", overwrite=True)
    assert user_files(project) == before


def test_a_sharded_checkpoint_converts(transformers_checkpoint, tokenizer, tmp_path):
    _, original = transformers_checkpoint
    original.save_pretrained(tmp_path / "sharded", max_shard_size="500KB")
    shutil.copy(transformers_checkpoint[0] / "vocab.txt", tmp_path / "sharded" / "vocab.txt")
    assert (tmp_path / "sharded" / "model.safetensors.index.json").is_file()
    converted = AutoModelForMaskedLM.from_pretrained(convert(tmp_path / "sharded", tmp_path / "converted")).eval()
    torch.testing.assert_close(logits_of(converted, tokenizer), logits_of(original, tokenizer), rtol=1e-5, atol=1e-5)


def test_a_vocab_with_a_repeated_line_is_refused(transformers_checkpoint, tmp_path):
    source = shutil.copytree(transformers_checkpoint[0], tmp_path / "source")
    lines = (source / "vocab.txt").read_text(encoding="utf-8").split("\n")
    lines[40000] = lines[2766]  # the size is unchanged, so only the repeat tells
    (source / "vocab.txt").write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(ConversionError, match=f"line 40001 repeats the token '{lines[2766]}' of line 2767"):
        convert(source, tmp_path / "converted")
    assert not (tmp_path / "converted").exists()


def test_output_may_not_be_the_source(transformers_checkpoint):
    with pytest.raises(ConversionError, match="replace the source"):
        convert(transformers_checkpoint[0], transformers_checkpoint[0], overwrite=True)


def test_a_folder_that_is_not_a_checkpoint_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ConversionError, match=r"not a RoFormer checkpoint.*notes\.txt"):
        convert(tmp_path, tmp_path.parent / "out")
    with pytest.raises(ConversionError, match="not a folder"):
        convert(tmp_path / "missing", tmp_path.parent / "out")


def test_a_roformer_hf_checkpoint_is_not_converted_again(transformers_checkpoint, tmp_path):
    output = convert(transformers_checkpoint[0], tmp_path / "converted")
    with pytest.raises(ConversionError, match="roformer_hf checkpoint needs no conversion"):
        convert(output, tmp_path / "again")


def test_a_vocab_of_another_size_is_refused(transformers_checkpoint, tmp_path):
    source = shutil.copytree(transformers_checkpoint[0], tmp_path / "source")
    lines = (source / "vocab.txt").read_text(encoding="utf-8").splitlines()[:1000]
    (source / "vocab.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ConversionError, match="1000 entries but the model has 50000"):
        convert(source, tmp_path / "converted")


def test_a_config_that_does_not_fit_the_weights_is_refused(transformers_checkpoint, tmp_path):
    source = shutil.copytree(transformers_checkpoint[0], tmp_path / "source")
    config = json.loads((source / "config.json").read_text())
    (source / "config.json").write_text(json.dumps({**config, "intermediate_size": 64}))
    with pytest.raises(ConversionError, match=r"intermediate\.dense\.weight \(48, 32\) vs \(64, 32\)"):
        convert(source, tmp_path / "converted")
    assert not (tmp_path / "converted").exists()


def test_command_line_converts(transformers_checkpoint, tmp_path, capsys):
    assert main([str(transformers_checkpoint[0]), str(tmp_path / "converted")]) == 0
    assert "converted" in capsys.readouterr().out
    assert (tmp_path / "converted" / "model.safetensors").is_file()


def test_command_line_prints_one_line_on_error(tmp_path, capsys):
    assert main([str(tmp_path), str(tmp_path / "out")]) == 1
    error = capsys.readouterr().err
    assert error.startswith("error: ") and error.count("\n") == 1


# ----------------------------------------------------------------------------------------------------------------
# Original bert4keras TensorFlow checkpoints
# ----------------------------------------------------------------------------------------------------------------


def write_tf_checkpoint(folder, variables) -> None:
    """A name-based TF1 checkpoint, as bert4keras writes them (bert_model.ckpt.index / .data-*)."""
    tf = pytest.importorskip("tensorflow")
    folder.mkdir(parents=True, exist_ok=True)
    with tf.Graph().as_default():
        tf_variables = [tf.compat.v1.Variable(array, name=name) for name, array in variables.items()]
        saver = tf.compat.v1.train.Saver(tf_variables)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, str(folder / "bert_model.ckpt"), write_meta_graph=False)


@pytest.fixture(scope="module")
def bert4keras_checkpoint(tmp_path_factory, roformer_vocab):
    """A tiny original-style checkpoint (bert_config.json, bert_model.ckpt.*, vocab.txt) and the same model in
    transformers' RoFormer."""
    pytest.importorskip("tensorflow")
    folder = tmp_path_factory.mktemp("bert4keras") / "chinese_roformer_L-2_H-32_A-2"
    model = transformers_mlm(embedding_size=16, seed=1)
    state_dict = {k: v for k, v in model.state_dict().items() if "embed_positions" not in k}
    variables = state_dict_to_bert4keras(state_dict)
    # Variables of the originals that roformer_hf has no use for: pooler, NSP head, step counter.
    variables["bert/pooler/dense/kernel"] = torch.randn(32, 32).numpy()
    variables["cls/seq_relationship/output_weights"] = torch.randn(2, 32).numpy()
    variables["global_step"] = torch.tensor(7).numpy()
    write_tf_checkpoint(folder, variables)
    bert_config = {
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "embedding_size": 16,
        "hidden_size": 32,
        "initializer_range": 0.02,
        "intermediate_size": 48,
        "max_position_embeddings": 128,
        "num_attention_heads": 2,
        "num_hidden_layers": 2,
        "type_vocab_size": 2,
        "vocab_size": 50000,
        "directionality": "bidi",
    }
    (folder / "bert_config.json").write_text(json.dumps(bert_config))
    shutil.copy(roformer_vocab, folder / "vocab.txt")
    return folder, model


def test_bert4keras_checkpoint_converts_with_identical_outputs(bert4keras_checkpoint, tokenizer, tmp_path):
    source, original = bert4keras_checkpoint
    output = convert(source, tmp_path / "converted")
    converted = AutoModelForMaskedLM.from_pretrained(output).eval()
    assert converted.config.embedding_size == 16
    assert json.loads((output / "config.json").read_text())["auto_map"]
    torch.testing.assert_close(logits_of(converted, tokenizer), logits_of(original, tokenizer), rtol=1e-5, atol=1e-5)


def test_bert4keras_checkpoint_with_foreign_variables_is_refused(bert4keras_checkpoint, tmp_path):
    source = shutil.copytree(bert4keras_checkpoint[0], tmp_path / "bert")
    for path in source.glob("bert_model.ckpt*"):
        path.unlink()
    variables = state_dict_to_bert4keras(
        {k: v for k, v in bert4keras_checkpoint[1].state_dict().items() if "embed_positions" not in k}
    )
    variables["bert/embeddings/position_embeddings"] = torch.zeros(128, 16).numpy()
    variables["bert/encoder/layer_0/attention/self/relative/kernel"] = torch.zeros(32, 32).numpy()
    write_tf_checkpoint(source, variables)
    with pytest.raises(ConversionError) as error:
        convert(source, tmp_path / "converted")
    assert "bert/embeddings/position_embeddings" in str(error.value)
    assert "bert/encoder/layer_0/attention/self/relative/kernel" in str(error.value)
    assert not (tmp_path / "converted").exists()


def test_bert4keras_checkpoint_without_tensorflow_names_the_extra(tmp_path, roformer_vocab, monkeypatch):
    for name in ("bert_config.json", "bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001"):
        (tmp_path / name).write_text("{}")
    shutil.copy(roformer_vocab, tmp_path / "vocab.txt")
    monkeypatch.setitem(sys.modules, "tensorflow", None)
    with pytest.raises(ConversionError, match=r"roformer_hf\[tf\]"):
        convert(tmp_path, tmp_path.parent / "converted")
