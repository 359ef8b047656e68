"""SIGINT stops the test suite with pytest's summary whatever test runs: one started as a background job of a shell
script (SIGINT ignored at its start), and one that runs a script's steps in this process (the stop handling of
`guard_run`, and `run_script`'s exit, used to turn the Ctrl-C into a failed test, and the suite went on)."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import REPO_ROOT

# Each inner test writes the file READY once it waits for the signal, and stops waiting after HANG_GUARD_S seconds (a
# guard against hanging, far above the moment the signal takes to come), which without the fix fails it.
INNER_TESTS = {
    "waiting": """
        def test_waiting():
            wait_for_the_signal()
    """,
    "outside_training": """
        from transformers import TrainingArguments
        from roformer_hf.training.script_runner import guard_run

        def test_outside_training(tmp_path):
            arguments = TrainingArguments(tmp_path / "out", report_to="none", use_cpu=True)
            with guard_run(arguments, "run_mlm.py", []):
                wait_for_the_signal()
    """,
    "training_under_run_script": """
        from types import SimpleNamespace
        from transformers import TrainerControl, TrainingArguments
        from roformer_hf.training.outputs.interrupts import StopAtStepBoundary, raise_if_stopped
        from roformer_hf.training.script_runner import guard_run, run_script

        def test_training_under_run_script(tmp_path):
            arguments = TrainingArguments(tmp_path / "out", report_to="none", use_cpu=True)
            trainer = SimpleNamespace(args=arguments, state=SimpleNamespace(global_step=1), is_world_process_zero=lambda: True)
            stops = StopAtStepBoundary()

            def training():
                with guard_run(arguments, "run_mlm.py", []):
                    stops.on_train_begin(arguments, None, None)
                    wait_for_the_signal(until=lambda: stops.on_step_end(arguments, None, TrainerControl()).should_training_stop)
                    stops.on_train_end(arguments, None, None)
                    raise_if_stopped(trainer)

            run_script(training)
    """,
}

INNER_COMMON = """
    import time
    from pathlib import Path

    HANG_GUARD_S = 300

    def wait_for_the_signal(until=lambda: False):
        Path("READY").write_text("")
        deadline = time.monotonic() + HANG_GUARD_S
        while not until() and time.monotonic() < deadline:
            time.sleep(0.05)
"""

INNER_AFTER = """
    def test_after_the_signal():
        Path("RAN ON").write_text("")
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("inner", "sigint_ignored_at_start"),
    [("waiting", True), ("outside_training", False), ("training_under_run_script", False)],
)
def test_sigint_stops_the_suite_with_its_summary(tmp_path, inner, sigint_ignored_at_start):
    (tmp_path / "test_inner.py").write_text(
        "".join(textwrap.dedent(part) for part in (INNER_COMMON, INNER_TESTS[inner], INNER_AFTER))
    )
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "tests")])}
    signal_at_start = signal.SIG_IGN if sigint_ignored_at_start else signal.SIG_DFL
    suite = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q", "test_inner.py"],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal_at_start),
    )
    while not (tmp_path / "READY").exists() and suite.poll() is None:
        time.sleep(0.05)
    suite.send_signal(signal.SIGINT)
    output, _ = suite.communicate(timeout=600)  # a guard against hanging only: the inner test stops waiting first
    assert suite.returncode == pytest.ExitCode.INTERRUPTED, output
    assert not (tmp_path / "RAN ON").exists(), output
