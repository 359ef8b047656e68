"""Pretrain a RoFormer masked language model, or continue pretraining a checkpoint on your own text.

Shaped like transformers' `run_mlm.py` (argument dataclasses, `HfArgumentParser`, every `TrainingArguments` option,
a single `.json`/`.yaml` file of arguments) with what RoFormer's pretraining adds:

- whole-word masking over jieba words (the tokenizer's `word_ids`), also on blocks packed from several texts;
- `--stages "512:256:200000,1536:256:12500,..."` (max_seq_length:global_batch:steps): one run walks the stages, each
  starting from the weights and optimizer state the previous one ended with; the learning-rate schedule spans them all;
- masked-token accuracy (computed offline by an `evaluate` module of `roformer_hf.metrics`), perplexity, a loss
  curve and a model card.

Run it without arguments for a demo: a tiny RoFormer pretrained in 1,700 small steps (a few minutes on a CPU) on the
People's Daily sample in `data/`, saved to `./outputs/run_mlm/`. Runs unchanged under `torchrun` and `accelerate launch`.

    python run_mlm.py --train_file corpus.txt --tokenizer_name vocab.txt \
        --config_overrides "hidden_size=256,num_hidden_layers=4,num_attention_heads=4,intermediate_size=1024" \
        --stages "128:64:2000,512:32:500" --per_device_train_batch_size 16 --output_dir my-roformer
"""

import json
import logging
import math
import re
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import datasets
import torch
from safetensors.torch import load_file
from transformers import (
    EvalPrediction,
    PreTrainedTokenizerBase,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)

from roformer_hf import RoFormerForMaskedLM
from roformer_hf.metrics import load as load_metric
from roformer_hf.training.building import build_config, build_model, build_tokenizer
from roformer_hf.training.cli import (
    ModelArguments,
    ScriptTrainingArguments,
    command_line,
    demo_or_given_arguments,
    parse_arguments,
)
from roformer_hf.training.console import loading_instructions, setup_logging
from roformer_hf.training.data_files import CSV_ONLY_EMPTY_CELLS_MISSING, check_data_file, data_file_error
from roformer_hf.training.errors import ScriptError
from roformer_hf.training.interrupts import StopAtStepBoundary, raise_if_stopped
from roformer_hf.training.launch import check_distributed_launch
from roformer_hf.training.resume import (
    absolute_path,
    check_resume,
    find_resume_checkpoint,
    last_complete_checkpoint,
    record_run_settings,
    run_settings,
)
from roformer_hf.training.run_outputs import (
    atomic_path,
    check_output_dir,
    prepare_output_dir,
    save_metrics,
    save_model_atomically,
    save_state,
    write_json_atomically,
)
from roformer_hf.training.script_runner import guard_run, run_script

logger = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parent / "data"
DEMO_ARGUMENTS = [
    *("--train_file", str(DATA_DIR / "peoples_daily_sample.txt")),
    *("--tokenizer_name", str(DATA_DIR / "demo_vocab.txt")),
    *("--config_overrides", "hidden_size=128,num_hidden_layers=2,num_attention_heads=2,intermediate_size=512"),
    # 1,700 small steps: 190 left the model at the frequent-token stage (fill-mask guesses ， 的 。 whatever the context)
    *("--stages", "64:16:1500,128:16:200"),
    *("--per_device_train_batch_size", "16", "--per_device_eval_batch_size", "32"),
    *("--learning_rate", "2e-3", "--warmup_steps", "100", "--weight_decay", "0.01"),
    *("--logging_steps", "50", "--save_steps", "500", "--save_total_limit", "2", "--output_dir", "outputs/run_mlm"),
]
SCRIPT_DEFAULTS = {"do_train": True, "do_eval": True, "output_dir": "outputs/run_mlm", "report_to": "none"}
FILL_MASK_EXAMPLES = [
    "新华社北京一月一日[MASK]",
    "中国人民[MASK]继承邓小平同志的遗志。",
    "国民经济保持了良好的发展[MASK]。",
]
MIN_SEQ_LENGTH = 8
# Texts longer than this many characters are cut into pieces before tokenization (not with --line_by_line, where a
# line is an example): the tokenizer's memory follows the length of one text, so a corpus on one line needed several times
# the memory of the same text in lines. Packing joins the pieces again, with [SEP] [CLS] at each cut.
LONG_TEXT_CHARACTERS = 2_000
SENTENCE_ENDS = ("。", "！", "？", "!", "?", "\n")
# Streamed validation text has no length: without --max_eval_samples, evaluate on this many of its blocks (the whole
# streamed share of a large corpus took 10 minutes before and after a 2-step run).
STREAMING_MAX_EVAL_SAMPLES = 1000


