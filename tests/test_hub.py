"""Checkpoints carry their code: they load with `trust_remote_code=True` where roformer_hf is not installed, and
`push_to_hub` uploads them with a model card."""

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import huggingface_hub
import pytest
import torch
import transformers
from conftest import HANG_GUARD_S, REPO_ROOT, TINY_WORD_VOCAB, fake_upload_folder

import roformer_hf
from roformer_hf.configuration import AUTO_MAP

TEXTS = ["今天天气很好，我们去公园散步。", "原告与被告签订借款合同，约定借款十万元。"]
# Every head and the Auto class that loads it.
AUTO_CLASSES = {
    "RoFormerModel": "AutoModel",
    "RoFormerForMaskedLM": "AutoModelForMaskedLM",
    "RoFormerForCausalLM": "AutoModelForCausalLM",
    "RoFormerForSequenceClassification": "AutoModelForSequenceClassification",
    "RoFormerForTokenClassification": "AutoModelForTokenClassification",
    "RoFormerForQuestionAnswering": "AutoModelForQuestionAnswering",
    "RoFormerForMultipleChoice": "AutoModelForMultipleChoice",
}
# The Auto classes a pretrained MLM checkpoint is loaded with, and the settings each needs.
MLM_LOADS = {auto_class: {} for auto_class in AUTO_MAP if auto_class != "AutoConfig"}
MLM_LOADS["AutoModelForCausalLM"] = {"is_decoder": True}  # a causal LM from a bidirectional MLM: the user says so
# The variants saved beside the heads: name -> (class, Auto class, settings of the tiny config).
VARIANTS = {
    "RoFormer-V2": (
        "RoFormerForMaskedLM",
        "AutoModelForMaskedLM",
        {"norm_type": "rms_norm", "use_bias": False, "hidden_act": "relu", "embedding_size": 32},  # V2's tied head
    ),
    "RoFormer-Sim": ("RoFormerForCausalLM", "AutoModelForCausalLM", {"is_decoder": True, "decoder_mask": "unilm"}),
}

# Runs in a fresh interpreter in which `import roformer_hf` (and `import rjieba`) fails: loads every checkpoint with
# the Auto classes and trust_remote_code=True, and saves the ids, the outputs and the module of every class it got.
CHILD = """
import sys

sys.modules["roformer_hf"] = None  # as if roformer_hf were not installed
sys.modules["rjieba"] = None  # optional too: the tokenizer falls back on jieba, which must be installed
try:
    import roformer_hf
except ImportError:
    pass
else:
    raise SystemExit("roformer_hf is importable in the child process")

import json
from pathlib import Path

import torch
import transformers

folders, texts, result_file = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
results = {}
for architecture, (folder, auto_class) in folders.items():
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    model = getattr(transformers, auto_class).from_pretrained(folder, trust_remote_code=True).eval()
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    inputs = dict(batch)
    if architecture == "RoFormerForMultipleChoice":  # every text a choice of one example
        inputs = {name: tensor[None] for name, tensor in inputs.items()}
    with torch.no_grad():
        output = model(**inputs)[0]
    results[architecture] = {
        "input_ids": batch["input_ids"],
        "output": output,
        "model_module": type(model).__module__,
        "tokenizer_module": type(tokenizer).__module__,
        "config_module": type(model.config).__module__,
    }

# Every Auto class and the feature-extraction pipeline on the one pretrained MLM folder (the usual "pretrained MLM ->
# fine-tune another head" path): the new heads initialise at random, the encoder they share is the saved one.
mlm_folder = folders["RoFormerForMaskedLM"][0]
tokenizer = transformers.AutoTokenizer.from_pretrained(mlm_folder, trust_remote_code=True)
batch = tokenizer(texts, padding=True, return_tensors="pt")
for auto_class, settings in json.loads(sys.argv[4]).items():
    model = getattr(transformers, auto_class).from_pretrained(mlm_folder, trust_remote_code=True, **settings).eval()
    with torch.no_grad():
        last_hidden_state = model.base_model(**batch).last_hidden_state
    results[auto_class] = {"class": f"{type(model).__module__}.{type(model).__name__}", "encoded": last_hidden_state}
extractor = transformers.pipeline("feature-extraction", model=mlm_folder, trust_remote_code=True)
results["feature-extraction"] = {
    "class": f"{type(extractor.model).__module__}.{type(extractor.model).__name__}",
    "tokenizer": type(extractor.tokenizer).__module__,
    "features": [torch.tensor(features[0]) for features in extractor(texts)],
}

# Saving where roformer_hf is missing: the checkpoint's own code saves it, without the publishing modules (the
# sentence-transformers files of a pooled model are written only where roformer_hf is installed).
model = transformers.AutoModel.from_pretrained(mlm_folder, trust_remote_code=True)
model.config.add_pooling_layer = True
model.save_pretrained("resaved")
results["resaved"] = sorted(path.name for path in Path("resaved").iterdir())
torch.save(results, result_file)
"""


