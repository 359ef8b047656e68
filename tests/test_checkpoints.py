"""A checkpoint is resumed from only once it is verified (`roformer_hf.training.outputs.checkpoints`): its manifest,
written last, lists every file with its size and checksum and the step; a checkpoint without one is resumed from only
when named, unverified, once its files can be read. Files written through `atomic_path` get the mode a plain write gives. Checkpoints here are written by hand,
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
    UNFINISHED_CHECKPOINT,
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
    False (as transformers' own Trainer writes it, or a run killed before the manifest)."""
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


# --- checkpoints without a manifest (issue 50: resumed only when named, unverified) ---


def given(resume: Path | str, output_dir: Path | None = None):
    """The training arguments of a resume from `resume` (a path, or "true" in `output_dir`), of 3 epochs."""

    class Arguments:
        resume_from_checkpoint, max_steps, num_train_epochs, process_index = str(resume), -1, 3.0, 0

    Arguments.output_dir = str(output_dir or Path(resume).parent)
    return Arguments


def test_a_checkpoint_without_manifest_is_resumed_only_when_named_and_said_unverified(tmp_path, caplog):
    """`true` never takes a checkpoint without a manifest (a checkpoint of transformers' own Trainer copied in, or one
    whose run stopped before writing it); named by path, it is resumed from with one line saying it is unverified
    (before: taken by `true` too, after heuristics, as "written before roformer_hf wrote one")."""
    unstamped = write_checkpoint(tmp_path / "checkpoint-2", 2, manifest=False)
    assert verify_checkpoint(unstamped) is False
    with caplog.at_level(logging.WARNING):
        assert last_complete_checkpoint(tmp_path) is None
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert find_resume_checkpoint(given(unstamped)) == str(unstamped)
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 1 and lines[0].startswith(f"resuming from {unstamped} unverified: it has no {MANIFEST_NAME}")
    assert "written before roformer_hf" not in lines[0]


UNREADABLE = {
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
}


@pytest.mark.parametrize("damage", UNREADABLE)
def test_a_checkpoint_without_manifest_that_cannot_be_read_is_refused_naming_the_file(damage, tmp_path):
    checkpoint = write_checkpoint(tmp_path / "checkpoint-4", 4, manifest=False)
    damage_checkpoint, named = UNREADABLE[damage]
    damage_checkpoint(checkpoint)
    assert checkpoint_problem(checkpoint).startswith(named)
    with pytest.raises(ScriptError) as error_info:
        find_resume_checkpoint(given(checkpoint))
    assert str(error_info.value).startswith(f"--resume_from_checkpoint {checkpoint} cannot be resumed from: {named}")
    assert "\n" not in str(error_info.value)


def test_a_checkpoint_a_kill_left_without_its_manifest_is_called_unfinished(tmp_path, caplog):
    """A run killed (SIGKILL) between the Trainer's files and the manifest: `true` passes it by as an unfinished
    checkpoint of the run (before: "written before roformer_hf wrote one", and resumed from where no checkpoint
    beside it had a manifest); named by path, it is resumed from unverified."""
    write_checkpoint(tmp_path / "checkpoint-2", 2)
    cut_off = write_checkpoint(tmp_path / "checkpoint-4", 4, manifest=False)
    with caplog.at_level(logging.WARNING):
        assert last_complete_checkpoint(tmp_path) == str(tmp_path / "checkpoint-2")
    assert [record.getMessage() for record in caplog.records] == [
        f"skipping the checkpoint {cut_off}: {UNFINISHED_CHECKPOINT}; resuming from {tmp_path / 'checkpoint-2'}, the "
        "newest complete one."
    ]
    assert "an unfinished checkpoint of this run" in UNFINISHED_CHECKPOINT
    assert "written before" not in UNFINISHED_CHECKPOINT
    (tmp_path / "checkpoint-2" / MANIFEST_NAME).unlink()  # the first checkpoint of a run killed while writing it
    caplog.clear()
    with pytest.raises(ScriptError, match="holds no complete checkpoint"), caplog.at_level(logging.WARNING):
        find_resume_checkpoint(given("true", tmp_path))
    assert all(UNFINISHED_CHECKPOINT in record.getMessage() for record in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert find_resume_checkpoint(given(cut_off)) == str(cut_off)
    assert "unverified" in caplog.records[0].getMessage()


# --- resumes: finished runs, settings compared as parsed values (issue 51) ---


@pytest.mark.parametrize(
    ("max_steps", "epochs", "recorded", "finished"),
    [
        (4, 3.0, {}, True),  # at --max_steps
        (6, 3.0, {}, False),  # a longer run: trains on
        (2, 3.0, {}, True),  # fewer steps than trained: nothing to train either
        (-1, 2.0, {"max_steps": -1, "num_train_epochs": 2.0}, True),  # the end of the epochs it was trained for
        (-1, 3.0, {"max_steps": -1, "num_train_epochs": 2.0}, False),  # more epochs
    ],
)
def test_a_run_is_finished_at_its_max_steps_or_the_end_of_its_epochs(max_steps, epochs, recorded, finished, tmp_path):
    """A run whose last checkpoint is at its end and which saved its final state after it is finished; one stopped
    between the two is not (resumed, it saves what is missing)."""
    from roformer_hf.training.outputs.resume import RunFinished, check_not_finished

    checkpoint = write_checkpoint(tmp_path / "checkpoint-4", 4)
    state = {"global_step": 4, "max_steps": 4, "num_train_epochs": 2, "log_history": []}
    (checkpoint / "trainer_state.json").write_text(json.dumps(state))
    (checkpoint / "run_settings.json").write_text(json.dumps(recorded))

    class Arguments:
        num_train_epochs, process_index, output_dir = epochs, 0, str(tmp_path)

    Arguments.max_steps = max_steps
    check_not_finished(checkpoint, Arguments)  # stopped before its final save (no trainer_state.json of the run's)
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))  # saved after the final model
    if not finished:
        check_not_finished(checkpoint, Arguments)
        return
    with pytest.raises(RunFinished, match=rf"^the run is finished: {checkpoint} is at step 4, (past )?the end of --"):
        check_not_finished(checkpoint, Arguments)


def test_resume_settings_are_compared_as_parsed_values(tmp_path, caplog):
    """One table of rules (`resume.RESUME_RULES`): `--stages` with a space after the comma is the same stages (it was
    refused as other stages); other steps are refused, a longer --max_steps applied with a warning."""
    from roformer_hf.training.outputs.resume import check_resume

    checkpoint = tmp_path / "checkpoint-2"
    checkpoint.mkdir()
    (checkpoint / "run_settings.json").write_text(json.dumps({"stages": "16:2:2,16:2:2", "max_steps": 4}))
    check_resume(checkpoint, None, None, {"stages": "16:2:2, 16:2:2", "max_steps": 4})
    check_resume(checkpoint, None, None, {"stages": [[16, 2, 2], [16, 2, 2]], "max_steps": 4})  # parsed already
    with pytest.raises(
        ScriptError, match=r"it was trained with --stages 16:2:2,16:2:2, this run gives --stages 16:2:3"
    ):
        check_resume(checkpoint, None, None, {"stages": "16:2:3", "max_steps": 8})
    with caplog.at_level(logging.WARNING):
        check_resume(checkpoint, None, None, {"stages": "16:2:2,16:2:2", "max_steps": 8})
    assert [record.getMessage() for record in caplog.records] == [
        f"--max_steps 8 differs from the 4 of {checkpoint}: applied, the run now ends (and its learning-rate schedule "
        "with it) where this run's options say."
    ]


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
