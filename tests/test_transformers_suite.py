"""tests/run_transformers_suite.py: the import rewriting, the stand-ins for names we lack, and the result reading.

The suite itself runs in CI (.ci/run) from the sdist of the installed transformers; these tests check the machinery.
"""

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import transformers

import roformer_hf

TESTS_DIR = Path(__file__).resolve().parent


def load_script():
    spec = importlib.util.spec_from_file_location("run_transformers_suite", TESTS_DIR / "run_transformers_suite.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


suite = load_script()

THEIR_IMPORTS = """\
import unittest

from transformers import RoFormerConfig, is_torch_available
from transformers.testing_utils import require_torch

from ...test_modeling_common import ModelTesterMixin

if is_torch_available():
    from transformers import (
        RoFormerForMaskedLM,
        RoFormerModel,
    )
    from transformers.models.roformer.modeling_roformer import RoFormerSelfAttention as Attention
"""

OUR_IMPORTS = """\
import unittest

from transformers import is_torch_available
from roformer_hf_imports import RoFormerConfig
from transformers.testing_utils import require_torch

from ...test_modeling_common import ModelTesterMixin

if is_torch_available():
    from roformer_hf_imports import RoFormerForMaskedLM, RoFormerModel
    from roformer_hf_imports import RoFormerSelfAttention as Attention
"""


def test_only_the_roformer_imports_are_rewritten():
    assert suite.rewrite_imports(THEIR_IMPORTS) == OUR_IMPORTS


def test_code_after_the_imports_is_unchanged():
    body = "\n\nclass RoFormerModelTest(unittest.TestCase):\n    def test_x(self):\n        RoFormerModel(1)\n"
    assert suite.rewrite_imports(THEIR_IMPORTS + body) == OUR_IMPORTS + body


@pytest.fixture
def our_imports(monkeypatch):
    monkeypatch.syspath_prepend(str(suite.SUPPORT))
    sys.modules.pop("roformer_hf_imports", None)
    return importlib.import_module("roformer_hf_imports")


def test_rewritten_imports_load_our_classes(our_imports):
    from roformer_hf_imports import RoFormerConfig, RoFormerForCausalLM, RoFormerModel

    assert (RoFormerConfig, RoFormerModel, RoFormerForCausalLM) == (
        roformer_hf.RoFormerConfig,
        roformer_hf.RoFormerModel,
        roformer_hf.RoFormerForCausalLM,
    )
    assert RoFormerConfig.model_type == "roformer_hf"


def test_against_transformers_the_same_names_load_transformers_roformer(monkeypatch):
    """`--against transformers`: the same tests, transformers' classes (our tokenizer's name translated)."""
    monkeypatch.setenv("ROFORMER_HF_SUITE_AGAINST", "transformers")
    monkeypatch.syspath_prepend(str(suite.SUPPORT))
    monkeypatch.delitem(sys.modules, "roformer_hf_imports", raising=False)
    their_imports = importlib.import_module("roformer_hf_imports")
    monkeypatch.delitem(sys.modules, "roformer_hf_imports")  # the next test imports ours again
    assert (their_imports.RoFormerModel, their_imports.RoFormerJiebaTokenizer) == (
        transformers.RoFormerModel,
        transformers.RoFormerTokenizer,
    )
    assert their_imports.RoFormerSinusoidalPositionalEmbedding.__module__.startswith("transformers.models.roformer")


def test_a_name_we_lack_fails_only_when_used(our_imports):
    from roformer_hf_imports import RoFormerSinusoidalPositionalEmbedding

    with pytest.raises(our_imports.MissingFromRoformerHF, match="roformer_hf has no RoFormerSinusoidalPositional"):
        RoFormerSinusoidalPositionalEmbedding(num_positions=6, embedding_dim=6)
    with pytest.raises(our_imports.MissingFromRoformerHF, match=r"RoFormerSinusoidalPositionalEmbedding\.weight"):
        RoFormerSinusoidalPositionalEmbedding.weight  # noqa: B018


# Two entries in the script's form: one test of one class, and one test in any class ("::test"), with two causes.
LISTED = {
    "RoFormerSinusoidalPositionalEmbeddingTest::test_basic": suite.Expected(
        "sinusoid-table internal", "roformer_hf has no RoFormerSinusoidalPositionalEmbedding"
    ),
    "::test_overflow": suite.Expected("two listed causes", r"^KeyError: 'overflowing_tokens'$|^AssertionError: False"),
}


@pytest.mark.parametrize(
    ("test_id", "message", "expected"),
    [
        (
            "RoFormerSinusoidalPositionalEmbeddingTest::test_basic",
            "roformer_hf has no RoFormerSinusoidalPositionalEmbedding",
            True,
        ),
        ("RoFormerHFTokenizationTest::test_overflow", "KeyError: 'overflowing_tokens'", True),
        ("RoFormerOtherTokenizationTest::test_overflow", "AssertionError: False is not true", True),  # "::": any class
        ("RoFormerHFTokenizationTest::test_overflow", "KeyError: 'rope_theta'", False),  # another cause
        ("RoFormerHFTokenizationTest::test_overflow_loads", "KeyError: 'overflowing_tokens'", False),
        ("RoFormerModelTest::test_basic", "roformer_hf has no RoFormerSinusoidalPos", False),  # another class
        ("RoFormerModelTest::test_training", "", False),
    ],
)
def test_expected_failures_match_by_test_and_cause(monkeypatch, test_id, message, expected):
    monkeypatch.setattr(suite, "EXPECTED_FAILURES", LISTED)
    assert (suite.expected_reason(suite.Result(test_id, "failed", message)) is not None) == expected


def test_every_failure_of_an_expected_test_must_have_the_listed_cause(monkeypatch):
    monkeypatch.setattr(suite, "EXPECTED_FAILURES", LISTED)
    test_id = "RoFormerHFTokenizationTest::test_overflow"
    wording = "AssertionError: False is not true"
    windows = suite.Result(test_id, "failed", wording, ("KeyError: 'overflowing_tokens'",))
    assert suite.expected_reason(windows) == "two listed causes"
    truncation = suite.Result(test_id, "failed", wording, ("AssertionError: 101 != 100",))
    assert suite.expected_reason(truncation) is None


def test_a_failed_subtest_fails_its_test_and_a_skipped_subtest_does_not_skip_it(tmp_path):
    reports = [
        {"nodeid": "t.py::A::test_one", "when": "call", "outcome": "failed", "message": "E1", "subtest": True},
        {"nodeid": "t.py::A::test_one", "when": "call", "outcome": "passed", "message": "", "subtest": False},
        {"nodeid": "t.py::A::test_two", "when": "call", "outcome": "skipped", "message": "S", "subtest": True},
        {"nodeid": "t.py::A::test_two", "when": "call", "outcome": "passed", "message": "", "subtest": False},
        {"nodeid": "t.py::A::test_three", "when": "setup", "outcome": "skipped", "message": "S3", "subtest": False},
        {"nodeid": "t.py::A::test_four", "when": "setup", "outcome": "failed", "message": "E4", "subtest": False},
    ]
    results_file = tmp_path / "results.jsonl"
    results_file.write_text("".join(json.dumps(report) + "\n" for report in reports))
    results = {result.test_id: (result.outcome, result.message) for result in suite.read_results(results_file)}
    assert results == {
        "A::test_one": ("failed", "E1"),
        "A::test_two": ("passed", ""),
        "A::test_three": ("skipped", "S3"),
        "A::test_four": ("error", "E4"),
    }


def test_report_fails_only_on_unexpected_failures(capsys, monkeypatch):
    monkeypatch.setattr(suite, "EXPECTED_FAILURES", LISTED)
    message = "MissingFromRoformerHF: roformer_hf has no RoFormerSinusoidalPositionalEmbedding"
    expected = suite.Result("RoFormerSinusoidalPositionalEmbeddingTest::test_basic", "failed", message)
    passed = suite.Result("RoFormerModelTest::test_training", "passed", "")
    assert suite.report([expected, passed]) == 0
    unexpected = suite.Result("RoFormerModelTest::test_save_load", "failed", "ValueError: at 0x7f00 and more\nline 2")
    assert suite.report([expected, passed, unexpected]) == 1
    assert "1 x ValueError: at 0x… and more" in capsys.readouterr().out
    stale = suite.Result("RoFormerHFTokenizationTest::test_overflow", "passed", "")
    assert suite.report([stale]) == 0
    assert "expected to fail but passed: RoFormerHFTokenizationTest::test_overflow" in capsys.readouterr().out
    assert suite.report([expected, passed, unexpected], against="transformers") == 0  # a measurement of theirs


def test_a_folder_without_transformers_tests_is_refused_in_one_line(tmp_path):
    with pytest.raises(SystemExit, match=r"has no tests/test_modeling_common\.py: pass a transformers checkout"):
        suite.main(["--source", str(tmp_path)])


def test_a_roformer_hf_without_its_data_folder_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(suite, "roformer_hf_root", lambda: tmp_path)  # e.g. installed without its checkout
    with pytest.raises(SystemExit, match=r"roformer_chinese_base_vocab\.txt is missing: run this script from a"):
        suite.original_vocab()
