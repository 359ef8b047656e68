"""trainer_internals.py: what the scripts rely on in transformers' `Trainer` beyond its documented API holds on the
installed release (the newest and the oldest pass of .ci/run both run this file's checks through the scripts' tests;
here each is checked on its own, tiny model, no data files)."""

import logging

import pytest
import torch
import transformers.trainer
from conftest import TINY
from safetensors.torch import load_file, save_file
from torch.utils.data import Dataset
from transformers import Trainer, TrainingArguments

from roformer_hf import RoFormerConfig, RoFormerForMaskedLM, RoFormerForSequenceClassification
from roformer_hf.training.trainer_internals import (
    END_OF_TRAINING_MESSAGE,
    TRAINER_LOGGER,
    InputOrderEvaluation,
    TiedWeightsOnLoad,
    around_checkpoint_weights,
    update_mixed_precision,
)


class Documents(Dataset):
    """Rows of different lengths, so that grouping by length would reorder them."""

    def __init__(self, lengths: list[int]):
        self.rows = [{"input_ids": [5] * n, "labels": 0} for n in lengths]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict:
        return self.rows[index]


class InputOrderTrainer(InputOrderEvaluation, Trainer):
    pass


def tiny_trainer(trainer_class: type, tmp_path, **arguments) -> Trainer:
    torch.manual_seed(0)
    model = RoFormerForSequenceClassification(RoFormerConfig(**TINY, num_labels=2, pad_token_id=0))
    args = TrainingArguments(tmp_path / "run", report_to="none", use_cpu=True, **arguments)
    return trainer_class(model=model, args=args, train_dataset=Documents([3, 9, 5, 7]))


def evaluation_order(trainer: Trainer, lengths: list[int]) -> list[int]:
    """The lengths of the rows in the order the trainer's evaluation reads them."""
    trainer.data_collator = lambda rows: {"length": torch.tensor([len(row["input_ids"]) for row in rows])}
    return [n for batch in trainer.get_eval_dataloader(Documents(lengths)) for n in batch["length"].tolist()]


def test_evaluation_keeps_the_input_order_where_batches_are_grouped_by_length(tmp_path):
    grouped = {"train_sampling_strategy": "group_by_length", "per_device_eval_batch_size": 2}
    lengths = [3, 9, 5, 7, 2, 8]
    assert evaluation_order(tiny_trainer(Trainer, tmp_path, **grouped), lengths) != lengths  # what it overrides
    assert evaluation_order(tiny_trainer(InputOrderTrainer, tmp_path, **grouped), lengths) == lengths


def test_a_checkpoint_s_weights_are_its_first_file_and_pass_through_save_model(tmp_path):
    trainer = tiny_trainer(Trainer, tmp_path, max_steps=1, save_steps=1, per_device_train_batch_size=2)
    trainer.data_collator = lambda rows: {
        "input_ids": torch.tensor([row["input_ids"][:3] for row in rows]),
        "labels": torch.tensor([row["labels"] for row in rows]),
    }
    seen = []
    around_checkpoint_weights(
        trainer,
        before=lambda folder: seen.append(("before", folder.name, sorted(p.name for p in folder.glob("*")))),
        after=lambda folder: seen.append(("after", folder.name, sorted(p.name for p in folder.glob("*.safetensors")))),
    )
    trainer.train()
    trainer.save_model(tmp_path / "final")  # the final model passes through without the calls
    assert seen == [("before", "checkpoint-1", []), ("after", "checkpoint-1", ["model.safetensors"])]
    assert (tmp_path / "run" / "checkpoint-1" / "optimizer.pt").is_file()
    assert (tmp_path / "final" / "model.safetensors").is_file()


class AcceleratorBuilt(Exception):
    """Stops a Trainer once it has asked for its accelerator (accelerate's state is one per process)."""