def model_inputs(architecture: str, batch) -> dict:
    """The inputs of a head, as the child makes them: multiple choice reads every text as a choice of one example."""
    if architecture == "RoFormerForMultipleChoice":
        return {name: tensor[None] for name, tensor in batch.items()}
    return dict(batch)


def tiny_config(architecture: str, **settings) -> roformer_hf.RoFormerConfig:
    settings = {**TINY_WORD_VOCAB, "is_decoder": architecture == "RoFormerForCausalLM", **settings}
    return roformer_hf.RoFormerConfig(id2label={0: "civil", 1: "criminal"}, **settings)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, tokenizer):
    """Every head and every variant of `VARIANTS` saved with the tokenizer, and its output on TEXTS."""
    root = tmp_path_factory.mktemp("checkpoints")
    saved = {}
    builds = {architecture: (architecture, {}) for architecture in AUTO_CLASSES}
    builds |= {name: (architecture, settings) for name, (architecture, _, settings) in VARIANTS.items()}
    for name, (architecture, settings) in builds.items():
        torch.manual_seed(0)
        model = getattr(roformer_hf, architecture)(tiny_config(architecture, **settings)).eval()
        folder = root / name
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
        with torch.no_grad():
            output = model(**model_inputs(architecture, batch))[0]
        saved[name] = (folder, batch["input_ids"], output)
    return saved


def relative_imports(module_file: Path) -> set[str]:
    """The modules that a module imports relatively (`from .rope import ...`), followed recursively."""
    found, pending = set(), [module_file]
    while pending:
        text = pending.pop().read_text(encoding="utf-8")
        for name in re.findall(r"^\s*from \.(\w+) import", text, flags=re.MULTILINE):
            if name not in found:
                found.add(name)
                pending.append(module_file.parent / f"{name}.py")
    return found


@pytest.mark.parametrize("architecture", list(AUTO_CLASSES))
def test_save_pretrained_writes_auto_map_and_code(checkpoints, architecture):
    folder = checkpoints[architecture][0]
    auto_map = json.loads((folder / "config.json").read_text())["auto_map"]
    # Every Auto class of roformer_hf, not only the saved head's: a pretrained MLM loads as a classifier.
    assert auto_map == {"AutoConfig": "configuration.RoFormerConfig"} | {
        auto_class: f"modeling.{head}" for head, auto_class in AUTO_CLASSES.items()
    }
    package = Path(roformer_hf.__file__).parent
    needed = {"modeling", "configuration"} | relative_imports(package / "modeling.py")
    assert {f"{name}.py" for name in needed} <= {path.name for path in folder.glob("*.py")}


# What a checkpoint's model code is: the model's two modules, as on the Hub (issue 50); nothing about the machine,
# another project's layout or publishing.
MODEL_CODE_FILES = {"configuration.py", "modeling.py"}


# The tokenizer's code, which the fixture's folders carry too (a tokenizer is saved beside each model).
TOKENIZER_CODE_FILES = {"tokenization.py"}


@pytest.mark.parametrize("saved", ["RoFormerForMaskedLM", "RoFormerForSequenceClassification", *VARIANTS])
def test_a_checkpoint_carries_the_model_code_only(checkpoints, saved):
    """The model side of a saved folder is `configuration.py` and `modeling.py`, nothing else (the rest is the
    tokenizer's), and modeling.py imports no module of the package but the configuration."""
    folder = checkpoints[saved][0]
    code_files = {path.name for path in folder.glob("*.py")}
    assert code_files - TOKENIZER_CODE_FILES == MODEL_CODE_FILES
    package = Path(roformer_hf.__file__).parent
    assert relative_imports(package / "modeling.py") == {"configuration"}


# Earlier layouts of the model's code, each the last commit before it changed, and the code files its checkpoints
# carry: f5f3415's eleven (before modeling.py took in the rest), 68c410c's ten, f2676ad's nine (before dropout.py and
# losses.py).
F2676AD_MODEL_CODE_FILES = (
    "attention_kernels.py",
    "compat.py",
    "configuration.py",
    "input_checks.py",
    "masks.py",
    "modeling.py",
    "norms.py",
    "pretrained.py",
    "rope.py",
)
EARLIER_LAYOUTS = {
    "f5f3415": (*F2676AD_MODEL_CODE_FILES, "dropout.py", "losses.py"),
    "68c410c": (*sorted(set(F2676AD_MODEL_CODE_FILES) - {"norms.py"}), "cpu_arithmetic.py", "losses.py"),
    "f2676ad": F2676AD_MODEL_CODE_FILES,
}

