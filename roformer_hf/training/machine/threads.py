"""How many threads a run computes with. By default the cores this process may use (`os.sched_getaffinity`, within
a container's CPU quota), whatever runs beside it: the thread count decides the order of floating-point sums, so a
count taken from the load at start gave another run of the same command on the same machine (test accuracy 0.700 on
one thread, 0.667 on two, same seed). `--threads N` (or `OMP_NUM_THREADS`) sets the number; `--threads auto` adapts
it to the load instead: the usable cores less those other processes keep busy when the run starts, measured over
`SAMPLE_SECONDS` of /proc/stat (faster beside busy processes, not reproducible).

On a shared machine extra threads cost more than the cores they cannot have: OpenMP threads wait for each other at
every operation, and an idle one spins before it sleeps (beside two busy processes on a 2-core Xeon, 100 steps of the
demo model took 3.7x their quiet time with two threads, 1.5x with one; docs/scripts.md has this project's EPYC).
So the scripts set `OMP_WAIT_POLICY=PASSIVE` before torch loads (the first thing they do; a policy given in the
environment is kept): idle threads sleep, and two threads beside busy processes lose less."""

import logging
import os
import time
from pathlib import Path
from typing import NamedTuple

import torch

from ..errors import ScriptError

logger = logging.getLogger(__name__)

PROC_STAT = Path("/proc/stat")
PROC_LOADAVG = Path("/proc/loadavg")
SAMPLE_SECONDS = 0.15


