"""training/machine/threads.py: the thread count of a run from the usable cores (whatever the load: the same command
gives the same run), `--threads` and `OMP_NUM_THREADS` first, `--threads auto` from the load other processes put on the
cores (/proc/stat readings faked here), and the one line that says the choice."""

import logging

import pytest
import torch

from roformer_hf.training.errors import ScriptError
from roformer_hf.training.machine import threads
from roformer_hf.training.machine.threads import (
    MOST_THREADS_PER_CORE,
    busy_cores,
    choose_threads,
    cpu_times,
    decide_threads,
)

# Two readings of a 2-core /proc/stat 1 second (100 ticks per core) apart: cpu0 idle for 10 of its 100 ticks, cpu1 for
# 60 (idle + iowait); the aggregate "cpu" line and the other lines are not per-core and are skipped.
STAT_BEFORE = """cpu  300 0 100 700 0 0 0 0 0 0
cpu0 100 0 50 300 0 0 0 0 0 0
cpu1 200 0 50 390 10 0 0 0 0 0
intr 12345 0 0
ctxt 999
"""
STAT_AFTER = """cpu  430 0 120 770 0 0 0 0 0 0
cpu0 170 0 70 310 0 0 0 0 0 0
cpu1 230 0 60 440 20 0 0 0 0 0
intr 12400 0 0
"""


def test_busy_cores_from_two_proc_stat_readings():
    before, after = cpu_times(STAT_BEFORE, None), cpu_times(STAT_AFTER, None)
    assert before == {0: (300, 450), 1: (400, 650)}
    assert busy_cores(before, after) == pytest.approx(0.9 + 0.4)
    assert busy_cores(cpu_times(STAT_BEFORE, {1}), cpu_times(STAT_AFTER, {1})) == pytest.approx(0.4)  # affinity


@pytest.mark.parametrize(
    ("usable", "busy", "expected"),
    [(2, 0.05, 2), (2, 0.6, 1), (2, 1.9, 1), (2, 5.0, 1), (16, 3.7, 12), (1, 0.0, 1), (8, None, 8)],
)
def test_threads_auto_leaves_the_cores_others_keep_busy(usable, busy, expected):
    choice = decide_threads("auto", None, usable, busy)
    assert choice.threads == expected
    assert choice.line.startswith(f"{expected} thread") and f"{usable} usable cores" in choice.line
    assert "--threads auto" in choice.line and "other weights" in choice.line
    if busy is not None:
        assert f"keep {busy:.1f} of them busy" in choice.line


@pytest.mark.parametrize("busy", [0.0, 1.0, 1.9, 5.0, None])
def test_by_default_the_count_is_the_usable_cores_whatever_the_load(busy):
    """The same command on the same machine computes with the same threads (the order of its sums), busy or not."""
    choice = decide_threads(None, None, 2, busy)
    assert choice.threads == 2
    assert choice.line.startswith("2 threads, one per usable core") and "--threads auto" in choice.line


def test_a_cpu_quota_bounds_the_usable_cores(tmp_path, monkeypatch):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert threads.cpu_quota(tmp_path / "cpu.max") == 1
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert threads.cpu_quota(tmp_path / "cpu.max") is None
    assert threads.cpu_quota(tmp_path / "missing") is None
    monkeypatch.setattr(threads, "cpu_quota", lambda: 1)
    assert threads.usable_cores() == 1


def test_threads_option_wins_over_omp_num_threads_which_wins_over_the_cores():
    assert decide_threads(3, "1", 4, 1.9) == (3, None)
    assert decide_threads("3", "1", 4) == (3, None)
    assert decide_threads(None, "4", 4, 1.9) == (4, None)
    assert decide_threads(None, "3,1", 4) == (3, None)  # OpenMP's list, one count per nesting level: the first
    assert decide_threads(None, "not a number", 2, 1.9).threads == 2  # ignored, as torch ignores it


@pytest.mark.parametrize("environment", ["0", "-1", "two", "1.5"])
def test_an_omp_num_threads_left_aside_is_said(environment):
    choice = decide_threads(None, environment, 2)
    assert choice.threads == 2
    assert f"OMP_NUM_THREADS={environment!r} left aside (not a whole number of at least 1)" in choice.line


@pytest.mark.parametrize(
    ("requested", "environment", "given_by"), [(8, None, "--threads"), (None, "3", "OMP_NUM_THREADS")]
)
def test_more_threads_than_cores_are_taken_and_said(requested, environment, given_by):
    choice = decide_threads(requested, environment, 2)
    assert choice.threads == (requested or int(environment))
    assert choice.line.startswith(f"{choice.threads} threads ({given_by}) on 2 usable cores")
    assert f"give {given_by} 2 or fewer" in choice.line


@pytest.mark.parametrize("requested", ["AUTO", " auto ", "Auto"])
def test_auto_is_read_in_any_case(requested):
    assert decide_threads(requested, None, 2, 1.0).threads == 1


