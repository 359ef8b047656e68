"""Model cards (the README.md of a checkpoint) for RoFormer checkpoints, and `push_to_hub` with such a card.

A card says what the model is (read from its config), how to load it (with `trust_remote_code=True`, since the code
travels with the checkpoint) and, when a training script made it, how it was trained (a `TrainingSummary`).

transformers' `PushToHubMixin.push_to_hub` writes a generic card after `save_pretrained`, so the models' `push_to_hub`
calls `push_to_hub_with_model_card` instead: save, write this card, upload the folder, all through public
`huggingface_hub` API.
"""

import logging
import os
import re
import shlex
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import HfApi, ModelCard
from huggingface_hub.hf_api import CommitInfo
from transformers import PreTrainedConfig

from ..training.machine.precisions import mixed_precision
from .card_metadata import finite_results, hub_base_model, hub_card_data, hub_id_of_snapshot, is_hub_dataset_id
from .hub_upload import commit_folder

logger = logging.getLogger(__name__)

# What each head does, and the pipeline that serves it.
HEAD_TASKS = {
    "RoFormerModel": ("encoder (hidden states, no head)", "feature-extraction"),
    "RoFormerForMaskedLM": ("masked language model", "fill-mask"),
    "RoFormerForCausalLM": ("causal language model", "text-generation"),
    "RoFormerForSequenceClassification": ("text classifier", "text-classification"),
    "RoFormerForTokenClassification": ("token classifier", "token-classification"),
    "RoFormerForQuestionAnswering": ("extractive question answering model", "question-answering"),
    "RoFormerForMultipleChoice": ("multiple-choice model", None),
}
# transformers 5 has no "question-answering" pipeline; roformer_hf.question_answering_pipeline has one for span heads.
QUESTION_ANSWERING_EXAMPLE = """

With roformer_hf's question-answering pipeline:

```python
from roformer_hf.question_answering_pipeline import RoFormerQuestionAnsweringPipeline

answerer = RoFormerQuestionAnsweringPipeline(model=model, tokenizer=tokenizer)
answerer(question="借款多少？", context="原告与被告签订借款合同，约定借款十万元。")
```"""
PIPELINE_EXAMPLES = {
    "fill-mask": '"今天天气很[MASK]。"',
    "feature-extraction": '"今天天气很好。"',
    "text-classification": '"原告与被告签订借款合同，约定借款十万元。"',
    "token-classification": '"北京大学位于海淀区。"',
    "text-generation": '"今天天气"',
}


