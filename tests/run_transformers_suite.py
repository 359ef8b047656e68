"""Run transformers' own model and tokenizer tests against roformer_hf's classes, from a transformers source folder.

    python tests/run_transformers_suite.py --source DIR [--keep] [--against transformers] [-- PYTEST_ARGS...]

DIR is a transformers checkout or an extracted sdist (`pip download --no-deps --no-binary :all: transformers==X`).
The script copies the test files it needs into a temporary folder, rewrites only the imports that name transformers'
RoFormer classes so that they load roformer_hf's (through `tests/transformers_suite/roformer_hf_imports.py`), runs
pytest there, prints the failures grouped by cause, and exits 1 when a test fails that `EXPECTED_FAILURES` does not
list (0 otherwise; 1 with one line for a folder without transformers' tests or a missing test dependency). Nothing of
transformers' test code is kept in this repository. Needs `parameterized` (in this project's `test` extra).

- With `tests/models/roformer/test_modeling_roformer.py` (a checkout): that file, imports rewritten.
- Without it (the sdist ships only the common mixins): `ModelTesterMixin` and `ConfigTester` with our own tester,
  `tests/transformers_suite/roformer_hf_common.py`.
- Either way, `TokenizerTesterMixin` with our own tester, `tests/transformers_suite/roformer_hf_tokenizer_common.py`
  (transformers' own RoFormer tokenizer test reads checkpoints from the Hub), on the original checkpoints' vocabulary.
Modules the common mixins import but the sdist lacks (the generate and export test mixins, the shared config
kwargs, the tokenizer tests' sample text) are replaced by stand-ins written below, which add no tests.

`--against transformers` runs the same tests on transformers' own RoFormer classes instead (every imported name
answered by transformers'), to compare: it prints the same report and exits 0.
"""

import argparse
import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUPPORT = HERE / "transformers_suite"
ROFORMER_SUITE = Path("models") / "roformer" / "test_modeling_roformer.py"


@dataclass
class Expected:
    reason: str
    message: str  # a regular expression every failure of the test must match: another cause is unexpected


# Tests allowed to fail, by "Class::test" or "::test" (in any class; a parametrized name adds "_<number>...").
EXPECTED_FAILURES = {
    # roformer_hf rotates the query and key in `modeling.py` and keeps no sinusoid-table module or static rotation helper,
    # so these tests of transformers' internals have nothing of ours to test (the rotation itself is tested against
    # the reference in tests/test_rope.py). With the file at transformers' commit 158e70c they also fail for
    # transformers' own RoFormer 5.23.0.
    **dict.fromkeys(
        (
            "RoFormerSinusoidalPositionalEmbeddingTest::test_basic",
            "RoFormerSinusoidalPositionalEmbeddingTest::test_positional_emb_weights_against_roformer",
            "RoFormerSelfAttentionRotaryPositionEmbeddingTest::test_apply_rotary_position_embeddings",
        ),
        Expected("sinusoid-table internal", "roformer_hf has no RoFormerSinusoidalPositionalEmbedding"),
    ),
    # That version of the RoFormer file declares a generative class without inheriting GenerationTesterMixin: it
    # fails the same way for transformers' own classes (our sdist tester inherits the mixin and passes).
    "RoFormerModelTest::test_generation_tester_mixin_inheritance": Expected(
        "the test file's own class lacks the mixin", "GenerationTesterMixin"
    ),
}

GENERATION_STAND_IN = '''"""Stand-in: the sdist has no tests/generation; no generate tests run."""


class GenerationTesterMixin:
    pass
'''

EXPORT_STAND_IN = '''"""Stand-in: the sdist has no tests/exporters; no export tests run."""


class ExportTesterMixin:
    pass
'''

CONFIG_KWARGS_STAND_IN = '''"""Stand-in: every common PreTrainedConfig field, each set away from its default."""

config_common_kwargs = {
    "return_dict": False,
    "output_hidden_states": True,
    "output_attentions": True,
    "dtype": "float16",
    "chunk_size_feed_forward": 5,
    "architectures": ["RoFormerModel"],
    "id2label": {0: "label"},
    "label2id": {"label": 0},
    "problem_type": "regression",
}
'''

