"""Runs run_mlm.py or run_classification.py as the script would, and records what every process trained.

`python tests/distributed_worker.py RECORD_DIR SCRIPT.py ARGS...`, typically under torchrun: every process writes
`RECORD_DIR/rank-<r>.json` (per training stage: the checksum of the weights after every step, whether the model was
wrapped in DistributedDataParallel, and the fingerprints of the examples it trained on at every step) and
`RECORD_DIR/rank-<r>-stage-<n>.safetensors` (its weights at the end of each stage). Not a test module itself.

`KILL_AT` makes the process SIGKILL itself, as a crash or an out-of-memory kill would:
- `step:<folder>:<n>`: after optimizer step n of the trainer whose output_dir ends with <folder>;
- `checkpoint:<folder>`: while writing the checkpoint folder that ends with <folder>, after its weights, optimizer
  and RNG states and before its trainer_state.json (which transformers writes last);
- `signal:<folder>:<n>:<SIGNAL>[+<SIGNAL>...]`: sends itself the signal(s) (e.g. `SIGINT`, `SIGINT+SIGINT`, `SIGTERM`)
  after optimizer step n, as a user's Ctrl-C or a cluster's SIGTERM would, once it has written the SHA-256 of every
  file of `SNAPSHOT_DIR` to `RECORD_DIR/before-signal.json`; with `SIGNAL_RANK` set, only the process of that rank
  does (as when one node of a cluster job is told to stop first; the others learn it through the all-reduce);
- `pause:<folder>:<n>:<gate>`: after optimizer step n, creates `<gate>.reached` and waits until `<gate>` exists;
- `final-save`: while saving the final model, once its files are written into its staging folder and before they
  are moved into place.
"""

import hashlib
import importlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from types import ModuleType

import torch
from safetensors.torch import save_file
from transformers import Trainer, TrainerCallback, TrainerState

from roformer_hf.training.script_runner import run_script


