"""A pytest plugin, copied as `conftest.py` beside the staged suite: one JSON line per test report.

The file named by `ROFORMER_HF_SUITE_RESULTS` receives the node id, phase, outcome and one-line message of every
report, subtests and files that fail to import included (transformers' common tests run many checks as subtests of one test).
"""

import json
import os


def one_line_message(report) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:  # a failure: the exception's own line
        return crash.message
    if isinstance(report.longrepr, tuple):  # a skip: (file, line, reason)
        return str(report.longrepr[2])
    return str(report.longrepr or "")


def pytest_collectreport(report):
    if report.failed:  # a test file that does not import: its tests never run
        write_record(report, when="collect", subtest=False)


def pytest_runtest_logreport(report):
    write_record(report, when=report.when, subtest=type(report).__name__ != "TestReport")


def write_record(report, when: str, subtest: bool) -> None:
    record = {
        "nodeid": report.nodeid,
        "when": when,
        "outcome": report.outcome,
        "message": one_line_message(report) if report.outcome != "passed" else "",
        "subtest": subtest,
    }
    with open(os.environ["ROFORMER_HF_SUITE_RESULTS"], "a", encoding="utf-8") as results:
        results.write(json.dumps(record) + "\n")
