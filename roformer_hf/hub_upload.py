"""What goes to the Hub from a checkpoint folder: what a stranger needs to load, run and judge the model, and nothing
private to the run that made it.

A script's output folder also holds the predictions on the user's test data, pictures of its confusion matrix, the
run's settings and state, its checkpoints, TensorBoard logs and the folder's lock. Those stay on the machine unless
asked for (`include_run_files`, `--hub_include_run_files`): the upload is an allow-list, so a file nobody listed here
(a note of the user's, a data file left in the folder) is never published by accident. The upload is one commit made
with `huggingface_hub`'s `HfApi.create_commit`.
"""

from fnmatch import fnmatchcase
from pathlib import Path

from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub.hf_api import CommitInfo

# What a stranger needs: the model (weights, config, code), the tokenizer, the sentence-transformers files of a
# pooled encoder, the card and the run's metrics.
SHARED_FILES = (
    *("config.json", "generation_config.json", "*.safetensors", "model.safetensors.index.json", "*.py"),
    *("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "tokenizer.json"),
    *("modules.json", "sentence_bert_config.json", "README.md", "*_results.json"),
)
# Private to the run, uploaded only when asked: predictions and pictures of the user's data (and the label legend of
# a picture), the run's settings and the Trainer's state. Checkpoints, stage folders, TensorBoard logs and the lock
# are never uploaded from here (Trainer's `hub_strategy` is the way to publish checkpoints).
RUN_FILES = ("predictions.jsonl", "confusion_matrix_*", "loss_curve.png", "run_settings.json", "trainer_state.json")


def files_to_upload(folder: str | Path, include_run_files: bool = False) -> list[str]:
    """
    The names of the files of `folder` (its top level: no checkpoint or log folder) that an upload sends, sorted.

    Args:
        folder (`str` or `Path`): a checkpoint folder, e.g. a script's `--output_dir`.
        include_run_files (`bool`, *optional*, defaults to `False`): also send the predictions, pictures, settings
            and state of the run (`RUN_FILES`).
    """
    patterns = SHARED_FILES + (RUN_FILES if include_run_files else ())
    names = (path.name for path in Path(folder).iterdir() if path.is_file())
    return sorted(name for name in names if any(fnmatchcase(name, pattern) for pattern in patterns))


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
        commit_message, commit_description, private, token, revision, create_pr: as for `HfApi.create_commit` and
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
    One commit of `files_to_upload(folder, include_run_files)` to the existing repository `repo_id`.

    Args:
        api (`HfApi`): the client (with its token).
        repo_id (`str`): the repository's full id, `"owner/name"`.
        folder (`str` or `Path`): the checkpoint folder.
        include_run_files (`bool`, *optional*, defaults to `False`): see `files_to_upload`.
        commit_options: the other arguments of `HfApi.create_commit` (`commit_message`, `revision`, ...).
    """
    names = files_to_upload(folder, include_run_files)
    operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(Path(folder) / name)) for name in names]
    return api.create_commit(repo_id=repo_id, operations=operations, **commit_options)


__all__ = ["RUN_FILES", "SHARED_FILES", "commit_folder", "files_to_upload", "push_folder_to_hub"]