def weights_checksum(model: torch.nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def example_fingerprint(example: dict) -> str:
    return hashlib.sha256(json.dumps(list(example["input_ids"])).encode()).hexdigest()[:16]


class Recorder(TrainerCallback):
    """Records, per stage, the weights' checksum after every step and the examples of every step."""

    def __init__(self, trainer, record: dict, record_dir: Path):
        self.trainer, self.record, self.record_dir = trainer, record, record_dir
        self.batches: list[list[str]] = []
        self.stage: dict = {}
        get_train_dataloader = trainer.get_train_dataloader

        def recording_train_dataloader():
            collator = trainer.data_collator

            def collate(examples):
                self.batches.append([example_fingerprint(example) for example in examples])
                return collator(examples)

            trainer.data_collator = collate
            try:
                return get_train_dataloader()
            finally:
                trainer.data_collator = collator

        trainer.get_train_dataloader = recording_train_dataloader

    def on_train_begin(self, args, state, control, **kwargs):
        self.stage = {"output_dir": args.output_dir, "steps": {}}
        self.stage["wrapped"] = type(self.trainer.model_wrapped).__name__
        self.stage["find_unused_parameters"] = getattr(self.trainer.model_wrapped, "find_unused_parameters", None)
        self.record["stages"].append(self.stage)

    def on_step_end(self, args, state, control, **kwargs):
        batches_per_step = args.gradient_accumulation_steps
        examples = [fingerprint for batch in self.batches[:batches_per_step] for fingerprint in batch]
        del self.batches[:batches_per_step]
        self.stage["steps"][state.global_step] = {"checksum": weights_checksum(self.trainer.model)}
        self.stage["steps"][state.global_step]["examples"] = examples

    def on_train_end(self, args, state, control, **kwargs):
        rank = args.process_index
        index = len(self.record["stages"])
        weights = {name: tensor.detach().clone() for name, tensor in self.trainer.model.state_dict().items()}
        save_file(weights, self.record_dir / f"rank-{rank}-stage-{index}.safetensors")
        self.record["world_size"] = args.world_size
        (self.record_dir / f"rank-{rank}.json").write_text(json.dumps(self.record, indent=1))


def kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class KillAtStep(TrainerCallback):
    def __init__(self, folder: str, step: int):
        self.folder, self.step = folder, step

    def on_step_end(self, args, state, control, **kwargs):
        if args.output_dir.endswith(self.folder) and state.global_step == self.step:
            kill_self()


def files_sha256(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


class AtStep(TrainerCallback):
    """Calls `action()` after optimizer step `step` of the trainer whose output_dir ends with `folder`."""

    def __init__(self, folder: str, step: int, action):
        self.folder, self.step, self.action = folder, step, action

    def on_step_end(self, args, state, control, **kwargs):
        if args.output_dir.endswith(self.folder) and state.global_step == self.step:
            self.action()


def send_signals(names: str, record_dir: Path) -> None:
    snapshot = files_sha256(Path(os.environ["SNAPSHOT_DIR"]))
    (record_dir / "before-signal.json").write_text(json.dumps(snapshot, indent=1))
    for name in names.split("+"):
        os.kill(os.getpid(), getattr(signal, name))


def wait_at_gate(gate: Path) -> None:
    gate.with_name(gate.name + ".reached").touch()
    while not gate.exists():
        time.sleep(0.1)


def install_kill_hook(kill_at: str, callbacks: list, record_dir: Path | None = None) -> None:
    """Arrange the SIGKILL (or signal, or pause) that `KILL_AT` asks for (see the module docstring)."""
    kind, _, where = kill_at.partition(":")
    if kind == "signal" and os.environ.get("SIGNAL_RANK", os.environ.get("RANK", "0")) != os.environ.get("RANK", "0"):
        return
    if kind in ("signal", "pause"):
        folder, step, argument = where.split(":", 2)
        action = (
            (lambda: send_signals(argument, record_dir)) if kind == "signal" else lambda: wait_at_gate(Path(argument))
        )
        callbacks.append(AtStep(folder, int(step), action))
    elif kind == "step":
        folder, step = where.rsplit(":", 1)
        callbacks.append(KillAtStep(folder, int(step)))
    elif kind == "checkpoint":
        save_to_json = TrainerState.save_to_json

        def save_state_or_die(state, json_path):
            if str(Path(json_path).parent).endswith(where):
                kill_self()
            save_to_json(state, json_path)

        TrainerState.save_to_json = save_state_or_die
    elif kind == "final-save":
        save_model = Trainer.save_model

        def save_model_and_die(trainer, output_dir=None, *args, **kwargs):
            save_model(trainer, output_dir, *args, **kwargs)
            if Path(str(output_dir)).name.startswith(".partial-model"):
                kill_self()

        Trainer.save_model = save_model_and_die
    else:
        raise ValueError(f"unknown KILL_AT {kill_at!r}")


# The function of each script that builds its trainers (once per stage for run_mlm.py), and the module that looks it
# up when the script calls it: the one to patch to reach every trainer a run builds.
TRAINER_BUILDERS = {
    "run_mlm": ("roformer_hf.training.mlm.pretraining", "build_stage_trainer"),
    "run_classification": ("run_classification", "build_classification_trainer"),
}


def trainer_builder(script: str) -> tuple[ModuleType, str]:
    """The module that looks up the trainer builder of `script` (`run_mlm` or `run_mlm.py`, ...), and its name."""
    module_name, builder_name = TRAINER_BUILDERS[Path(script).stem]
    return importlib.import_module(module_name), builder_name


def record_run(module, record_dir: Path, argv: list[str] | None = None):
    """Run `module.main(argv)` with a `Recorder` on every trainer it builds; returns what `main` returns."""
    owner, builder_name = trainer_builder(module.__name__)
    build_trainer, record, kill_callbacks = getattr(owner, builder_name), {"stages": [], "pid": os.getpid()}, []
    if os.environ.get("KILL_AT"):
        install_kill_hook(os.environ["KILL_AT"], kill_callbacks, record_dir)

    def build_recorded_trainer(*args, **kwargs):
        trainer = build_trainer(*args, **kwargs)
        trainer.add_callback(Recorder(trainer, record, record_dir))
        for callback in kill_callbacks:
            trainer.add_callback(callback)
        return trainer

    setattr(owner, builder_name, build_recorded_trainer)
    try:
        return module.main(argv)
    finally:
        setattr(owner, builder_name, build_trainer)


def main() -> None:
    record_dir, script = Path(sys.argv[1]), Path(sys.argv[2])
    sys.argv = [str(script), *sys.argv[3:]]
    sys.path.insert(0, str(script.parent))
    module = importlib.import_module(script.stem)
    run_script(lambda: record_run(module, record_dir))


if __name__ == "__main__":
    main()