def accelerator_precision(args: TrainingArguments, monkeypatch) -> str:
    """The `mixed_precision` a Trainer built with `args` asks accelerate for."""

    def record(**kwargs):
        raise AcceleratorBuilt(kwargs["mixed_precision"])

    monkeypatch.setattr(transformers.trainer, "Accelerator", record)
    model = RoFormerForSequenceClassification(RoFormerConfig(**TINY, num_labels=2, pad_token_id=0))
    with pytest.raises(AcceleratorBuilt) as built:
        Trainer(model=model, args=args, train_dataset=Documents([3, 5]))
    return str(built.value)


def test_the_accelerator_is_built_from_the_derived_mixed_precision_which_follows_a_late_decision(
    tmp_path, monkeypatch
):
    """A precision decided once the model is built (the CPU probe) reaches the Trainer only through
    `update_mixed_precision`: the flag alone leaves the accelerator in float32."""
    late = TrainingArguments(tmp_path / "late", report_to="none", use_cpu=True)
    late.bf16 = True
    assert accelerator_precision(late, monkeypatch) == "no"  # what it mends
    update_mixed_precision(late)
    assert late.mixed_precision == "bf16" and accelerator_precision(late, monkeypatch) == "bf16"


def test_the_trainer_says_its_end_of_training_on_its_logger(tmp_path, caplog):
    trainer = tiny_trainer(Trainer, tmp_path, max_steps=1, per_device_train_batch_size=2, save_strategy="no")
    trainer.data_collator = lambda rows: {
        "input_ids": torch.tensor([row["input_ids"][:3] for row in rows]),
        "labels": torch.tensor([row["labels"] for row in rows]),
    }
    assert transformers.trainer.logger.name == TRAINER_LOGGER
    logger = logging.getLogger(TRAINER_LOGGER)
    logger.addHandler(caplog.handler)  # transformers' loggers do not propagate to the root logger caplog listens on
    try:
        with caplog.at_level(logging.INFO, logger=TRAINER_LOGGER):
            trainer.train()
    finally:
        logger.removeHandler(caplog.handler)
    assert any(END_OF_TRAINING_MESSAGE in record.getMessage() for record in caplog.records)


class TiedWeightsTrainer(TiedWeightsOnLoad, Trainer):
    pass


@pytest.mark.parametrize(
    ("trainer_class", "without_embeddings", "warned"),
    [(Trainer, False, True), (TiedWeightsTrainer, False, False), (TiedWeightsTrainer, True, True)],
)
def test_a_checkpoint_loads_without_calling_the_tied_decoder_missing(
    tmp_path, caplog, trainer_class, without_embeddings, warned
):
    """A resume of run_mlm.py said "missing keys in the checkpoint model loaded: cls.predictions.decoder.weight, ...",
    the decoder that save_pretrained leaves out as the word embeddings' second name; a checkpoint that lacks the
    embeddings as well is still named (transformers' line, what the mixin passes through)."""
    model = RoFormerForMaskedLM(RoFormerConfig(**TINY))
    model.save_pretrained(tmp_path / "checkpoint")
    if without_embeddings:
        weights = load_file(tmp_path / "checkpoint" / "model.safetensors")
        del weights["roformer.embeddings.word_embeddings.weight"]
        save_file(weights, tmp_path / "checkpoint" / "model.safetensors", metadata={"format": "pt"})
    args = TrainingArguments(tmp_path / "run", report_to="none", use_cpu=True)
    trainer = trainer_class(model=RoFormerForMaskedLM(RoFormerConfig(**TINY)), args=args)
    transformers_logger = logging.getLogger("transformers")  # it does not propagate to caplog's root handler
    transformers_logger.addHandler(caplog.handler)
    try:
        trainer._load_from_checkpoint(str(tmp_path / "checkpoint"))
    finally:
        transformers_logger.removeHandler(caplog.handler)
    missing = [record.getMessage() for record in caplog.records if "missing keys" in record.getMessage()]
    assert bool(missing) == warned, missing
    if without_embeddings:
        assert "roformer.embeddings.word_embeddings.weight" in missing[0]
    torch.testing.assert_close(
        trainer.model.cls.predictions.decoder.weight, trainer.model.get_input_embeddings().weight
    )
