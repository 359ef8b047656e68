"""The model card and Hub upload of a script's run (`roformer_hf.training.publishing`), the same for both scripts."""

from pathlib import Path
from types import SimpleNamespace

import huggingface_hub
import pytest
from conftest import BEFORE_CLASSES, bad_input_rows, fake_upload_folder
from test_bad_inputs import ROWS, run_in_process, template_pattern, tiny_run, write_jsonl

from roformer_hf import RoFormerConfig
from roformer_hf.hub.model_card import TrainingSummary
from roformer_hf.training.publishing import publish_run


@pytest.fixture
def fake_hub(monkeypatch, tmp_path):
    hub = {"repos": [], "uploads": []}

    def create_repo(api, repo_id, **kwargs):
        hub["repos"].append((repo_id, kwargs))
        return huggingface_hub.RepoUrl(f"https://huggingface.co/someone/{repo_id.split('/')[-1]}")

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", create_repo)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", fake_upload_folder(hub["uploads"], tmp_path / "hub"))
    return hub


def finished_run(output_dir, main_process=True, **arguments):
    args = SimpleNamespace(
        output_dir=str(output_dir), push_to_hub=False, hub_model_id=None, hub_token=None, hub_private_repo=None
    )
    vars(args).update({"license": None, "hub_include_run_files": False, "hub_revision": None} | arguments)
    model = SimpleNamespace(config=RoFormerConfig(hidden_size=32, num_attention_heads=2, num_hidden_layers=1))
    return SimpleNamespace(args=args, model=model, is_world_process_zero=lambda: main_process)


SUMMARY = TrainingSummary(script="run_classification.py", task="text classification", datasets=["cail.jsonl"])


def test_card_written_and_nothing_uploaded_without_push_to_hub(tmp_path, fake_hub):
    run = finished_run(tmp_path)
    assert publish_run(run, run.args, SUMMARY, base_model="junnyu/roformer_chinese_base") is None
    card = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert "run_classification.py" in card and "junnyu/roformer_chinese_base" in card
    assert fake_hub["repos"] == [] and fake_hub["uploads"] == []


def test_push_uploads_the_output_folder_without_checkpoints_and_names_the_repo_in_the_card(tmp_path, fake_hub):
    output_dir = tmp_path / "my-classifier"
    (output_dir / "checkpoint-2").mkdir(parents=True)
    for name in ("model.safetensors", "modeling.py", "vocab.txt", "all_results.json"):
        (output_dir / name).write_text("{}")
    (output_dir / "config.json").write_text('{"auto_map": {"AutoModel": "modeling.RoFormerModel"}}')
    for name in (
        "predictions.jsonl",
        "confusion_matrix_test.png",
        ".roformer_hf.lock",
        "notes.txt",
        "notes.py",
        "sweep_results.json",
        "run_settings.json",
    ):
        (output_dir / name).write_text("private")
    (output_dir / "checkpoint-2" / "model.safetensors").write_text("{}")
    run = finished_run(output_dir, push_to_hub=True, hub_private_repo=True)
    repo_id = publish_run(run, run.args, SUMMARY, None)
    assert repo_id == "someone/my-classifier"
    assert fake_hub["repos"] == [("my-classifier", {"private": True, "exist_ok": True})]
    [upload] = fake_hub["uploads"]
    assert upload.repo_id == repo_id and upload.options["commit_message"] == "End of training"
    shared = ["README.md", "all_results.json", "config.json", "model.safetensors", "modeling.py", "vocab.txt"]
    assert upload.sent == shared  # no checkpoint, lock, predictions, picture, run settings or file of the user's
    run.args.hub_include_run_files = True
    publish_run(run, run.args, SUMMARY, None)
    run_files = ["confusion_matrix_test.png", "predictions.jsonl", "run_settings.json"]
    assert fake_hub["uploads"][-1].sent == sorted(shared + run_files)
    assert f'from_pretrained("{repo_id}"' in (output_dir / "README.md").read_text(encoding="utf-8")


