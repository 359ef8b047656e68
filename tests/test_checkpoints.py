"""A checkpoint is resumed from only once it is verified (`roformer_hf.training.outputs.checkpoints`): its manifest,
written last, lists every file with its size and checksum and the step; a checkpoint without one is checked as far as
it can be. Files written through `atomic_path` get the mode a plain write gives. Checkpoints here are written by hand,
as the Trainer lays them out, with tiny tensors: the end-to-end runs are in test_checkpoint_resume.py."""

import json
import logging
import os
import stat
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from roformer_hf.training.errors import ScriptError
from roformer_hf.training.outputs.checkpoints import (
    MANIFEST_NAME,
    MISSING_MANIFEST,
    atomic_path,
    checkpoint_problem,
    is_complete_checkpoint,
    last_complete_checkpoint,
    verify_checkpoint,
    write_json_atomically,
    write_manifest,
)
from roformer_hf.training.outputs.resume import find_resume_checkpoint


def write_checkpoint(folder: Path, step: int, manifest: bool = True) -> Path:
    """A checkpoint folder as the scripts' Trainer writes it (tiny tensors), with its manifest unless `manifest` is
    False (as a checkpoint written before manifests)."""
    folder.mkdir(parents=True)
    save_file({"weight": torch.full((4, 4), float(step))}, folder / "model.safetensors")
    (folder / "config.json").write_text(json.dumps({"model_type": "roformer_hf", "vocab_size": 5}))
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", encoding="utf-8")
    (folder / "run_settings.json").write_text(json.dumps({"learning_rate": 0.001}))
    torch.save({"state": {0: {"step": torch.tensor(float(step))}}, "param_groups": []}, folder / "optimizer.pt")
    torch.save({"last_epoch": step}, folder / "scheduler.pt")
    torch.save({"cpu": torch.random.get_rng_state()}, folder / "rng_state.pth")
    torch.save({"output_dir": str(folder.parent)}, folder / "training_args.bin")
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": []}))
    if manifest:
        write_manifest(folder, step)
    return folder