# TokenizerTesterMixin reads this file in setUpClass (as `cls._data`); the sdist does not ship it. Our own few lines.
SAMPLE_TEXT_STAND_IN = """RoFormer encodes positions by rotating queries and keys.
It reads Chinese text word by word.

The tokenizer splits words it does not know into WordPiece pieces.
"""

# Stand-ins, by path in the staged folder, for what the common mixins read and the sdist does not ship; written only
# where the source has no such file. None adds a test. The tiny-model summary lists the Hub checkpoints the pipeline
# tests download (none: offline, they skip). The pipeline mixin executes `src/transformers/__init__.py` as
# `transformers` and then uses whatever `transformers` is imported: the installed package, which is what we test.
STAND_INS = {
    "src/transformers/__init__.py": '"""Stand-in: the tests run against the installed transformers."""\n',
    "tests/utils/tiny_model_summary.json": "{}\n",
    "tests/generation/test_utils.py": GENERATION_STAND_IN,
    "tests/exporters/test_export.py": EXPORT_STAND_IN,
    "tests/utils/test_configuration_utils.py": CONFIG_KWARGS_STAND_IN,
    "tests/fixtures/sample_text.txt": SAMPLE_TEXT_STAND_IN,
}

# The folders of a checkout the mixins import from; copied whole when present.
SHARED_FOLDERS = ("generation", "exporters", "utils")


@dataclass
class Result:
    test_id: str  # "Class::test_name"
    outcome: str  # "passed", "failed", "error" or "skipped"
    message: str  # the first failure's (or the skip's)
    other_messages: tuple[str, ...] = ()  # those of the test's other failed reports (subtests, the test's end)


def is_roformer_import(node: ast.ImportFrom) -> bool:
    """Whether an import names transformers' RoFormer: `from transformers import RoFormer...` or its modules."""
    module = node.module or ""
    if node.level or not module.startswith("transformers"):
        return False
    if module.startswith("transformers.models.roformer"):
        return True
    return module == "transformers" and any(alias.name.startswith("RoFormer") for alias in node.names)


def import_line(module: str, aliases: list[ast.alias], indent: str) -> str:
    names = ", ".join(alias.name if alias.asname is None else f"{alias.name} as {alias.asname}" for alias in aliases)
    return f"{indent}from {module} import {names}"


def rewrite_imports(source: str) -> str:
    """`source` with every import of transformers' RoFormer classes reading roformer_hf's instead; nothing else.

    `from transformers import RoFormerModel, is_torch_available` becomes two imports: the RoFormer names from
    `roformer_hf_imports`, the others still from transformers.
    """
    lines = source.splitlines()
    roformer_imports = [
        node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom) and is_roformer_import(node)
    ]
    for node in sorted(roformer_imports, key=lambda node: node.lineno, reverse=True):
        indent = re.match(r"\s*", lines[node.lineno - 1]).group()
        from_transformers_models = node.module.startswith("transformers.models.roformer")
        ours = [alias for alias in node.names if from_transformers_models or alias.name.startswith("RoFormer")]
        theirs = [alias for alias in node.names if alias not in ours]
        replacement = [import_line("roformer_hf_imports", ours, indent)]
        if theirs:
            replacement.insert(0, import_line(node.module, theirs, indent))
        lines[node.lineno - 1 : node.end_lineno] = replacement
    return "\n".join(lines) + "\n"


def transformers_tests_folder(source: Path) -> Path:
    tests = source / "tests"
    if not (tests / "test_modeling_common.py").is_file():
        raise SystemExit(
            f"error: {source} has no tests/test_modeling_common.py: pass a transformers checkout or an extracted "
            "sdist (pip download --no-deps --no-binary :all: transformers==VERSION, then tar xzf)"
        )
    return tests


def check_test_dependencies() -> None:
    if importlib.util.find_spec("parameterized") is None:
        raise SystemExit(
            "error: transformers' tests import parameterized, which is not installed: pip install 'parameterized>=0.9' "
            "(or pip install -e '.[test]')"
        )


