"""The front matter of a model card, the part the Hub reads: `license`, `base_model`, `datasets`, `language`,
`metrics` and a `model-index` with the run's validation and test results (its model page, search and leaderboards
use them), made with `huggingface_hub`'s `ModelCardData` and `EvalResult` as transformers' `Trainer.create_model_card`
does.

What the user does not say is taken from the checkpoint the run started from: its license from its card, and when it
is a local folder, the Hub model its card names as its base (a converted or fine-tuned checkpoint keeps the Hub's
link to where its weights came from).
"""

import math
import re
from pathlib import Path
from typing import Any

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
# The license ids the Hub knows (https://huggingface.co/docs/hub/repositories-licenses); huggingface_hub has no list
# of them. "other" is for a license not among them (named in the card's text).
# fmt: off
HUB_LICENSES = frozenset({
    "apache-2.0", "mit", "openrail", "bigscience-openrail-m", "creativeml-openrail-m", "bigscience-bloom-rail-1.0",
    "bigcode-openrail-m", "afl-3.0", "artistic-2.0", "bsl-1.0", "bsd", "bsd-2-clause", "bsd-3-clause",
    "bsd-3-clause-clear", "c-uda", "cc", "cc0-1.0", "cc-by-2.0", "cc-by-2.5", "cc-by-3.0", "cc-by-4.0",
    "cc-by-sa-3.0", "cc-by-sa-4.0", "cc-by-nc-2.0", "cc-by-nc-3.0", "cc-by-nc-4.0", "cc-by-nd-4.0",
    "cc-by-nc-nd-3.0", "cc-by-nc-nd-4.0", "cc-by-nc-sa-2.0", "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0",
    "cdla-sharing-1.0", "cdla-permissive-1.0", "cdla-permissive-2.0", "wtfpl", "ecl-2.0", "epl-1.0", "epl-2.0",
    "etalab-2.0", "eupl-1.1", "eupl-1.2", "agpl-3.0", "gfdl", "gpl", "gpl-2.0", "gpl-3.0", "lgpl", "lgpl-2.1",
    "lgpl-3.0", "isc", "h-research", "intel-research", "lppl-1.3c", "ms-pl", "apple-ascl", "apple-amlr", "mpl-2.0",
    "odc-by", "odbl", "openrail++", "osl-3.0", "postgresql", "ofl-1.1", "ncsa", "unlicense", "zlib", "pddl",
    "lgpl-lr", "deepfloyd-if-license", "fair-noncommercial-research-license", "llama2", "llama3", "llama3.1",
    "llama3.2", "llama3.3", "llama4", "gemma", "unknown", "other",
})
# fmt: on


def is_hub_model_id(name: str | None) -> bool:
    """Whether `name` reads as a Hub id (`owner/name`) rather than a local folder."""
    return bool(name) and HUB_ID.fullmatch(name) is not None and not Path(name).exists()


def is_hub_dataset_id(name: str | None) -> bool:
    """Whether `name` reads as a Hub dataset id rather than a local file or folder (`--dataset_name` may be either)."""
    return bool(name) and HUB_DATASET_ID.fullmatch(name) is not None and not Path(name).exists()


def hub_id_of_snapshot(name: str | None, repo_type: str) -> str | None:
    """
    The Hub id of a folder of the Hub cache, `<cache>/models--owner--name/snapshots/<commit>` (`datasets--...` for
    `repo_type="dataset"`), as `hf download` leaves it: that repository at that commit, so named on the card rather
    than as a folder of this machine. `None` for any other name.
    """
    if not name or not Path(name).is_dir():
        return None
    parts = Path(name).resolve().parts
    if len(parts) < 3 or parts[-2] != "snapshots" or not parts[-3].startswith(f"{repo_type}s--"):
        return None
    repo_id = "/".join(parts[-3].split("--")[1:])  # a Hub id holds no "--": the cache's folder joins its parts so
    pattern = HUB_ID if repo_type == "model" else HUB_DATASET_ID
    return repo_id if pattern.fullmatch(repo_id) else None


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
    """The Hub model a checkpoint comes from: `base_model` when it is a Hub id or a folder of the Hub cache
    (`hub_id_of_snapshot`), else the one its card names."""
    hub_id = base_model if is_hub_model_id(base_model) else hub_id_of_snapshot(base_model, "model")
    if hub_id is not None:
        return hub_id
    named = starting_card.base_model if starting_card is not None else None
    named = named[0] if isinstance(named, list) and len(named) == 1 else named
    return named if isinstance(named, str) and is_hub_model_id(named) else None


