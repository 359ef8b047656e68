"""What a script does with the model it trained besides saving it: the model card (README.md), and with
`--push_to_hub` the upload of the output folder, the same way for both scripts."""

from pathlib import Path

from transformers import Trainer

from ..model_card import TrainingSummary, write_model_card

# What stays on the machine: checkpoints, the stage folders of run_mlm.py and TensorBoard logs.
NOT_UPLOADED = ["checkpoint-*", "stage-*", "runs/*"]


def publish_run(trainer: Trainer, summary: TrainingSummary | None, base_model: str | None) -> None:
    """
    On the main process: write output_dir/README.md, the model card, then with `--push_to_hub` upload output_dir
    (model, tokenizer, code, card and results) to `--hub_model_id` (default: the folder's name).

    Args:
        trainer (`Trainer`): the trainer of the run, whose output_dir holds the final model.
        summary (`TrainingSummary`, *optional*): how the model was trained; `None` when the run only evaluated, so
            that the card claims no training.
        base_model (`str`, *optional*): the checkpoint the run started from (`--model_name_or_path`).
    """
    if not trainer.is_world_process_zero():
        return
    args = trainer.args
    write_model_card(args.output_dir, config=trainer.model.config, training_summary=summary, base_model=base_model)
    if args.push_to_hub:
        upload_output_dir(args.output_dir, args.hub_model_id, args.hub_token, args.hub_private_repo)


def upload_output_dir(output_dir: str, repo_id: str | None, token: str | None, private: bool | None) -> str:
    """Upload `output_dir`, less `NOT_UPLOADED`, to the Hub repository `repo_id` (created if needed); returns its id."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    repo_id = api.create_repo(repo_id or Path(output_dir).resolve().name, private=private, exist_ok=True).repo_id
    api.upload_folder(
        repo_id=repo_id, folder_path=output_dir, commit_message="End of training", ignore_patterns=NOT_UPLOADED
    )
    return repo_id