def stage_suite(source: Path, work: Path) -> list[Path]:
    """Copies what the suite needs into `work`; returns the test files to run."""
    theirs = transformers_tests_folder(source)
    staged = work / "tests"
    staged.mkdir(parents=True)
    for common_file in theirs.glob("*.py"):  # the common mixins and tests/__init__.py
        shutil.copy(common_file, staged / common_file.name)
    (staged / "__init__.py").touch()
    for folder in SHARED_FOLDERS:
        if (theirs / folder).is_dir():
            shutil.copytree(theirs / folder, staged / folder)
    if (source / "utils" / "test_module").is_dir():  # tests/utils/test_configuration_utils.py reads it
        shutil.copytree(source / "utils" / "test_module", work / "utils" / "test_module")
    for relative_path, text in STAND_INS.items():
        if not (work / relative_path).is_file():
            (work / relative_path).parent.mkdir(parents=True, exist_ok=True)
            (work / relative_path).write_text(text)
    shutil.copy(SUPPORT / "roformer_hf_imports.py", work / "roformer_hf_imports.py")

    if (theirs / ROFORMER_SUITE).is_file():
        target = staged / ROFORMER_SUITE
        target.parent.mkdir(parents=True)
        target.write_text(rewrite_imports((theirs / ROFORMER_SUITE).read_text()))
    else:
        target = staged / "models" / "roformer_hf" / "test_roformer_hf_common.py"
        target.parent.mkdir(parents=True)
        shutil.copy(SUPPORT / "roformer_hf_common.py", target)
    # transformers' own RoFormer tokenizer test reads Hub checkpoints: our tester of the common mixin, either way.
    tokenizer_target = staged / "models" / "roformer_hf" / "test_roformer_hf_tokenization.py"
    tokenizer_target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(SUPPORT / "roformer_hf_tokenizer_common.py", tokenizer_target)
    shutil.copy(original_vocab(), work / "vocab.txt")
    for folder in (staged / "models", target.parent, tokenizer_target.parent):
        (folder / "__init__.py").touch()
    # The staged folder is pytest's rootdir; transformers registers its marks in a conftest.py the sdist lacks.
    (work / "pytest.ini").write_text("[pytest]\nfilterwarnings = ignore::pytest.PytestUnknownMarkWarning\n")
    shutil.copy(SUPPORT / "record_results.py", work / "conftest.py")
    return [target, tokenizer_target]


def original_vocab() -> Path:
    """The vocabulary of the original checkpoints, in the checkout of the roformer_hf under test."""
    vocab = roformer_hf_root() / "data" / "roformer_chinese_base_vocab.txt"
    if not vocab.is_file():
        raise SystemExit(
            f"error: {vocab} is missing: run this script from a roformer_hf checkout (pip install -e . there, or "
            "PYTHONPATH=<checkout>), whose data/ holds the vocabulary the tokenizer tests read"
        )
    return vocab


def roformer_hf_root() -> Path:
    """The folder holding the roformer_hf package this interpreter imports (PYTHONPATH decides, as for pytest)."""
    import roformer_hf

    return Path(roformer_hf.__file__).resolve().parents[1]


def run_pytest(work: Path, targets: list[Path], against: str, pytest_args: list[str]) -> Path:
    """Runs pytest on the staged suite, with the classes of `against` ("roformer_hf" or "transformers", read by
    `roformer_hf_imports`); returns the file of its reports (one JSON line each)."""
    results = work / "results.jsonl"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(work), str(roformer_hf_root()), env.get("PYTHONPATH")) if p)
    env["ROFORMER_HF_SUITE_RESULTS"] = str(results)
    env["ROFORMER_HF_SUITE_AGAINST"] = against
    env.setdefault("HF_HUB_OFFLINE", "1")
    options = ["-q", "--tb=short", "-p", "no:cacheprovider"]  # later pytest_args override these
    files = [str(target.relative_to(work)) for target in targets]
    command = [sys.executable, "-m", "pytest", *files, *options, *pytest_args]
    subprocess.run(command, cwd=work, env=env, check=False)
    if not results.is_file():
        raise SystemExit("error: pytest ran no test (see its output above)")
    return results


