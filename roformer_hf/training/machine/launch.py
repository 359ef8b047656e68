"""Distributed launches (torchrun, `accelerate launch`): the defaults that follow from the machine, and the refusal of
a launch whose processes would each train a model of their own; and how `--torch_compile` compiles where the lengths
of the batches vary."""

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

import torch
from transformers import TrainingArguments
from transformers.training_args import ParallelMode

from ..errors import ScriptError

logger = logging.getLogger(__name__)


MPI_WORLD_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
# What accelerate's `TorchDynamoPlugin` reads for `torch.compile(..., dynamic=)`, where the Trainer leaves it unset.
DYNAMIC_COMPILE_VARIABLE = "ACCELERATE_DYNAMO_USE_DYNAMIC"


# What `launch_defaults` sets, for the scripts' --help-all (whose defaults hold on every machine).
LAUNCH_DEFAULTS_NOTE = (
    "On a machine without a GPU the scripts set --dataloader_pin_memory false, and under torchrun or accelerate "
    "launch --use_cpu true as well; the bf16 default follows the CPU (see --bf16)."
)


def launch_defaults() -> dict[str, Any]:
    """
    `TrainingArguments` defaults that follow from the machine and how the script was launched. Without an
    accelerator: no pinned memory (torch warns at every data loader that it cannot pin), and `use_cpu` for a
    multi-process launch (torchrun, `accelerate launch --multi_gpu`); without it transformers sets up the process
    group but not distributed training, and every process trains its own model.
    """
    if torch.accelerator.is_available():
        return {}
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return {"use_cpu": True, "dataloader_pin_memory": False}
    return {"dataloader_pin_memory": False}


def check_distributed_launch(training_args: TrainingArguments) -> None:
    """
    Refuse a launch that asked for several processes but trains in one, or in several unconnected ones; say in one
    line that `--fsdp` on a CPU trains as DDP.

    Raises `ScriptError` naming the command that starts the processes.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size > 1 and training_args.parallel_mode != ParallelMode.DISTRIBUTED:
        raise ScriptError(
            f"launched as {world_size} processes, but transformers set up {training_args.parallel_mode.value} "
            "training, so each process would train its own model: on a machine without a GPU add --use_cpu true."
        )
    # accelerate's plain launcher (no --multi_gpu) runs the script once; it sets MASTER_ADDR only when asked for
    # several processes or machines, which it then expects mpirun to start.
    if training_args.fsdp and trains_on_cpu(training_args.use_cpu):
        logger.warning(
            f"--fsdp on a CPU: FSDP shards a model over GPUs, so this run trains as plain DDP, each of its "
            f"{world_size} process{'es' * (world_size > 1)} holding the whole model (leave --fsdp out to say so)."
        )
    launched_by_accelerate = "ACCELERATE_USE_CPU" in os.environ and "MASTER_ADDR" in os.environ
    started_alone = not any(name in os.environ for name in ("WORLD_SIZE", *MPI_WORLD_SIZE_VARIABLES))
    if launched_by_accelerate and started_alone:
        raise ScriptError(
            "accelerate launch was asked for several processes but started only this one (without a GPU it starts "
            "them through mpirun, given --mpirun_hostfile): use 'accelerate launch --multi_gpu --num_processes N' "
            "(it starts them like torchrun, with or without a GPU) or torchrun."
        )


def choose_unused_parameter_search(training_args: TrainingArguments, model: torch.nn.Module) -> None:
    """
    Turn off DDP's search for parameters without a gradient where the model has none (`unused_in_training`) and the
    user left `--ddp_find_unused_parameters` unset: transformers searches then at every step of a distributed run (an
    extra pass over the graph, and a warning from every process that it found none). A model with such parameters
    keeps transformers' choice.
    """
    if training_args.ddp_find_unused_parameters is not None or training_args.parallel_mode != ParallelMode.DISTRIBUTED:
        return
    unused = unused_in_training(model)
    if not unused:
        training_args.ddp_find_unused_parameters = False
    if training_args.process_index == 0:
        found = f"{', '.join(unused)} get none: searched at every step" if unused else "none: not searched"
        logger.info(f"distributed training, parameters without a gradient: {found}")


def unused_in_training(model: torch.nn.Module) -> list[str]:
    """The trainable parameters a head model's training never reaches: those of the encoder's pooler (a checkpoint's,
    such as RoFormer-Sim's), whose output no head of the scripts reads."""
    base_model = getattr(model, "base_model", model)
    pooler = getattr(base_model, "pooler", None)
    if base_model is model or pooler is None:
        return []
    prefix = f"{model.base_model_prefix}.pooler."
    return [prefix + name for name, parameter in pooler.named_parameters() if parameter.requires_grad]


def trains_on_cpu(use_cpu: bool) -> bool:
    """Whether training runs on the CPU: `--use_cpu`, or no accelerator (GPU, XPU, MPS...) and no TPU."""
    from transformers.utils import is_torch_xla_available

    return use_cpu or not (torch.accelerator.is_available() or is_torch_xla_available())


@contextlib.contextmanager
def compiled_for_every_length(training_args: TrainingArguments, varying: str | None) -> Iterator[None]:
    """
    While the Trainers of a run with `--torch_compile` are built, where the shapes of its batches vary (`varying`
    says how; None: they do not), have them compile the model once for every length (`torch.compile(...,
    dynamic=True)`, through accelerate's `ACCELERATE_DYNAMO_USE_DYNAMIC`, restored afterwards), and say so in one
    line. torch's default compiles for the first batch's shapes, then again, dynamically, at the first other shape: on
    the demo's model 31 s + 35 s against 50 s once, the steps as fast (docs/scripts.md). Fixed shapes keep the default
    (one static compilation is the cheaper), and so does a value the user set.
    """
    if not training_args.torch_compile or varying is None or DYNAMIC_COMPILE_VARIABLE in os.environ:
        yield
        return
    if int(os.environ.get("RANK", "0")) == 0:
        logger.warning(
            f"--torch_compile compiles the model once for every length ({varying}); "
            f"{DYNAMIC_COMPILE_VARIABLE}=false before the command compiles for each length instead."
        )
    os.environ[DYNAMIC_COMPILE_VARIABLE] = "true"
    try:
        yield
    finally:
        del os.environ[DYNAMIC_COMPILE_VARIABLE]
