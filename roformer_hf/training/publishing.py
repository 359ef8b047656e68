"""What a script does with the model it trained besides saving it: the model card (README.md), and with
`--push_to_hub` the upload of the output folder, the same way for both scripts.

The upload is the script's, once, at the end of the run (`roformer_hf.hub_upload`: the model, its code, tokenizer,
card and metrics; the run's predictions, pictures and settings only with `--hub_include_run_files`). The Trainer is
handed `push_to_hub=False` (`trainer_arguments`): its own pushes, at every checkpoint and when the model is saved,
upload the whole output folder as it lies.
"""

from dataclasses import replace
from pathlib import Path
from typing import Any

from huggingface_hub import ModelCard
from transformers import Trainer, TrainingArguments

from ..hub_upload import commit_folder
from ..model_card import TrainingSummary, write_model_card


def trainer_arguments(training_args: TrainingArguments) -> TrainingArguments:
    """The arguments to build a script's Trainer with: the run's, without the Trainer's own pushes to the Hub."""
    return replace(training_args, push_to_hub=False) if training_args.push_to_hub else training_args


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
    folder's name), the card then showing how to load the model from there.

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
    model_name, repo_id = repo_name.split("/")[-1], None
    if args.push_to_hub:
        from huggingface_hub import HfApi

        api = HfApi(token=args.hub_token)
        repo_id = api.create_repo(repo_name, private=args.hub_private_repo, exist_ok=True).repo_id
    card_options = {"training_summary": summary, "base_model": base_model, "repo_id": repo_id, "license": args.license}
    card = write_model_card(args.output_dir, config=trainer.model.config, model_name=model_name, **card_options)
    if repo_id is not None:
        commit_folder(
            api,
            repo_id,
            args.output_dir,
            include_run_files=args.hub_include_run_files,
            commit_message="End of training",
        )
    if ModelCard.load(card).data.license is None:
        print(
            f"{card} names no license (nor does the checkpoint the run started from): pass --license with the "
            "Hub's id of yours (apache-2.0, mit, cc-by-4.0, ...; 'other' for one the Hub does not list)."
        )
    return repo_id
