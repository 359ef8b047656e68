"""The front matter of a model card, the part the Hub reads: `license`, `base_model`, `datasets`, `language`,
`metrics` and a `model-index` with the run's validation and test results (its model page, search and leaderboards
use them), made with `huggingface_hub`'s `ModelCardData` and `EvalResult` as transformers' `Trainer.create_model_card`
does.

What the user does not say is taken from the checkpoint the run started from: its license from its card, and when it
is a local folder, the Hub model its card names as its base (a converted or fine-tuned checkpoint keeps the Hub's
link to where its weights came from).
"""

import re
from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData, hf_hub_download

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
# A dataset's id may lack the owner (the Hub's oldest datasets: "imdb").
HUB_DATASET_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
# The results that are metrics of the task (the model-index's), by their name after the split's prefix: the loss,
# run times and sample counts are not.
TASK_METRICS = {
    "accuracy": ("accuracy", None),
    "f1_macro": ("f1", "macro"),
    "f1_micro": ("f1", "micro"),
    "mse": ("mse", None),
    "mae": ("mae", None),
    "pearson": ("pearsonr", None),
    "perplexity": ("perplexity", None),
}
SPLIT_PREFIXES = {"eval": "validation", "test": "test"}


def is_hub_model_id(name: str | None) -> bool:
    """Whether `name` reads as a Hub id (`owner/name`) rather than a local folder."""
    return bool(name) and HUB_ID.fullmatch(name) is not None and not Path(name).exists()


def is_hub_dataset_id(name: str | None) -> bool:
    """Whether `name` reads as a Hub dataset id rather than a local file or folder (`--dataset_name` may be either)."""
    return bool(name) and HUB_DATASET_ID.fullmatch(name) is not None and not Path(name).exists()


def starting_card_data(base_model: str | None) -> ModelCardData | None:
    """The front matter of the card of the checkpoint a run started from (a local folder, or a Hub model found
    locally or in the cache); `None` when there is no such card."""
    if not base_model:
        return None
    card_file = Path(base_model) / "README.md"
    if not card_file.is_file() and is_hub_model_id(base_model):
        try:
            card_file = Path(hf_hub_download(base_model, "README.md"))
        except (OSError, ValueError):  # offline without it in the cache, no card, no such repository
            return None
    if not card_file.is_file():
        return None
    return ModelCard.load(card_file, ignore_metadata_errors=True).data


def hub_base_model(base_model: str | None, starting_card: ModelCardData | None) -> str | None:
    """The Hub model a checkpoint comes from: `base_model` when it is a Hub id, else the one its card names."""
    if is_hub_model_id(base_model):
        return base_model
    named = starting_card.base_model if starting_card is not None else None
    named = named[0] if isinstance(named, list) and len(named) == 1 else named
    return named if isinstance(named, str) and is_hub_model_id(named) else None


def eval_results(results: dict[str, float], *, task_type: str, dataset_id: str, dataset_name: str) -> list[EvalResult]:
    """
    The model-index entries of a run's results: one per task metric of the validation (`eval_`) and test (`test_`)
    splits; the loss, run times and counts are left out.

    Args:
        results (`dict[str, float]`): the run's metrics, e.g. `{"eval_accuracy": 0.9, "test_f1_macro": 0.8}`.
        task_type (`str`): the Hub's task id, e.g. `"text-classification"`.
        dataset_id (`str`): the dataset's Hub id, or the data file's name for local data.
        dataset_name (`str`): how the dataset is named on the model page.
    """
    entries = []
    for key, value in results.items():
        prefix, _, name = key.partition("_")
        split = SPLIT_PREFIXES.get(prefix)
        if key == "perplexity":  # run_mlm.py's, of its validation split
            split, name = "validation", key
        if split is None or name not in TASK_METRICS or not isinstance(value, int | float):
            continue
        metric_type, metric_config = TASK_METRICS[name]
        entries.append(
            EvalResult(
                task_type=task_type,
                dataset_type=dataset_id,
                dataset_name=dataset_name,
                dataset_split=split,
                metric_type=metric_type,
                metric_config=metric_config,
                metric_name=name,
                metric_value=float(value),
            )
        )
    return entries


def dataset_identity(dataset_name: str | None, data_files: list[str]) -> tuple[str, str]:
    """The dataset's id and name for the model-index: the Hub id (`--dataset_name`), else the names of the data files
    without their folders (the Hub knows nothing of the folders of the machine that trained the model)."""
    if is_hub_dataset_id(dataset_name):
        return dataset_name, dataset_name
    names = ", ".join(dict.fromkeys(Path(file).name for file in data_files)) or "local data"
    return names, names


def hub_card_data(
    *,
    pipeline_tag: str | None,
    tags: list[str],
    model_name: str,
    base_model: str | None = None,
    license: str | None = None,
    dataset_name: str | None = None,
    data_files: list[str] | None = None,
    results: dict[str, float] | None = None,
) -> ModelCardData:
    """
    The front matter of a RoFormer card.

    Args:
        pipeline_tag (`str`, *optional*): the task the head serves, also the model-index's task.
        tags (`list[str]`): the Hub tags.
        model_name (`str`): the model's name in the model-index.
        base_model (`str`, *optional*): the checkpoint the model started from (a Hub id or a local folder).
        license (`str`, *optional*): the license's Hub id (`"apache-2.0"`, ...); by default the starting checkpoint's.
        dataset_name (`str`, *optional*): the Hub id of the data, for `datasets` and the model-index (a local
            dataset folder is named by `data_files` instead).
        data_files (`list[str]`, *optional*): the local data files, named in the model-index without a Hub id.
        results (`dict[str, float]`, *optional*): the run's metrics (`eval_...`, `test_...`).
    """
    starting_card = starting_card_data(base_model)
    if license is None and starting_card is not None:
        license = starting_card.license
    entries = []
    if pipeline_tag and results:
        dataset_id, shown_name = dataset_identity(dataset_name, data_files or [])
        entries = eval_results(results, task_type=pipeline_tag, dataset_id=dataset_id, dataset_name=shown_name)
    return ModelCardData(
        language="zh",
        license=license,
        library_name="transformers",
        pipeline_tag=pipeline_tag,
        base_model=hub_base_model(base_model, starting_card),
        datasets=[dataset_name] if is_hub_dataset_id(dataset_name) else None,
        metrics=sorted({entry.metric_type for entry in entries}) or None,
        model_name=model_name if entries else None,
        eval_results=entries or None,
        tags=tags,
    )


__all__ = [
    "dataset_identity",
    "eval_results",
    "hub_base_model",
    "hub_card_data",
    "is_hub_dataset_id",
    "is_hub_model_id",
    "starting_card_data",
]
