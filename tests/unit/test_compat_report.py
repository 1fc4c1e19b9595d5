"""`make compat`'s reading of `go test -json` (tests/compat/report.py) on a small stream written by hand in
test2json's form: outcomes per top-level test, subtests folded in, a timeout's casualties, the summary line."""

from __future__ import annotations

import json

from tests.compat.report import FAIL, NOT_RUN, PASS, SKIP, parse

PKG = "github.com/twmb/franz-go/pkg/kgo"


def event(action: str, test: str | None = None, output: str | None = None, elapsed: float | None = None) -> str:
    fields: dict[str, object] = {"Time": "2026-11-28T17:35:20Z", "Action": action, "Package": PKG}
    if test is not None:
        fields["Test"] = test
    if output is not None:
        fields["Output"] = output
    if elapsed is not None:
        fields["Elapsed"] = elapsed
    return json.dumps(fields)


STREAM = [
    event("start"),
    event("run", "TestPing"),
    event("output", "TestPing", "=== RUN   TestPing\n"),
    event("pass", "TestPing", elapsed=0.01),
    event("run", "TestGroupSimple"),
    event("output", "TestGroupSimple", '    helpers_test.go:480: unable to create topic "ab": POLICY_VIOLATION\n'),
    event("output", "TestGroupSimple", "--- FAIL: TestGroupSimple (0.00s)\n"),
    event("fail", "TestGroupSimple", elapsed=0.0),
    event("run", "TestSCRAMAuth"),
    event("output", "TestSCRAMAuth", "    client_test.go:294: KGO_TEST_SCRAM_SEEDS or KGO_TEST_SCRAM not set\n"),
    event("skip", "TestSCRAMAuth", elapsed=0.0),
    # a subtest fails, its parent fails after it: one line, the parent's
    event("run", "TestRecordReader"),
    event("run", "TestRecordReader/json"),
    event("output", "TestRecordReader/json", "    record_formatter_test.go:12: got 1, want 2\n"),
    event("fail", "TestRecordReader/json", elapsed=0.0),
    event("run", "TestRecordReader/plain"),
    event("pass", "TestRecordReader/plain", elapsed=0.0),
    event("fail", "TestRecordReader", elapsed=0.1),
    # still running when the package's -timeout fires: no action of its own
    event("run", "TestGroupETL"),
    event("output", "TestGroupETL", "[17:35:21.1 3] INFO producing\n"),
    event("output", None, "panic: test timed out after 5m0s\n"),
    event("fail", None, elapsed=300.0),
]


def test_each_top_level_test_gets_one_outcome_and_the_summary_counts_them() -> None:
    report = parse(STREAM, "v1.22.3", listed=["TestPing", "TestGroupSimple", "TestSCRAMAuth", "TestRecordReader",
                                              "TestGroupETL", "TestTxnEtl"])
    outcomes = {name: test.outcome for name, test in report.tests.items()}
    assert outcomes == {"TestPing": PASS, "TestGroupSimple": FAIL, "TestSCRAMAuth": SKIP, "TestRecordReader": FAIL,
                        "TestGroupETL": FAIL, "TestTxnEtl": NOT_RUN}
    assert (report.count(PASS), report.count(FAIL), report.count(SKIP), report.count(NOT_RUN)) == (1, 3, 1, 1)
    assert report.summary() == "franz-go pkg/kgo v1.22.3: 1 passed, 3 failed, 1 skipped, 1 not run"
    assert report.timed_out and report.package_outcome == "fail"


def test_a_failure_is_reported_with_its_first_error_line_and_a_skip_with_its_reason() -> None:
    report = parse(STREAM, "v1.22.3")
    assert report.tests["TestGroupSimple"].reason() == 'helpers_test.go:480: unable to create topic "ab": POLICY_VIOLATION'
    assert report.tests["TestRecordReader"].reason() == "record_formatter_test.go:12: got 1, want 2"
    assert "-timeout fired" in report.tests["TestGroupETL"].reason()
    assert report.tests["TestSCRAMAuth"].reason() == "client_test.go:294: KGO_TEST_SCRAM_SEEDS or KGO_TEST_SCRAM not set"
    assert report.tests["TestPing"].reason() == ""
    lines = report.lines()
    assert len(lines) == 5 and lines[0].startswith("FAIL    TestGroupETL")
    assert report.as_json()["counts"] == {"passed": 1, "failed": 3, "skipped": 1, "not_run": 0}


def test_a_stream_without_a_test_of_the_package_leaves_the_report_empty() -> None:
    """A build failure: the go command's own lines, no JSON; the driver calls that the harness's failure."""
    report = parse(["# github.com/twmb/franz-go/pkg/kgo\n", "helpers_test.go:1:1: syntax error\n"], "v1.22.3")
    assert report.tests == {} and report.package_outcome is None
    assert report.summary() == "franz-go pkg/kgo v1.22.3: 0 passed, 0 failed, 0 skipped"
