"""What `--push_to_hub` publishes, as a stranger finds it: a fine-tuning run of run_classification.py from an MLM
checkpoint, its upload captured at `huggingface_hub`'s commit call (the Hub is out of reach), holds the model, code,
tokenizer, card and metrics and nothing private to the run; its card is one the Hub reads (`ModelCard.load`); and
the captured folder loads where roformer_hf is not installed, with `trust_remote_code=True`, to the same logits."""

import json
import subprocess
import sys
from fnmatch import fnmatchcase
from types import SimpleNamespace

import huggingface_hub
import pytest
import torch
from conftest import HANG_GUARD_S, TINY_WORD_VOCAB, fake_upload_folder
from huggingface_hub import ModelCard
from huggingface_hub.repocard_data import model_index_to_eval_results
from test_run_classification import tiny_run, write_jsonl

import roformer_hf
from roformer_hf.hub.model_card import TrainingSummary, model_card, without_local_path, write_model_card
from roformer_hf.training.machine.cpu_precision import evaluation_precision

TEXTS = ["原告与被告签订借款合同，约定借款十万元。", "被告人盗窃财物，数额较大。"]
# What the captured upload holds, besides the code (*.py) and the weights.
SHARED_FILES = {
    *("config.json", "vocab.txt", "tokenizer_config.json", "README.md"),
    *("all_results.json", "train_results.json", "eval_results.json", "test_results.json"),
}
# Files of the user's left in the output folder before the run, which an upload never sends (and one left after it,
# named as the results are, SWEEP_RESULTS).
STRAY_FILES = {"notes.py": "# what to try next\n", "my_notes_with_token.py": 'HF_TOKEN = "hf_not_a_real_token"\n'}
SWEEP_RESULTS = "sweep_results.json"


