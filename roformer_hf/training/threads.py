"""How many threads a run computes with: the cores this process may use (`os.sched_getaffinity`) less those other
processes keep busy when it starts, measured over `SAMPLE_SECONDS` of /proc/stat.

torch's default is one thread per core whatever else runs. On a shared machine that costs more than the cores it
cannot have: its OpenMP threads wait for each other at every operation, a thread whose core another process holds
makes the others spin: beside two busy processes on a 2-core Xeon, 100 steps of the demo model took 3.7x their quiet
time with the default two threads, 1.5x with one (docs/scripts.md has this project's EPYC). `--threads N` (or
`OMP_NUM_THREADS`) sets the number instead. An idle OpenMP thread spins before it sleeps unless
`OMP_WAIT_POLICY=PASSIVE` is set before torch starts (it is read once, when torch loads its OpenMP library, so a
running script cannot change it): where several threads share cores with other processes the run's line says so."""

import logging
import os
import time
from pathlib import Path
from typing import NamedTuple

import torch

from .errors import ScriptError

logger = logging.getLogger(__name__)

PROC_STAT = Path("/proc/stat")
PROC_LOADAVG = Path("/proc/loadavg")
SAMPLE_SECONDS = 0.15


class ThreadChoice(NamedTuple):
    """The thread count of a run, and the one line that says how it was chosen (None where the user gave it)."""

    threads: int
    line: str | None


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. under `taskset` or a container's cpuset)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cpu_times(stat_text: str, cpus: set[int] | None) -> dict[int, tuple[int, int]]:
    """(idle, total) clock ticks of each CPU line (`cpuN`) of a /proc/stat text, for the CPUs in `cpus` (None: all)."""
    times = {}
    for line in stat_text.splitlines():
        name, *fields = line.split()
        if not (name.startswith("cpu") and name[3:].isdigit()) or (cpus is not None and int(name[3:]) not in cpus):
            continue
        ticks = [int(field) for field in fields[:8]]  # user nice system idle iowait irq softirq steal
        times[int(name[3:])] = (ticks[3] + ticks[4], sum(ticks))
    return times


def busy_cores(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]]) -> float:
    """How many cores were busy between two `cpu_times` readings (1.0 per core that never idled)."""
    busy = 0.0
    for cpu, (idle_after, total_after) in after.items():
        idle_before, total_before = before.get(cpu, (idle_after, total_after))
        elapsed = total_after - total_before
        if elapsed > 0:
            busy += 1 - (idle_after - idle_before) / elapsed
    return busy


def busy_cores_of_others(seconds: float = SAMPLE_SECONDS) -> float | None:
    """The cores other processes keep busy, over `seconds` of /proc/stat while this process sleeps (or, where that
    cannot be read, the running tasks of /proc/loadavg less this one); None where neither exists (not Linux)."""
    cpus = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    try:
        before = cpu_times(PROC_STAT.read_text(), cpus)
        time.sleep(seconds)
        return busy_cores(before, cpu_times(PROC_STAT.read_text(), cpus))
    except (OSError, ValueError, IndexError):
        pass
    try:  # the fourth field is "running/total", the reader itself among the running
        return max(0, int(PROC_LOADAVG.read_text().split()[3].split("/")[0]) - 1)
    except (OSError, ValueError, IndexError):
        return None


def decide_threads(requested: int | None, environment: str | None, usable: int, busy: float | None) -> ThreadChoice:
    """
    The thread count: `requested` (`--threads`) first, then `environment` (`OMP_NUM_THREADS`, where it is a whole
    number of at least 1), else the `usable` cores less the `busy` ones (rounded), at least 1.

    Args:
        requested (`int`, *optional*): `--threads`; refused below 1 (`ScriptError`).
        environment (`str`, *optional*): the value of `OMP_NUM_THREADS`.
        usable (`int`): the cores this process may use (`usable_cores`).
        busy (`float`, *optional*): the cores other processes keep busy (`busy_cores_of_others`); None: unknown.
    """
    if requested is not None:
        if requested < 1:
            raise ScriptError(f"--threads must be a whole number of at least 1, got {requested}.")
        return ThreadChoice(requested, None)
    if environment is not None and environment.strip().isdigit() and int(environment) >= 1:
        return ThreadChoice(int(environment), None)
    others = round(busy) if busy is not None else 0
    threads = max(1, usable - others)
    measured = "no load reading on this system" if busy is None else f"other processes keep {busy:.1f} of them busy"
    line = f"{threads} thread{'s' if threads > 1 else ''}: {usable} usable cores, {measured}"
    if threads > 1 and others > 0 and "OMP_WAIT_POLICY" not in os.environ:
        line += "; with OMP_WAIT_POLICY=PASSIVE before the command, idle threads would not spin on the shared cores"
    return ThreadChoice(threads, f"{line}; --threads N sets another number.")


def choose_threads(requested: int | None) -> int:
    """
    Set torch's thread count for this run (`decide_threads`) and say in one line how it was chosen where the user did
    not choose it; returns the count. Measured once per process: a later call (a second run in the same process)
    keeps the first one's measurement.

    Args:
        requested (`int`, *optional*): `--threads`, None where not given.
    """
    environment = os.environ.get("OMP_NUM_THREADS")
    if requested is None and environment is None and _policy_choice:
        choice = _policy_choice[0]
    else:
        user_chose = requested is not None or (environment or "").strip().isdigit()
        busy = None if user_chose else busy_cores_of_others()
        choice = decide_threads(requested, environment, usable_cores(), busy)
        if choice.line is not None:
            _policy_choice[:] = [choice]
    torch.set_num_threads(choice.threads)
    if choice.line is not None and int(os.environ.get("RANK", "0")) == 0:
        logger.warning(choice.line)
    return choice.threads


_policy_choice: list[ThreadChoice] = []  # the first measured choice of this process


__all__ = ["ThreadChoice", "busy_cores", "busy_cores_of_others", "choose_threads", "cpu_times", "decide_threads"]