@dataclass
class DataArguments:
    """Which text to pretrain on and how to cut it into training examples."""

    train_file: str | None = field(
        default=None, metadata={"help": "Training text: .txt (one document or paragraph a line), .jsonl or .csv."}
    )
    validation_file: str | None = field(default=None, metadata={"help": "Validation text, same formats."})
    dataset_name: str | None = field(
        default=None,
        metadata={"help": "A dataset saved with `save_to_disk` (a Dataset or a DatasetDict with train/validation)."},
    )
    text_column_name: str = field(default="text", metadata={"help": "The column holding the text (jsonl/csv)."})
    validation_split_percentage: int = field(
        default=5, metadata={"help": "Percentage of the training text held out for validation when none is given."}
    )
    max_seq_length: int = field(
        default=512, metadata={"help": "Tokens per training example, special tokens included (without --stages)."}
    )
    line_by_line: bool = field(
        default=False,
        metadata={"help": "One example per line (truncated to max_seq_length) instead of packing text into blocks."},
    )
    streaming: bool = field(
        default=False, metadata={"help": "Stream the data instead of loading it (needs max_steps)."}
    )
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "Processes for tokenization."})
    overwrite_cache: bool = field(default=False, metadata={"help": "Tokenize again instead of using datasets' cache."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only this many training examples."})
    max_eval_samples: int | None = field(
        default=None,
        metadata={
            "help": "Keep only this many validation examples (with --streaming: "
            f"{STREAMING_MAX_EVAL_SAMPLES:,} unless given)."
        },
    )


@dataclass
class MaskingArguments:
    """How tokens are masked and how the run is staged."""

    mlm_probability: float = field(default=0.15, metadata={"help": "Share of words (or tokens) to predict."})
    whole_word_mask: bool = field(
        default=True,
        metadata={"help": "Mask every piece of a chosen jieba word together (--no_whole_word_mask: single tokens)."},
    )
    stages: str | None = field(
        default=None,
        metadata={
            "help": "Training stages as 'max_seq_length:global_batch:steps,...', e.g. RoFormer's "
            "'512:256:200000,1536:256:12500,256:256:120000,128:512:80000,1536:256:10000,512:512:30000'. The global "
            "batch is per_device_train_batch_size x gradient accumulation x processes; gradient accumulation is "
            "derived. Overrides max_seq_length, max_steps and gradient_accumulation_steps."
        },
    )
    sparse_prediction: bool = field(
        default=True,
        metadata={
            "help": "Run the MLM head at the masked positions only (the same loss and metrics; a base-model step "
            "1.19x faster than with the head at every position). Saved in the config, where it acts only when "
            "labels are given: fill-mask and other uses without labels get logits at every position. "
            "--sparse_prediction false: the head at every position."
        },
    )


@dataclass(frozen=True)
class Stage:
    """One stage of a pretraining run; `None` batch and steps mean "as TrainingArguments say" (no --stages)."""

    max_seq_length: int
    global_batch_size: int | None = None
    steps: int | None = None


def parse_stages(text: str) -> list[Stage]:
    """
    Parse `--stages`: `"max_seq_length:global_batch:steps"` items separated by commas.

    Raises `ScriptError` naming the malformed item.
    """
    stages = []
    for item in text.split(","):
        numbers = item.strip().split(":")
        # ASCII digits only: str.isdigit() also accepts "²", which int() then refuses
        if len(numbers) != 3 or not all(re.fullmatch(r"[0-9]+", number.strip()) for number in numbers):
            raise ScriptError(
                f"--stages: {item.strip()!r} is not 'max_seq_length:global_batch:steps' with three positive integers "
                "in digits 0-9 (e.g. --stages 512:256:1000,1536:256:100)."
            )
        max_seq_length, global_batch_size, steps = (int(number) for number in numbers)
        if global_batch_size < 1 or steps < 1:
            raise ScriptError(f"--stages: {item.strip()!r} needs a global batch and a number of steps of at least 1.")
        stages.append(Stage(max_seq_length, global_batch_size, steps))
    return stages


@dataclass
class WholeWordMaskCollator:
    """
    Pads blocks and masks them for masked language modelling: each jieba word (or each token, without whole-word
    masking) is chosen with `mlm_probability`; the tokens of chosen words become `[MASK]` (80%), a random token
    (10%) or stay (10%), and only they get labels. Special tokens and padding (`word_ids` -1) are never chosen.

    The masks of an example depend only on its own seed: `mask_seed` for validation examples (the same masks at every
    evaluation, so evaluations compare), and `(seed, epoch, example_index)` for training examples (new masks every
    epoch). So a resumed run masks exactly as an uninterrupted one, whatever batches the Trainer fetches to skip
    and whatever the state of the global RNG, and so do dataloader workers and DDP processes. Examples with neither
    key draw from torch's global generator.

    Args:
        tokenizer (`PreTrainedTokenizerBase`): gives the ids of `[PAD]` and `[MASK]` and the vocabulary size.
        mlm_probability (`float`): share of words (or tokens) to predict.
        whole_word_mask (`bool`): choose whole words rather than single tokens.
        mask_replace_probability (`float`): share of chosen tokens replaced by `[MASK]`.
        random_replace_probability (`float`): share of chosen tokens replaced by a random token.
        seed (`int`): seed of the training masks (the Trainer's seed).
        epoch (`int`): the current epoch, set by `EpochCallback`.
    """

    tokenizer: PreTrainedTokenizerBase
    mlm_probability: float = 0.15
    whole_word_mask: bool = True
    mask_replace_probability: float = 0.8
    random_replace_probability: float = 0.1
    seed: int = 0
    epoch: int = 0

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        length = max(len(example["input_ids"]) for example in examples)
        input_ids = torch.full((len(examples), length), self.tokenizer.pad_token_id)
        word_ids = torch.full((len(examples), length), -1)
        attention_mask = torch.zeros((len(examples), length), dtype=torch.long)
        for row, example in enumerate(examples):
            size = len(example["input_ids"])
            input_ids[row, :size] = torch.as_tensor(example["input_ids"])
            word_ids[row, :size] = torch.as_tensor(example["word_ids"])
            attention_mask[row, :size] = 1
        draws = torch.stack([self._draws(length, self._example_seed(example)) for example in examples], dim=1)
        labels = self._choose(word_ids, draws[0], input_ids)
        input_ids = self._replace(input_ids, labels != -100, draws[1:])
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}

    def _example_seed(self, example: dict[str, Any]) -> int | None:
        if "mask_seed" in example:
            return example["mask_seed"]
        if "example_index" in example:
            return ((self.seed * 1_000_003 + self.epoch) * 1_000_000_007 + example["example_index"]) % 2**63
        return None

    @staticmethod
    def _draws(length: int, seed: int | None) -> torch.Tensor:
        generator = None if seed is None else torch.Generator().manual_seed(seed)
        return torch.rand((4, length), generator=generator)  # choice, [MASK] or not, random or kept, random token

    def _choose(self, word_ids: torch.Tensor, choice_draws: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        if self.whole_word_mask:
            # every token of a word takes the draw of the word's rank within its row, so a word is chosen whole
            for row in range(word_ids.shape[0]):
                _, rank = torch.unique(word_ids[row], return_inverse=True)
                choice_draws[row] = choice_draws[row][rank]
        chosen = (choice_draws < self.mlm_probability) & (word_ids >= 0)
        return torch.where(chosen, input_ids, -100)

    def _replace(self, input_ids: torch.Tensor, chosen: torch.Tensor, draws: torch.Tensor) -> torch.Tensor:
        to_mask = chosen & (draws[0] < self.mask_replace_probability)
        keep_share = 1.0 - self.mask_replace_probability
        to_random = chosen & ~to_mask & (draws[1] < self.random_replace_probability / max(keep_share, 1e-12))
        random_ids = (draws[2] * len(self.tokenizer)).long()
        input_ids = torch.where(to_mask, self.tokenizer.mask_token_id, input_ids)
        return torch.where(to_random, random_ids, input_ids)


class StagedTrainer(Trainer):
    """
    A Trainer whose learning-rate schedule spans every stage of the run, and which can start from the optimizer and
    scheduler state the previous stage ended with (`create_optimizer` / `create_scheduler` are the overriding points
    transformers documents).

    Args:
        schedule_steps (`int`, *optional*): length of the whole schedule; `None` uses the Trainer's own.
        start_state (`dict`, *optional*): `{"optimizer": ..., "scheduler": ...}` state dicts to start from.
    """

    def __init__(self, *args, schedule_steps: int | None = None, start_state: dict | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.schedule_steps = schedule_steps
        self.start_state = start_state

    def create_optimizer(self, model=None) -> torch.optim.Optimizer:
        is_new = self.optimizer is None
        optimizer = super().create_optimizer(model)
        if is_new and self.start_state is not None:
            optimizer.load_state_dict(self.start_state["optimizer"])
        return optimizer

    def create_scheduler(self, num_training_steps: int, optimizer=None) -> torch.optim.lr_scheduler.LRScheduler:
        is_new = self.lr_scheduler is None
        scheduler = super().create_scheduler(self.schedule_steps or num_training_steps, optimizer)
        if is_new and self.start_state is not None:
            scheduler.load_state_dict(self.start_state["scheduler"])
            # a new scheduler sets the learning rate of its step 0; continue at the step the last stage reached
            for group, learning_rate in zip(scheduler.optimizer.param_groups, scheduler.get_last_lr(), strict=True):
                group["lr"] = learning_rate
        return scheduler


def parse_args(
    argv: list[str] | None = None,
) -> tuple[ModelArguments, DataArguments, MaskingArguments, TrainingArguments]:
    """Parse the arguments (no arguments at all: the demo) and check what the dataclasses cannot."""
    argv = demo_or_given_arguments(argv, DEMO_ARGUMENTS)
    model_args, data_args, masking_args, training_args = parse_arguments(
        (ModelArguments, DataArguments, MaskingArguments, ScriptTrainingArguments), argv, SCRIPT_DEFAULTS, __doc__
    )
    if masking_args.stages is not None:
        parse_stages(masking_args.stages)  # fail now rather than after loading the data
    if data_args.train_file is None and data_args.dataset_name is None:
        raise ScriptError("no training data: give --train_file (txt/jsonl/csv) or --dataset_name (a saved dataset).")
    if not 0 <= data_args.validation_split_percentage < 100:
        raise ScriptError(
            f"--validation_split_percentage must be in [0, 100), got {data_args.validation_split_percentage}."
        )
    if not 0.0 < masking_args.mlm_probability < 1.0:
        raise ScriptError(f"--mlm_probability must lie between 0 and 1, got {masking_args.mlm_probability}.")
    if data_args.streaming and masking_args.stages is None and training_args.max_steps <= 0:
        raise ScriptError("--streaming data has no length: give --max_steps (or --stages).")
    return model_args, data_args, masking_args, training_args


def bound_streamed_evaluation(data_args: DataArguments) -> None:
    """With `--streaming` and no `--max_eval_samples`, evaluate on the first `STREAMING_MAX_EVAL_SAMPLES` blocks."""
    if data_args.streaming and data_args.max_eval_samples is None:
        data_args.max_eval_samples = STREAMING_MAX_EVAL_SAMPLES
        logger.warning(
            f"--streaming: each evaluation reads the first {STREAMING_MAX_EVAL_SAMPLES:,} validation examples only "
            "(streamed text has no length); --max_eval_samples sets another number."
        )


def plan_stages(
    data_args: DataArguments, masking_args: MaskingArguments, training_args: TrainingArguments
) -> list[Stage]:
    """The stages to walk: those of `--stages`, else one stage as `TrainingArguments` say. Checks them all."""
    stages = parse_stages(masking_args.stages) if masking_args.stages else [Stage(data_args.max_seq_length)]
    for index, stage in enumerate(stages):
        if stage.max_seq_length < MIN_SEQ_LENGTH:
            raise ScriptError(
                f"max_seq_length {stage.max_seq_length} is too short: use at least {MIN_SEQ_LENGTH} tokens "
                "([CLS], [SEP] and some text)."
            )
        if stage.global_batch_size is not None:
            gradient_accumulation_steps(stage, index, training_args)
    warn_if_no_training_loss_is_logged(stages, training_args)
    return stages


def warn_if_no_training_loss_is_logged(stages: list[Stage], training_args: TrainingArguments) -> None:
    """Warn when `--logging_steps` exceeds every stage: the Trainer would log no training loss, the curve no line."""
    longest = max(stage.steps or training_args.max_steps for stage in stages)
    logging_steps = training_args.logging_steps
    if training_args.logging_strategy == "steps" and 1 <= longest < logging_steps and training_args.do_train:
        logger.warning(
            f"--logging_steps {logging_steps:g} is more than the {longest} steps of the longest stage: no training "
            f"loss will be logged and the loss curve will show none; use e.g. --logging_steps {max(1, longest // 10)}."
        )


def gradient_accumulation_steps(stage: Stage, index: int, training_args: TrainingArguments) -> int:
    """The gradient accumulation that gives the stage its global batch with this per-device batch and world size."""
    per_step = training_args.per_device_train_batch_size * training_args.world_size
    if stage.global_batch_size % per_step != 0:
        raise ScriptError(
            f"stage {index + 1}: the global batch {stage.global_batch_size} is not a multiple of "
            f"per_device_train_batch_size x processes = {training_args.per_device_train_batch_size} x "
            f"{training_args.world_size}: choose a per-device batch size that divides it."
        )
    return stage.global_batch_size // per_step


def load_raw_datasets(data_args: DataArguments, model_args: ModelArguments) -> datasets.DatasetDict:
    """
    Load the text as a `DatasetDict` (or `IterableDatasetDict` when streaming) with `train` and, when there is
    validation text, `validation` splits holding one column, `text`, without blank texts.
    """
    if data_args.dataset_name is not None:
        raw_datasets = _load_saved_dataset(data_args)
    else:
        raw_datasets = _load_text_files(data_args, model_args)
    columns = raw_datasets["train"].column_names
    if columns is not None and data_args.text_column_name not in columns:
        raise ScriptError(
            f"no column {data_args.text_column_name!r} in the data (columns: {', '.join(columns)}): "
            "name the text column with --text_column_name."
        )
    raw_datasets = raw_datasets.select_columns([data_args.text_column_name])
    if data_args.text_column_name != "text":
        raw_datasets = raw_datasets.rename_column(data_args.text_column_name, "text")
    for split, dataset in raw_datasets.items():
        source = (
            f"--dataset_name {data_args.dataset_name}"
            if data_args.dataset_name
            else data_file_option(split, data_args)
        )
        raw_datasets[split] = dataset.filter(_has_text, with_indices=True, fn_kwargs={"source": source})
    if not data_args.streaming and len(raw_datasets["train"]) == 0:
        raise ScriptError("the training data holds no text (only blank lines or empty values).")
    if not data_args.line_by_line:
        raw_datasets = raw_datasets.map(split_long_texts, batched=True, fn_kwargs={"limit": LONG_TEXT_CHARACTERS})
    if "validation" not in raw_datasets and data_args.validation_split_percentage > 0:
        raw_datasets = _split_validation(raw_datasets["train"], data_args.validation_split_percentage)
    return raw_datasets


def data_file_option(split: str, data_args: DataArguments) -> str:
    """The option and file a split was read from, for messages: `--train_file corpus.txt`."""
    return f"--{split}_file {getattr(data_args, f'{split}_file')}"


def _has_text(example: dict[str, Any], index: int, source: str) -> bool:
    """Whether a row holds text (blank lines and empty values are skipped); a number or a list is refused, since
    dropping it would silently lose data the user meant to train on."""
    text = example["text"]
    if text is not None and not isinstance(text, str):
        raise ScriptError(
            f"{source}: data row {index + 1} holds {text!r} ({type(text).__name__}), not text, in the text column: "
            'write every text as a string (in JSON, "123" rather than 123).'
        )
    return text is not None and bool(text.strip())


def split_long_text(text: str, limit: int) -> list[str]:
    """
    `text` cut into pieces of at most `limit` characters, each ending after the last sentence end (`SENTENCE_ENDS`)
    it holds (at `limit` characters where there is none), so that jieba's words are rarely cut.
    """
    pieces, start = [], 0
    while len(text) - start > limit:
        window = text[start : start + limit]
        cut = max(window.rfind(mark) for mark in SENTENCE_ENDS) + 1 or limit
        pieces.append(window[:cut])
        start += cut
    return [*pieces, text[start:]]


def split_long_texts(batch: dict[str, list], limit: int) -> dict[str, list]:
    """Cut every text longer than `limit` characters into pieces (see `split_long_text`), one row each."""
    return {"text": [piece for text in batch["text"] for piece in split_long_text(text, limit)]}


def _load_text_files(data_args: DataArguments, model_args: ModelArguments) -> datasets.DatasetDict:
    data_files = {"train": data_args.train_file}
    if data_args.validation_file is not None:
        data_files["validation"] = data_args.validation_file
    for split, path in data_files.items():
        check_data_file(path, f"--{split}_file")
    builders = {".txt": "text", ".json": "json", ".jsonl": "json", ".csv": "csv"}
    suffixes = {Path(path).suffix.lower() for path in data_files.values()}
    if len(suffixes) != 1 or next(iter(suffixes)) not in builders:
        raise ScriptError(
            f"data files must all be one of {', '.join(builders)}, got {', '.join(data_files.values())}."
        )
    builder = builders[suffixes.pop()]
    csv_options = CSV_ONLY_EMPTY_CELLS_MISSING if builder == "csv" else {}  # a text "NA" stays a text
    try:
        return datasets.load_dataset(
            builder,
            data_files=data_files,
            cache_dir=model_args.cache_dir,
            streaming=data_args.streaming,
            **csv_options,
        )
    except (datasets.exceptions.DatasetGenerationError, ValueError, OSError) as error:
        files = {f"--{split}_file": path for split, path in data_files.items()}
        raise data_file_error(files, error, cache_dir=model_args.cache_dir) from error


def _load_saved_dataset(data_args: DataArguments) -> datasets.DatasetDict:
    if not Path(data_args.dataset_name).is_dir():
        raise ScriptError(f"--dataset_name {data_args.dataset_name}: no dataset saved there (use save_to_disk).")
    loaded = datasets.load_from_disk(data_args.dataset_name)
    if isinstance(loaded, datasets.Dataset):
        loaded = datasets.DatasetDict({"train": loaded})
    if "train" not in loaded:
        raise ScriptError(f"--dataset_name {data_args.dataset_name} has no 'train' split (splits: {list(loaded)}).")
    if data_args.streaming:
        loaded = datasets.IterableDatasetDict({name: split.to_iterable_dataset() for name, split in loaded.items()})
    return loaded


def _split_validation(train: datasets.Dataset, percentage: int) -> datasets.DatasetDict:
    """Hold out the last `percentage`% of the rows (every row whose index ends in 00..percentage-1 when streaming)."""
    if isinstance(train, datasets.IterableDataset):
        return datasets.IterableDatasetDict(
            train=train.filter(lambda _, index: index % 100 >= percentage, with_indices=True),
            validation=train.filter(lambda _, index: index % 100 < percentage, with_indices=True),
        )
    if len(train) < 2:
        raise ScriptError(
            f"the training data holds only one text, too little to hold out {percentage}% of it for validation: "
            "give --validation_file, or --validation_split_percentage 0 to train without evaluation."
        )
    cut = len(train) - max(1, len(train) * percentage // 100)
    return datasets.DatasetDict(train=train.select(range(cut)), validation=train.select(range(cut, len(train))))


def build_tokenizer_and_model(
    model_args: ModelArguments, sparse_prediction: bool = True
) -> tuple[PreTrainedTokenizerBase, RoFormerForMaskedLM]:
    """
    Load the tokenizer (which must have `[MASK]`) and the model, from a checkpoint or from scratch, with
    `sparse_prediction` set in its config (`--config_overrides` still wins).
    """
    tokenizer = build_tokenizer(model_args)
    mask_token_id = tokenizer.convert_tokens_to_ids(tokenizer.mask_token) if tokenizer.mask_token else None
    if mask_token_id is None or mask_token_id == tokenizer.unk_token_id:
        raise ScriptError(
            f"the vocabulary has no mask token {tokenizer.mask_token!r}: masked language modelling needs one; "
            "add [MASK] to the vocab.txt."
        )
    defaults = {} if model_args.model_name_or_path else {"vocab_size": len(tokenizer)}
    # the script owns the labels and reads logits of either shape (predicted_token_ids), so sparse is safe here
    defaults["sparse_prediction"] = sparse_prediction
    config = build_config(model_args, pad_token_id=tokenizer.pad_token_id, **defaults)
    if len(tokenizer) > config.vocab_size:
        raise ScriptError(
            f"the tokenizer has {len(tokenizer)} tokens but the model only {config.vocab_size} embeddings: "
            "use the checkpoint's own tokenizer or a larger vocab_size."
        )
    return tokenizer, build_model(model_args, config, RoFormerForMaskedLM)


def tokenize_texts(batch: dict[str, list], tokenizer: PreTrainedTokenizerBase, max_length: int | None) -> dict:
    """Tokenize a batch of texts with their jieba word ids; truncate to `max_length` when given (line by line)."""
    encoding = tokenizer(
        batch["text"],
        return_word_ids=True,
        return_attention_mask=False,
        return_token_type_ids=False,
        truncation=max_length is not None,
        max_length=max_length,
        verbose=False,  # texts longer than model_max_length are expected: they are packed into blocks
    )
    return {"input_ids": encoding["input_ids"], "word_ids": encoding["word_ids"]}


def pack_into_blocks(batch: dict[str, list], block_length: int) -> dict[str, list]:
    """
    Concatenate tokenized texts and cut them into blocks of `block_length` tokens (the remainder is dropped). Word
    ids are renumbered so that every word of the batch keeps its own id, whichever text it came from.
    """
    input_ids, word_ids, next_word_id = [], [], 0
    for text_input_ids, text_word_ids in zip(batch["input_ids"], batch["word_ids"], strict=True):
        input_ids.extend(text_input_ids)
        word_ids.extend(word_id + next_word_id if word_id >= 0 else -1 for word_id in text_word_ids)
        next_word_id += max(text_word_ids, default=-1) + 1
    total_length = len(input_ids) // block_length * block_length
    starts = range(0, total_length, block_length)
    return {
        "input_ids": [input_ids[start : start + block_length] for start in starts],
        "word_ids": [word_ids[start : start + block_length] for start in starts],
    }


def preprocess(
    raw_datasets: datasets.DatasetDict,
    tokenizer: PreTrainedTokenizerBase,
    max_seq_length: int,
    data_args: DataArguments,
    training_args: TrainingArguments,
) -> datasets.DatasetDict:
    """
    Turn text into training examples of at most `max_seq_length` tokens with their word ids: packed blocks, or one
    truncated example per line with `--line_by_line`. Validation examples get a `mask_seed`.
    """
    map_options = {}
    if not data_args.streaming:
        map_options = {
            "load_from_cache_file": not data_args.overwrite_cache,
            "num_proc": data_args.preprocessing_num_workers,
        }
    truncation = max_seq_length if data_args.line_by_line else None
    with training_args.main_process_first(desc="tokenization"):
        examples = raw_datasets.map(
            partial(tokenize_texts, tokenizer=tokenizer, max_length=truncation),
            batched=True,
            remove_columns=["text"],
            **map_options,
        )
        if not data_args.line_by_line:
            examples = examples.map(
                partial(pack_into_blocks, block_length=max_seq_length), batched=True, **map_options
            )
    examples = _limit_examples(examples, data_args)
    examples["train"] = examples["train"].map(_add_index, with_indices=True, fn_kwargs={"name": "example_index"})
    if "validation" in examples:
        examples["validation"] = examples["validation"].map(
            _add_index, with_indices=True, fn_kwargs={"name": "mask_seed"}
        )
    _check_not_empty(examples, max_seq_length, data_args)
    return examples


def _add_index(example: dict[str, Any], index: int, name: str) -> dict[str, int]:
    return {name: index}


def _limit_examples(examples: datasets.DatasetDict, data_args: DataArguments) -> datasets.DatasetDict:
    for split, limit in (("train", data_args.max_train_samples), ("validation", data_args.max_eval_samples)):
        if limit is not None and split in examples:
            part = examples[split]
            examples[split] = part.take(limit) if data_args.streaming else part.select(range(min(limit, len(part))))
    return examples


def _check_not_empty(examples: datasets.DatasetDict, max_seq_length: int, data_args: DataArguments) -> None:
    if data_args.streaming:
        return
    for split, part in examples.items():
        if len(part) == 0:
            raise ScriptError(
                f"the {split} text gives no example of {max_seq_length} tokens: lower max_seq_length, use "
                "--line_by_line, or give more text."
            )


def masked_token_accuracy(eval_prediction: EvalPrediction) -> dict[str, float]:
    """Accuracy of the predictions at the masked positions (labels other than -100)."""
    masked_accuracy = load_metric("masked_accuracy")  # roformer_hf's offline evaluate module
    return masked_accuracy.compute(
        predictions=eval_prediction.predictions.ravel(), references=eval_prediction.label_ids.ravel()
    )


def predicted_token_ids(logits: torch.Tensor | tuple, labels: torch.Tensor) -> torch.Tensor:
    """Keep only the arg-max token ids of the logits, so that evaluation does not gather whole vocabularies.

    With `sparse_prediction` the logits hold the labelled positions only, `(N, vocab_size)`: their ids go back to
    those positions of a `labels`-shaped tensor (-100 elsewhere), so the metrics read both kinds alike.
    """
    predictions = (logits[0] if isinstance(logits, tuple) else logits).argmax(dim=-1)
    if predictions.shape == labels.shape:
        return predictions
    return torch.full_like(labels, -100).masked_scatter_(labels != -100, predictions)


def stage_training_args(training_args: TrainingArguments, stages: list[Stage], index: int) -> TrainingArguments:
    """
    The TrainingArguments of stage `index`: its own folder, steps, derived gradient accumulation and seed. Pushing
    to the Hub happens once at the end of the run, and the collator needs the `word_ids` column.
    """
    common = {"remove_unused_columns": False, "push_to_hub": False}
    stage = stages[index]
    if stage.steps is None:
        return replace(training_args, **common)
    return replace(
        training_args,
        output_dir=str(stage_dir(training_args, stages, index)),
        max_steps=stage.steps,
        gradient_accumulation_steps=gradient_accumulation_steps(stage, index, training_args),
        seed=training_args.seed + index,
        **common,
    )


def stage_dir(training_args: TrainingArguments, stages: list[Stage], index: int) -> Path:
    """Where stage `index` keeps its checkpoints and results: `output_dir/stage-<n>`, or output_dir for one stage."""
    if stages[index].steps is None:
        return Path(training_args.output_dir)
    return Path(training_args.output_dir) / f"stage-{index + 1}"


def build_trainer(
    model: RoFormerForMaskedLM,
    tokenizer: PreTrainedTokenizerBase,
    examples: datasets.DatasetDict,
    args: TrainingArguments,
    masking_args: MaskingArguments,
    schedule_steps: int | None = None,
    start_state: dict | None = None,
) -> StagedTrainer:
    """The Trainer of one stage, with the masking collator, masked-token accuracy and stage-end checkpoints."""
    evaluate = args.do_eval and "validation" in examples
    collator = WholeWordMaskCollator(
        tokenizer, masking_args.mlm_probability, masking_args.whole_word_mask, seed=args.seed
    )
    trainer = StagedTrainer(
        model=model,
        args=args,
        train_dataset=examples["train"] if args.do_train else None,
        eval_dataset=examples["validation"] if evaluate else None,
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=masked_token_accuracy if evaluate else None,
        preprocess_logits_for_metrics=predicted_token_ids if evaluate else None,
        schedule_steps=schedule_steps,
        start_state=start_state,
    )
    trainer.add_callback(EpochCallback(collator))
    trainer.add_callback(SaveAtEndCallback())
    trainer.add_callback(StopAtStepBoundary())
    return trainer


def find_starting_point(training_args: TrainingArguments, stages: list[Stage]) -> tuple[int, str | None]:
    """
    Which stage to run first and the checkpoint to resume it from, as `--resume_from_checkpoint` says (a path, or
    `True` for the last checkpoint of the run).
    """
    if stages[0].steps is None or training_args.resume_from_checkpoint is None:
        return 0, find_resume_checkpoint(training_args)
    if str(training_args.resume_from_checkpoint).lower() == "true":
        for index in reversed(range(len(stages))):
            folder = stage_dir(training_args, stages, index)
            checkpoint = last_complete_checkpoint(folder)
            if checkpoint is not None:
                return index, checkpoint
        raise ScriptError(
            f"--resume_from_checkpoint True, but no stage of {training_args.output_dir} has a complete checkpoint."
        )
    checkpoint = Path(training_args.resume_from_checkpoint)
    match = re.fullmatch(r"stage-(\d+)", checkpoint.parent.name)
    if not checkpoint.is_dir() or match is None or int(match.group(1)) > len(stages):
        raise ScriptError(
            f"--resume_from_checkpoint {checkpoint}: with --stages, give a checkpoint-* folder inside "
            "output_dir/stage-<n>/ of a run with the same stages, or True for the last one."
        )
    return int(match.group(1)) - 1, str(checkpoint)


def checkpoint_step(checkpoint: str) -> int:
    """The optimizer step a checkpoint was saved at."""
    return json.loads((Path(checkpoint) / "trainer_state.json").read_text())["global_step"]


def load_stage_end(model: RoFormerForMaskedLM, checkpoint: str) -> dict:
    """Load the weights a finished stage ended with into `model`; return its optimizer and scheduler state."""
    for weights_file in sorted(Path(checkpoint).glob("*.safetensors")):
        unexpected = model.load_state_dict(load_file(weights_file), strict=False).unexpected_keys
        if unexpected:
            raise ScriptError(f"{checkpoint} holds weights of another model ({unexpected[0]}, ...).")
    return {
        name: torch.load(Path(checkpoint) / f"{name}.pt", weights_only=True) for name in ("optimizer", "scheduler")
    }


def stage_end_state(trainer: StagedTrainer) -> dict | None:
    """The optimizer and scheduler state a stage ended with (None under FSDP/DeepSpeed, which shard them)."""
    if trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled:
        logger.warning("FSDP/DeepSpeed: the next stage starts a new optimizer (its state is sharded).")
        return None
    return {"optimizer": trainer.optimizer.state_dict(), "scheduler": trainer.lr_scheduler.state_dict()}


class EpochCallback(TrainerCallback):
    """Tells the collator the epoch, so that every epoch masks the training examples anew."""

    def __init__(self, collator: WholeWordMaskCollator):
        self.collator = collator

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.collator.epoch = int(state.epoch or 0)


def evaluate_initial_model(trainer: StagedTrainer) -> None:
    """Evaluate the model before its first step and save the metrics as `initial_results.json`."""
    metrics = trainer.evaluate()
    trainer.log_metrics("initial", metrics)
    save_metrics(trainer, "initial", metrics, combined=False)


class InitialEvaluationCallback(TrainerCallback):
    """
    Evaluates the model before its first step, once `train()` has prepared it. Evaluating before `train()` would
    prepare the bare model for evaluation, and accelerate then leaves it unwrapped for training: without
    DistributedDataParallel every process would train its own model.
    """

    def __init__(self, trainer: StagedTrainer):
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        evaluate_initial_model(self.trainer)


class SaveAtEndCallback(TrainerCallback):
    """Saves a checkpoint at the last step of a stage, so the next stage (or a resumed run) can start from it."""

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= state.max_steps and args.save_strategy != "no":
            control.should_save = True
        return control


def train_and_evaluate(
    model: RoFormerForMaskedLM,
    tokenizer: PreTrainedTokenizerBase,
    raw_datasets: datasets.DatasetDict,
    stages: list[Stage],
    data_args: DataArguments,
    masking_args: MaskingArguments,
    training_args: TrainingArguments,
) -> StagedTrainer:
    """
    Walk the stages: each trains from the weights, optimizer and schedule the previous one ended with, then
    evaluates (loss, perplexity, masked-token accuracy) and saves its results in its folder. Returns the last
    stage's trainer.
    """
    first_index, checkpoint = find_starting_point(training_args, stages)
    settings = mlm_run_settings(data_args, masking_args, training_args)
    if checkpoint is not None:
        check_resume(checkpoint, model, tokenizer, settings)
    start_state = None
    stage_steps = stages[first_index].steps
    if checkpoint is not None and stage_steps is not None and checkpoint_step(checkpoint) >= stage_steps:
        start_state = load_stage_end(model, checkpoint)
        first_index, checkpoint = first_index + 1, None
    schedule_steps = sum(stage.steps for stage in stages) if stages[0].steps is not None else None
    trainer = None
    for index in range(first_index, len(stages)):
        args = stage_training_args(training_args, stages, index)
        examples = preprocess(raw_datasets, tokenizer, stages[index].max_seq_length, data_args, training_args)
        trainer = build_trainer(model, tokenizer, examples, args, masking_args, schedule_steps, start_state)
        record_run_settings(trainer, settings)
        final_model_dir = Path(training_args.output_dir) if index == len(stages) - 1 else None
        run_stage(trainer, stages, index, checkpoint, index == 0 and checkpoint is None, final_model_dir)
        start_state, checkpoint = stage_end_state(trainer) if args.do_train else None, None
    if trainer is None:  # resumed from the end of the last stage
        args = stage_training_args(training_args, stages, len(stages) - 1)
        examples = preprocess(raw_datasets, tokenizer, stages[-1].max_seq_length, data_args, training_args)
        trainer = build_trainer(model, tokenizer, examples, replace(args, do_train=False), masking_args)
        run_stage(trainer, stages, len(stages) - 1, None, False, Path(training_args.output_dir))
    return trainer


def mlm_run_settings(
    data_args: DataArguments, masking_args: MaskingArguments, training_args: TrainingArguments
) -> dict[str, Any]:
    """The settings a checkpoint of this run records, and a resume must repeat (`training.resume`)."""
    return run_settings(
        training_args,
        train_file=absolute_path(data_args.train_file),
        dataset_name=data_args.dataset_name,
        max_seq_length=None if masking_args.stages else data_args.max_seq_length,
        stages=masking_args.stages,
        mlm_probability=masking_args.mlm_probability,
        **({"max_steps": None, "num_train_epochs": None} if masking_args.stages else {}),  # the stages say instead
    )


def run_stage(
    trainer: StagedTrainer,
    stages: list[Stage],
    index: int,
    checkpoint: str | None,
    starts_run: bool,
    final_model_dir: Path | None = None,
) -> None:
    """
    Train one stage (resuming from `checkpoint` if given) and evaluate it; save its metrics and state. The last stage
    saves the final model into `final_model_dir` first, so that results never describe weights that were not saved.
    """
    if trainer.eval_dataset is not None and starts_run:
        if trainer.args.do_train:
            trainer.add_callback(InitialEvaluationCallback(trainer))
        else:
            evaluate_initial_model(trainer)
    if trainer.args.do_train:
        logger.info(f"*** Stage {index + 1}/{len(stages)}: {stages[index]} ***")
        metrics = trainer.train(resume_from_checkpoint=checkpoint).metrics
        raise_if_stopped(trainer)
    if final_model_dir is not None:
        save_model_atomically(trainer, final_model_dir)
    if trainer.args.do_train:
        trainer.log_metrics("train", metrics)
        save_metrics(trainer, "train", metrics)
    if trainer.eval_dataset is not None:
        metrics = trainer.evaluate()
        metrics["perplexity"] = math.exp(min(metrics["eval_loss"], 100.0))
        trainer.log_metrics("eval", metrics)
        save_metrics(trainer, "eval", metrics)
    if trainer.args.do_train:
        save_state(trainer)  # the log history, evaluations included, for the loss curve


def read_stage_results(training_args: TrainingArguments, stages: list[Stage]) -> list[dict[str, Any]]:
    """The results of every stage of the run as saved in the stage folders (also those finished before a resume)."""
    table = []
    for index, stage in enumerate(stages):
        row = {
            "stage": index + 1,
            "max_seq_length": stage.max_seq_length,
            "global_batch_size": stage.global_batch_size,
        }
        row["steps"] = stage.steps
        folder = stage_dir(training_args, stages, index)
        if (folder / "initial_results.json").is_file():
            initial = json.loads((folder / "initial_results.json").read_text())
            row.update({key.replace("eval_", "initial_eval_"): value for key, value in initial.items()})
        for split in ("train", "eval"):
            if (folder / f"{split}_results.json").is_file():
                row.update(json.loads((folder / f"{split}_results.json").read_text()))
        table.append(row)
    return table


def plot_loss_curve(training_args: TrainingArguments, stages: list[Stage], path: Path) -> None:
    """Draw the training (and evaluation) loss of every stage against the run's step count, stages marked."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(8, 4.5))
    offset = 0
    for index in range(len(stages)):
        state_file = stage_dir(training_args, stages, index) / "trainer_state.json"
        if not state_file.is_file():
            continue
        state = json.loads(state_file.read_text())
        history = state["log_history"]
        for key, style in (("loss", ".-"), ("eval_loss", "o")):
            points = [(offset + entry["step"], entry[key]) for entry in history if key in entry]
            if points:
                label = f"{'train' if key == 'loss' else 'eval'} loss" if index == 0 else None
                axes.plot(*zip(*points, strict=True), style, color="C0" if key == "loss" else "C1", label=label)
        offset += state["global_step"]
        if len(stages) > 1:
            axes.axvline(offset, color="grey", linestyle=":", linewidth=1)
    axes.set(xlabel="optimizer step", ylabel="MLM loss", title="run_mlm.py loss (dotted lines: ends of stages)")
    axes.legend()
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=100, bbox_inches="tight")
    pyplot.close(figure)


def save_outputs(
    trainer: StagedTrainer,
    stages: list[Stage],
    model_args: ModelArguments,
    data_args: DataArguments,
    masking_args: MaskingArguments,
    training_args: TrainingArguments,
    argv: list[str] | None,
) -> list[dict[str, Any]]:
    """Save the results, loss curve and model card of the run beside its final model in output_dir."""
    output_dir = Path(training_args.output_dir)  # the final model is in place already (`run_stage`)
    if not trainer.is_world_process_zero():
        return []
    table = read_stage_results(training_args, stages)
    final = {key: value for key, value in table[-1].items() if key.startswith(("train_", "eval_", "perplexity"))}
    write_json_atomically(
        output_dir / "eval_results.json", {k: v for k, v in final.items() if not k.startswith("train_")}, indent=2
    )
    write_json_atomically(
        output_dir / "train_results.json", {k: v for k, v in final.items() if k.startswith("train_")}, indent=2
    )
    write_json_atomically(output_dir / "all_results.json", final, indent=2)
    write_json_atomically(output_dir / "stage_results.json", table, indent=2)
    if training_args.do_train:
        plot_loss_curve(training_args, stages, output_dir / "loss_curve.png")
        write_card(trainer, stages, output_dir, final, model_args, data_args, masking_args, argv)
    else:  # evaluated only: the card claims no training (the results are in eval_results.json)
        from roformer_hf.model_card import write_model_card

        write_model_card(output_dir, config=trainer.model.config, base_model=model_args.model_name_or_path)
    if training_args.push_to_hub:
        push_to_hub(training_args)
    return table


def write_card(
    trainer: StagedTrainer,
    stages: list[Stage],
    output_dir: Path,
    results: dict[str, float],
    model_args: ModelArguments,
    data_args: DataArguments,
    masking_args: MaskingArguments,
    argv: list[str] | None,
) -> None:
    """Write output_dir/README.md, the model card, describing this training run."""
    from roformer_hf.model_card import TrainingSummary, write_model_card

    masking = "whole-word masking over jieba words" if masking_args.whole_word_mask else "token masking"
    hyperparameters = {"seed": trainer.args.seed - (len(stages) - 1), "max_seq_length": data_args.max_seq_length}
    if masking_args.stages:  # batch size, accumulation and steps vary by stage
        stage_steps = sum(stage.steps for stage in stages)
        hyperparameters = {"stages": masking_args.stages, "max_steps": stage_steps, "seed": hyperparameters["seed"]}
        hyperparameters.update(train_batch_size="per stage", gradient_accumulation_steps="per stage")
    summary = TrainingSummary.from_trainer(
        trainer,
        script="run_mlm.py",
        task=f"masked language modelling with {masking} (mlm_probability {masking_args.mlm_probability})",
        datasets=[data_args.dataset_name or data_args.train_file],
        hyperparameters=hyperparameters,
        results={key: results[key] for key in ("eval_loss", "perplexity", "eval_accuracy") if key in results},
        trained_lengths=[stage.max_seq_length for stage in stages],
        trained_steps=sum(stage.steps for stage in stages) if masking_args.stages else trainer.state.global_step,
        command=command_line(__file__, argv),
    )
    write_model_card(
        output_dir, config=trainer.model.config, training_summary=summary, base_model=model_args.model_name_or_path
    )


def push_to_hub(training_args: TrainingArguments) -> None:
    """Upload output_dir (model, tokenizer, code, card, results; not the checkpoints) to `--hub_model_id`."""
    from huggingface_hub import HfApi

    api = HfApi(token=training_args.hub_token)
    repo_id = training_args.hub_model_id or Path(training_args.output_dir).resolve().name
    repo_id = api.create_repo(repo_id, private=training_args.hub_private_repo, exist_ok=True).repo_id
    api.upload_folder(
        repo_id=repo_id,
        folder_path=training_args.output_dir,
        commit_message="End of training",
        ignore_patterns=["checkpoint-*", "stage-*", "runs/*"],
    )


def format_stage_table(table: list[dict[str, Any]]) -> str:
    """A Markdown table of the stages' results (the masked-token accuracy before training on the first line)."""
    columns = ["stage", "max_seq_length", "global_batch_size", "steps", "train_loss", "eval_loss", "perplexity"]
    columns.append("eval_accuracy")
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    if "initial_eval_accuracy" in table[0]:
        initial = {"stage": "before training", "eval_loss": table[0]["initial_eval_loss"]}
        initial["eval_accuracy"] = table[0]["initial_eval_accuracy"]
        table = [initial, *table]
    for row in table:
        cells = [row.get(column) for column in columns]
        lines.append("| " + " | ".join(_format_cell(cell) for cell in cells) + " |")
    return "\n".join(lines)


def _format_cell(value: Any) -> str:
    if value is None:
        return ""
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def show_fill_mask_examples(model: RoFormerForMaskedLM, tokenizer: PreTrainedTokenizerBase) -> None:
    """Print the model's top guesses for a few masked sentences."""
    from transformers import pipeline

    fill_mask = pipeline("fill-mask", model=model, tokenizer=tokenizer, device=model.device, top_k=3)
    for text in FILL_MASK_EXAMPLES:
        guesses = ", ".join(f"{guess['token_str']} ({guess['score']:.2f})" for guess in fill_mask(text))
        print(f"fill-mask: {text} -> {guesses}")


# Below this masked-token accuracy a model has learned how frequent tokens are, hardly yet what their context says.
FREQUENT_TOKENS_ACCURACY = 0.15


def fill_mask_expectation(accuracy: float | None) -> str | None:
    """What the fill-mask guesses of a model this accurate show (a line to print under them), or None."""
    if accuracy is None or accuracy >= FREQUENT_TOKENS_ACCURACY:
        return None
    return (
        f"(masked-token accuracy {accuracy:.3f}: a model this briefly trained guesses the text's most frequent tokens, "
        "such as ， 的 。, whatever the context; guesses that read the context take more steps (the demo, "
        "`python run_mlm.py`, reaches 0.2 in 1,700 small ones)"
    )


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the script; returns the results of every stage (empty on processes other than the main one)."""
    model_args, data_args, masking_args, training_args = parse_args(argv)
    setup_logging(training_args)
    check_distributed_launch(training_args)
    with guard_run(training_args, "run_mlm.py", demo_or_given_arguments(argv, DEMO_ARGUMENTS, announce=False)):
        check_output_dir(training_args)
        bound_streamed_evaluation(data_args)
        set_seed(training_args.seed)
        stages = plan_stages(data_args, masking_args, training_args)
        raw_datasets = load_raw_datasets(data_args, model_args)
        tokenizer, model = build_tokenizer_and_model(model_args, masking_args.sparse_prediction)
        if training_args.do_train:  # the saved tokenizer's truncation=True cuts to the longest length trained with
            tokenizer.model_max_length = max(stage.max_seq_length for stage in stages)
        prepare_output_dir(training_args, model, [stage.steps or training_args.max_steps for stage in stages])
        trainer = train_and_evaluate(model, tokenizer, raw_datasets, stages, data_args, masking_args, training_args)
        table = save_outputs(trainer, stages, model_args, data_args, masking_args, training_args, argv)
    if trainer.is_world_process_zero():
        print(format_stage_table(table))
        show_fill_mask_examples(model, tokenizer)
        expectation = fill_mask_expectation(table[-1].get("eval_accuracy"))
        if expectation:
            print(expectation)
        print(loading_instructions(training_args.output_dir, RoFormerForMaskedLM))
    return table


if __name__ == "__main__":
    run_script(main)