@pytest.fixture(scope="module")
def pushed_run(tmp_path_factory, tokenizer, roformer_vocab, cail_rows):
    """A tiny MLM saved with a card (a license, the Hub model it came from), fine-tuned into a classifier by
    run_classification.py with --push_to_hub; returns the output folder, the captured upload and the metrics."""
    root = tmp_path_factory.mktemp("push")
    mlm_folder = root / "mlm"
    torch.manual_seed(0)
    config = roformer_hf.RoFormerConfig(**TINY_WORD_VOCAB | {"intermediate_size": 64})  # tiny_run's TINY_MODEL
    mlm = roformer_hf.RoFormerForMaskedLM(config)
    mlm.save_pretrained(mlm_folder)
    tokenizer.save_pretrained(mlm_folder)
    write_model_card(mlm_folder, config=mlm.config, base_model="junnyu/roformer_chinese_base", license="apache-2.0")
    rows = [{"text": row["text"], "label": row["label"]} for row in cail_rows]
    train = write_jsonl(root / "train.jsonl", rows[:8] + rows[30:38])
    test = write_jsonl(root / "test.jsonl", rows[10:14] + rows[40:44])
    uploads = []

    def create_repo(api, repo_id, **kwargs):
        return huggingface_hub.RepoUrl(f"https://huggingface.co/someone/{repo_id.split('/')[-1]}")

    def create_commit(api, **kwargs):
        raise AssertionError(f"create_commit called with {kwargs}: an upload is upload_folder's one commit")

    output_dir = root / "cail-classifier"
    output_dir.mkdir()
    for name, content in STRAY_FILES.items():  # the user's, beside the model: they stay here
        (output_dir / name).write_text(content, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # the Hub stood in for, as in reach
        patch.setattr(huggingface_hub.HfApi, "whoami", lambda api, **kwargs: {"name": "someone"})
        patch.setattr(huggingface_hub.HfApi, "create_repo", create_repo)
        patch.setattr(huggingface_hub.HfApi, "create_commit", create_commit)
        patch.setattr(huggingface_hub.HfApi, "upload_folder", fake_upload_folder(uploads, root / "hub"))
        metrics = tiny_run(
            roformer_vocab,
            output_dir,
            *("--model_name_or_path", str(mlm_folder), "--tokenizer_name", str(mlm_folder)),
            *("--train_file", str(train), "--validation_file", str(test), "--test_file", str(test)),
            *("--do_train", "--do_eval", "--do_predict", "--push_to_hub", "--save_strategy", "steps"),
            *("--save_steps", "2", "--max_steps", "3"),
        )
    commits = [(upload.repo_id, upload.options["commit_message"]) for upload in uploads]
    captured = uploads[0].copied
    return SimpleNamespace(output_dir=output_dir, captured=captured, commits=commits, metrics=metrics)


def test_the_upload_is_the_model_and_its_results_without_the_run_private_files(pushed_run):
    assert pushed_run.commits == [("someone/cail-classifier", "End of training")]  # one commit, the script's
    uploaded = {path.name for path in pushed_run.captured.iterdir()}
    code = {name for name in uploaded if name.endswith(".py")}
    assert {"modeling.py", "configuration.py", "tokenization.py", "text_classification_pipeline.py"} <= code
    assert uploaded - code == SHARED_FILES | {"model.safetensors"}
    left_behind = {path.name for path in pushed_run.output_dir.iterdir()} - uploaded
    assert {"predictions.jsonl", "confusion_matrix_eval.png", "confusion_matrix_test.png"} <= left_behind
    assert {"checkpoint-2", "checkpoint-3"} <= left_behind
    assert set(STRAY_FILES) <= left_behind  # the user's notes (one with a token) stay on the machine
    assert all(
        (pushed_run.output_dir / name).read_text(encoding="utf-8") == text for name, text in STRAY_FILES.items()
    )


def test_push_folder_to_hub_sends_a_saved_folder_as_the_script_does(pushed_run, monkeypatch, tmp_path):
    from roformer_hf.hub.hub_upload import RUN_FILES, push_folder_to_hub

    uploads = []
    monkeypatch.setattr(
        huggingface_hub.HfApi,
        "create_repo",
        lambda api, repo_id, **kwargs: huggingface_hub.RepoUrl(f"https://huggingface.co/{repo_id}"),
    )
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", fake_upload_folder(uploads, tmp_path))
    (pushed_run.output_dir / SWEEP_RESULTS).write_text('{"lr_1e-3": 0.5}')
    push_folder_to_hub(pushed_run.output_dir, "someone/again")
    push_folder_to_hub(pushed_run.output_dir, "someone/again", include_run_files=True)
    assert [upload.repo_id for upload in uploads] == ["someone/again"] * 2
    sent, with_run_files = (set(upload.sent) for upload in uploads)
    assert sent == {path.name for path in pushed_run.captured.iterdir()}
    assert with_run_files - sent == {"predictions.jsonl", "confusion_matrix_eval.png", "confusion_matrix_test.png"} | {
        "trainer_state.json"
    }
    assert all(any(fnmatchcase(name, pattern) for pattern in RUN_FILES) for name in with_run_files - sent)
    assert not (set(STRAY_FILES) | {SWEEP_RESULTS}) & with_run_files
    with pytest.raises(ValueError, match=r"holds no config\.json, so it is not a saved model"):
        push_folder_to_hub(pushed_run.output_dir.parent, "someone/again")  # the folder above it, by mistake
    assert len(uploads) == 2


def test_the_card_is_one_the_hub_reads(pushed_run):
    card = ModelCard.load(pushed_run.captured / "README.md")
    data = card.data
    assert data.license == "apache-2.0"  # from the card of the MLM the run started from
    assert data.base_model == "junnyu/roformer_chinese_base"  # the Hub model that card names
    assert data.language == "zh" and data.pipeline_tag == "text-classification"
    # local data files: no model-index (its dataset ids would read as Hub ids); the results are in the text
    assert data.metrics is None and data.eval_results is None and data.datasets is None
    test_results = json.loads((pushed_run.captured / "test_results.json").read_text())
    body = card.text
    assert (
        body.startswith("\n# cail-classifier\n") or "# cail-classifier\n" in body
    )  # the model's name, not "RoFormer"
    assert "- `eval_` (validation): `test.jsonl`" in body and "- `test_` (test): `test.jsonl`" in body
    assert f"| test_accuracy | {test_results['test_accuracy']:.4f} |" in body  # the test metrics, in the text too
    assert "Results (computed in float32):" in body and test_results["test_precision"] == "float32"
    assert 'from_pretrained("someone/cail-classifier", trust_remote_code=True)' in body


def test_a_card_reads_back_every_field(tmp_path):
    """Results of a Hub dataset's splits `dev` and `test` in configuration `court`, read back as the Hub reads them."""
    config = roformer_hf.RoFormerConfig(**TINY_WORD_VOCAB, id2label={0: "civil", 1: "criminal"})
    config.architectures = ["RoFormerForSequenceClassification"]
    summary = TrainingSummary(
        script="run_classification.py",
        task="text classification",
        datasets=["someone/cail2019"],
        dataset_name="someone/cail2019",
        dataset_config="court",
        split_names={"eval": "dev", "test": "test"},
        precision="bf16 autocast",
        results={"eval_accuracy": 0.75, "eval_loss": 0.5, "test_accuracy": 0.625, "test_f1_macro": 0.6},
    )
    card = model_card(
        config,
        repo_id="someone/cail",
        training_summary=summary,
        base_model="junnyu/roformer_chinese_base",
        license="mit",
    )
    card.save(tmp_path / "README.md")
    data = ModelCard.load(tmp_path / "README.md").data
    assert (data.license, data.base_model, data.datasets) == (
        "mit",
        "junnyu/roformer_chinese_base",
        ["someone/cail2019"],
    )
    assert data.language == "zh" and data.metrics == ["accuracy", "f1"]
    model_name, results = model_index_to_eval_results(data.to_dict()["model-index"])
    read_back = [(r.dataset_type, r.dataset_config, r.dataset_split, r.metric_name, r.metric_value) for r in results]
    assert model_name == "cail" and read_back == [
        ("someone/cail2019", "court", "dev", "accuracy", 0.75),  # the split's own name; the loss is no task metric
        ("someone/cail2019", "court", "test", "accuracy", 0.625),
        ("someone/cail2019", "court", "test", "f1_macro", 0.6),
    ]
    assert "Results (computed in bf16 autocast):" in card.text
    assert "- `eval_` (validation): the split `dev` of `someone/cail2019` (configuration `court`)" in card.text


def test_a_local_dataset_folder_stays_out_of_the_metadata(tmp_path):
    """--dataset_name may be a local folder: the Hub's metadata names no folder of this machine, as a Hub id or
    otherwise; the text says what the data is, and what the held-out validation text is."""
    config = roformer_hf.RoFormerConfig(**TINY_WORD_VOCAB)
    config.architectures = ["RoFormerForMaskedLM"]
    folder = tmp_path / "news_corpus"
    folder.mkdir()
    summary = TrainingSummary(
        script="run_mlm.py",
        task="masked language modelling",
        datasets=[str(folder)],
        dataset_name=str(folder),
        evaluation_data={"eval": "the last 5% of the training text (in file order), held out: not trained on"},
    )
    summary.results = {"eval_accuracy": 0.25, "perplexity": 40.0}
    card = model_card(config, training_summary=summary, base_model=str(folder), model_name="news-mlm")
    card.save(tmp_path / "README.md")
    data = ModelCard.load(tmp_path / "README.md").data
    assert data.datasets is None and data.eval_results is None and str(tmp_path) not in str(card)
    assert data.pipeline_tag == "fill-mask" and data.license is None and data.base_model is None
    assert "# news-mlm\n" in card.text and "- news_corpus" in card.text
    assert "- `eval_` (validation): the last 5% of the training text (in file order), held out" in card.text
    assert "Started from `news_corpus`, a local checkpoint" in card.text and "Base model:" not in card.text


def test_folders_of_the_hub_cache_are_named_by_their_hub_ids(tmp_path):
    """A base model and a dataset as `hf download` leaves them (`models--owner--name/snapshots/<commit>`) are those
    Hub repositories: named by their ids in the metadata and the text, the results under the real split and
    configuration; names with Chinese text, quotes, colons and a newline keep the front matter valid."""
    config = roformer_hf.RoFormerConfig(**TINY_WORD_VOCAB)
    config.architectures = ["RoFormerForSequenceClassification"]
    config.id2label, config.label2id = {0: '民事: "civil"', 1: "刑事"}, {'民事: "civil"': 0, "刑事": 1}
    base = tmp_path / "hub" / "models--junnyu--roformer_chinese_base" / "snapshots" / "0123abcd"
    data = tmp_path / "hub" / "datasets--someone--cail_small" / "snapshots" / "4567ef01"
    base.mkdir(parents=True)
    data.mkdir(parents=True)
    summary = TrainingSummary(
        script="run_classification.py",
        task="text classification",
        datasets=[str(data), '法律文书: "CAIL" 样本\n(2019)'],
        dataset_name=str(data),
        dataset_config='zh: "news"',
        split_names={"eval": "dev", "test": "test"},
        results={"eval_accuracy": 0.5, "test_accuracy": 0.25},
    )
    write_model_card(
        tmp_path, config=config, training_summary=summary, base_model=str(base), model_name='案由: "分类"'
    )
    card = ModelCard.load(tmp_path / "README.md")
    assert card.data.base_model == "junnyu/roformer_chinese_base" and card.data.datasets == ["someone/cail_small"]
    _, results = model_index_to_eval_results(card.data.to_dict()["model-index"])
    assert {(result.dataset_type, result.dataset_config, result.dataset_split) for result in results} == {
        ("someone/cail_small", 'zh: "news"', "dev"),
        ("someone/cail_small", 'zh: "news"', "test"),
    }
    assert "Base model: [`junnyu/roformer_chinese_base`]" in card.text and str(tmp_path) not in card.text
    assert "- `eval_` (validation): the split `dev` of `someone/cail_small`" in card.text
    assert '0 = `民事: "civil"`, 1 = `刑事`' in card.text


def test_a_description_stays_whole_and_loses_only_its_folders():
    described = (
        "CAIL2019 court fact descriptions (/home/me/data/cail_sample.jsonl), 96 for training, 32 for evaluation"
    )
    assert without_local_path(described) == (
        "CAIL2019 court fact descriptions (cail_sample.jsonl), 96 for training, 32 for evaluation"
    )
    assert without_local_path("someone/cail2019") == "someone/cail2019"
    assert without_local_path("/home/me/corpus.txt") == "corpus.txt"


def test_non_finite_results_are_left_out_with_a_line(caplog):
    config = roformer_hf.RoFormerConfig(**TINY_WORD_VOCAB)
    config.architectures = ["RoFormerForSequenceClassification"]
    summary = TrainingSummary(
        script="run_classification.py",
        task="text classification",
        datasets=["someone/cail2019"],
        dataset_name="someone/cail2019",
        split_names={"eval": "validation"},
        results={"eval_accuracy": 0.5, "eval_f1_macro": float("nan"), "eval_loss": float("inf")},
    )
    with caplog.at_level("WARNING", logger="roformer_hf.hub.model_card"):
        card = model_card(config, training_summary=summary)
    assert [record.getMessage() for record in caplog.records] == [
        "the model card leaves out eval_f1_macro, eval_loss: not finite numbers"
    ]
    assert [result.metric_name for result in card.data.eval_results] == ["accuracy"]
    assert "nan" not in card.text.lower() and "| inf" not in card.text
    assert "Left out of the results: `eval_f1_macro`, `eval_loss` (not finite numbers)." in card.text


# Loads the captured upload where roformer_hf cannot be imported and prints the logits of the texts.
CHILD = """
import json
import sys

sys.modules["roformer_hf"] = None  # as if roformer_hf were not installed
sys.modules["rjieba"] = None

import torch
import transformers

folder, texts = sys.argv[1], json.loads(sys.argv[2])
tokenizer = transformers.AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
model = transformers.AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True).eval()
with torch.no_grad():
    logits = model(**tokenizer(texts, padding=True, return_tensors="pt")).logits
print(json.dumps({"module": type(model).__module__, "logits": logits.tolist()}))
"""


def test_the_upload_loads_elsewhere_to_the_same_logits(pushed_run, tmp_path):
    environment = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf_home"),
        "OMP_NUM_THREADS": "1",
    }
    texts = json.dumps(TEXTS, ensure_ascii=False)
    command = [sys.executable, "-c", CHILD, str(pushed_run.captured), texts]
    process = subprocess.run(
        command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert process.returncode == 0, process.stderr[-3000:]
    loaded = json.loads(process.stdout.splitlines()[-1])
    assert loaded["module"].startswith("transformers_modules.")
    model = roformer_hf.RoFormerForSequenceClassification.from_pretrained(pushed_run.output_dir).eval()
    tokenizer = roformer_hf.RoFormerJiebaTokenizer.from_pretrained(pushed_run.output_dir)
    with torch.no_grad():
        expected = model(**tokenizer(TEXTS, padding=True, return_tensors="pt")).logits
    torch.testing.assert_close(torch.tensor(loaded["logits"]), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("settings", "dtype", "expected"),
    [
        ({}, torch.float32, "float32"),
        ({"bf16": True}, torch.float32, "bf16 autocast"),
        ({"fp16": True}, torch.float32, "fp16 autocast"),
        ({"bf16": True, "bf16_full_eval": True}, torch.float32, "bfloat16"),
        ({}, torch.bfloat16, "bfloat16"),  # --dtype bfloat16: the weights themselves
    ],
)
def test_evaluation_precision_names_what_the_trainer_runs(settings, dtype, expected):
    args = SimpleNamespace(
        **{"bf16": False, "fp16": False, "bf16_full_eval": False, "fp16_full_eval": False} | settings
    )
    assert evaluation_precision(args, torch.nn.Linear(2, 2).to(dtype)) == expected


def test_stray_files_stay_and_a_link_to_a_file_outside_is_refused(monkeypatch, tmp_path):
    """push_folder_to_hub of a saved folder beside a user's files of every kind: only the model goes up; a link named
    like a file of the model sends the file it points at, so it is refused, but for a Hub cache's links to blobs."""
    from roformer_hf import RoFormerConfig, RoFormerForSequenceClassification
    from roformer_hf.hub.hub_upload import push_folder_to_hub

    uploads = []
    monkeypatch.setattr(
        huggingface_hub.HfApi,
        "create_repo",
        lambda api, repo_id, **kwargs: huggingface_hub.RepoUrl(f"https://huggingface.co/{repo_id}"),
    )
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", fake_upload_folder(uploads, tmp_path / "hub"))
    config = RoFormerConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=2)
    snapshot = tmp_path / "models--someone--tiny" / "snapshots" / "0123abcd"
    RoFormerForSequenceClassification(config).save_pretrained(snapshot)
    stray = ["config.json.bak", ".env", "pytorch_model.bin", "adapter_model.safetensors", "logs/run.log"]
    stray += ["runs/events.out.tfevents", ".ipynb_checkpoints/notes-checkpoint.py", "checkpoint-2/config.json"]
    for name in stray:
        (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / name).write_text("private")
    blobs = snapshot.parent.parent / "blobs"
    blobs.mkdir()
    (snapshot / "config.json").rename(blobs / "3f2a")  # as hf download leaves it: a link into blobs
    (snapshot / "config.json").symlink_to(blobs / "3f2a")
    push_folder_to_hub(snapshot, "someone/tiny")
    [upload] = uploads
    assert "config.json" in upload.sent and "model.safetensors" in upload.sent
    assert not {name for name in upload.sent if "/" in name or name in stray}
    secret = tmp_path / "token.txt"
    secret.write_text("hf_not_a_real_token")
    (snapshot / "tokenizer.json").symlink_to(secret)
    with pytest.raises(ValueError, match=r"tokenizer\.json is a link to .*token\.txt, outside .*: an upload would"):
        push_folder_to_hub(snapshot, "someone/tiny")
    assert len(uploads) == 1
