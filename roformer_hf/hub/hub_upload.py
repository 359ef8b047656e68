"""What goes to the Hub from a checkpoint folder: what a stranger needs to load, run and judge the model, and nothing
private to the run that made it, nor any file of the user's that lies beside it.

A script's output folder also holds the predictions on the user's test data, pictures of its confusion matrix, the
run's settings and state, its checkpoints, TensorBoard logs, the folder's lock, and whatever the user left there (a
`notes.py`, a `sweep_results.json`). The upload names its files one by one (`files_to_upload`): the ones
`save_pretrained` writes for the model and the tokenizer (the code among them: the modules their `auto_map` and
`custom_pipelines` name, and the modules those import), the card, and the results the scripts write; the run's
private files only when asked (`include_run_files`, `--hub_include_run_files`). The upload is `huggingface_hub`'s
`HfApi.upload_folder` with those names as its `allow_patterns`, in one commit.
"""

import glob
import json
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from huggingface_hub import HfApi
from huggingface_hub.hf_api import CommitInfo

from ..compat import relative_import_files

# What save_pretrained writes for a model and a tokenizer besides the code and the shards of a sharded model, what
# roformer_hf adds for sentence-transformers (a pooled encoder), and the card.
MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors", "model.safetensors.index.json")
TOKENIZER_FILES = (
    "vocab.txt",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "tokenizer.json",
)
SENTENCE_TRANSFORMERS_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")
CARD_FILE = "README.md"
# The metrics the scripts write (Trainer's save_metrics, and run_mlm.py's table of its stages): by name, so that a
# sweep_results.json of the user's is not taken for one.
RESULT_FILES = (
    *("all_results.json", "train_results.json", "eval_results.json", "test_results.json", "stage_results.json"),
)
# Private to the run, uploaded only when asked: predictions and pictures of the user's data (and the label legend of
# a picture), the run's settings and the Trainer's state. Checkpoints, stage folders, TensorBoard logs and the lock
# are never uploaded from here (a checkpoint folder is uploaded by `push_folder_to_hub` of that folder).
RUN_FILES = ("predictions.jsonl", "confusion_matrix_*", "loss_curve.png", "run_settings.json", "trainer_state.json")


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file's object, `{}` where there is none (no such file, or not an object)."""
    if not path.is_file():
        return {}
    content = json.loads(path.read_text(encoding="utf-8"))
    return content if isinstance(content, dict) else {}


def code_references(folder: Path) -> set[str]:
    """The `module.Class` references of the folder's config and tokenizer config: `auto_map` (a tokenizer's maps to
    a pair, slow and fast) and the `custom_pipelines` implementations."""
    references = set()
    for name in ("config.json", "tokenizer_config.json"):
        config = read_json(folder / name)
        for value in (config.get("auto_map") or {}).values():
            references.update(value if isinstance(value, list) else [value])
        for pipeline in (config.get("custom_pipelines") or {}).values():
            references.add(pipeline.get("impl") if isinstance(pipeline, dict) else None)
    return {reference for reference in references if isinstance(reference, str)}


def code_files(folder: str | Path) -> list[str]:
    """
    The modules a checkpoint's code is: those its `auto_map` and `custom_pipelines` name (`"modeling.RoFormerModel"`
    is `modeling.py`; one of another repository, `"owner/repo--modeling.X"`, is not in the folder), and every module
    they import relatively, as transformers' `trust_remote_code=True` loads them.
    """
    folder = Path(folder)
    named = {reference.rsplit(".", 1)[0] + ".py" for reference in code_references(folder) if "--" not in reference}
    files = {name for name in named if (folder / name).is_file()}
    for name in list(files):
        files.update(Path(path).name for path in relative_import_files(folder / name))
    return sorted(files)


def weight_shards(folder: Path) -> list[str]:
    """The weight files a sharded checkpoint's index names."""
    return sorted(set((read_json(folder / "model.safetensors.index.json").get("weight_map") or {}).values()))


