"""What a script does with the model it trained besides saving it: the model card (README.md), and with
`--push_to_hub` the upload of the output folder, the same way for both scripts.

The upload is the script's, once, at the end of the run (`roformer_hf.hub.hub_upload`: the model, its code, tokenizer,
card and metrics; the run's predictions, pictures and settings only with `--hub_include_run_files`). The Trainer is
handed `push_to_hub=False` (`trainer_arguments`): its own pushes, at every checkpoint and when the model is saved,
upload the whole output folder as it lies.
"""

import logging
from dataclasses import replace
from difflib import get_close_matches
from pathlib import Path
from typing import Any

import huggingface_hub
from huggingface_hub import ModelCard
from huggingface_hub.errors import HFValidationError, RepositoryNotFoundError
from huggingface_hub.utils import validate_repo_id
from transformers import Trainer, TrainingArguments

from ..hub.card_metadata import HUB_LICENSES, is_hub_license
from ..hub.hub_upload import commit_folder
from ..hub.model_card import TrainingSummary, write_model_card
from .errors import ScriptError

logger = logging.getLogger(__name__)


def trainer_arguments(training_args: TrainingArguments) -> TrainingArguments:
    """The arguments to build a script's Trainer with: the run's, without the Trainer's own pushes to the Hub."""
    return replace(training_args, push_to_hub=False) if training_args.push_to_hub else training_args


def check_publishing(args: TrainingArguments) -> None:
    """
    Before the first training step, what would otherwise fail after it: `--license` (a Hub license id, not empty),
    and with `--push_to_hub` the repository id's form (`--hub_model_id`, else the output folder's name), offline mode,
    whether the Hub answers with the token (`HfApi.whoami`) and whether the token may write to the repository's
    namespace, and that `--hub_revision` names no tag of the repository. Raises `ScriptError` naming the option to
    change.
    """
    check_license(args.license)
    if not args.push_to_hub:
        return
    check_hub_model_id(args.hub_model_id)
    check_hub_strategy(args.hub_strategy)
    repo_name = args.hub_model_id or Path(args.output_dir).resolve().name
    try:
        validate_repo_id(repo_name)
    except HFValidationError as error:
        option = f"--hub_model_id {repo_name}" if args.hub_model_id else f"the output folder's name {repo_name!r}"
        raise ScriptError(
            f"--push_to_hub: {option} is no Hub repository id ({str(error).splitlines()[0]}): name the repository "
            "with --hub_model_id owner/name."
        ) from error
    if huggingface_hub.constants.HF_HUB_OFFLINE:
        raise ScriptError(
            "--push_to_hub, but the Hub is switched off (HF_HUB_OFFLINE=1), so the upload would fail after training: "
            "unset HF_HUB_OFFLINE, or leave out --push_to_hub and upload the output folder later with "
            "roformer_hf.hub.hub_upload.push_folder_to_hub."
        )
    api = huggingface_hub.HfApi(token=args.hub_token)
    try:
        identity = api.whoami()
    except (
        Exception
    ) as error:  # no token, a refused one, no connection (httpx's errors are no OSErrors): all stop here
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ScriptError(
            f"--push_to_hub, but the Hub does not answer with your token ({first_line}): log in with `hf auth login` "
            "or pass --hub_token, check the connection, or leave out --push_to_hub."
        ) from error
    check_namespace(repo_name, identity)
    repo_id = repo_name if "/" in repo_name else f"{identity.get('name')}/{repo_name}"  # create_repo's namespace
    check_hub_revision(api, repo_id, args.hub_revision)


