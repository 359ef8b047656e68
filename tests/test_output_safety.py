"""Never lose a user's work: output folders holding an earlier run are refused before training, unwritable folders
and full disks are reported before training, checkpoints cut off while being written are skipped on resume, and a
run killed at any point (SIGKILL: during a step, while writing a checkpoint, during the final save) resumes to
exactly the weights of an uninterrupted run."""

import errno
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import namedtuple
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from conftest import CAIL_SAMPLE, HANG_GUARD_S, PEOPLES_DAILY_SAMPLE, fail_final_saves_on_a_full_disk
from distributed_worker import files_sha256
from safetensors.torch import load_file
from test_bad_inputs import RunsCode, with_value
from test_checkpoints import write_checkpoint
from transformers import Trainer, TrainingArguments

import run_classification
import run_mlm
from roformer_hf import RoFormerConfig, RoFormerForMaskedLM
from roformer_hf.training.cli import ScriptTrainingArguments
from roformer_hf.training.errors import ScriptError
from roformer_hf.training.outputs import run_outputs
from roformer_hf.training.outputs.checkpoints import is_complete_checkpoint, last_complete_checkpoint, write_manifest
from roformer_hf.training.outputs.locks import LOCK_FILE_NAME, FolderLock, FolderLockedError
from roformer_hf.training.outputs.output_record import RECORD_NAME
from roformer_hf.training.outputs.resume import find_resume_checkpoint
from roformer_hf.training.outputs.run_outputs import save_model_atomically
from roformer_hf.training.script_runner import run_script

REPO_ROOT = Path(__file__).resolve().parents[1]
WORKER = REPO_ROOT / "tests" / "distributed_worker.py"
DEMO_VOCAB = REPO_ROOT / "data" / "demo_vocab.txt"
TINY_MODEL = "hidden_size=32,num_hidden_layers=1,num_attention_heads=2,intermediate_size=64"


@pytest.fixture
def news_file(tmp_path) -> Path:
    with open(PEOPLES_DAILY_SAMPLE, encoding="utf-8") as file:
        (tmp_path / "news.txt").write_text("".join(next(file) for _ in range(150)), encoding="utf-8")
    return tmp_path / "news.txt"


