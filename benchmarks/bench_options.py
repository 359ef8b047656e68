"""The option checks the benchmark scripts share: every option is checked before any work (a checkpoint written, an
ONNX export of half a minute), and a bad one stops the script with one line naming the option and what it takes,
exit status 1 and no traceback."""

import os
import sys
from pathlib import Path

import torch


def stop(script: str, message: str) -> None:
    """Ends the script with one line on stderr and exit status 1."""
    sys.exit(f"{Path(script).name}: error: {message}")


def check_at_least(script: str, values: dict[str, int | None], minimum: int) -> None:
    """Each option of `values` (name -> value; None where it was not given) is a whole number of at least `minimum`."""
    for option, value in values.items():
        if value is not None and value < minimum:
            stop(script, f"{option} takes a whole number of at least {minimum}, got {value}")


def check_writable_file(script: str, option: str, path: Path | None) -> None:
    """`path` can be written at the end of a run: a file (or none yet) in an existing folder that accepts it. Tried by
    opening it, so that permissions, read-only mounts and full disks answer as they would at the end."""
    if path is None:
        return
    existed = path.exists()
    try:
        with path.open("a"):
            pass
    except OSError as error:
        stop(script, f"{option} {path} cannot be written ({error.strerror}): give a file in a folder you can write to")
    if not existed:
        os.remove(path)


def check_device(script: str, device: str) -> None:
    """`device` is one torch can place a tensor on here, or the script stops before its first row rather than every
    row failing alike."""
    try:
        torch.zeros(1, device=device)
    except (RuntimeError, AssertionError, ValueError) as error:  # unknown name; no CUDA build, driver or index
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        stop(
            script,
            f"--device {device} cannot be used on this machine ({reason}): give --device cpu or a device it has",
        )