def test_license_given_wins_over_the_starting_checkpoint_card(tmp_path, fake_hub):
    from huggingface_hub import ModelCard

    from roformer_hf.hub.model_card import write_model_card

    base = tmp_path / "base"
    base.mkdir()
    write_model_card(base, config=RoFormerConfig(), base_model="junnyu/roformer_chinese_base", license="apache-2.0")
    (tmp_path / "given").mkdir()
    run = finished_run(tmp_path / "given", license="mit")
    publish_run(run, run.args, SUMMARY, base_model=str(base))
    given = ModelCard.load(tmp_path / "given" / "README.md").data
    assert (given.license, given.base_model) == ("mit", "junnyu/roformer_chinese_base")
    (tmp_path / "inherited").mkdir()
    run = finished_run(tmp_path / "inherited")
    publish_run(run, run.args, SUMMARY, base_model=str(base))
    assert ModelCard.load(tmp_path / "inherited" / "README.md").data.license == "apache-2.0"


def test_other_processes_write_and_upload_nothing(tmp_path, fake_hub):
    run = finished_run(tmp_path, main_process=False, push_to_hub=True)
    assert publish_run(run, run.args, SUMMARY, None) is None
    assert not (tmp_path / "README.md").exists() and fake_hub["uploads"] == []


def test_a_card_without_license_is_said_at_the_end(tmp_path, fake_hub, capsys):
    run = finished_run(tmp_path)
    publish_run(run, run.args, SUMMARY, None)
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"{tmp_path / 'README.md'} names no license (nor does the checkpoint the run started from): pass --license "
        "with the Hub's id of yours (apache-2.0, mit, cc-by-4.0, ...; 'other' for one the Hub does not list)."
    )
    run = finished_run(tmp_path, license="mit")
    publish_run(run, run.args, SUMMARY, None)
    assert "names no license" not in capsys.readouterr().out


def test_the_card_is_named_after_the_hub_model_id_or_the_output_folder(tmp_path, fake_hub):
    output_dir = tmp_path / "my-run"
    output_dir.mkdir()
    run = finished_run(output_dir)
    publish_run(run, run.args, SUMMARY, None)
    assert "\n# my-run\n" in (output_dir / "README.md").read_text(encoding="utf-8")
    run = finished_run(output_dir, hub_model_id="someone/cail-roformer")
    publish_run(run, run.args, SUMMARY, None)
    assert "\n# cail-roformer\n" in (output_dir / "README.md").read_text(encoding="utf-8")


# --- Pushes and licenses checked before training: the table "Pushes, licenses and dataset splits" of bad_inputs.md ---

SECTION = "## Pushes, licenses and dataset splits"