def cut_in_half(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def flip_a_byte(path: Path) -> None:
    content = bytearray(path.read_bytes())
    content[len(content) // 2] ^= 0xFF
    path.write_bytes(bytes(content))


# damage -> (what is done to checkpoint-4, the file the problem names)
DAMAGES = {
    "optimizer_missing": (lambda folder: (folder / "optimizer.pt").unlink(), "its optimizer.pt is missing"),
    "scheduler_missing": (lambda folder: (folder / "scheduler.pt").unlink(), "its scheduler.pt is missing"),
    "rng_state_missing": (lambda folder: (folder / "rng_state.pth").unlink(), "its rng_state.pth is missing"),
    "weights_truncated": (lambda folder: cut_in_half(folder / "model.safetensors"), "its model.safetensors has"),
    "weights_empty": (lambda folder: (folder / "model.safetensors").write_bytes(b""), "its model.safetensors has 0"),
    "optimizer_empty": (lambda folder: (folder / "optimizer.pt").write_bytes(b""), "its optimizer.pt has 0 bytes"),
    "config_truncated": (lambda folder: cut_in_half(folder / "config.json"), "its config.json has"),
    "config_a_list": (lambda folder: (folder / "config.json").write_text("[1, 2]"), "its config.json has"),
    "run_settings_empty": (lambda folder: (folder / "run_settings.json").write_text(""), "its run_settings.json has"),
    "vocab_truncated": (lambda folder: cut_in_half(folder / "vocab.txt"), "its vocab.txt has"),
    "optimizer_bit_flip": (lambda folder: flip_a_byte(folder / "optimizer.pt"), "its optimizer.pt is not the file"),
    "state_of_another_step": (
        lambda folder: (folder / "trainer_state.json").write_text(json.dumps({"global_step": 2, "log_history": []})),
        "its trainer_state.json",
    ),
    "weights_of_another_step": (
        lambda folder: (folder / "model.safetensors").write_bytes(
            (folder.parent / "checkpoint-2" / "model.safetensors").read_bytes()
        ),
        "its model.safetensors is not the file saved",
    ),
    "manifest_of_another_step": (
        lambda folder: (folder / MANIFEST_NAME).write_text(
            (folder.parent / "checkpoint-2" / MANIFEST_NAME).read_text()
        ),
        f"its {MANIFEST_NAME} is of step 2, its folder's name says 4",
    ),
    "manifest_truncated": (lambda folder: cut_in_half(folder / MANIFEST_NAME), f"its {MANIFEST_NAME} cannot be read"),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_newest_checkpoint_is_skipped_with_one_line_naming_the_file(damage, tmp_path, caplog):
    write_checkpoint(tmp_path / "checkpoint-2", 2)
    newest = write_checkpoint(tmp_path / "checkpoint-4", 4)
    assert is_complete_checkpoint(newest)
    damage_checkpoint, named = DAMAGES[damage]
    damage_checkpoint(newest)
    assert checkpoint_problem(newest).startswith(named)
    with caplog.at_level(logging.WARNING):
        assert last_complete_checkpoint(tmp_path) == str(tmp_path / "checkpoint-2")
    lines = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert len(lines) == 1
    assert lines[0].startswith(f"skipping the checkpoint {newest}: {named}")
    assert lines[0].endswith(f"; resuming from {tmp_path / 'checkpoint-2'}, the newest complete one.")


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_checkpoint_given_by_path_is_refused_naming_the_file_and_the_newest_complete_one(damage, tmp_path):
    write_checkpoint(tmp_path / "checkpoint-2", 2)
    newest = write_checkpoint(tmp_path / "checkpoint-4", 4)
    damage_checkpoint, named = DAMAGES[damage]
    damage_checkpoint(newest)

    class Arguments:
        output_dir, resume_from_checkpoint = str(tmp_path), str(newest)

    with pytest.raises(ScriptError) as error_info:
        find_resume_checkpoint(Arguments)
    message = str(error_info.value)
    assert message.startswith(f"--resume_from_checkpoint {newest} cannot be resumed from: {named}")
    assert message.endswith(f"; {tmp_path / 'checkpoint-2'} is complete: resume from that one.")
    assert "\n" not in message


def test_a_resume_finds_no_complete_checkpoint_and_says_how_to_start_again(tmp_path, caplog):
    checkpoint = write_checkpoint(tmp_path / "checkpoint-2", 2)
    (checkpoint / "scheduler.pt").unlink()

    class Arguments:
        output_dir, resume_from_checkpoint = str(tmp_path), "true"

    with pytest.raises(ScriptError) as error_info, caplog.at_level(logging.WARNING):
        find_resume_checkpoint(Arguments)
    assert str(error_info.value) == (
        f"--resume_from_checkpoint true, but {tmp_path} holds no complete checkpoint: start the run again with "
        "--overwrite_output_dir in place of --resume_from_checkpoint (a checkpoint skipped as damaged is named above), "
        "or give the path of a checkpoint."
    )
    assert [record.getMessage() for record in caplog.records] == [
        f"skipping the checkpoint {checkpoint}: its scheduler.pt is missing."
    ]


def test_the_manifest_lists_every_file_with_its_size_and_checksum(tmp_path):
    checkpoint = write_checkpoint(tmp_path / "checkpoint-3", 3)
    (checkpoint / "optimizer_0").mkdir()  # a subfolder (FSDP's sharded optimizer state)
    (checkpoint / "optimizer_0" / "shard.distcp").write_bytes(b"state")
    write_manifest(checkpoint, 3)
    manifest = json.loads((checkpoint / MANIFEST_NAME).read_text())
    names = sorted(path.relative_to(checkpoint).as_posix() for path in checkpoint.rglob("*") if path.is_file())
    assert manifest["global_step"] == 3 and sorted(manifest["files"]) == [n for n in names if n != MANIFEST_NAME]
    assert manifest["files"]["vocab.txt"]["size"] == (checkpoint / "vocab.txt").stat().st_size
    assert verify_checkpoint(checkpoint) is True
    (checkpoint / "optimizer_0" / "shard.distcp").write_bytes(b"State")
    assert (
        checkpoint_problem(checkpoint)
        == "its optimizer_0/shard.distcp is not the file saved (its checksum differs from its manifest's)"
    )
    (checkpoint / "notes.txt").write_text("a file of the user's, not listed: no part of the checkpoint")
    (checkpoint / "optimizer_0" / "shard.distcp").write_bytes(b"state")
    assert is_complete_checkpoint(checkpoint)


# --- checkpoints written before the manifest ---


def test_a_checkpoint_without_manifest_is_checked_as_far_as_it_can_be_and_said_so(tmp_path, caplog):
    legacy = write_checkpoint(tmp_path / "checkpoint-2", 2, manifest=False)
    assert verify_checkpoint(legacy) is False
    with caplog.at_level(logging.WARNING):
        assert last_complete_checkpoint(tmp_path) == str(legacy)
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 1 and lines[0].startswith(f"resuming from {legacy} unverified: it has no {MANIFEST_NAME}")
    assert "whole" not in lines[0]  # it said "checked ... whole" before, as if verified


LEGACY_DAMAGES = {
    "optimizer_missing": (lambda folder: (folder / "optimizer.pt").unlink(), "its optimizer.pt is missing"),
    "rng_state_missing": (lambda folder: (folder / "rng_state.pth").unlink(), "its rng_state.pth is missing"),
    "weights_truncated": (
        lambda folder: cut_in_half(folder / "model.safetensors"),
        "its model.safetensors is cut short",
    ),
    "optimizer_truncated": (lambda folder: cut_in_half(folder / "optimizer.pt"), "its optimizer.pt is cut short"),
    "scheduler_empty": (lambda folder: (folder / "scheduler.pt").write_bytes(b""), "its scheduler.pt is cut short"),
    "rng_bit_flip": (lambda folder: flip_a_byte(folder / "rng_state.pth"), "its rng_state.pth is"),
    "config_truncated": (lambda folder: cut_in_half(folder / "config.json"), "its config.json is cut short"),
    "config_a_list": (
        lambda folder: (folder / "config.json").write_text("[1, 2]"),
        "its config.json holds a JSON list",
    ),
    "run_settings_empty": (
        lambda folder: (folder / "run_settings.json").write_text(""),
        "its run_settings.json is cut",
    ),
    "vocab_empty": (lambda folder: (folder / "vocab.txt").write_text(""), "its vocab.txt is empty"),
    "vocab_not_utf8": (lambda folder: (folder / "vocab.txt").write_bytes(b"\xff\xfe"), "its vocab.txt is cut short"),
    "state_missing": (lambda folder: (folder / "trainer_state.json").unlink(), "its trainer_state.json, written last"),
    "state_truncated": (lambda folder: cut_in_half(folder / "trainer_state.json"), "its trainer_state.json is cut"),
    "state_of_another_step": (
        lambda folder: (folder / "trainer_state.json").write_text('{"global_step": 2}'),
        "its trainer_state.json is of step 2, its folder's name says 4",
    ),
}


@pytest.mark.parametrize("damage", LEGACY_DAMAGES)
def test_a_damaged_checkpoint_without_manifest_is_found_out(damage, tmp_path):
    checkpoint = write_checkpoint(tmp_path / "checkpoint-4", 4, manifest=False)
    damage_checkpoint, named = LEGACY_DAMAGES[damage]
    damage_checkpoint(checkpoint)
    assert checkpoint_problem(checkpoint).startswith(named)


# --- unverified: what can be checked without a manifest (issue 35) ---


def with_earlier(*names: str):
    """Damage: these files of checkpoint-4 replaced by checkpoint-2's (a copy of older files under a newer state)."""

    def damage(folder: Path) -> None:
        for name in names:
            (folder / name).write_bytes((folder.parent / "checkpoint-2" / name).read_bytes())

    return damage


def nan_weights(folder: Path) -> None:
    save_file({"weight": torch.full((4, 4), float("nan"))}, folder / "model.safetensors")


UNVERIFIED_DAMAGES = {
    "older_optimizer_and_scheduler": (
        with_earlier("optimizer.pt", "scheduler.pt", "model.safetensors"),
        "its optimizer.pt is of step 2, its trainer_state.json of step 4",
    ),
    "older_scheduler": (
        with_earlier("scheduler.pt"),
        "its scheduler.pt is of step 2, its trainer_state.json of step 4",
    ),
    "weights_not_finite": (nan_weights, "its model.safetensors holds values that are not finite (in weight)"),
    "optimizer_not_a_state_dict": (
        lambda folder: torch.save([1, 2], folder / "optimizer.pt"),
        "its optimizer.pt holds a list, not a state dictionary",
    ),
}


@pytest.mark.parametrize("damage", UNVERIFIED_DAMAGES)
def test_an_unverified_checkpoint_of_another_step_is_found_out_and_skipped(damage, tmp_path, caplog):
    write_checkpoint(tmp_path / "checkpoint-2", 2, manifest=False)
    newest = write_checkpoint(tmp_path / "checkpoint-4", 4, manifest=False)
    assert verify_checkpoint(newest) is False  # whole, but unverified
    damage_checkpoint, named = UNVERIFIED_DAMAGES[damage]
    damage_checkpoint(newest)
    assert checkpoint_problem(newest).startswith(named)
    with caplog.at_level(logging.WARNING):
        assert last_complete_checkpoint(tmp_path) == str(tmp_path / "checkpoint-2")
    lines = [record.getMessage() for record in caplog.records]
    assert lines[0].startswith(f"skipping the checkpoint {newest}: {named}")
    assert lines[1].startswith(f"resuming from {tmp_path / 'checkpoint-2'} unverified: ")


def test_an_unverified_optimizer_that_would_run_code_is_refused_and_runs_nothing(tmp_path):
    from test_bad_inputs import RunsCode

    checkpoint = write_checkpoint(tmp_path / "checkpoint-2", 2, manifest=False)
    torch.save({"state": RunsCode(tmp_path / "code-ran")}, checkpoint / "optimizer.pt")
    assert (
        checkpoint_problem(checkpoint) == "its optimizer.pt is not a plain tensor file (unpickling it would run code)"
    )
    assert not (tmp_path / "code-ran").exists()


def test_a_checkpoint_without_manifest_beside_checkpoints_with_one_is_damaged(tmp_path, caplog):
    """A run killed between trainer_state.json and the manifest, or a manifest deleted: its files, whatever they
    hold now (here checkpoint-2's weights), are not resumed from; the newest complete checkpoint is, and said so."""
    write_checkpoint(tmp_path / "checkpoint-2", 2)
    cut_off = write_checkpoint(tmp_path / "checkpoint-4", 4, manifest=False)
    with_earlier("model.safetensors")(cut_off)
    with caplog.at_level(logging.WARNING):
        assert last_complete_checkpoint(tmp_path) == str(tmp_path / "checkpoint-2")
    assert [record.getMessage() for record in caplog.records] == [
        f"skipping the checkpoint {cut_off}: {MISSING_MANIFEST}; resuming from {tmp_path / 'checkpoint-2'}, the "
        "newest complete one."
    ]
    assert "unverified" in MISSING_MANIFEST

    class Arguments:
        output_dir, resume_from_checkpoint = str(tmp_path), str(cut_off)

    with pytest.raises(ScriptError) as error_info:
        find_resume_checkpoint(Arguments)
    assert str(error_info.value) == (
        f"--resume_from_checkpoint {cut_off} cannot be resumed from: {MISSING_MANIFEST}; "
        f"{tmp_path / 'checkpoint-2'} is complete: resume from that one."
    )


def with_run_state(folder: Path, optimizer_step: int, **settings) -> Path:
    """Give `folder` an optimizer and a scheduler of `optimizer_step` steps and these run settings."""
    torch.save(
        {"state": {0: {"step": torch.tensor(float(optimizer_step))}}, "param_groups": []}, folder / "optimizer.pt"
    )
    torch.save({"last_epoch": optimizer_step}, folder / "scheduler.pt")
    (folder / "run_settings.json").write_text(json.dumps(settings))
    return folder


def test_a_stage_checkpoint_counts_the_steps_of_the_stages_before_it(tmp_path):
    """run_mlm.py's stage-2/checkpoint-2 after a stage of 3 steps: the optimizer and the scheduler are at step 5."""
    stages = "32:8:3,64:4:4"
    checkpoint = write_checkpoint(tmp_path / "stage-2" / "checkpoint-2", 2, manifest=False)
    assert verify_checkpoint(with_run_state(checkpoint, 5, stages=stages)) is False
    with_run_state(checkpoint, 2, stages=stages)  # the optimizer of a stage that started afresh
    assert checkpoint_problem(checkpoint) == (
        "its optimizer.pt is of step 2, its trainer_state.json of step 2 (5 from the run's start) (the optimizer.pt "
        "of another checkpoint?)"
    )
    with_run_state(checkpoint, 4)  # stages not recorded: at least the step of trainer_state.json
    assert verify_checkpoint(checkpoint) is False
    with_run_state(checkpoint, 1)
    assert checkpoint_problem(checkpoint).startswith("its optimizer.pt is of step 1, its trainer_state.json of step 2")


@pytest.mark.parametrize(("precision", "fits"), [("fp16", True), ("bf16", False), ("no", False)])
def test_fewer_optimizer_steps_are_those_fp16_skipped(precision, fits, tmp_path):
    """fp16's loss scaling skips the optimizer and scheduler steps that overflowed; bf16 and float32 skip none."""
    checkpoint = with_run_state(
        write_checkpoint(tmp_path / "checkpoint-4", 4, manifest=False), 3, mixed_precision=precision
    )
    assert (checkpoint_problem(checkpoint) is None) == fits
    with_run_state(checkpoint, 5, mixed_precision=precision)  # more steps than trained: never
    assert checkpoint_problem(checkpoint).startswith("its optimizer.pt is of step 5")


# --- files written whole, with the mode a plain write gives ---


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_files_written_whole_get_the_mode_of_a_plain_write(umask, tmp_path):
    previous = os.umask(umask)
    try:
        (tmp_path / "plain.json").write_text("{}")
        write_json_atomically(tmp_path / "results.json", {"eval_loss": 1.0})
        with atomic_path(tmp_path / "predictions.jsonl") as temporary:
            temporary.write_text("{}\n")
    finally:
        os.umask(previous)
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in tmp_path.iterdir()}
    assert modes == {name: 0o666 & ~umask for name in ("plain.json", "results.json", "predictions.jsonl")}


def test_a_file_written_whole_replaces_a_link_in_its_place_and_never_writes_through_it(tmp_path):
    (tmp_path / "elsewhere.json").write_text('{"another model": true}')
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "all_results.json").symlink_to(tmp_path / "elsewhere.json")
    write_json_atomically(tmp_path / "out" / "all_results.json", {"eval_loss": 1.0})
    assert (tmp_path / "elsewhere.json").read_text() == '{"another model": true}'
    assert not (tmp_path / "out" / "all_results.json").is_symlink()
    assert json.loads((tmp_path / "out" / "all_results.json").read_text()) == {"eval_loss": 1.0}


def test_no_module_of_training_imports_one_that_imports_it_back():
    """interrupts -> resume -> run_outputs -> interrupts was a circle (broken by imports inside functions); the
    checkpoints module, which all three import, ended it. Imports inside functions count too."""
    import ast

    folder = Path(__file__).resolve().parents[1] / "roformer_hf" / "training"
    imports = {}
    for path in folder.rglob("*.py"):  # its wings (outputs/, mlm/, ...) too, each module by its dotted name
        name = ".".join(path.relative_to(folder.parent).with_suffix("").parts).removesuffix(".__init__")
        package = name.split(".") if path.stem == "__init__" else name.split(".")[:-1]
        nodes = ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        imports[name] = set()
        for node in nodes:
            if isinstance(node, ast.ImportFrom) and node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
                imports[name] |= {base} if node.module else {f"{base}.{alias.name}" for alias in node.names}

    def reachable(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for module in imports.get(todo.pop(), ()):
                if module not in seen:
                    seen.add(module)
                    todo.append(module)
        return seen

    assert [module for module in imports if module in reachable(module)] == []