EARLIER_CHILD = """
import sys

sys.modules["roformer_hf"] = None  # as if roformer_hf were not installed
import torch
import transformers

model = transformers.AutoModelForMaskedLM.from_pretrained(sys.argv[1], trust_remote_code=True).eval()
with torch.no_grad():
    logits = model(input_ids=torch.load(sys.argv[2])).logits
torch.save({"module": type(model).__module__, "logits": logits}, sys.argv[3])
"""


@pytest.mark.parametrize("commit", sorted(EARLIER_LAYOUTS))
def test_a_checkpoint_carrying_the_earlier_code_loads_to_the_same_logits(tmp_path, commit):
    """A checkpoint saved before the code files changed (it carries the 11 model files of f5f3415, the 10 of 68c410c,
    or the 9 of f2676ad) loads, with its own code where roformer_hf is missing and with roformer_hf's classes where it is installed, to the
    same logits."""
    sources = {}
    for name in EARLIER_LAYOUTS[commit]:
        command = ["git", "show", f"{commit}:roformer_hf/{name}"]
        completed = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            pytest.skip(f"commit {commit} is not in this clone's history (a shallow clone?)")
        sources[name] = completed.stdout
    torch.manual_seed(0)
    model = roformer_hf.RoFormerForMaskedLM(tiny_config("RoFormerForMaskedLM")).eval()
    folder = tmp_path / "earlier"
    model.save_pretrained(folder)
    for path in folder.glob("*.py"):
        path.unlink()
    for name, source in sources.items():
        (folder / name).write_text(source, encoding="utf-8")
    input_ids = torch.randint(5, TINY_WORD_VOCAB["vocab_size"], (2, 9))
    torch.save(input_ids, tmp_path / "ids.pt")
    with torch.no_grad():
        expected = model(input_ids=input_ids).logits
        registered = transformers.AutoModelForMaskedLM.from_pretrained(folder).eval()(input_ids=input_ids).logits
    (tmp_path / "child.py").write_text(EARLIER_CHILD)
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    environment["HF_MODULES_CACHE"] = str(tmp_path / "modules")
    command = [sys.executable, "child.py", str(folder), "ids.pt", "out.pt"]
    process = subprocess.run(
        command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert process.returncode == 0, process.stderr[-3000:]
    remote = torch.load(tmp_path / "out.pt")
    assert remote["module"].startswith("transformers_modules.")
    torch.testing.assert_close(remote["logits"], expected, rtol=0, atol=1e-5)
    torch.testing.assert_close(registered, expected, rtol=0, atol=1e-5)


def test_tokenizer_save_pretrained_writes_auto_map_and_code(checkpoints):
    folder = checkpoints["RoFormerModel"][0]
    auto_map = json.loads((folder / "tokenizer_config.json").read_text())["auto_map"]
    assert auto_map["AutoTokenizer"][0] == "tokenization.RoFormerJiebaTokenizer"
    package = Path(roformer_hf.__file__).parent
    needed = {"tokenization"} | relative_imports(package / "tokenization.py")
    assert {f"{name}.py" for name in needed} <= {path.name for path in folder.glob("*.py")}


@pytest.fixture(scope="module")
def remote_code_results(checkpoints, tmp_path_factory):
    """What the child process loaded (see CHILD) with roformer_hf missing."""
    tmp_path = tmp_path_factory.mktemp("child")
    (tmp_path / "child.py").write_text(CHILD)
    auto_classes = AUTO_CLASSES | {name: auto_class for name, (_, auto_class, _) in VARIANTS.items()}
    folders = {name: (str(folder), auto_classes[name]) for name, (folder, _, _) in checkpoints.items()}
    result_file = tmp_path / "results.pt"
    environment = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "HF_HUB_OFFLINE": "1",
        "HF_MODULES_CACHE": str(tmp_path / "modules"),
        "HF_HOME": str(tmp_path / "hf_home"),
    }
    texts = json.dumps(TEXTS, ensure_ascii=False)
    command = [sys.executable, "child.py", json.dumps(folders), texts, "results.pt", json.dumps(MLM_LOADS)]
    process = subprocess.run(
        command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert process.returncode == 0, process.stderr[-3000:]
    return torch.load(result_file, weights_only=False)


def test_checkpoints_load_with_remote_code_where_roformer_hf_is_missing(checkpoints, remote_code_results):
    results = remote_code_results
    for architecture, (_, input_ids, output) in checkpoints.items():
        result = results[architecture]
        for kind in ("model_module", "tokenizer_module", "config_module"):
            assert result[kind].startswith("transformers_modules."), (architecture, kind, result[kind])
        assert torch.equal(result["input_ids"], input_ids), architecture
        torch.testing.assert_close(result["output"], output, rtol=1e-5, atol=1e-5, msg=architecture)


@pytest.mark.parametrize("saved", ["RoFormerForSequenceClassification", *VARIANTS])
def test_checkpoints_load_with_roformer_hf_s_classes_where_it_is_installed(checkpoints, tokenizer, saved):
    """The other way: with roformer_hf imported, the Auto class (no trust_remote_code) gives roformer_hf's own class,
    with the saved model's output."""
    folder, _, output = checkpoints[saved]
    auto_class = (AUTO_CLASSES | {name: auto_class for name, (_, auto_class, _) in VARIANTS.items()})[saved]
    model = getattr(transformers, auto_class).from_pretrained(folder).eval()
    assert type(model).__module__ == "roformer_hf.modeling"
    with torch.no_grad():
        loaded_output = model(**tokenizer(TEXTS, padding=True, return_tensors="pt"))[0]
    torch.testing.assert_close(loaded_output, output, rtol=1e-5, atol=1e-5)


def mlm_encoded(checkpoints, tokenizer, **settings) -> tuple[torch.Tensor, torch.Tensor]:
    """The last hidden states of the saved MLM's encoder on TEXTS, in the saving process, and the attention mask."""
    model = roformer_hf.RoFormerModel.from_pretrained(checkpoints["RoFormerForMaskedLM"][0], **settings).eval()
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(**batch).last_hidden_state, batch["attention_mask"]


@pytest.mark.parametrize("auto_class", list(MLM_LOADS))
def test_every_auto_class_loads_a_saved_mlm_with_remote_code(remote_code_results, checkpoints, tokenizer, auto_class):
    result = remote_code_results[auto_class]
    expected_class = AUTO_MAP[auto_class].split(".")[1]
    assert result["class"].startswith("transformers_modules.") and result["class"].endswith(f".{expected_class}")
    expected, _ = mlm_encoded(checkpoints, tokenizer, **MLM_LOADS[auto_class])
    torch.testing.assert_close(result["encoded"], expected, rtol=1e-5, atol=1e-5)


def test_feature_extraction_pipeline_loads_a_saved_mlm_with_remote_code(remote_code_results, checkpoints, tokenizer):
    result = remote_code_results["feature-extraction"]
    assert result["class"].startswith("transformers_modules.") and result["class"].endswith(".RoFormerModel")
    assert result["tokenizer"].startswith("transformers_modules.")
    last_hidden_state, attention_mask = mlm_encoded(checkpoints, tokenizer)
    for features, encoded, mask in zip(result["features"], last_hidden_state, attention_mask, strict=True):
        torch.testing.assert_close(features, encoded[mask.bool()], rtol=1e-5, atol=1e-5)


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    """Stands in for the Hub (no network): `uploads` records every upload, `uploaded` holds a copy of the folder."""
    uploads = []

    def create_repo(api, repo_id, **kwargs):
        return huggingface_hub.RepoUrl(f"https://huggingface.co/{repo_id}")

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", create_repo)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", fake_upload_folder(uploads, tmp_path / "hub"))
    return SimpleNamespace(uploads=uploads, uploaded=tmp_path / "hub" / "upload-0")