@dataclass
class TrainingSummary:
    """How a training script made a checkpoint, for its model card.

    Args:
        script (`str`):
            The script that trained the model, e.g. `"run_mlm.py"`.
        task (`str`):
            What it was trained to do, e.g. `"masked language modelling with whole-word masking"`.
        datasets (`list[str]`):
            The training (and evaluation) data, one readable line each, e.g. `"CAIL2019 (data/cail_sample.jsonl)"`.
            A line that is a local path is shown as its file name (the card travels to the Hub; the folder does not).
        hyperparameters (`dict[str, Any]`, *optional*):
            Settings worth repeating, e.g. `{"learning_rate": 5e-5, "num_train_epochs": 3}`.
        trained_lengths (`list[int]`, *optional*):
            The input lengths (tokens) the run trained at, in order, e.g. `[512, 1536]` for two stages.
        trained_steps (`int`, *optional*):
            The optimizer steps the run took.
        published_step (`int`, *optional*):
            The optimizer step whose weights the run saved where it is not the last: under `--load_best_model_at_end`,
            the step of the best evaluation (by `metric_for_best_model`).
        results (`dict[str, float]`, *optional*):
            Final metrics of the validation (`eval_`) and test (`test_`) splits, e.g. `{"eval_accuracy": 0.93}`: in
            the card's text, and those of the task (accuracy, F1, ...) in its model-index.
        dataset_name (`str`, *optional*):
            `--dataset_name`: where it is a Hub id, the card's `datasets` and model-index name it; a local folder is
            named in the text only.
        dataset_config (`str`, *optional*):
            Its configuration (`--dataset_config_name`), recorded with each result of the model-index.
        split_names (`dict[str, str]`, *optional*):
            The split of `dataset_name` the results of each prefix were computed on, e.g. `{"eval": "dev", "test":
            "test"}`; results of rows that are no split of the dataset (held out of train, a file) have none, and no
            model-index entry.
        evaluation_data (`dict[str, str]`, *optional*):
            Where the rows of a prefix without a split came from, in words, e.g. `{"eval": "5% of the training text
            held out (not trained on)"}`.
        precision (`str`, *optional*):
            The precision the results were computed in, e.g. `"float32"` or `"bf16 autocast"`.
        command (`str`, *optional*):
            The command line that ran the script.
    """

    script: str
    task: str
    datasets: list[str]
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    results: dict[str, float] = field(default_factory=dict)
    command: str | None = None
    trained_lengths: list[int] = field(default_factory=list)
    trained_steps: int | None = None
    published_step: int | None = None
    dataset_name: str | None = None
    precision: str | None = None
    dataset_config: str | None = None
    split_names: dict[str, str] = field(default_factory=dict)
    evaluation_data: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_trainer(cls, trainer, *, script: str, task: str, datasets: list[str], **kwargs) -> "TrainingSummary":
        """
        Reads the usual hyperparameters from `trainer.args` (a `TrainingArguments`): `max_steps` when it set the
        length of training, else `num_train_epochs`, the mixed precision ("bf16", "fp16" or "no": float32) and, on a
        CPU, the threads it computed with (`cpu_threads`: a run's numbers depend on them); and the steps taken from
        `trainer.state`. `kwargs` fill the rest.
        """
        args = trainer.args
        length_of_training = (
            {"max_steps": args.max_steps} if args.max_steps > 0 else {"num_train_epochs": args.num_train_epochs}
        )
        hyperparameters = {
            "learning_rate": args.learning_rate,
            "train_batch_size": args.per_device_train_batch_size * max(args.n_gpu, 1),
            "gradient_accumulation_steps": args.gradient_accumulation_steps,
            **length_of_training,
            "lr_scheduler_type": str(getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)),
            "warmup_steps": args.warmup_steps,
            "weight_decay": args.weight_decay,
            "seed": args.seed,
            "mixed_precision": mixed_precision(args),
        }
        if args.device.type == "cpu":
            hyperparameters["cpu_threads"] = torch.get_num_threads()
        best_step = trainer.state.best_global_step if args.load_best_model_at_end else None
        if best_step is not None:
            hyperparameters["metric_for_best_model"] = args.metric_for_best_model
        hyperparameters.update(kwargs.pop("hyperparameters", {}))
        kwargs.setdefault("trained_steps", trainer.state.global_step)
        if best_step != kwargs["trained_steps"]:
            kwargs.setdefault("published_step", best_step)
        return cls(script=script, task=task, datasets=datasets, hyperparameters=hyperparameters, **kwargs)


def _with_hub_ids(summary: TrainingSummary | None) -> TrainingSummary | None:
    """The summary with a dataset read from a Hub cache snapshot (`hf download`'s folder) named by its Hub id."""
    hub_id = hub_id_of_snapshot(summary.dataset_name, "dataset") if summary is not None else None
    if hub_id is None:
        return summary
    lines = [hub_id if line == summary.dataset_name else line for line in summary.datasets]
    return replace(summary, dataset_name=hub_id, datasets=lines)


def _finite_summary(summary: TrainingSummary | None) -> tuple[TrainingSummary | None, list[str]]:
    """The summary with its finite results only (the Hub's metadata takes no NaN), and the names of those left out,
    said in one warning."""
    if summary is None:
        return None, []
    shown, left_out = finite_results(summary.results)
    if left_out:
        logger.warning(f"the model card leaves out {', '.join(left_out)}: not finite numbers")
    return replace(summary, results=shown), left_out