def check_hub_strategy(hub_strategy: str) -> None:
    """
    Refuse a `--hub_strategy` other than `end` (the scripts' default, `cli.ScriptTrainingArguments`): the scripts
    upload the model once, at the end (`trainer_arguments` turns the Trainer's pushes off, which would send every file
    of the output folder, a user's notes and logs too), so the pushes at each save or checkpoint asked for would
    silently never happen.
    """
    strategy = str(getattr(hub_strategy, "value", hub_strategy))  # a HubStrategy, or its value
    if strategy != "end":
        raise ScriptError(
            f"--hub_strategy {strategy}: the scripts upload the final model once, "
            "at the end of the run, and nothing at a save or checkpoint (the Trainer's own pushes would send every "
            "file of the output folder): leave out --hub_strategy, and upload a checkpoint folder yourself with "
            "roformer_hf.hub.hub_upload.push_folder_to_hub(<output_dir>/checkpoint-<step>, <repo>, revision=<branch>)."
        )


def check_license(license: str | None) -> None:
    """`--license` is one of the Hub's license ids (`card_metadata.HUB_LICENSES`), or not given."""
    if license is None or is_hub_license(license):
        return
    if not license.strip():
        raise ScriptError(
            "--license is empty: give the Hub's id of the model's license (apache-2.0, mit, cc-by-4.0, ...), or leave "
            "it out to take the license of the checkpoint the run starts from."
        )
    close = get_close_matches(license.strip().lower().replace(" ", "-"), sorted(HUB_LICENSES), n=3)
    suggestion = f" (did you mean {', '.join(close)}?)" if close else ""
    raise ScriptError(
        f"--license {license!r} is not a license id of the Hub{suggestion}: give one of its ids (apache-2.0, mit, "
        "cc-by-4.0, ...: https://huggingface.co/docs/hub/repositories-licenses), or 'other' for a license it does "
        "not list."
    )


def check_hub_model_id(hub_model_id: str | None) -> None:
    """With `--push_to_hub`, an empty `--hub_model_id` (often an unset shell variable) is refused rather than replaced
    by the output folder's name, which would push to a repository the user did not name."""
    if hub_model_id is not None and not hub_model_id.strip():
        raise ScriptError(
            "--push_to_hub: --hub_model_id is empty: name the repository with --hub_model_id owner/name, or leave the "
            "option out to name it after the output folder."
        )


def check_namespace(repo_name: str, identity: dict[str, Any]) -> None:
    """A repository id under a namespace the token's account may not write to (not its own, not one of its
    organizations: the Hub gives no one else write access there) is refused before training; `create_repo` would
    fail with a 403 only once the model is trained."""
    namespace = repo_name.split("/")[0] if "/" in repo_name else None
    own = [identity.get("name"), *(org.get("name") for org in identity.get("orgs") or [])]
    if namespace is not None and identity.get("name") and namespace not in own:
        raise ScriptError(
            f"--push_to_hub: --hub_model_id {repo_name} is under {namespace}, where your token ({identity['name']}) "
            f"cannot create or write a repository (its namespaces: {', '.join(filter(None, own))}): name the "
            f"repository under one of them, or pass --hub_token of an account of {namespace}."
        )


def check_hub_revision(api: huggingface_hub.HfApi, repo_id: str, revision: str | None) -> None:
    """
    A `--hub_revision` that is a tag of `repo_id` (and no branch) is refused before training: the upload commits onto
    a branch, and onto a tag it fails only once the model is trained. A repository not created yet has no tags; where
    its references cannot be read otherwise, the upload's own failure stays the one line (`upload_failure`).
    """
    if not revision:
        return
    try:
        references = api.list_repo_refs(repo_id)
    except RepositoryNotFoundError:
        return
    except Exception:  # the Hub answered whoami: an upload that fails after all is said at the end, in one line
        logger.warning(f"--hub_revision {revision}: the branches and tags of {repo_id} could not be read to check it.")
        return
    tags = {reference.name for reference in references.tags}
    if revision in tags and revision not in {reference.name for reference in references.branches}:
        raise ScriptError(
            f"--hub_revision {revision} is a tag of {repo_id}, and the upload commits onto a branch: name a branch "
            "with --hub_revision (one that does not exist is created), or leave it out to upload to the default "
            "branch."
        )