def test_push_to_hub_uploads_a_model_card(fake_hub):
    from roformer_hf.hub.model_card import TrainingSummary

    model = roformer_hf.RoFormerForSequenceClassification(tiny_config("RoFormerForSequenceClassification"))
    summary = TrainingSummary(
        script="run_classification.py",
        task="text classification (civil / criminal)",
        datasets=["CAIL2019 court facts (data/cail_sample.jsonl)"],
        hyperparameters={"learning_rate": 5e-5},
        results={"eval_accuracy": 0.875},
        command="python run_classification.py --num_train_epochs 1",
    )
    assert model.push_to_hub("someone/roformer-cail", training_summary=summary, commit_message="first") == "commit"
    uploaded = fake_hub.uploaded
    card = (uploaded / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\n")
    assert "pipeline_tag: text-classification" in card
    assert (
        'AutoModelForSequenceClassification.from_pretrained("someone/roformer-cail", trust_remote_code=True)' in card
    )
    assert "run_classification.py" in card and "0.8750" in card and "data/cail_sample.jsonl" in card
    assert "`civil`" in card and "`criminal`" in card
    assert json.loads((uploaded / "config.json").read_text())["auto_map"]
    assert (uploaded / "model.safetensors").is_file() and (uploaded / "modeling.py").is_file()
    [upload] = fake_hub.uploads
    assert upload.repo_id == "someone/roformer-cail" and upload.options["commit_message"] == "first"


def test_model_card_without_training_says_so(tmp_path):
    from roformer_hf.hub.model_card import write_model_card

    config = tiny_config("RoFormerForMaskedLM")
    config.architectures = ["RoFormerForMaskedLM"]
    card = write_model_card(tmp_path, config=config, base_model="junnyu/roformer_chinese_base").read_text()
    assert "pipeline_tag: fill-mask" in card and "base_model: junnyu/roformer_chinese_base" in card
    assert "records no training run" in card
    assert "model = AutoModelForMaskedLM.from_pretrained(" in card
    base_folder = tmp_path / "base"  # a local checkpoint without a card
    for folder in (base_folder, tmp_path / "new", tmp_path / "newer"):
        folder.mkdir()
    local_card = write_model_card(tmp_path / "new", config=config, base_model=str(base_folder)).read_text()
    assert "base_model:" not in local_card  # the Hub's metadata wants model ids
    assert (
        "Started from `base`, a local checkpoint" in local_card and str(tmp_path) not in local_card
    )  # no local folders
    # a local checkpoint whose card names its Hub model: the new card names that one
    from_card = write_model_card(tmp_path / "newer", config=config, base_model=str(tmp_path)).read_text()
    assert "base_model: junnyu/roformer_chinese_base" in from_card
    assert "| layers | 2 |" in card and "50,000" in card


def test_model_card_states_what_the_run_did(tmp_path):
    """Lengths and steps of the run (not the config's max_position_embeddings), only the option that set the length
    of training, and data and command without the folders of the machine that trained the model."""
    from transformers import TrainingArguments

    from roformer_hf.hub.model_card import TrainingSummary, model_card

    config = tiny_config("RoFormerForMaskedLM")
    trainer = SimpleNamespace(
        args=TrainingArguments(str(tmp_path), max_steps=300, report_to="none"), state=SimpleNamespace(global_step=300)
    )
    corpus = tmp_path / "corpus.txt"
    summary = TrainingSummary.from_trainer(
        trainer,
        script="run_mlm.py",
        task="masked language modelling",
        datasets=[str(corpus), "someone/news-corpus"],
        trained_lengths=[64, 1024],
        command=f"python run_mlm.py --train_file {corpus} --output_dir '{tmp_path / 'my model'}'",
    )
    card = str(model_card(config, training_summary=summary))
    assert "| trained length | 64 then 1,024 tokens (by run_mlm.py" in card
    assert "300 optimizer steps on inputs of 64 then 1,024 tokens." in card
    assert "| max_steps | 300 |" in card and "num_train_epochs" not in card
    assert "- corpus.txt" in card and "- someone/news-corpus" in card
    assert "python run_mlm.py --train_file corpus.txt --output_dir 'my model'" in card
    assert str(tmp_path) not in card and str(config.max_position_embeddings) not in card
    by_epochs = TrainingSummary.from_trainer(
        SimpleNamespace(
            args=TrainingArguments(str(tmp_path), num_train_epochs=2), state=SimpleNamespace(global_step=9)
        ),
        script="run_classification.py",
        task="text classification",
        datasets=["data/cail_sample.jsonl"],
    )
    assert by_epochs.hyperparameters["num_train_epochs"] == 2 and "max_steps" not in by_epochs.hyperparameters
    assert by_epochs.hyperparameters["mixed_precision"] == "no"  # float32; "bf16" after --bf16 (test_run_mlm.py)
    assert by_epochs.hyperparameters["cpu_threads"] == torch.get_num_threads()  # the numbers depend on them
    untrained = str(model_card(config))
    assert f"| max_position_embeddings | {config.max_position_embeddings} " in untrained
    assert "trained length" not in untrained


def test_a_model_with_remote_code_saves_where_roformer_hf_is_missing(remote_code_results):
    saved = remote_code_results["resaved"]
    assert {"config.json", "model.safetensors"} <= set(saved)  # and the code, on newer transformers
    assert (
        "modules.json" not in saved and "model_card.py" not in saved and "sentence_transformers_files.py" not in saved
    )
