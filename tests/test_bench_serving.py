"""benchmarks/bench_serving.py --tiny end to end, offline, in a subprocess: every implementation gets a speed row and
every precision an agreement row with sane values. No timing is asserted (benchmarks print, tests check)."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from conftest import CAIL_SAMPLE, DATA_DIR, HANG_GUARD_S, REPO_ROOT, full_data_present

SCRIPT = REPO_ROOT / "benchmarks" / "bench_serving.py"
# ChnSentiCorp where the full data is present, else the shipped court texts (JSON lines with a `text` field too)
TEXTS = DATA_DIR / "cls" / "chnsenticorp_htl.jsonl" if full_data_present() else CAIL_SAMPLE
IMPLEMENTATIONS = (
    "transformers-float32",
    "roformer_hf-float32",
    "roformer_hf-bf16",
    "roformer_hf-int8",
    "roformer_hf-int8-compiled",
    "roformer_hf-int8-deprecated",
    "onnxruntime-float32",
    "onnxruntime-int8",
)
NUM_TEXTS = 16  # what --tiny reads


def may_fail(name: str) -> bool:
    """Rows that may give a one-line reason instead of numbers: onnxruntime's int8 quantizer, and our int8 row where
    torchao (the int8 extra) is not installed."""
    torchao_rows = ("roformer_hf-int8", "roformer_hf-int8-compiled")
    return name == "onnxruntime-int8" or (name in torchao_rows and importlib.util.find_spec("torchao") is None)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    output = tmp_path_factory.mktemp("bench_serving") / "results.json"
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--tiny", "--texts", str(TEXTS), "--json", str(output)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=HANG_GUARD_S,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return completed.stdout, json.loads(output.read_text())


@pytest.mark.slow  # about 30 s: an ONNX export and a fresh process per implementation
def test_tiny_run_prints_the_header_and_a_speed_row_per_implementation(tiny_run):
    stdout, results = tiny_run
    assert stdout.startswith("command: python benchmarks/bench_serving.py --tiny")
    assert (
        "machine: CPU " in stdout
        and "roofs (the best square matrix product of " in stdout
        and "bf16 on this CPU: " in stdout
    )
    rows = {row["implementation"]: row for row in results["speed"]}
    assert list(rows) == list(IMPLEMENTATIONS)
    for name, row in rows.items():
        assert f"| 2 x 32 | {name} | " in stdout
        if may_fail(name) and "error" in row:  # allowed: the table then gives the one-line reason
            assert row["error"] in stdout
            continue
        assert "error" not in row, row
        assert row["seconds"] > 0 and row["peak_bytes"] > 0
    assert "| 2 x 32 | transformers-float32 | " in stdout and " | 1.00x |" in stdout


@pytest.mark.slow
def test_tiny_run_reports_agreement_of_every_precision_with_our_float32(tiny_run):
    stdout, results = tiny_run
    rows = {(row["head"], row["implementation"]): row for row in results["agreement"]}
    assert set(rows) == {(head, name) for head in ("raw", "calibrated") for name in IMPLEMENTATIONS[1:]}
    for (head, name), row in rows.items():
        if may_fail(name) and "error" in row:
            continue
        assert row["texts"] == NUM_TEXTS
        assert f"| {head} | {name} | {row['agree']} / {NUM_TEXTS} |" in stdout
        assert 0 <= row["agree"] <= NUM_TEXTS
        assert 0 <= row["max_probability_difference"] <= 1
    for head in ("raw", "calibrated"):
        assert rows[head, "roformer_hf-float32"]["agree"] == NUM_TEXTS  # our float32 against itself
        assert rows[head, "roformer_hf-float32"]["max_probability_difference"] == 0
    # onnxruntime's float32 runs our export of the same weights: the same decisions up to rounding.
    assert rows["raw", "onnxruntime-float32"]["agree"] == NUM_TEXTS
    assert rows["raw", "onnxruntime-float32"]["max_probability_difference"] < 1e-4
    assert "our float32 raw head: label 1 for " in stdout
