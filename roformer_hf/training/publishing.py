"""What a script does with the model it trained besides saving it: the model card (README.md), and with
`--push_to_hub` the upload of the output folder, the same way for both scripts."""

from pathlib import Path

from transformers import Trainer, TrainingArguments

from ..model_card import TrainingSummary, write_model_card

# What stays on the machine: checkpoints, the stage folders of run_mlm.py and TensorBoard logs.
NOT_UPLOADED = ["checkpoint-*", "stage-*", "runs/*"]


def publish_run(
    trainer: Trainer, args: TrainingArguments, summary: TrainingSummary | None, base_model: str | None
) -> str | None:
    """
    On the main process: write output_dir/README.md, the model card, and with `--push_to_hub` upload output_dir
    (model, tokenizer, code, card and results) to `--hub_model_id` (default: the folder's name), the card then
    showing how to load the model from there.

    Args:
        trainer (`Trainer`): the trainer that trained the model (the last stage's for run_mlm.py).
        args (`TrainingArguments`): the run's arguments, whose output_dir holds the final model (not a stage's).
        summary (`TrainingSummary`, *optional*): how the model was trained; `None` when the run only evaluated, so
            that the card claims no training.
        base_model (`str`, *optional*): the checkpoint the run started from (`--model_name_or_path`).

    Returns:
        The id of the Hub repository uploaded to, or `None`.
    """
    if not trainer.is_world_process_zero():
        return None
    repo_id = None
    if args.push_to_hub:
        from huggingface_hub import HfApi

        api = HfApi(token=args.hub_token)
        name = args.hub_model_id or Path(args.output_dir).resolve().name
        repo_id = api.create_repo(name, private=args.hub_private_repo, exist_ok=True).repo_id
    card_options = {"training_summary": summary, "base_model": base_model, "repo_id": repo_id}
    write_model_card(args.output_dir, config=trainer.model.config, **card_options)
    if repo_id is not None:
        api.upload_folder(
            repo_id=repo_id,
            folder_path=args.output_dir,
            commit_message="End of training",
            ignore_patterns=NOT_UPLOADED,
        )
    return repo_id