class ThreadChoice(NamedTuple):
    """The thread count of a run, and the one line that says how it was chosen (None where the user gave it)."""

    threads: int
    line: str | None


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (e.g. under `taskset` or a container's cpuset), within a
    container's CPU quota (`cpu_quota`)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = cpu_quota()
    return min(cores, quota) if quota is not None else cores


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


# `--threads auto`: the thread count follows the load at start.
AUTO = "auto"
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def cpu_quota(cpu_max: Path = CGROUP_CPU_MAX) -> int | None:
    """The whole cores a cgroup v2 CPU quota allows (`cpu.max`: quota and period), at least 1; None without one."""
    try:
        quota, period = cpu_max.read_text().split()[:2]
        return None if quota == "max" else max(1, int(quota) // int(period))
    except (OSError, ValueError):
        return None


def parse_threads(value: str | int | None) -> int | str | None:
    """`--threads` as given: None, `AUTO` (in any case, spaces around), or a whole number of at least 1 (else a
    `ScriptError`)."""
    if value is None:
        return value
    text = str(value).strip()
    if text.lower() == AUTO:
        return AUTO
    if not text.lstrip("-").isdigit() or int(text) < 1:
        raise ScriptError(
            f"--threads must be a whole number of at least 1, or auto (the usable cores less those other processes "
            f"keep busy at the start), got {value}."
        )
    return int(text)


def decide_threads(
    requested: int | str | None, environment: str | None, usable: int, busy: float | None = None
) -> ThreadChoice:
    """
    The thread count: `requested` (`--threads` N) first, then `environment` (`OMP_NUM_THREADS`, where it gives a
    whole number of at least 1), else the `usable` cores; with `--threads auto`, the usable cores less the `busy` ones
    (rounded), at least 1. A count given above the usable cores is taken, with a line (`more_than_the_cores`).

    Args:
        requested (`int` or `"auto"`, *optional*): `--threads`; refused below 1 (`ScriptError`).
        environment (`str`, *optional*): the value of `OMP_NUM_THREADS` (`environment_threads`; one that gives no
            count is left aside, and the line says so).
        usable (`int`): the cores this process may use (`usable_cores`).
        busy (`float`, *optional*): with `"auto"`, the cores other processes keep busy (`busy_cores_of_others`);
            None: unknown.
    """
    requested = parse_threads(requested)
    if isinstance(requested, int):
        return ThreadChoice(requested, more_than_the_cores(requested, "--threads", usable))
    from_environment = environment_threads(environment)
    if requested is None and from_environment is not None:
        return ThreadChoice(from_environment, more_than_the_cores(from_environment, "OMP_NUM_THREADS", usable))
    if requested != AUTO:
        line = f"{usable} thread{'s' * (usable > 1)}, one per usable core (the same whatever runs beside)"
        if requested is None and environment is not None and environment.strip():
            line += f", OMP_NUM_THREADS={environment.strip()!r} left aside (not a whole number of at least 1)"
        return ThreadChoice(usable, f"{line}; --threads N sets another number, --threads auto follows the load.")
    others = round(busy) if busy is not None else 0
    threads = max(1, usable - others)
    measured = "no load reading on this system" if busy is None else f"other processes keep {busy:.1f} of them busy"
    line = f"{threads} thread{'s' if threads > 1 else ''} (--threads auto): {usable} usable cores, {measured}"
    return ThreadChoice(threads, f"{line}; a run on another count of threads may end with other weights.")


def environment_threads(environment: str | None) -> int | None:
    """The thread count `OMP_NUM_THREADS` gives: a whole number of at least 1, or OpenMP's list of one per nesting level
    ("2,1"), whose first is the count of the operations' threads; None where it gives none."""
    first = (environment or "").split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) >= 1 else None


# A count the user gives past this many threads a usable core is refused: each extra thread only slows the run
# (`more_than_the_cores`), and a count like OMP_NUM_THREADS=99999 cannot start ("can't start new thread" tracebacks).
MOST_THREADS_PER_CORE = 16


def more_than_the_cores(threads: int, given_by: str, usable: int) -> str | None:
    """The line for a count the user gave that is more than the usable cores (the run is reproducible, but slower:
    OpenMP threads wait for each other at every operation); None where it is not. A count past
    `MOST_THREADS_PER_CORE` a core is refused (`ScriptError`)."""
    if threads <= usable:
        return None
    cores = f"{usable} usable core{'s' * (usable > 1)}"
    if threads > MOST_THREADS_PER_CORE * usable:
        raise ScriptError(
            f"{given_by} {threads} asks for {threads} threads on {cores}: more than {MOST_THREADS_PER_CORE} a core "
            f"cannot all start and would only slow the run; give {given_by} {usable} or fewer (or leave it out: one "
            "thread a core)."
        )
    return (
        f"{threads} threads ({given_by}) on {cores}: the threads take turns on the cores and wait for each other at "
        f"every operation, so the run is slower than on {usable}; give {given_by} {usable} or fewer (the run's "
        "numbers depend on the count, so keep it to reproduce a run)."
    )


def choose_threads(requested: int | str | None) -> int:
    """
    Set torch's thread count for this run (`decide_threads`) and say in one line how it was chosen where the user did
    not give a number; returns the count. With `--threads auto` the load is measured once per process: a later call
    (a second run in the same process) keeps the first one's measurement.

    Args:
        requested (`int` or `"auto"`, *optional*): `--threads`, None where not given.
    """
    environment = os.environ.get("OMP_NUM_THREADS")
    requested = parse_threads(requested)
    if requested == AUTO and _policy_choice:
        choice = _policy_choice[0]
    else:
        busy = busy_cores_of_others() if requested == AUTO else None
        choice = decide_threads(requested, environment, usable_cores(), busy)
        if requested == AUTO:
            _policy_choice[:] = [choice]
    torch.set_num_threads(choice.threads)
    if choice.line is not None and int(os.environ.get("RANK", "0")) == 0:
        logger.warning(choice.line)
    return choice.threads


_policy_choice: list[ThreadChoice] = []  # the first measured choice of this process (--threads auto)


__all__ = [
    "AUTO",
    "ThreadChoice",
    "busy_cores",
    "busy_cores_of_others",
    "choose_threads",
    "cpu_times",
    "decide_threads",
    "environment_threads",
    "parse_threads",
]