@pytest.fixture
def classification_files(tmp_path) -> Path:
    rows = [json.loads(line) for line in CAIL_SAMPLE.open(encoding="utf-8")]
    rows = [row for row in rows if row["label"] == "civil"][:12] + [row for row in rows if row["label"] == "criminal"][
        :12
    ]
    for name, part in (("train", rows[2:10] + rows[14:22]), ("validation", rows[:2] + rows[12:14])):
        lines = [json.dumps({"text": row["text"], "label": row["label"]}, ensure_ascii=False) for row in part]
        (tmp_path / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def mlm_arguments(train_file: Path, output_dir: Path, *extra: str) -> list[str]:
    return [
        *("--train_file", str(train_file), "--tokenizer_name", str(DEMO_VOCAB), "--config_overrides", TINY_MODEL),
        *("--stages", "32:8:3,64:4:4", "--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "8"),
        *("--validation_split_percentage", "10", "--max_eval_samples", "8", "--save_steps", "2"),
        *("--output_dir", str(output_dir), "--cache_dir", str(output_dir.parent / "cache"), "--seed", "7"),
        *("--disable_tqdm", "true", *extra),
    ]


def classification_arguments(data_dir: Path, output_dir: Path, *extra: str) -> list[str]:
    return [
        *("--train_file", str(data_dir / "train.jsonl"), "--validation_file", str(data_dir / "validation.jsonl")),
        *("--tokenizer_name", str(DEMO_VOCAB), "--config_overrides", TINY_MODEL, "--max_seq_length", "64"),
        *("--do_train", "--do_eval", "--max_steps", "4", "--save_steps", "2", "--learning_rate", "1e-3"),
        *("--per_device_train_batch_size", "4", "--output_dir", str(output_dir), "--report_to", "none"),
        *("--disable_tqdm", "true", "--seed", "3", *extra),
    ]


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def exit_line(main, arguments: list[str], capsys) -> str:
    """Run a script's main as its command line does; return the one line it printed on stderr (exit status 1)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        run_script(lambda: main(arguments))
    assert exit_info.value.code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0]
    return lines[0]


# --- output folders ---


@pytest.mark.parametrize("script", ["run_mlm", "run_classification"])
def test_a_finished_run_is_never_replaced_silently(script, tmp_path, news_file, classification_files, capsys):
    main, arguments = {
        "run_mlm": (run_mlm.main, lambda output_dir, *extra: mlm_arguments(news_file, output_dir, *extra)),
        "run_classification": (
            run_classification.main,
            lambda output_dir, *extra: classification_arguments(classification_files, output_dir, *extra),
        ),
    }[script]
    output_dir = tmp_path / "out"
    short = ["--stages", "32:4:2"] if script == "run_mlm" else []
    main(arguments(output_dir, "--seed", "4", *short))
    first_run = folder_bytes(output_dir)
    assert any(name.endswith("model.safetensors") and "checkpoint-" in name for name in first_run)

    line = exit_line(main, arguments(output_dir), capsys)
    assert "--overwrite_output_dir" in line and "--resume_from_checkpoint" in line and str(output_dir) in line
    assert folder_bytes(output_dir) == first_run  # bytes equal: nothing deleted, nothing written

    (output_dir / "checkpoint-999").mkdir()  # made by hand after the run: the user's (issue 51), never deleted
    (output_dir / "notes.txt").write_text("mine")  # not a run's output: kept
    line = exit_line(main, arguments(output_dir, "--overwrite_output_dir", *short), capsys)
    assert line.startswith(f"error: --output_dir {output_dir} holds checkpoint-999, which no run of these scripts")
    (output_dir / "checkpoint-999").rmdir()
    main(arguments(output_dir, "--overwrite_output_dir", *short))
    assert (output_dir / "notes.txt").read_text() == "mine"
    assert (output_dir / "model.safetensors").read_bytes() != first_run["model.safetensors"]


def test_an_unwritable_output_dir_stops_before_training(tmp_path, news_file, capsys, monkeypatch):
    (tmp_path / "file").write_text("")
    line = exit_line(run_mlm.main, mlm_arguments(news_file, tmp_path / "file" / "out"), capsys)
    assert line.startswith(f"error: cannot write to --output_dir {tmp_path / 'file' / 'out'}: Not a directory")

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(run_outputs.tempfile, "TemporaryFile", read_only)
    arguments = classification_arguments(tmp_path, tmp_path / "cls", "--train_file", str(tmp_path / "missing.jsonl"))
    line = exit_line(run_classification.main, arguments, capsys)  # before the data is even read
    assert "Read-only file system" in line and "choose a folder you can write to" in line


def test_a_full_disk_stops_before_training(tmp_path, news_file, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(run_outputs.shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 10**5, 10**5))
    with pytest.raises(ScriptError, match=r"has 0\.1 MiB free, but this run writes about") as error_info:
        run_mlm.main(mlm_arguments(news_file, tmp_path / "out"))
    assert not list((tmp_path / "out").rglob("checkpoint-*"))
    # stages of 3 and 4 steps, a checkpoint every 2 steps and at the end of each stage: 2 + 2 checkpoints of weights
    # and Adam's two moments, and the final model
    needed, weights = re.search(
        r"writes about ([\d.]+) MiB \(the final model, ([\d.]+) MiB", str(error_info.value)
    ).groups()
    assert "and 4 checkpoints of weights and optimizer state" in str(error_info.value)
    assert float(needed) == pytest.approx(float(weights) * (1 + 4 * 3), rel=0.05)  # MiB rounded to 0.1


def test_the_free_space_check_counts_the_checkpoints_kept(tmp_path):
    """--save_total_limit 2 keeps 3 checkpoints at once (the oldest is deleted after the new one is written)."""
    model = torch.nn.Linear(256, 256)  # 263,168 bytes of float32 weights
    weights = sum(parameter.numel() * 4 for parameter in model.parameters())
    arguments = ScriptTrainingArguments(str(tmp_path), save_steps=10, save_total_limit=2, max_steps=100)
    assert run_outputs.bytes_to_write(arguments, model, [100])[0] == weights * (1 + 3 * 3)
    assert run_outputs.bytes_to_write(arguments, model, [100, 15])[0] == weights * (1 + 3 * 3 + 3 * 2)
    arguments = ScriptTrainingArguments(str(tmp_path), save_strategy="no")
    assert run_outputs.bytes_to_write(arguments, model)[0] == weights
    (tmp_path / "model.safetensors").write_bytes(b"an earlier final model, kept until the new one is whole")
    assert run_outputs.bytes_to_write(arguments, model)[0] == 2 * weights


# --- incomplete checkpoints ---


def test_resume_skips_incomplete_checkpoints(tmp_path, caplog):
    """A checkpoint without trainer_state.json (killed while saving) or with a truncated one (full disk) is skipped."""
    write_checkpoint(tmp_path / "checkpoint-2", 2)
    for step, state in ((4, None), (6, '{"global_st')):
        state_file = write_checkpoint(tmp_path / f"checkpoint-{step}", step, manifest=False) / "trainer_state.json"
        state_file.unlink() if state is None else state_file.write_text(state)
    with caplog.at_level(logging.WARNING):
        assert last_complete_checkpoint(tmp_path) == str(tmp_path / "checkpoint-2")
    skipped = [record.getMessage() for record in caplog.records if "skipping the checkpoint" in record.getMessage()]
    assert [message.split()[3] for message in skipped] == [
        f"{tmp_path / 'checkpoint-6'}:",
        f"{tmp_path / 'checkpoint-4'}:",
    ]

    class Arguments:
        output_dir, resume_from_checkpoint = str(tmp_path), str(tmp_path / "checkpoint-4")

    with pytest.raises(
        ScriptError, match=r"checkpoint-4 cannot be resumed from: its trainer_state\.json, written last"
    ):
        find_resume_checkpoint(Arguments)


# --- SIGKILL and resume ---


def killed_run(script: str, arguments: list[str], kill_at: str, cwd: Path) -> None:
    # as many threads as this process, where the reference and the resumed runs train: the same float sums
    threads = str(torch.get_num_threads())
    environment = {**os.environ, "KILL_AT": kill_at, "OMP_NUM_THREADS": threads, "PYTHONPATH": str(REPO_ROOT)}
    (cwd / "record").mkdir(exist_ok=True)
    command = [sys.executable, str(WORKER), str(cwd / "record"), str(REPO_ROOT / script), *arguments]
    result = subprocess.run(command, capture_output=True, text=True, timeout=HANG_GUARD_S, env=environment, cwd=cwd)
    assert result.returncode == -9, result.stderr[-3000:]


def assert_same_weights(first: Path, second: Path) -> None:
    first_weights, second_weights = load_file(first / "model.safetensors"), load_file(second / "model.safetensors")
    assert first_weights.keys() == second_weights.keys()
    for name, weight in first_weights.items():
        assert torch.equal(weight, second_weights[name]), name


@pytest.fixture(scope="module")
def straight_mlm_run(tmp_path_factory) -> tuple[Path, Path]:
    """An uninterrupted run: the reference of the resumed ones."""
    folder = tmp_path_factory.mktemp("straight")
    with open(PEOPLES_DAILY_SAMPLE, encoding="utf-8") as file:
        (folder / "news.txt").write_text("".join(next(file) for _ in range(150)), encoding="utf-8")
    run_mlm.main(mlm_arguments(folder / "news.txt", folder / "out"))
    return folder / "news.txt", folder / "out"


@pytest.mark.slow
@pytest.mark.parametrize(
    "kill_at",
    [
        "step:stage-2:3",  # during a step: resumes from stage-2/checkpoint-2
        "checkpoint:stage-2/checkpoint-4",  # its weights written, not its trainer_state.json: skipped on resume
        "final-save",  # every checkpoint complete, the final model not in place: resumes at the end
    ],
)
def test_run_mlm_killed_anywhere_resumes_to_the_same_weights(tmp_path, straight_mlm_run, kill_at):
    news_file, straight = straight_mlm_run
    output_dir = tmp_path / "killed"
    killed_run("run_mlm.py", mlm_arguments(news_file, output_dir), kill_at, tmp_path)
    assert not (output_dir / "model.safetensors").exists()
    if kill_at.startswith("checkpoint:"):
        checkpoint = output_dir / kill_at.partition(":")[2]
        assert (checkpoint / "model.safetensors").exists() and not (checkpoint / "trainer_state.json").exists()
    run_mlm.main(mlm_arguments(news_file, output_dir, "--resume_from_checkpoint", "true"))
    assert_same_weights(straight, output_dir)


@pytest.mark.slow
@pytest.mark.parametrize(
    "kill_at",
    [
        "checkpoint:checkpoint-4",  # its weights written, not its trainer_state.json: skipped on resume
        "final-save",  # checkpoint-6 complete, at --max_steps, the final model not in place: resumed, no step trained
    ],
)
def test_run_classification_killed_anywhere_resumes_to_the_same_weights(tmp_path, classification_files, kill_at):
    """Step 6 is mid-epoch (4 steps an epoch): resumed from checkpoint-6, the Trainer trained a 7th step."""
    run_classification.main(classification_arguments(classification_files, tmp_path / "straight", "--max_steps", "6"))
    output_dir = tmp_path / "killed"
    arguments = classification_arguments(classification_files, output_dir, "--max_steps", "6")
    killed_run("run_classification.py", arguments, kill_at, tmp_path)
    assert not (output_dir / "model.safetensors").exists()
    run_classification.main([*arguments, "--resume_from_checkpoint", "true"])
    assert_same_weights(tmp_path / "straight", output_dir)
    assert not (output_dir / "checkpoint-7").exists()


# --- two runs into one folder ---


def worker_command(script: str, arguments: list[str], record: Path) -> list[str]:
    record.mkdir(exist_ok=True)
    return [sys.executable, str(WORKER), str(record), str(REPO_ROOT / script), *arguments]


def worker_environment(**variables: str) -> dict[str, str]:
    # as many threads as this process, where the reference and the resumed runs train: the same float sums
    threads = str(torch.get_num_threads())
    return {**os.environ, "OMP_NUM_THREADS": threads, "PYTHONPATH": str(REPO_ROOT), **variables}


@pytest.mark.slow
def test_a_second_run_into_a_folder_in_use_is_refused_and_the_first_finishes_intact(
    tmp_path, straight_mlm_run, capsys
):
    news_file, straight = straight_mlm_run
    output_dir, gate = tmp_path / "out", tmp_path / "gate"
    environment = worker_environment(KILL_AT=f"pause:stage-2:2:{gate}")
    first = subprocess.Popen(
        worker_command("run_mlm.py", mlm_arguments(news_file, output_dir), tmp_path / "record"),
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not gate.with_name("gate.reached").exists():
            assert first.poll() is None, first.stderr.read()[-3000:]
            time.sleep(0.2)
        before = folder_bytes(output_dir)
        for extra in ([], ["--overwrite_output_dir"], ["--resume_from_checkpoint", "true"]):
            line = exit_line(run_mlm.main, mlm_arguments(news_file, output_dir, "--seed", "8", *extra), capsys)
            assert line.startswith(
                f"error: --output_dir {output_dir} is in use by another run (process {first.pid} on "
            )
            assert folder_bytes(output_dir) == before  # nothing written, nothing deleted
    finally:
        gate.touch()
        first.wait(timeout=HANG_GUARD_S)
    assert first.returncode == 0, first.stderr[-3000:] if isinstance(first.stderr, str) else ""
    assert_same_weights(straight, output_dir)
    assert not (output_dir / LOCK_FILE_NAME).exists()


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path):
    dead = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, signal, sys; from roformer_hf.training.outputs.locks import FolderLock; "
            "FolderLock(sys.argv[1]).acquire(); os.kill(os.getpid(), signal.SIGKILL)",
            str(tmp_path),
        ],
        env=worker_environment(),
        check=False,
    )
    assert dead.returncode == -9 and (tmp_path / LOCK_FILE_NAME).exists()  # the file stays, the lock does not
    with FolderLock(tmp_path) as lock:
        assert json.loads(lock.path.read_text())["pid"] == os.getpid()
        with pytest.raises(FolderLockedError, match=f"in use by another run \\(process {os.getpid()} on "):
            FolderLock(tmp_path).acquire()
    assert not (tmp_path / LOCK_FILE_NAME).exists()


def test_concurrent_atomic_saves_into_one_folder_do_not_collide(tmp_path):
    config = RoFormerConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=2)
    trainer = Trainer(model=RoFormerForMaskedLM(config), args=TrainingArguments(str(tmp_path), report_to="none"))
    with ThreadPoolExecutor(max_workers=6) as pool:
        saves = [pool.submit(save_model_atomically, trainer, tmp_path) for _ in range(12)]
    assert [save.exception() for save in saves] == [None] * 12
    assert not [path.name for path in tmp_path.iterdir() if "partial" in path.name]
    saved = load_file(tmp_path / "model.safetensors")
    assert all(
        torch.equal(saved[name], tensor) for name, tensor in trainer.model.state_dict().items() if name in saved
    )


# --- Ctrl-C and SIGTERM ---


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signals", "at", "status", "checkpoint"),
    [
        # the signal comes during the next step (the hook sends it after this one): stops after it, with a checkpoint
        ("SIGINT", "stage-2:2", 130, "stage-2/checkpoint-3"),
        ("SIGTERM", "stage-1:1", 143, "stage-1/checkpoint-2"),
        ("SIGINT+SIGINT", "stage-2:3", 130, None),  # the second Ctrl-C stops at once: resumes from checkpoint-2
    ],
)
def test_a_signal_stops_at_a_step_boundary_and_resumes_to_the_same_weights(
    tmp_path, straight_mlm_run, signals, at, status, checkpoint
):
    news_file, straight = straight_mlm_run
    output_dir = tmp_path / "out"
    environment = worker_environment(KILL_AT=f"signal:{at}:{signals}", SNAPSHOT_DIR=str(output_dir))
    command = worker_command("run_mlm.py", mlm_arguments(news_file, output_dir), tmp_path / "record")
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=HANG_GUARD_S, env=environment, check=False
    )
    assert result.returncode == status, result.stderr[-3000:]
    line = result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr
    resume = f"resume with python run_mlm.py {shlex.join(mlm_arguments(news_file, output_dir))} --resume_from_checkpoint true"
    if checkpoint is None:
        newest = output_dir / "stage-2" / "checkpoint-2"
        assert (
            line
            == f"error: interrupted (SIGINT) and stopped at once; the newest complete checkpoint is {newest}: {resume}"
        )
    else:
        name = signals.split("+")[0]
        step = checkpoint.rsplit("-")[-1]
        assert (
            line
            == f"error: stopped by {name} after step {step}; the checkpoint {output_dir / checkpoint} is complete: {resume}"
        )
        assert is_complete_checkpoint(output_dir / checkpoint)
    before = json.loads((tmp_path / "record" / "before-signal.json").read_text())
    before.pop(LOCK_FILE_NAME)  # the run's own lock, deleted when it ends
    before.pop(RECORD_NAME)  # the record of the files it wrote, closed when it ends (outputs/output_record.py)
    assert before and {name: digest for name, digest in files_sha256(output_dir).items() if name in before} == before
    assert not (output_dir / "model.safetensors").exists() and not (output_dir / LOCK_FILE_NAME).exists()
    run_mlm.main(shlex.split(line.partition("resume with ")[2])[2:])
    assert_same_weights(straight, output_dir)


# --- a full disk (simulated: the writes of one file raise what a full disk raises) ---


def files_of(folder: Path, names: list[str]) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in names}


@pytest.mark.slow
def test_a_full_disk_while_checkpointing_keeps_the_earlier_checkpoint_and_resumes(
    tmp_path, classification_files, capsys, monkeypatch
):
    run_classification.main(classification_arguments(classification_files, tmp_path / "straight"))
    output_dir = tmp_path / "out"
    arguments = classification_arguments(classification_files, output_dir)
    save, before = torch.save, {}

    def save_on_a_full_disk(content, path, *args, **kwargs):
        if "checkpoint-4" in str(path):
            before.update(folder_bytes(output_dir / "checkpoint-2"))
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return save(content, path, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save_on_a_full_disk)
    line = exit_line(run_classification.main, arguments, capsys)
    assert line == (
        f"error: no space left on device while writing {output_dir / 'checkpoint-4' / 'training_args.bin'}: free some space; "
        f"the newest complete checkpoint is {output_dir / 'checkpoint-2'}: resume with python run_classification.py "
        f"{shlex.join(arguments)} --resume_from_checkpoint true"
    )
    assert before and folder_bytes(output_dir / "checkpoint-2") == before
    assert not (output_dir / "model.safetensors").exists()
    monkeypatch.setattr(torch, "save", save)  # space freed
    run_classification.main([*arguments, "--resume_from_checkpoint", "true"])
    assert_same_weights(tmp_path / "straight", output_dir)


@pytest.mark.slow
@pytest.mark.parametrize("earlier_final_model", [False, True])
def test_a_full_disk_at_the_final_save_loses_neither_the_trained_nor_the_earlier_model(
    tmp_path, classification_files, capsys, monkeypatch, earlier_final_model
):
    straight = tmp_path / "straight"
    run_classification.main(classification_arguments(classification_files, straight, "--save_strategy", "no"))
    output_dir = tmp_path / "out"
    arguments = classification_arguments(classification_files, output_dir, "--save_strategy", "no")
    if earlier_final_model:  # a finished run, resumed from its checkpoint-2: its final model is there
        run_classification.main(classification_arguments(classification_files, output_dir))
        arguments = classification_arguments(classification_files, output_dir, "--resume_from_checkpoint", "true")
        arguments = [*arguments[:-2], "--resume_from_checkpoint", str(output_dir / "checkpoint-2")]
    kept = ["model.safetensors", "config.json", "trainer_state.json", "all_results.json", "train_results.json"]
    before = files_of(output_dir, kept) if earlier_final_model else {}
    fail_final_saves_on_a_full_disk(monkeypatch)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "elsewhere"))
    (tmp_path / "elsewhere").mkdir()
    line = exit_line(run_classification.main, arguments, capsys)
    rescued = next((tmp_path / "elsewhere").glob("roformer_hf-rescued-out-*"))
    assert line == (
        f"error: no space left on device while saving the final model to {output_dir} (Error while serializing: I/O "
        f"error: No space left on device (os error 28)); the trained model was saved to {rescued} instead, and what "
        f"{output_dir} held before is unchanged: free some space and copy it there."
    )
    assert_same_weights(straight, rescued)
    if earlier_final_model:
        assert files_of(output_dir, kept) == before
    else:
        assert not (output_dir / "model.safetensors").exists() and not (output_dir / "trainer_state.json").exists()
    assert not list(output_dir.glob(".partial-model-*"))


# --- a resume with other settings ---


@pytest.mark.slow
def test_a_resume_refused_for_its_settings_keeps_the_checkpoint_and_resumes_once_they_match(
    tmp_path, classification_files, capsys
):
    output_dir = tmp_path / "out"
    arguments = classification_arguments(classification_files, output_dir)
    run_classification.main(arguments)
    straight = load_file(output_dir / "model.safetensors")  # the uninterrupted run's weights
    for path in (output_dir / "checkpoint-4", output_dir / "model.safetensors"):  # as if stopped after step 2
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    before = files_sha256(output_dir / "checkpoint-2")
    resume = [*arguments, "--resume_from_checkpoint", "true"]
    line = exit_line(run_classification.main, with_learning_rate(resume, "2e-3"), capsys)
    assert line.startswith(f"error: cannot resume from {output_dir / 'checkpoint-2'}: it was trained with --learning")
    assert files_sha256(output_dir / "checkpoint-2") == before
    assert not (output_dir / "checkpoint-4").exists() and not (output_dir / "model.safetensors").exists()
    run_classification.main(resume)
    resumed = load_file(output_dir / "model.safetensors")
    assert resumed.keys() == straight.keys()
    assert all(torch.equal(resumed[name], weight) for name, weight in straight.items())


def with_learning_rate(arguments: list[str], learning_rate: str) -> list[str]:
    arguments = list(arguments)
    arguments[arguments.index("--learning_rate") + 1] = learning_rate
    return arguments


@pytest.mark.slow
def test_a_checkpoint_whose_pickle_would_run_code_is_refused_and_nothing_saved_changes(
    tmp_path, classification_files, capsys
):
    output_dir = tmp_path / "out"
    arguments = classification_arguments(classification_files, output_dir)
    run_classification.main(arguments)
    straight = load_file(output_dir / "model.safetensors")
    torch.save({"state": RunsCode(tmp_path / "code-ran")}, output_dir / "checkpoint-4" / "optimizer.pt")
    write_manifest(output_dir / "checkpoint-4", 4)  # crafted: its manifest matches
    before = files_sha256(output_dir)
    del before[RECORD_NAME]  # which records checkpoint-4 as it is now (issue 51)
    longer = with_value(arguments, "--max_steps", "6")  # a resume at the end of the run would load nothing (issue 51)
    line = exit_line(run_classification.main, [*longer, "--resume_from_checkpoint", "true"], capsys)
    assert line.startswith(f"error: {output_dir / 'checkpoint-4' / 'optimizer.pt'} is not a plain tensor file: ")
    assert not (tmp_path / "code-ran").exists()
    assert {name: digest for name, digest in files_sha256(output_dir).items() if name != RECORD_NAME} == before
    run_classification.main([*arguments, "--resume_from_checkpoint", str(output_dir / "checkpoint-2")])
    resumed = load_file(output_dir / "model.safetensors")
    assert all(torch.equal(resumed[name], weight) for name, weight in straight.items())


# --- a read-only checkpoint ---


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """`chmod -R a-w` the folder, and mount it read-only onto itself where this process may (root, whom permission
    bits do not stop); skip the test when neither makes the folder read-only here."""
    modes = {path: path.stat().st_mode for path in [folder, *folder.rglob("*")]}
    for path, mode in modes.items():
        path.chmod(mode & ~0o222)
    mounted = False
    if os.geteuid() == 0 and shutil.which("mount"):
        mount = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True, check=False)
        mounted = mount.returncode == 0
        if mounted:
            subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], capture_output=True, check=False)
    try:
        try:
            (folder / "probe").touch()
        except OSError:
            pass
        else:
            (folder / "probe").unlink()
            pytest.skip("cannot make a folder read-only here (root, and mount is not allowed)")
        yield
    finally:
        if mounted:
            subprocess.run(["umount", str(folder)], check=True)
        for path, mode in modes.items():
            path.chmod(mode)


@pytest.mark.slow
def test_a_resume_from_a_read_only_checkpoint_trains_and_leaves_it_unchanged(tmp_path, classification_files):
    """A resume only reads its checkpoint: one given by path outside the output folder, or one of the output folder
    (`--resume_from_checkpoint true`, with `--save_total_limit 1`, whose rotation would delete it) that cannot be
    written; the run writes its new checkpoints and model beside it and ends with the uninterrupted run's weights."""
    straight = tmp_path / "straight"
    run_classification.main(classification_arguments(classification_files, straight))
    elsewhere, inside = tmp_path / "archive" / "checkpoint-2", tmp_path / "in-folder" / "checkpoint-2"
    shutil.copytree(straight / "checkpoint-2", elsewhere)
    # the run's folder as it stopped after checkpoint-2, with its record (a folder without one is the user's)
    shutil.copytree(straight, inside.parent, ignore=shutil.ignore_patterns("checkpoint-4"))
    before = folder_bytes(elsewhere)
    runs = [
        (elsewhere, tmp_path / "out", ["--resume_from_checkpoint", str(elsewhere)]),
        (inside, inside.parent, ["--resume_from_checkpoint", "true", "--save_total_limit", "1"]),
    ]
    for checkpoint, output_dir, extra in runs:
        with read_only(checkpoint):
            run_classification.main(classification_arguments(classification_files, output_dir, *extra))
            assert folder_bytes(checkpoint) == before
        assert_same_weights(straight, output_dir)
        assert is_complete_checkpoint(output_dir / "checkpoint-4")