@pytest.mark.parametrize("requested", [0, -2, "many", "1.5"])
def test_threads_below_one_are_refused_in_one_line(requested):
    with pytest.raises(
        ScriptError, match=rf"--threads must be a whole number of at least 1, or auto .*, got {requested}\."
    ):
        decide_threads(requested, None, 2, 0.0)


@pytest.fixture
def restored_threads(monkeypatch):
    monkeypatch.setattr(threads, "_policy_choice", [])
    saved = torch.get_num_threads()
    yield
    torch.set_num_threads(saved)


def test_choose_threads_auto_sets_torch_and_measures_once(monkeypatch, caplog, restored_threads):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    readings = iter([1.0, 0.0])
    monkeypatch.setattr(threads, "busy_cores_of_others", lambda: next(readings))
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    with caplog.at_level(logging.WARNING, logger=threads.__name__):
        assert choose_threads("auto") == 1
        assert choose_threads("auto") == 1  # a second run in this process: the first measurement, not a new one
    assert torch.get_num_threads() == 1
    assert caplog.messages == [caplog.messages[0]] * 2
    assert caplog.messages[0].startswith("1 thread (--threads auto): 2 usable cores")


def test_choose_threads_by_default_never_measures_the_load(monkeypatch, caplog, restored_threads):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "busy_cores_of_others", lambda: pytest.fail("the default read the load"))
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    with caplog.at_level(logging.WARNING, logger=threads.__name__):
        assert choose_threads(None) == 2
    assert torch.get_num_threads() == 2 and caplog.messages[0].startswith("2 threads, one per usable core")


@pytest.mark.parametrize(("requested", "environment"), [(1, None), (None, "1"), (1, "2")])
def test_a_chosen_count_is_applied_without_a_line_or_a_measurement(
    monkeypatch, caplog, restored_threads, requested, environment
):
    if environment is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", environment)
    monkeypatch.setattr(threads, "busy_cores_of_others", lambda: pytest.fail("measured although the user chose"))
    with caplog.at_level(logging.WARNING, logger=threads.__name__):
        assert choose_threads(requested) == (requested or int(environment))
    assert caplog.messages == []


def test_the_measurement_reads_this_machine():
    busy = threads.busy_cores_of_others(seconds=0.02)
    assert busy is None or 0 <= busy <= threads.usable_cores()


def test_the_scripts_take_threads_as_an_option(tmp_path):
    from transformers import HfArgumentParser

    from roformer_hf.training.cli import ScriptTrainingArguments

    parser = HfArgumentParser(ScriptTrainingArguments)
    [given] = parser.parse_args_into_dataclasses(["--output_dir", str(tmp_path), "--threads", "3", "--bf16", "false"])
    [default] = parser.parse_args_into_dataclasses(["--output_dir", str(tmp_path), "--bf16", "false"])
    [auto] = parser.parse_args_into_dataclasses(
        ["--output_dir", str(tmp_path), "--threads", "auto", "--bf16", "false"]
    )
    assert (given.threads, default.threads, auto.threads) == ("3", None, "auto")


def test_the_same_command_beside_busy_processes_trains_alike(tmp_path, monkeypatch):
    """The same command twice, the second beside two busy processes (and a load reading that says so): the same
    threads and precision, recorded in the results, and the same weights."""
    import json
    import subprocess
    import sys

    from test_bad_inputs import SCRIPTS, good_run, with_value

    (tmp_path / "run0.0").mkdir()
    (tmp_path / "run2.0").mkdir()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # the precision probe measured by the first run
    saved = torch.get_num_threads()
    results = []
    try:
        for busy in (0.0, 2.0):
            monkeypatch.setattr(threads, "busy_cores_of_others", lambda busy=busy: busy)
            spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(int(busy))]
            try:
                arguments = good_run()("run_classification.py", tmp_path / f"run{busy}")
                SCRIPTS["run_classification.py"].main(with_value(arguments, "--max_steps", "3"))
            finally:
                for spinner in spinners:
                    spinner.kill()
                    spinner.wait()
            out = tmp_path / f"run{busy}" / "out"
            recorded = json.loads((out / "train_results.json").read_text())
            results.append(
                (recorded["train_threads"], recorded["train_precision"], (out / "model.safetensors").read_bytes())
            )
    finally:
        torch.set_num_threads(saved)
    assert results[0][0] == threads.usable_cores()
    assert results[0] == results[1]


@pytest.mark.parametrize(("requested", "environment", "given_by"), [(33, None, "--threads"), (None, "99999", "OMP")])
def test_a_count_no_machine_can_start_is_refused_in_one_line(requested, environment, given_by):
    """OMP_NUM_THREADS=99999 was taken, then every thread the run started failed ("can't start new thread" traceback
    after the warning about the count): past `MOST_THREADS_PER_CORE` a core it is refused, naming the count to give."""
    with pytest.raises(ScriptError, match=rf"^{given_by}.* on 2 usable cores: .* give {given_by}\S* 2 or fewer"):
        decide_threads(requested, environment, 2)
    assert decide_threads(MOST_THREADS_PER_CORE * 2, None, 2).threads == MOST_THREADS_PER_CORE * 2  # taken, said