def read_results(results_file: Path) -> list[Result]:
    """One result per test: failed (or error, outside the test's call) when any report or subtest failed."""
    reports_by_test = defaultdict(list)
    for line in results_file.read_text(encoding="utf-8").splitlines():
        report = json.loads(line)
        reports_by_test[report["nodeid"]].append(report)
    results = []
    for nodeid, reports in reports_by_test.items():
        test_id = "::".join(nodeid.split("::")[-2:])  # "Class::test_name"
        failed = [report for report in reports if report["outcome"] == "failed"]
        skipped = [report for report in reports if report["outcome"] == "skipped" and not report["subtest"]]
        if failed:
            outcome = "failed" if failed[0]["when"] == "call" else "error"
            others = tuple(dict.fromkeys(report["message"] for report in failed[1:]))
            results.append(Result(test_id, outcome, failed[0]["message"], others))
        elif skipped:
            results.append(Result(test_id, "skipped", skipped[0]["message"]))
        else:
            results.append(Result(test_id, "passed", ""))
    return results


def cause_of(message: str) -> str:
    """A failure's message reduced to one line that failures of the same cause share."""
    first_line = next((line.strip() for line in message.splitlines() if line.strip()), "(no message)")
    first_line = re.sub(r"0x[0-9a-f]+", "0x…", first_line)  # object addresses differ from test to test
    return first_line if len(first_line) <= 150 else first_line[:149] + "…"


def expected_entry(test_id: str) -> Expected | None:
    """The entry of EXPECTED_FAILURES listing `test_id`, or None."""
    class_name, test_name = test_id.split("::")[-2:] if "::" in test_id else ("", test_id)
    for expected_id, expected in EXPECTED_FAILURES.items():
        for candidate in (f"{class_name}::{test_name}", f"::{test_name}"):
            # A parametrized test's name adds "_<number>..." (parameterized.expand).
            if re.fullmatch(re.escape(expected_id) + r"(_\d+(_\w*)?)?", candidate):
                return expected
    return None


def expected_reason(failure: Result) -> str | None:
    """Why `failure` may fail; None when its test is not listed, or when any of its failures has another cause."""
    expected = expected_entry(failure.test_id)
    messages = (failure.message, *failure.other_messages)
    return expected.reason if expected and all(re.search(expected.message, text) for text in messages) else None


def report(results: list[Result], against: str = "roformer_hf") -> int:
    """Prints the counts and the failures grouped by cause; returns the exit status (always 0 for a measurement of
    transformers' own classes, `against="transformers"`)."""
    counts = defaultdict(int)
    for result in results:
        counts[result.outcome] += 1
    print(
        f"\ntransformers' suite against {against}: {len(results)} tests, "
        + ", ".join(f"{counts[outcome]} {outcome}" for outcome in ("passed", "failed", "error", "skipped"))
    )
    by_cause = defaultdict(list)
    unexpected = []
    for result in results:
        if result.outcome in ("failed", "error"):
            by_cause[cause_of(result.message)].append(result)
            if expected_reason(result) is None:
                unexpected.append(result)
    for cause, failures in sorted(by_cause.items(), key=lambda item: -len(item[1])):
        print(f"\n{len(failures):4d} x {cause}")
        for failure in failures:
            reason = expected_reason(failure)
            print(f"       {failure.test_id}" + (f"  [expected: {reason}]" if reason else ""))
    stale = [result.test_id for result in results if result.outcome == "passed" and expected_entry(result.test_id)]
    stale = stale if against == "roformer_hf" else []  # the list is of our failures
    for test_id in stale:
        print(f"\nexpected to fail but passed: {test_id} (its entry in EXPECTED_FAILURES can go)")
    if against != "roformer_hf":
        print(f"\n(transformers' RoFormer measured: {len(by_cause)} causes, no failure is checked)")
        return 0
    if unexpected:
        print(
            f"\n{len(unexpected)} unexpected failure(s): see above; the expected ones are listed in {Path(__file__).name}"
        )
        return 1
    print("\nno unexpected failure")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True, help="a transformers checkout or extracted sdist")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and print its path")
    parser.add_argument(
        "--against",
        choices=("roformer_hf", "transformers"),
        default="roformer_hf",
        help="whose classes the tests import: ours (checked), or transformers' RoFormer (measured, for comparison)",
    )
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest after `--` (e.g. -- -k test_config -x)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="roformer_hf_transformers_suite_"))
    try:
        targets = stage_suite(args.source.resolve(), work)
        check_test_dependencies()
        return report(read_results(run_pytest(work, targets, args.against, args.pytest_args)), args.against)
    finally:
        if args.keep:
            print(f"the staged suite is in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