def model_card(
    config: PreTrainedConfig,
    *,
    repo_id: str | None = None,
    training_summary: TrainingSummary | None = None,
    base_model: str | None = None,
    converted_from: str | None = None,
    tags: list[str] | None = None,
    license: str | None = None,
    model_name: str | None = None,
    revision: str | None = None,
) -> ModelCard:
    """Builds the model card of a RoFormer checkpoint.

    Args:
        config (`RoFormerConfig`):
            The model's config; `config.architectures` (set by `save_pretrained`) names the head.
        repo_id (`str`, *optional*):
            Where the checkpoint lives (Hub repository or folder), used in the loading examples.
        training_summary (`TrainingSummary`, *optional*):
            How a training script made the checkpoint. Without it, the card says no training run is recorded.
        base_model (`str`, *optional*):
            The checkpoint this one was converted or fine-tuned from: a Hub model id goes into the card's metadata
            (the Hub links them), a local path only into the text.
        converted_from (`str`, *optional*):
            The original checkpoint that `python -m roformer_hf.conversion.convert` read.
        tags (`list[str]`, *optional*):
            More Hub tags.
        license (`str`, *optional*):
            The license's Hub id (`"apache-2.0"`, `"mit"`, ...); by default the one of `base_model`'s card.
        model_name (`str`, *optional*):
            The model's name in the title and model-index; by default the name of `repo_id`, else "RoFormer".
        revision (`str`, *optional*):
            The branch of `repo_id` the checkpoint is uploaded to, where it is not the default one (`--hub_revision`):
            the loading examples name it.

    Returns:
        A `huggingface_hub.ModelCard`; `card.save(path)` writes it.
    """
    architecture = (config.architectures or ["RoFormerModel"])[0]
    description, pipeline_tag = HEAD_TASKS.get(architecture, ("model", None))
    name = model_name or (repo_id.rstrip("/").split("/")[-1] if repo_id else "RoFormer")
    summary, left_out = _finite_summary(_with_hub_ids(training_summary))
    card_data = hub_card_data(
        pipeline_tag=pipeline_tag,
        tags=["roformer", "roformer_hf", "rope", "custom_code", *(tags or [])],
        model_name=name,
        base_model=base_model,
        license=license,
        dataset_name=summary.dataset_name if summary is not None else None,
        dataset_config=summary.dataset_config if summary is not None else None,
        split_names=summary.split_names if summary is not None else None,
        results=summary.results if summary is not None else None,
    )
    sections = [
        _title_section(config, architecture, description, name),
        _architecture_section(config, architecture, summary),
        _loading_section(architecture, pipeline_tag, repo_id or "path/to/checkpoint", revision),
        _training_section(summary, base_model, converted_from, left_out),
    ]
    return ModelCard(f"---\n{card_data.to_yaml()}\n---\n\n" + "\n\n".join(sections) + "\n")


def write_model_card(output_dir: str | Path, *, config: PreTrainedConfig, **card_options) -> Path:
    """Writes `output_dir/README.md` and returns its path.

    Args:
        output_dir (`str` or `Path`):
            The checkpoint folder.
        config (`RoFormerConfig`):
            The model's config.
        card_options:
            The keyword arguments of `model_card`: `repo_id`, `training_summary`, `base_model`, `converted_from`,
            `tags`, `license`, `model_name`.
    """
    path = Path(output_dir) / "README.md"
    # Written beside and renamed: a process killed while writing leaves the old card, not half a new one. (Not
    # training.outputs.checkpoints.atomic_path: what lies beside the model does not import the scripts' layer.)
    temporary = path.with_name(".README.partial.md")
    model_card(config, **card_options).save(temporary)
    os.replace(temporary, path)
    return path


def push_to_hub_with_model_card(
    model,
    repo_id: str,
    *,
    training_summary: TrainingSummary | None = None,
    base_model: str | None = None,
    commit_message: str | None = None,
    commit_description: str | None = None,
    private: bool | None = None,
    token: bool | str | None = None,
    revision: str | None = None,
    create_pr: bool = False,
    max_shard_size: int | str | None = "50GB",
    tags: list[str] | None = None,
    license: str | None = None,
) -> CommitInfo:
    """Uploads `model` (weights, config, code) and its model card to the Hub repository `repo_id`, in one commit
    (`hub_upload.commit_folder`).

    The arguments are those of transformers' `PushToHubMixin.push_to_hub`, plus `training_summary`, `base_model` and
    `license` for the card (see `model_card`).
    """
    api = HfApi(token=token)
    repo_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder, max_shard_size=max_shard_size)
        card_tags = [*(model.model_tags or []), *(tags or [])]
        card_options = {"training_summary": training_summary, "base_model": base_model, "license": license}
        write_model_card(folder, config=model.config, repo_id=repo_id, tags=card_tags, **card_options)
        return commit_folder(
            api,
            repo_id,
            folder,
            commit_message=commit_message or "Upload model",
            commit_description=commit_description,
            revision=revision,
            create_pr=create_pr,
        )


# An absolute path inside a description: no space, up to a closing bracket, a comma or a semicolon.
ABSOLUTE_PATH = re.compile(r"(?<![\w.~])/[^\s()\[\],;]+")


def without_local_path(text: str) -> str:
    """
    `text` with its local paths cut to their names: the whole text when it is a file or folder that exists here, or
    each absolute path inside it (a description stays whole: `"CAIL2019 (/home/me/cail.jsonl), 96 for training"`
    becomes `"CAIL2019 (cail.jsonl), 96 for training"`). A card is read on the Hub, where the folders of the machine
    that trained the model mean nothing. Hub ids stay as they are.

    Args:
        text (`str`): a data source (`"data/train.jsonl"`, `"/home/me/corpus.txt"`, `"owner/dataset"`) or any text.
    """
    if text and Path(text).exists():
        return Path(text).name
    return ABSOLUTE_PATH.sub(lambda match: Path(match.group()).name, text)