def files_to_upload(folder: str | Path, include_run_files: bool = False) -> list[str]:
    """
    The names of the files of `folder` (its top level: no checkpoint or log folder) that an upload sends, sorted:
    the model's and tokenizer's files as `save_pretrained` writes them, their code, the card and the scripts'
    results; no other file of the folder.

    Args:
        folder (`str` or `Path`): a checkpoint folder, e.g. a script's `--output_dir`.
        include_run_files (`bool`, *optional*, defaults to `False`): also send the predictions, pictures, settings
            and state of the run (`RUN_FILES`).
    """
    folder = Path(folder)
    names = {*MODEL_FILES, *TOKENIZER_FILES, *SENTENCE_TRANSFORMERS_FILES, CARD_FILE, *RESULT_FILES}
    names.update(weight_shards(folder), code_files(folder))
    if include_run_files:
        present = (path.name for path in folder.iterdir() if path.is_file())
        names.update(name for name in present if any(fnmatchcase(name, pattern) for pattern in RUN_FILES))
    sent = sorted(name for name in names if (folder / name).is_file())
    for name in sent:
        check_not_a_link_outside(folder, name)
    return sent


def check_not_a_link_outside(folder: Path, name: str) -> None:
    """
    Refuse a file of the upload that is a link to a file outside `folder` (a `tokenizer.json` pointing at a file of
    the user's home): the upload would send that file's content under the link's name. Links inside the folder, and
    a Hub cache snapshot's links into its repository's `blobs`, are the folder's own files.
    """
    path = folder / name
    if not path.is_symlink():
        return
    target, root = path.resolve(), folder.resolve()
    own = [root]
    if root.parent.name == "snapshots":  # models--owner--name/snapshots/<commit>/, as hf download leaves it
        own.append(root.parent.parent / "blobs")
    if not any(target.is_relative_to(root) for root in own):
        raise ValueError(
            f"{path} is a link to {target}, outside {folder}: an upload would send that file under the name {name}. "
            f"Put the file itself there (cp --remove-destination {target} {path}), or remove the link."
        )


def push_folder_to_hub(
    folder: str | Path,
    repo_id: str,
    *,
    include_run_files: bool = False,
    commit_message: str = "Upload model",
    commit_description: str | None = None,
    private: bool | None = None,
    token: bool | str | None = None,
    revision: str | None = None,
    create_pr: bool = False,
) -> CommitInfo:
    """
    Upload a saved checkpoint folder (model, config, code, tokenizer, card, metrics: `files_to_upload`) to the Hub
    repository `repo_id` in one commit, creating the repository if needed.

    Args:
        folder (`str` or `Path`): the folder `save_pretrained` (or a script) wrote.
        repo_id (`str`): the repository, `"owner/name"` or `"name"` (under your account).
        include_run_files (`bool`, *optional*, defaults to `False`): also upload what is private to the run
            (`RUN_FILES`: predictions, pictures, run settings, trainer state).
        commit_message, commit_description, private, token, revision, create_pr: as for `HfApi.upload_folder` and
            `HfApi.create_repo`.

    Returns:
        The `CommitInfo` of the commit.

    Raises:
        ValueError: when `folder` holds no saved model (no `config.json`), before anything is sent.
    """
    if not (Path(folder) / "config.json").is_file():
        raise ValueError(
            f"{folder} holds no config.json, so it is not a saved model: give the folder that save_pretrained (or a "
            "script's --output_dir) wrote."
        )
    api = HfApi(token=token)
    repo_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id
    return commit_folder(
        api,
        repo_id,
        folder,
        include_run_files=include_run_files,
        commit_message=commit_message,
        commit_description=commit_description,
        revision=revision,
        create_pr=create_pr,
    )


def commit_folder(
    api: HfApi, repo_id: str, folder: str | Path, *, include_run_files: bool = False, **commit_options
) -> CommitInfo:
    """
    One commit of `files_to_upload(folder, include_run_files)` to the existing repository `repo_id`, by
    `HfApi.upload_folder` with those names (each one a pattern matching itself only) as its `allow_patterns`.

    Args:
        api (`HfApi`): the client (with its token).
        repo_id (`str`): the repository's full id, `"owner/name"`.
        folder (`str` or `Path`): the checkpoint folder.
        include_run_files (`bool`, *optional*, defaults to `False`): see `files_to_upload`.
        commit_options: the other arguments of `HfApi.upload_folder` (`commit_message`, `revision`, ...).
    """
    allowed = [glob.escape(name) for name in files_to_upload(folder, include_run_files)]
    return api.upload_folder(repo_id=repo_id, folder_path=str(folder), allow_patterns=allowed, **commit_options)


__all__ = ["RESULT_FILES", "RUN_FILES", "code_files", "commit_folder", "files_to_upload", "push_folder_to_hub"]