def finite_results(results: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The results a card shows (text and numbers that are finite) and the names of those left out (NaN or
    infinite: a number the Hub would index as a score though it is none)."""
    left_out = [name for name, value in results.items() if isinstance(value, float) and not math.isfinite(value)]
    return {name: value for name, value in results.items() if name not in left_out}, left_out


def eval_results(
    results: dict[str, float],
    *,
    task_type: str,
    dataset_id: str,
    split_names: dict[str, str],
    dataset_config: str | None = None,
) -> list[EvalResult]:
    """
    The model-index entries of a run's results: one per task metric of the splits of the dataset that the results
    were computed on; the loss, run times and counts are left out, and so are results of rows that are no split of
    the dataset (a held-out part of train, a file given besides the dataset).

    Args:
        results (`dict[str, float]`): the run's metrics, e.g. `{"eval_accuracy": 0.9, "test_f1_macro": 0.8}`.
        task_type (`str`): the Hub's task id, e.g. `"text-classification"`.
        dataset_id (`str`): the dataset's Hub id.
        split_names (`dict[str, str]`): the dataset's split each prefix's results are of, e.g.
            `{"eval": "dev", "test": "test"}` (run_mlm.py's `perplexity` is of its `eval` split).
        dataset_config (`str`, *optional*): the dataset's configuration (`--dataset_config_name`).
    """
    entries = []
    for key, value in results.items():
        prefix, _, name = key.partition("_")
        if key == "perplexity":
            prefix, name = "eval", key
        split = split_names.get(prefix)
        if split is None or name not in TASK_METRICS or not isinstance(value, int | float):
            continue
        metric_type, metric_config = TASK_METRICS[name]
        entries.append(
            EvalResult(
                task_type=task_type,
                dataset_type=dataset_id,
                dataset_name=dataset_id,
                dataset_config=dataset_config,
                dataset_split=split,
                metric_type=metric_type,
                metric_config=metric_config,
                metric_name=name,
                metric_value=float(value),
            )
        )
    return entries


def is_hub_license(license: str | None) -> bool:
    """Whether `license` is one of the Hub's license ids (`HUB_LICENSES`)."""
    return license in HUB_LICENSES


def hub_card_data(
    *,
    pipeline_tag: str | None,
    tags: list[str],
    model_name: str,
    base_model: str | None = None,
    license: str | None = None,
    dataset_name: str | None = None,
    dataset_config: str | None = None,
    split_names: dict[str, str] | None = None,
    results: dict[str, float] | None = None,
) -> ModelCardData:
    """
    The front matter of a RoFormer card. Every id in it is a Hub id: a local checkpoint or dataset is named in the
    card's text only.

    Args:
        pipeline_tag (`str`, *optional*): the task the head serves, also the model-index's task.
        tags (`list[str]`): the Hub tags.
        model_name (`str`): the model's name in the model-index.
        base_model (`str`, *optional*): the checkpoint the model started from (a Hub id or a local folder).
        license (`str`, *optional*): the license's Hub id (`"apache-2.0"`, ...); by default the starting checkpoint's.
        dataset_name (`str`, *optional*): `--dataset_name`; in `datasets` and the model-index where it is a Hub id.
        dataset_config (`str`, *optional*): its configuration (`--dataset_config_name`).
        split_names (`dict[str, str]`, *optional*): the dataset's split each prefix's results are of (`eval_results`).
        results (`dict[str, float]`, *optional*): the run's metrics (`eval_...`, `test_...`), finite ones.
    """
    starting_card = starting_card_data(base_model)
    if license is None and starting_card is not None:
        license = starting_card.license
    entries = []
    if pipeline_tag and results and is_hub_dataset_id(dataset_name):
        entries = eval_results(
            results,
            task_type=pipeline_tag,
            dataset_id=dataset_name,
            split_names=split_names or {},
            dataset_config=dataset_config,
        )
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
    "HUB_LICENSES",
    "eval_results",
    "finite_results",
    "hub_base_model",
    "hub_card_data",
    "hub_id_of_snapshot",
    "is_hub_dataset_id",
    "is_hub_license",
    "is_hub_model_id",
    "starting_card_data",
]