def _title_section(config: PreTrainedConfig, architecture: str, description: str, name: str) -> str:
    text = (
        f"# {name}\n\n"
        f"A Chinese RoFormer {description} (`{architecture}`, model type `roformer_hf`). RoFormer is BERT with rotary "
        "position embeddings (RoPE) in place of a position table: every query and key is rotated by an angle "
        "proportional to its position, so attention depends on relative positions and the model reads texts longer "
        "than those it was trained on. Its vocabulary is word-level: jieba words plus BERT-Chinese characters "
        f"({config.vocab_size:,} entries), tokenized by `RoFormerJiebaTokenizer`."
    )
    labels = _labels(config)
    if labels:
        text += f"\n\nLabels: {labels}."
    return text


def _labels(config: PreTrainedConfig) -> str:
    id2label = config.id2label or {}
    if all(str(label) == f"LABEL_{index}" for index, label in id2label.items()):
        return ""
    return ", ".join(f"{index} = `{label}`" for index, label in sorted(id2label.items()))


def _architecture_section(
    config: PreTrainedConfig, architecture: str, training_summary: TrainingSummary | None
) -> str:
    rope = config.rope_parameters or {}
    rope_text = ", ".join(f"{key} {value}" for key, value in rope.items() if key != "rope_type")
    rows = [
        ("head", f"`{architecture}`"),
        ("layers", config.num_hidden_layers),
        ("hidden size", f"{config.hidden_size} (token embeddings {config.embedding_size})"),
        ("attention heads", f"{config.num_attention_heads} (head dimension {config.head_dim})"),
        ("feed-forward size", config.intermediate_size),
        ("attention", config.attention_type),
        ("RoPE", f"{rope.get('rope_type', 'default')} ({rope_text}), values rotated: {config.rotary_value}"),
        _length_row(config, training_summary),
        ("vocabulary", f"{config.vocab_size:,} entries"),
    ]
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    return f"## Model\n\n| | |\n| --- | --- |\n{table}"


def _length_row(config: PreTrainedConfig, training_summary: TrainingSummary | None) -> tuple[str, str]:
    # max_position_embeddings is what the config says (1536, the original's, unless set): the run knows better
    if training_summary is not None and training_summary.trained_lengths:
        lengths = _lengths_text(training_summary.trained_lengths)
        return "trained length", f"{lengths} tokens (by {training_summary.script}; RoPE has no length cap)"
    return "max_position_embeddings", f"{config.max_position_embeddings} (a hint for truncation, not a cap)"


def _loading_section(architecture: str, pipeline_tag: str | None, location: str, revision: str | None = None) -> str:
    # transformers' naming: RoFormerModel -> AutoModel, RoFormerForMaskedLM -> AutoModelForMaskedLM, ...
    source = f'"{location}", revision="{revision}"' if revision else f'"{location}"'
    head = architecture.removeprefix("RoFormer")
    auto_class = "AutoModel" + head if head.startswith("For") else "AutoModel"
    text = (
        "## How to load\n\n"
        "The code comes with the checkpoint, so transformers loads it with `trust_remote_code=True` (it needs `jieba`, "
        "and uses `rjieba` when installed); with the `roformer_hf` package installed, `import roformer_hf` registers "
        "the classes and `trust_remote_code` is not needed.\n\n"
        "```python\n"
        f"from transformers import AutoTokenizer, {auto_class}\n\n"
        f"tokenizer = AutoTokenizer.from_pretrained({source}, trust_remote_code=True)\n"
        f"model = {auto_class}.from_pretrained({source}, trust_remote_code=True)\n"
        "```"
    )
    if pipeline_tag in PIPELINE_EXAMPLES:
        text += (
            "\n\nWith a pipeline:\n\n```python\nfrom transformers import pipeline\n\n"
            f'pipe = pipeline("{pipeline_tag}", model={source}, trust_remote_code=True)\n'
            f"pipe({PIPELINE_EXAMPLES[pipeline_tag]})\n```"
        )
    elif pipeline_tag == "question-answering":
        text += QUESTION_ANSWERING_EXAMPLE
    return text


def _base_model_text(base_model: str | None) -> str:
    if not base_model:
        return ""
    hub_id = hub_base_model(base_model, starting_card=None)  # a Hub id, or hf download's folder of one
    if hub_id is not None:
        return f"\n\nBase model: [`{hub_id}`](https://huggingface.co/{hub_id})."
    return (
        f"\n\nStarted from `{without_local_path(base_model)}`, a local checkpoint of the machine that trained this "
        "model (not on the Hub)."
    )