def hub_in_reach(monkeypatch, whoami=lambda api, **kwargs: {"name": "someone"}) -> None:
    """The Hub as if online (the tests never reach it): offline mode off, `whoami` answered by `whoami`."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.HfApi, "whoami", whoami)


def unreachable(api, **kwargs):
    raise ConnectionError("Failed to connect to huggingface.co")


def upload_gone(api, **kwargs):
    raise ConnectionError("Connection reset by peer")


def push_offline(monkeypatch, tmp) -> list[str]:
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return ["--push_to_hub"]


def push_hub_unreachable(monkeypatch, tmp) -> list[str]:
    hub_in_reach(monkeypatch, whoami=unreachable)
    return ["--push_to_hub"]


def push_upload_fails(monkeypatch, tmp) -> list[str]:
    hub_in_reach(monkeypatch)
    repo_url = huggingface_hub.RepoUrl("https://huggingface.co/someone/out")
    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", lambda api, repo_id, **kwargs: repo_url)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", upload_gone)
    return ["--push_to_hub"]


def push_to_another_namespace(monkeypatch, tmp) -> list[str]:
    hub_in_reach(monkeypatch, whoami=lambda api, **kwargs: {"name": "someone", "orgs": [{"name": "my-lab"}]})
    return ["--push_to_hub", "--hub_model_id", "someone-else/cail-roformer"]


def dataset_configurations_in_cache(monkeypatch, tmp) -> list[str]:
    from test_data_sources import cache_of_two_configurations

    rows = [{"id": str(index), **row} for index, row in enumerate(ROWS * 2)]
    cache = cache_of_two_configurations(tmp, {"train": rows, "validation": rows[:4], "test": rows[:4]})
    return ["--dataset_name", "someone/cail_small", "--cache_dir", str(cache)]


def push_hub_strategy_checkpoints(monkeypatch, tmp) -> list[str]:
    hub_in_reach(monkeypatch)
    return ["--push_to_hub", "--hub_strategy", "all_checkpoints"]


def push_hub_strategy_every_save(monkeypatch, tmp) -> list[str]:
    hub_in_reach(monkeypatch)
    return ["--push_to_hub", "--hub_strategy", "every_save"]


def hub_references(branches: list[str], tags: list[str]):
    """A stand-in for `HfApi.list_repo_refs`: a repository with these branches and tags."""
    from huggingface_hub.hf_api import GitRefInfo, GitRefs

    def reference(name: str, kind: str) -> GitRefInfo:
        return GitRefInfo(name=name, ref=f"refs/{kind}/{name}", target_commit="0" * 40)

    def list_repo_refs(api, repo_id, **kwargs):
        return GitRefs([reference(name, "heads") for name in branches], [], [reference(name, "tags") for name in tags])

    return list_repo_refs


def push_hub_revision_a_tag(monkeypatch, tmp) -> list[str]:
    hub_in_reach(monkeypatch)
    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_refs", hub_references(["main"], ["v1.0"]))
    return ["--push_to_hub", "--hub_revision", "v1.0"]


def dataset_test_split_of_another_name(monkeypatch, tmp) -> list[str]:
    from test_data_sources import split_folder

    folder = split_folder(tmp / "cail_testing", {"train": ROWS, "dev": ROWS, "testing": ROWS})
    return ["--dataset_name", str(folder), "--do_predict"]


def validation_ids_beside_class_label(monkeypatch, tmp) -> list[str]:
    import datasets

    names = ["1", "0"]  # names that look like ids: the id 0 is the class "1"
    label = datasets.ClassLabel(names=names)
    features = datasets.Features({"text": datasets.Value("string"), "label": label})
    ids = [index % 2 for index in range(len(ROWS))]
    train = datasets.Dataset.from_dict({"text": [row["text"] for row in ROWS], "label": ids}, features=features)
    train.to_parquet(str(tmp / "train.parquet"))
    datasets.Dataset.from_dict({"text": [row["text"] for row in ROWS], "label": ids}).to_parquet(
        str(tmp / "dev.parquet")
    )
    return ["--train_file", str(tmp / "train.parquet"), "--validation_file", str(tmp / "dev.parquet")]


def dataset_class_labels_differ(monkeypatch, tmp) -> list[str]:
    import datasets

    folder = tmp / "cail_dev"
    for split, names in (("train", ["criminal", "civil"]), ("dev", ["civil", "criminal"])):
        features = datasets.Features({"text": datasets.Value("string"), "label": datasets.ClassLabel(names=names)})
        part = datasets.Dataset.from_dict(
            {"text": [row["text"] for row in ROWS], "label": [0, 1] * (len(ROWS) // 2)}, features=features
        )
        part.to_parquet(str(folder / "data" / f"{split}-00000-of-00001.parquet"))
    return ["--dataset_name", str(folder), "--validation_split_name", "dev"]


PUSH_CASES = {
    "push_offline": ("both scripts", push_offline),
    "push_repo_id_malformed": (
        "run_classification.py",
        lambda *_: ["--push_to_hub", "--hub_model_id", "my model!"],
    ),
    "push_hub_unreachable": ("run_mlm.py", push_hub_unreachable),
    "push_upload_fails": ("run_classification.py", push_upload_fails),
    "license_not_a_hub_id": ("both scripts", lambda *_: ["--license", "Apache 2.0"]),
    "license_empty": ("run_classification.py", lambda *_: ["--license", ""]),
    "push_hub_model_id_empty": ("both scripts", lambda *_: ["--push_to_hub", "--hub_model_id", ""]),
    "push_to_another_namespace": ("run_classification.py", push_to_another_namespace),
    "dataset_configurations_in_cache": ("run_classification.py", dataset_configurations_in_cache),
    "dataset_class_labels_differ": ("run_classification.py", dataset_class_labels_differ),
    "validation_ids_beside_class_label": ("run_classification.py", validation_ids_beside_class_label),
    "dataset_test_split_of_another_name": ("run_classification.py", dataset_test_split_of_another_name),
    "push_hub_strategy_checkpoints": ("both scripts", push_hub_strategy_checkpoints),
    "push_hub_strategy_every_save": ("both scripts", push_hub_strategy_every_save),
    "push_hub_revision_a_tag": ("both scripts", push_hub_revision_a_tag),
}


def save_int8_quantized_in_memory(tmp: Path, monkeypatch, torchao: bool = True) -> None:
    """quantize_int8 (torchao's in-place route, or without torchao torch's deprecated one), then save_pretrained."""
    import warnings

    from roformer_hf import RoFormerForSequenceClassification, int8_serving

    if torchao:
        pytest.importorskip("torchao", reason="torchao's route: the int8 extra (.ci/run tests it apart)")
    else:
        monkeypatch.setattr(int8_serving, "torchao_int8", lambda: (None, None))
    config = RoFormerConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback's warning where torchao is not installed (test_int8_serving)
        model = int8_serving.quantize_int8(RoFormerForSequenceClassification(config).eval())
    model.save_pretrained(tmp / "int8")


LIBRARY_CASES = {
    "save_int8_quantized_in_memory": ("library", save_int8_quantized_in_memory),
    "save_int8_without_torchao": (
        "library",
        lambda tmp, monkeypatch: save_int8_quantized_in_memory(tmp, monkeypatch, False),
    ),
}


@pytest.mark.parametrize("case", list(LIBRARY_CASES))
def test_a_library_refusal_is_one_value_error(case, tmp_path, monkeypatch):
    with pytest.raises(ValueError) as error:
        LIBRARY_CASES[case][1](tmp_path, monkeypatch)
    pattern = template_pattern(bad_input_rows(SECTION)[case][2])
    assert pattern.fullmatch(f"ValueError: {error.value}") and not (tmp_path / "int8").exists()


def test_the_table_and_the_push_cases_name_the_same_bad_inputs():
    table = bad_input_rows(SECTION)
    cases = {case: where for case, (where, _) in {**PUSH_CASES, **LIBRARY_CASES}.items()}
    assert {case: where for case, (where, _, _) in table.items()} == cases
    assert all(before.startswith(BEFORE_CLASSES) for _, before, _ in table.values())


def push_parameters() -> list:
    return [
        pytest.param(case, script, id=f"{case}-{script.removesuffix('.py')}")
        for case, (where, _) in PUSH_CASES.items()
        for script in (["run_mlm.py", "run_classification.py"] if where == "both scripts" else [where])
    ]


@pytest.mark.parametrize(("case", "script"), push_parameters())
def test_a_push_or_license_that_would_fail_is_refused_before_training(case, script, tmp_path, capsys, monkeypatch):
    extra = PUSH_CASES[case][1](monkeypatch, tmp_path)
    arguments = tiny_run(script, tmp_path, write_jsonl(tmp_path / "train.jsonl", ROWS), *extra)
    message = run_in_process(script, arguments, capsys)
    pattern = template_pattern(bad_input_rows(SECTION)[case][2])
    assert pattern.fullmatch(message), f"{script} {case}:\n  got      {message}\n  expected {pattern.pattern}"
    output_dir = tmp_path / "out"
    if case == "push_upload_fails":  # trained and saved, the card written, before the upload failed
        assert (output_dir / "model.safetensors").is_file() and (output_dir / "README.md").is_file()
    else:  # refused before any step: nothing trained or saved
        assert not (output_dir / "model.safetensors").exists() and not list(output_dir.glob("checkpoint-*"))


def test_hub_revision_is_refused_only_where_it_is_a_tag(monkeypatch):
    """A branch (also one named as a tag), a revision the repository lacks (created as a branch) and a repository not
    created yet pass; a tag of the repository is refused (row `push_hub_revision_a_tag`)."""
    import httpx2
    from huggingface_hub.errors import RepositoryNotFoundError

    from roformer_hf.training.errors import ScriptError
    from roformer_hf.training.publishing import check_hub_revision

    api = huggingface_hub.HfApi()
    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_refs", hub_references(["main", "v2.0"], ["v1.0", "v2.0"]))
    for revision in (None, "main", "dev", "v2.0"):
        check_hub_revision(api, "someone/cail-roformer", revision)
    with pytest.raises(ScriptError, match=r"^--hub_revision v1\.0 is a tag of someone/cail-roformer, "):
        check_hub_revision(api, "someone/cail-roformer", "v1.0")

    def not_created(api, repo_id, **kwargs):
        response = httpx2.Response(404, request=httpx2.Request("GET", f"https://huggingface.co/api/models/{repo_id}"))
        raise RepositoryNotFoundError("404 Repository Not Found", response=response)

    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_refs", not_created)
    check_hub_revision(api, "someone/new-model", "v1.0")


@pytest.mark.parametrize(("load_best_model_at_end", "best_step"), [(True, 3), (True, 6), (False, 3)])
def test_the_card_names_the_step_whose_weights_it_publishes(tmp_path, load_best_model_at_end, best_step):
    """Under --load_best_model_at_end the card said "6 optimizer steps" while the weights were step 3's."""
    from transformers import TrainerState, TrainingArguments

    from roformer_hf.hub.model_card import model_card

    args = TrainingArguments(
        tmp_path, max_steps=6, eval_strategy="steps", eval_steps=3, save_steps=3, report_to="none", use_cpu=True,
        load_best_model_at_end=load_best_model_at_end,
    )  # fmt: skip
    trainer = SimpleNamespace(args=args, state=TrainerState(global_step=6, best_global_step=best_step))
    summary = TrainingSummary.from_trainer(trainer, script="run_classification.py", task="text classification",
                                           datasets=["cail.jsonl"], trained_lengths=[64])  # fmt: skip
    card = str(model_card(RoFormerConfig(hidden_size=32, num_attention_heads=2), training_summary=summary))
    assert "6 optimizer steps on inputs of 64 tokens." in card
    published = "The weights are those of step 3, the best evaluation by `metric_for_best_model`"
    assert (published in card) == (load_best_model_at_end and best_step == 3)
    assert ("| metric_for_best_model | loss |" in card) == load_best_model_at_end


def test_hub_revision_is_the_branch_uploaded_to_and_named_in_the_card(tmp_path, fake_hub, monkeypatch):
    """`--hub_revision dev` was accepted and the model went to `main`."""
    branches = []
    monkeypatch.setattr(
        huggingface_hub.HfApi, "create_branch", lambda api, repo_id, **kwargs: branches.append((repo_id, kwargs))
    )
    output_dir = tmp_path / "my-classifier"
    output_dir.mkdir()
    for name in ("model.safetensors", "config.json"):
        (output_dir / name).write_text("{}")
    run = finished_run(output_dir, push_to_hub=True, hub_revision="dev")
    repo_id = publish_run(run, run.args, SUMMARY, None)
    assert branches == [(repo_id, {"branch": "dev", "exist_ok": True})]
    [upload] = fake_hub["uploads"]
    assert upload.options["revision"] == "dev"
    assert (
        f'from_pretrained("{repo_id}", revision="dev", trust_remote_code=True)'
        in (output_dir / "README.md").read_text()
    )
