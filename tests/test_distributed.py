"""Data-parallel runs of both scripts on 2 CPU processes (gloo): one model, trained alike on every rank.

Each 2-process run goes through `tests/distributed_worker.py`, which records per rank the weights after every step
and the examples of every step. The reference is the same script in one process with the same global batch (twice
the per-device batch), without dropout: the same examples at every step, the same weights up to float32 rounding
(`--bf16 false`: bf16, the default on a CPU with bf16 instructions, rounds two half batches otherwise than their
whole) and the same evaluation before training.
"""

import json
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import HANG_GUARD_S, PEOPLES_DAILY_SAMPLE
from distributed_worker import files_sha256, record_run
from safetensors.torch import load_file
from transformers import TrainingArguments

import run_classification
import run_mlm
from roformer_hf.training.errors import ScriptError
from roformer_hf.training.machine.launch import check_distributed_launch
from roformer_hf.training.outputs.checkpoints import is_complete_checkpoint

REPO_ROOT = Path(__file__).resolve().parents[1]
WORKER = REPO_ROOT / "tests" / "distributed_worker.py"
DEMO_VOCAB = REPO_ROOT / "data" / "demo_vocab.txt"
NO_DROPOUT_MODEL = (
    "hidden_size=32,num_hidden_layers=1,num_attention_heads=2,intermediate_size=64,"
    "hidden_dropout_prob=0,attention_probs_dropout_prob=0"
)
ENVIRONMENT = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]  # a free port
# The accelerate command docs/distributed_training.md gives for CPU: its torchrun-style launcher, which needs no GPU.
ACCELERATE = [
    *(sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"),
    *("--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "29534"),
]


def launch(launcher: list[str], arguments: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*launcher, *arguments], capture_output=True, text=True, timeout=HANG_GUARD_S, env=ENVIRONMENT, cwd=cwd
    )


def run_two_processes(
    launcher: list[str], script: str, arguments: list[str], record_dir: Path
) -> tuple[list[dict], str]:
    """Each rank's record, and what the launch printed."""
    record_dir.mkdir()
    result = launch(launcher, [str(WORKER), str(record_dir), str(REPO_ROOT / script), *arguments], record_dir.parent)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return [json.loads((record_dir / f"rank-{rank}.json").read_text()) for rank in range(2)], result.stdout


def run_one_process(module, arguments: list[str], record_dir: Path) -> dict:
    record_dir.mkdir()
    record_run(module, record_dir, arguments)
    return json.loads((record_dir / "rank-0.json").read_text())


def assert_one_model_trained(ranks: list[dict], single: dict, record_dir: Path, single_dir: Path, batches: list[int]):
    """Every stage wrapped in DDP; equal weights on both ranks after every step; each rank its half of every global
    batch, the two halves together the examples of the one-process run's step; final weights as that run's."""
    assert [rank["world_size"] for rank in ranks] == [2, 2]
    assert len(ranks[0]["stages"]) == len(ranks[1]["stages"]) == len(single["stages"]) == len(batches)
    for index, (stage, other, reference) in enumerate(
        zip(*(r["stages"] for r in ranks), single["stages"], strict=True)
    ):
        assert stage["wrapped"] == other["wrapped"] == "DistributedDataParallel"
        assert stage["steps"].keys() == other["steps"].keys() == reference["steps"].keys()
        for step, record in stage["steps"].items():
            assert record["checksum"] == other["steps"][step]["checksum"], f"stage {index + 1} step {step}"
            mine, theirs = record["examples"], other["steps"][step]["examples"]
            assert len(mine) == len(theirs) == batches[index] // 2
            assert sorted(mine + theirs) == sorted(reference["steps"][step]["examples"])
        weights = [load_file(record_dir / f"rank-{rank}-stage-{index + 1}.safetensors") for rank in range(2)]
        reference_weights = load_file(single_dir / f"rank-0-stage-{index + 1}.safetensors")
        for name, tensor in weights[0].items():
            assert torch.equal(tensor, weights[1][name]), name
            torch.testing.assert_close(tensor, reference_weights[name], rtol=1e-5, atol=1e-6)


def mlm_arguments(train_file: Path, output_dir: Path, per_device_batch: int, per_device_eval_batch: int) -> list[str]:
    return [
        *(
            "--train_file",
            str(train_file),
            "--tokenizer_name",
            str(DEMO_VOCAB),
            "--config_overrides",
            NO_DROPOUT_MODEL,
        ),
        *("--stages", "32:8:3,64:4:2", "--per_device_train_batch_size", str(per_device_batch)),
        *("--per_device_eval_batch_size", str(per_device_eval_batch), "--max_eval_samples", "16"),
        *("--validation_split_percentage", "10", "--save_steps", "2", "--output_dir", str(output_dir)),
        *("--cache_dir", str(output_dir.parent / "cache"), "--seed", "7", "--disable_tqdm", "true"),
        *("--bf16", "false"),
    ]


@pytest.mark.slow
def test_run_mlm_under_torchrun_trains_one_model(tmp_path):
    """torchrun, gloo, no --use_cpu (the script sets it on a machine without GPU): two stages, both data-parallel."""
    with open(PEOPLES_DAILY_SAMPLE, encoding="utf-8") as file:
        (tmp_path / "news.txt").write_text("".join(next(file) for _ in range(150)), encoding="utf-8")
    ddp_arguments = [*mlm_arguments(tmp_path / "news.txt", tmp_path / "ddp", 2, 8), "--ddp_backend", "gloo"]
    ranks, _ = run_two_processes(TORCHRUN, "run_mlm.py", ddp_arguments, tmp_path / "ddp-record")
    single_arguments = mlm_arguments(tmp_path / "news.txt", tmp_path / "single", 4, 16)
    single = run_one_process(run_mlm, single_arguments, tmp_path / "single-record")

    assert_one_model_trained(ranks, single, tmp_path / "ddp-record", tmp_path / "single-record", batches=[8, 4])
    # no search for unused parameters (transformers' default: a warning on every rank, and an extra pass)
    assert {stage["find_unused_parameters"] for rank in ranks for stage in rank["stages"]} == {False}
    initial = [
        json.loads((tmp_path / run / "stage-1" / "initial_results.json").read_text()) for run in ("ddp", "single")
    ]
    assert initial[0]["eval_loss"] == pytest.approx(initial[1]["eval_loss"], abs=1e-4)
    assert 8 < initial[0]["eval_loss"] < 9  # about log(vocabulary size) untrained, not doubled by the world size
    assert json.loads((tmp_path / "ddp" / "stage-2" / "trainer_state.json").read_text())["global_step"] == 2


def classification_arguments(data_dir: Path, output_dir: Path, per_device_batch: int, per_device_eval: int):
    return [
        *("--train_file", str(data_dir / "train.jsonl"), "--validation_file", str(data_dir / "validation.jsonl")),
        *("--tokenizer_name", str(DEMO_VOCAB), "--config_overrides", NO_DROPOUT_MODEL, "--max_seq_length", "64"),
        *("--do_train", "--do_eval", "--max_steps", "3", "--learning_rate", "1e-3", "--seed", "3"),
        *(
            "--per_device_train_batch_size",
            str(per_device_batch),
            "--per_device_eval_batch_size",
            str(per_device_eval),
        ),
        *("--eval_on_start", "true", "--eval_strategy", "steps", "--eval_steps", "100", "--save_strategy", "no"),
        *("--output_dir", str(output_dir), "--report_to", "none", "--disable_tqdm", "true", "--bf16", "false"),
    ]


@pytest.mark.slow
def test_run_classification_under_accelerate_launch_trains_one_model(tmp_path, cail_rows):
    """docs/distributed_training.md's `accelerate launch --multi_gpu` command on CPU: two processes, one model."""
    by_label = [[row for row in cail_rows if row["label"] == label][:20] for label in ("civil", "criminal")]
    for name, part in (("train", slice(0, 16)), ("validation", slice(16, 20))):
        lines = [
            json.dumps({"text": row["text"], "label": row["label"]}, ensure_ascii=False)
            for rows in by_label
            for row in rows[part]
        ]
        (tmp_path / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    ddp_arguments = [*classification_arguments(tmp_path, tmp_path / "ddp", 2, 4), "--ddp_backend", "gloo"]
    ranks, printed = run_two_processes(ACCELERATE, "run_classification.py", ddp_arguments, tmp_path / "ddp-record")
    assert printed.count("of the tokens of the training text are [UNK]") == 1  # the demo vocabulary: said once
    single_arguments = classification_arguments(tmp_path, tmp_path / "single", 4, 8)
    single = run_one_process(run_classification, single_arguments, tmp_path / "single-record")

    assert_one_model_trained(ranks, single, tmp_path / "ddp-record", tmp_path / "single-record", batches=[4])
    initial = []
    for run in ("ddp", "single"):
        history = json.loads((tmp_path / run / "trainer_state.json").read_text())["log_history"]
        initial.append(next(entry["eval_loss"] for entry in history if "eval_loss" in entry and entry["step"] == 0))
    assert initial[0] == pytest.approx(initial[1], abs=1e-4)


def test_accelerate_launch_without_multi_gpu_is_refused(monkeypatch, tmp_path):
    """`accelerate launch --cpu --num_processes 2` runs the script once (multi-CPU goes through mpirun), with the
    environment of its plain launcher: ACCELERATE_USE_CPU, and MASTER_ADDR/PORT as it was asked for processes."""
    training_args = TrainingArguments(output_dir=str(tmp_path), report_to="none")
    for name, value in {"ACCELERATE_USE_CPU": "True", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ScriptError, match="accelerate launch --multi_gpu --num_processes N"):
        check_distributed_launch(training_args)
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")  # started by mpirun: not refused
    check_distributed_launch(training_args)


def test_several_processes_without_distributed_training_are_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("WORLD_SIZE", "2")
    training_args = TrainingArguments(output_dir=str(tmp_path), report_to="none")  # no process group: NOT_PARALLEL
    with pytest.raises(ScriptError, match=r"launched as 2 processes.*--use_cpu true"):
        check_distributed_launch(training_args)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_documented_cpu_commands_run_as_written(tmp_path):
    """The torchrun and accelerate lines of docs/distributed_training.md that need no GPU, word for word, on a small
    args.yaml: the file of arguments first, the options after it overriding it."""
    from test_readme import NOT_RUN, bash_commands

    commands = [
        command for command in bash_commands(REPO_ROOT / "docs" / "distributed_training.md") if NOT_RUN not in command
    ]
    assert [command.split()[0] for command in commands] == ["torchrun", "accelerate"]
    (tmp_path / "run_mlm.py").symlink_to(REPO_ROOT / "run_mlm.py")
    arguments = {
        "train_file": str(REPO_ROOT / "data" / "peoples_daily_sample.txt"),
        "tokenizer_name": str(DEMO_VOCAB),
        "config_overrides": NO_DROPOUT_MODEL,
        "stages": "32:8:2",
        "per_device_train_batch_size": 4,
        "max_eval_samples": 8,
        "ddp_backend": "nccl",  # what a GPU run would use; the command's --ddp_backend gloo must win
        "disable_tqdm": True,
    }
    for index, command in enumerate(commands):
        output_dir = tmp_path / f"run-{index}"
        (tmp_path / "args.yaml").write_text(yaml.safe_dump({**arguments, "output_dir": str(output_dir)}))
        # torchrun reads its port from PET_MASTER_PORT, so that parallel test runs do not meet on the default one
        completed = run_as_written(command, tmp_path, {**ENVIRONMENT, "PET_MASTER_PORT": str(free_port())})
        assert completed.returncode == 0, f"{command}\n{completed.stdout[-2000:]}{completed.stderr[-3000:]}"
        assert (output_dir / "model.safetensors").is_file()
        state = json.loads((output_dir / "stage-1" / "trainer_state.json").read_text())
        assert state["global_step"] == 2


def run_as_written(command: str, cwd: Path, environment: dict[str, str]) -> subprocess.CompletedProcess:
    """A documented or printed command, word for word, with its launcher (torchrun, accelerate) installed beside this
    Python."""
    words = shlex.split(command)
    launcher = Path(sys.executable).parent / words[0]
    return subprocess.run(
        [str(launcher), *words[1:]], capture_output=True, text=True, timeout=HANG_GUARD_S, env=environment, cwd=cwd
    )


@pytest.mark.slow
def test_sigterm_under_torchrun_stops_both_processes_at_one_step_and_resumes(tmp_path):
    """SIGTERM to rank 1 only, after its step 1: rank 0 learns it through the all-reduce of the stop request, both
    stop after step 2 and write one checkpoint together; the printed command resumes to the uninterrupted run's
    weights."""
    with open(PEOPLES_DAILY_SAMPLE, encoding="utf-8") as file:
        (tmp_path / "news.txt").write_text("".join(next(file) for _ in range(150)), encoding="utf-8")

    def arguments(output_dir: Path) -> list[str]:  # one stage, no checkpoint but the one the signal asks for
        words = [*mlm_arguments(tmp_path / "news.txt", output_dir, 2, 8), "--ddp_backend", "gloo"]
        return [*words, "--stages", "32:8:4", "--save_steps", "100", "--max_eval_samples", "8"]

    run_two_processes(TORCHRUN, "run_mlm.py", arguments(tmp_path / "straight"), tmp_path / "straight-record")
    output_dir, record_dir = tmp_path / "out", tmp_path / "record"
    record_dir.mkdir()
    environment = {**ENVIRONMENT, "KILL_AT": "signal:stage-1:1:SIGTERM", "SIGNAL_RANK": "1"}
    command = [*TORCHRUN, str(WORKER), str(record_dir), str(REPO_ROOT / "run_mlm.py"), *arguments(output_dir)]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        env={**environment, "SNAPSHOT_DIR": str(output_dir)},
    )
    # torchrun reports its workers' exit status 143 (128 + SIGTERM) as a failure: its own exit status is 1
    assert result.returncode == 1, result.stderr[-3000:]
    assert "failed (exitcode: 143)" in result.stderr
    checkpoint = output_dir / "stage-1" / "checkpoint-2"
    resume = f"torchrun --standalone --nproc_per_node 2 run_mlm.py {shlex.join(arguments(output_dir))} --resume_from_checkpoint true"
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert lines == [
        f"error: stopped by SIGTERM after step 2; the checkpoint {checkpoint} is complete: resume with {resume}"
    ]
    assert is_complete_checkpoint(checkpoint) and sorted(output_dir.glob("**/checkpoint-*")) == [checkpoint]
    assert json.loads((checkpoint / "trainer_state.json").read_text())["global_step"] == 2
    before = files_sha256(checkpoint)
    assert (
        load_file(checkpoint / "model.safetensors").keys()
        == load_file(tmp_path / "straight" / "model.safetensors").keys()
    )

    (tmp_path / "run_mlm.py").symlink_to(REPO_ROOT / "run_mlm.py")
    resumed = run_as_written(resume, tmp_path, ENVIRONMENT)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert files_sha256(checkpoint) == before
    straight, final = (load_file(folder / "model.safetensors") for folder in (tmp_path / "straight", output_dir))
    assert straight.keys() == final.keys()
    for name, tensor in straight.items():
        assert torch.equal(tensor, final[name]), name


def test_the_resume_command_launches_as_many_processes(monkeypatch):
    from roformer_hf.training.outputs.interrupts import resume_command

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    arguments = ["--output_dir", "out dir", "--resume_from_checkpoint", "out dir/checkpoint-2"]
    assert resume_command("run_mlm.py", arguments) == (
        "python run_mlm.py --output_dir 'out dir' --resume_from_checkpoint true"
    )
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")  # two machines of four processes each
    assert resume_command("run_mlm.py", ["args.yaml"]) == (
        "torchrun --nnodes 2 --nproc_per_node 4 --rdzv_endpoint <host:port> run_mlm.py args.yaml after setting "
        "resume_from_checkpoint: true in args.yaml"
    )


def test_only_a_pooler_that_no_head_reads_is_unused_in_training():
    """What keeps DDP's search for parameters without a gradient on (`choose_unused_parameter_search`)."""
    from roformer_hf import RoFormerConfig, RoFormerForMaskedLM, RoFormerForSequenceClassification, RoFormerModel
    from roformer_hf.training.machine.launch import unused_in_training

    tiny = {
        "vocab_size": 99,
        "hidden_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 8,
    }
    assert unused_in_training(RoFormerForMaskedLM(RoFormerConfig(**tiny))) == []
    assert unused_in_training(RoFormerForSequenceClassification(RoFormerConfig(**tiny))) == []
    assert unused_in_training(RoFormerModel(RoFormerConfig(**tiny, add_pooling_layer=True))) == []  # its output
    pooled = RoFormerForSequenceClassification(RoFormerConfig(**tiny, add_pooling_layer=True))
    assert unused_in_training(pooled) == ["roformer.pooler.dense.weight", "roformer.pooler.dense.bias"]