def _evaluation_lines(summary: TrainingSummary) -> list[str]:
    """Where each split's results come from: a split of the dataset (and its configuration), or in words."""
    lines = []
    for prefix, role in (("eval", "validation"), ("test", "test")):
        if not any(
            name.startswith(f"{prefix}_") or (prefix, name) == ("eval", "perplexity") for name in summary.results
        ):
            continue
        if prefix in summary.split_names:
            dataset = f"`{without_local_path(summary.dataset_name or '')}`"
            if not is_hub_dataset_id(summary.dataset_name):
                dataset = f"the local dataset {dataset}"
            where = f"the split `{summary.split_names[prefix]}` of {dataset}"
            if summary.dataset_config:
                where += f" (configuration `{summary.dataset_config}`)"
        elif prefix in summary.evaluation_data:
            where = without_local_path(summary.evaluation_data[prefix])
        else:
            continue
        lines.append(f"- `{prefix}_` ({role}): {where}")
    return lines


def _training_section(
    training_summary: TrainingSummary | None,
    base_model: str | None,
    converted_from: str | None,
    left_out: list[str] | None = None,
) -> str:
    origin = _base_model_text(base_model)
    if converted_from:
        origin += (
            f"\n\nConverted by `python -m roformer_hf.conversion.convert` from the original checkpoint "
            f"`{converted_from}`: the same weights under the same names, without the sinusoidal position table (RoPE is "
            "computed from the config)."
        )
    if training_summary is None:
        return f"## Training\n\nThis checkpoint records no training run of roformer_hf's scripts.{origin}"
    summary = training_summary
    lines = ["## Training", "", f"Trained by `{summary.script}` from roformer_hf: {summary.task}.{origin}"]
    if summary.trained_steps is not None and summary.trained_lengths:
        lengths = _lengths_text(summary.trained_lengths)
        lines += ["", f"{summary.trained_steps:,} optimizer steps on inputs of {lengths} tokens."]
    if summary.published_step is not None:
        lines += [
            "",
            f"The weights are those of step {summary.published_step:,}, the best evaluation by `metric_for_best_model` "
            "(`--load_best_model_at_end`), not the last step's.",
        ]
    lines += ["", "Data:", "", *(f"- {without_local_path(dataset)}" for dataset in summary.datasets)]
    if summary.hyperparameters:
        lines += ["", "| hyperparameter | value |", "| --- | --- |"]
        lines += [f"| {name} | {value} |" for name, value in summary.hyperparameters.items()]
    if summary.results:
        precision = f" (computed in {summary.precision})" if summary.precision else ""
        lines += ["", f"Results{precision}:", "", "| result | value |", "| --- | --- |"]
        lines += [f"| {name} | {_format_number(value)} |" for name, value in summary.results.items()]
        evaluated_on = _evaluation_lines(summary)
        if evaluated_on:
            lines += ["", "Evaluated on:", "", *evaluated_on]
    if left_out:
        lines += ["", f"Left out of the results: {', '.join(f'`{name}`' for name in left_out)} (not finite numbers)."]
    if summary.command:
        command, shortened = _command_without_local_paths(summary.command)
        lines += ["", "Command (run in the folder the training ran in):", "", "```bash", command, "```"]
        if shortened:
            lines += ["", "(Paths outside that folder are shown by their names only.)"]
    return "\n".join(lines)


def _lengths_text(lengths: list[int]) -> str:
    """The input lengths of a run's stages as a card says them, e.g. "512 then 1,536"."""
    return " then ".join(f"{length:,}" for length in lengths)


def _command_without_local_paths(command: str) -> tuple[str, bool]:
    """
    The command as a card shows it, and whether a path was shortened. Relative paths stay, so the command re-runs as
    written in the folder the training ran in; an absolute path inside that folder becomes relative to it, one
    elsewhere is cut to its name (the machine's folders mean nothing on the Hub).
    """
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: not a command line shlex can read, so shown as given
        return command, False
    outside = [Path(word).is_absolute() and not Path(word).is_relative_to(Path.cwd()) for word in words]
    shown = [_path_relative_to_run(word) for word in words]
    return shlex.join(shown), any(outside)


def _path_relative_to_run(word: str) -> str:
    path = Path(word)
    if not path.is_absolute():
        return word
    if path.is_relative_to(Path.cwd()):
        return str(path.relative_to(Path.cwd()))
    return path.name


def _format_number(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


__all__ = [
    "TrainingSummary",
    "model_card",
    "push_to_hub_with_model_card",
    "without_local_path",
    "write_model_card",
]
