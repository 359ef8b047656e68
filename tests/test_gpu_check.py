"""benchmarks/gpu_check.py, the one command a session lent a GPU runs: its parts run on the CPU, it reads pytest's
and nvidia-smi's output right, and it runs every test that can run on a GPU."""

import importlib.util
import re
import subprocess
import sys

import pytest
from conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_counts_read_outcomes_failures_and_recorded_errors(gpu_check, tmp_path):
    xml = tmp_path / "tests.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_modeling" name="test_a"/>'
        '<testcase classname="tests.test_modeling" name="test_b"><failure message="assert 2 &lt;= 1&#10;more"/>'
        "</testcase>"
        '<testcase classname="tests.test_modeling" name="test_c"><skipped message="no reference"/></testcase>'
        '<testcase classname="tests.test_precision" name="test_d"><properties>'
        '<property name="relative_error" value="0.0064"/></properties></testcase>'
        "</testsuite></testsuites>"
    )
    lines = gpu_check.test_counts(xml)
    assert "| test_modeling | 1 | 1 | 0 | 1 |" in lines
    assert "| test_precision | 1 | 0 | 0 | 0 |" in lines
    assert "| **all** | 2 | 1 | 0 | 1 |" in lines
    assert "- FAILED test_modeling::test_b: assert 2 <= 1" in lines
    assert "- test_d: relative_error 6.40e-03" in lines


def test_utilisation_is_read_over_the_training_window(gpu_check, tmp_path):
    samples = tmp_path / "utilisation.csv"
    values = [0, 0, 90, 40, 100, 80, 0, 0]  # tokenizing, training, saving
    samples.write_text(
        "".join(f"2026/11/26 10:00:0{index}.000, {value}, 1000\n" for index, value in enumerate(values))
    )
    (line,) = gpu_check.utilisation_summary(samples)
    assert "(4 samples, 200 ms apart): mean 78%, median 85%, 25% of samples under 50%" in line


def test_the_device_test_files_hold_every_device_test(gpu_check):
    """The check runs only DEVICE_TEST_FILES (collecting the others needs packages a GPU image may lack), so every
    test marked `device` must live in one of them, and each of them must hold some."""
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "device", "tests"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    files = {line.split("::")[0] for line in collected.splitlines() if "::" in line}
    assert files == set(gpu_check.DEVICE_TEST_FILES)


def test_the_cpu_dry_run_writes_its_report(tmp_path):
    """Two of the parts, as the dry run runs them (the rest take minutes: benchmarks/gpu_check.py --tiny)."""
    completed = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--tiny",
            "--device",
            "cpu",
            "--out",
            str(tmp_path),
            "--parts",
            "versions,collator",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    report = (tmp_path / "gpu_check.md").read_text()
    assert "- torch " in report and "no CUDA device; device cpu" in report
    assert "32 x 512: " in report and "ms a batch" in report
    assert "failed" not in report


@pytest.mark.slow
def test_the_cpu_dry_run_of_the_prepared_command_runs_every_new_part(tmp_path):
    """The issue-45 parts of the prepared GPU command, tiny on the CPU (compiled with aot_eager): the step table of
    both libraries and three variants, run_mlm.py eager and compiled (in-process: its step times and graphs) and the
    long-document experiment with its table (a few minutes on 2 busy cores). A dry run has no time caps: the test holds
    however busy the machine. The device tests part is the pytest run test_the_device_test_files_hold_every_device_test
    collects."""
    out = tmp_path / "dry_run"
    completed = subprocess.run(
        [
            *(sys.executable, str(SCRIPT), "--tiny", "--device", "cpu", "--out", str(out)),
            *("--parts", "versions,steps,mlm_graphs,longdoc"),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    report = (out / "gpu_check.md").read_text()
    exits = re.findall(r"exit (.+?), \d+ s", report)
    assert "failed" not in report and exits and set(exits) == {"0"}, report
    for library in ("transformers", "ours"):
        for variant in ("eager", "compile", "cudagraphs"):
            assert f"| {library} | {variant} | 1 x 128 |" in report and f"| {library} | {variant} | 2 x 64 |" in report
    assert report.count("steady step") == 2
    assert "of which 0 after the first step (recompilations)" in report  # the compiled run: static shapes
    assert "| naive Bayes, character 1-2-grams" in report
    for setting in ("max_seq_length 64 (head)", "max_seq_length 128 (head)", "chunks of 64 tokens, mean-pooled"):
        assert f"| RoFormer, {setting}" in report
