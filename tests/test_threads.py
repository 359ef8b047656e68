"""training/threads.py: the thread count of a run from the usable cores and the load other processes put on them
(/proc/stat readings faked here), `--threads` and `OMP_NUM_THREADS` first, and the one line that says the choice."""

import logging

import pytest
import torch

from roformer_hf.training import threads
from roformer_hf.training.errors import ScriptError
from roformer_hf.training.threads import busy_cores, choose_threads, cpu_times, decide_threads

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
def test_the_policy_leaves_the_cores_others_keep_busy(usable, busy, expected):
    choice = decide_threads(None, None, usable, busy)
    assert choice.threads == expected
    assert choice.line.startswith(f"{expected} thread") and f"{usable} usable cores" in choice.line
    assert "--threads N" in choice.line
    if busy is not None:
        assert f"keep {busy:.1f} of them busy" in choice.line


def test_shared_cores_with_several_threads_name_the_passive_wait_policy(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert "OMP_WAIT_POLICY=PASSIVE" in decide_threads(None, None, 16, 3.7).line
    assert "OMP_WAIT_POLICY" not in decide_threads(None, None, 16, 0.1).line  # not shared
    assert "OMP_WAIT_POLICY" not in decide_threads(None, None, 2, 1.2).line  # one thread: nothing waits
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    assert "OMP_WAIT_POLICY" not in decide_threads(None, None, 16, 3.7).line  # already set


def test_threads_option_wins_over_omp_num_threads_which_wins_over_the_policy():
    assert decide_threads(3, "1", 2, 1.9) == (3, None)
    assert decide_threads(None, "4", 2, 1.9) == (4, None)
    assert decide_threads(None, "not a number", 2, 1.9).threads == 1  # ignored, as torch ignores it


@pytest.mark.parametrize("requested", [0, -2])
def test_threads_below_one_are_refused_in_one_line(requested):
    with pytest.raises(ScriptError, match=rf"--threads must be a whole number of at least 1, got {requested}\."):
        decide_threads(requested, None, 2, 0.0)


@pytest.fixture
def restored_threads(monkeypatch):
    monkeypatch.setattr(threads, "_policy_choice", [])
    saved = torch.get_num_threads()
    yield
    torch.set_num_threads(saved)


def test_choose_threads_sets_torch_and_says_the_policys_choice_once(monkeypatch, caplog, restored_threads):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    readings = iter([1.0, 0.0])
    monkeypatch.setattr(threads, "busy_cores_of_others", lambda: next(readings))
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    with caplog.at_level(logging.WARNING, logger=threads.__name__):
        assert choose_threads(None) == 1
        assert choose_threads(None) == 1  # a second run in this process: the first measurement, not a new one
    assert torch.get_num_threads() == 1
    assert caplog.messages == [caplog.messages[0]] * 2 and caplog.messages[0].startswith("1 thread: 2 usable cores")


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
    assert (given.threads, default.threads) == (3, None)