def evaluation_origins(data_args: Any, held_out: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """
    Where a run's validation (`eval_`) and test (`test_`) results come from, for its card: the split of
    `--dataset_name` of each prefix (`{"eval": "dev"}`), and for the others where their rows came from, in words (a
    file, or `held_out`: the words for a part of train held out, `None` when nothing was).

    Args:
        data_args: the script's data arguments (`--validation_file`, `--validation_split_name`, ...).
        held_out (`str`, *optional*): what the validation rows are when held out of train, e.g. "the last 5% of the
            training text, not trained on".
    """
    split_names, described = {}, {}
    for prefix, split in (("eval", "validation"), ("test", "test")):
        file = getattr(data_args, f"{split}_file", None)
        if file:
            described[prefix] = f"`{file}`"
        elif held_out and split == "validation":
            described[prefix] = held_out
        elif data_args.dataset_name:
            split_names[prefix] = getattr(data_args, f"{split}_split_name", split)
    return split_names, described


def publish_run(
    trainer: Trainer, args: TrainingArguments, summary: TrainingSummary | None, base_model: str | None
) -> str | None:
    """
    On the main process: write output_dir/README.md, the model card, and with `--push_to_hub` upload output_dir's
    model, code, tokenizer, card and results (`hub_upload.files_to_upload`) to `--hub_model_id` (default: the
    folder's name), on the branch `--hub_revision` where given (created where missing), the card then showing how to
    load the model from there.

    Args:
        trainer (`Trainer`): the trainer that trained the model (the last stage's for run_mlm.py).
        args (`TrainingArguments`): the run's arguments (`ScriptTrainingArguments`: `--license` and
            `--hub_include_run_files` too), whose output_dir holds the final model (not a stage's).
        summary (`TrainingSummary`, *optional*): how the model was trained; `None` when the run only evaluated, so
            that the card claims no training.
        base_model (`str`, *optional*): the checkpoint the run started from (`--model_name_or_path`).

    Returns:
        The id of the Hub repository uploaded to, or `None`.
    """
    if not trainer.is_world_process_zero():
        return None
    repo_name = args.hub_model_id or Path(args.output_dir).resolve().name
    api = huggingface_hub.HfApi(token=args.hub_token)
    repo_id, failure = None, None
    if args.push_to_hub:
        try:
            repo_id = api.create_repo(repo_name, private=args.hub_private_repo, exist_ok=True).repo_id
            if args.hub_revision:
                api.create_branch(repo_id, branch=args.hub_revision, exist_ok=True)
        except Exception as error:  # whatever stops the upload, the card is written first (below)
            failure = error
    card_options = {"training_summary": summary, "base_model": base_model, "repo_id": repo_id, "license": args.license}
    card_options["revision"] = args.hub_revision if repo_id is not None else None
    model_name = repo_name.split("/")[-1]
    card = write_model_card(args.output_dir, config=trainer.model.config, model_name=model_name, **card_options)
    if repo_id is not None:
        try:
            commit_folder(
                api,
                repo_id,
                args.output_dir,
                include_run_files=args.hub_include_run_files,
                commit_message="End of training",
                revision=args.hub_revision,
            )
        except Exception as error:  # the model and its card stay saved: said in one line below
            failure = error
    say_missing_license(card)
    if failure is not None:
        raise upload_failure(failure, repo_id or repo_name, args.output_dir) from failure
    return repo_id


def say_missing_license(card: Path) -> None:
    """The run's closing line when its card names no license (given, or of the checkpoint it started from)."""
    if ModelCard.load(card).data.license is None:
        print(
            f"{card} names no license (nor does the checkpoint the run started from): pass --license with the "
            "Hub's id of yours (apache-2.0, mit, cc-by-4.0, ...; 'other' for one the Hub does not list)."
        )


def upload_failure(error: Exception, repo: str, output_dir: str) -> ScriptError:
    """The one line for an upload that failed at the end of a run: the model and card are saved, how to send them."""
    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return ScriptError(
        f"--push_to_hub: the upload to {repo} failed ({first_line}); the model and its card are saved in "
        f"{output_dir}: upload them later with roformer_hf.hub.hub_upload.push_folder_to_hub({str(output_dir)!r}, "
        f"{repo!r})."
    )
