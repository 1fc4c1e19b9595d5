"""`make compat`'s reading of `go test -json` (tests/compat/report.py) on a small stream written by hand in
test2json's form: outcomes per top-level test, subtests folded in, a timeout's casualties, the summary line;
and one test binary per test: a timeout named with where the test waited, a binary that dies before its test."""

from __future__ import annotations

import json

from tests.compat.franz_go import requests_between
from tests.compat.report import FAIL, NOT_RUN, PASS, SKIP, ReportBuilder, parse, stuck_at

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


# One test binary per test (the driver's way): the first times out in a WaitGroup, its goroutine dump naming the
# line; the next passes in a binary of its own; the third's binary dies before it starts.
TIMEOUT_DUMP = [
    "panic: test timed out after 3m0s\n",
    "\trunning tests:\n",
    "\t\tTestClient_Produce (3m0s)\n",
    "\n",
    "goroutine 5 [running]:\n",
    "testing.(*M).startAlarm.func1()\n",
    "\t/usr/lib/go/src/testing/testing.go:2484 +0x394\n",
    "\n",
    "goroutine 7 [semacquire, 2 minutes]:\n",
    "sync.(*WaitGroup).Wait(0xc00012a0d0?)\n",
    "\t/usr/lib/go/src/sync/waitgroup.go:118 +0x48\n",
    "github.com/twmb/franz-go/pkg/kgo.TestClient_Produce(0xc000103500)\n",
    "\t/tmp/franz-go-v1.22.3/pkg/kgo/produce_request_test.go:69 +0x2d4\n",
    "testing.tRunner(0xc000103500, 0x9b0e28)\n",
    "\n",
    "goroutine 9 [select]:\n",
    "github.com/twmb/franz-go/pkg/kgo.(*Client).ProduceSync(0xc0000, {0xa1b2c0, 0xc00001})\n",
    "\t/tmp/franz-go-v1.22.3/pkg/kgo/producer.go:420 +0x1c5\n",
    "github.com/twmb/franz-go/pkg/kgo.TestClient_Produce.func2()\n",
    "\t/tmp/franz-go-v1.22.3/pkg/kgo/produce_request_test.go:55 +0x8a\n",
]


def test_each_binary_of_its_own_a_timeout_fails_only_its_test_with_where_it_waited() -> None:
    builder = ReportBuilder("v1.22.3", ["TestClient_Produce", "TestPing", "TestGroupSimple", "TestTxnEtl"])
    for line in [event("start"), event("run", "TestClient_Produce"),
                 event("output", "TestClient_Produce", "=== RUN   TestClient_Produce\n"),
                 *(event("output", "TestClient_Produce", text) for text in TIMEOUT_DUMP),
                 event("fail", "TestClient_Produce", elapsed=180.0), event("fail", None, elapsed=180.2)]:
        builder.feed(line)
    produce = builder.process_ended("TestClient_Produce", bound_s=180, wall_s=180.4, exit_code=2)
    assert produce.outcome == FAIL and produce.timed_out_after_s == 180
    assert produce.stuck_at == ["produce_request_test.go:69"]  # the test function's frame, not a worker's
    assert produce.reason() == "compat: timed out after 180 s at produce_request_test.go:69"

    for line in [event("start"), event("run", "TestPing"), event("pass", "TestPing", elapsed=0.02),
                 event("pass", None, elapsed=0.03)]:
        builder.feed(line)
    assert builder.process_ended("TestPing", bound_s=180, wall_s=0.1, exit_code=0).outcome == PASS

    for line in ["panic: unable to create admin client: no seed brokers\n", event("fail", None, elapsed=0.0)]:
        builder.feed(line)
    died = builder.process_ended("TestGroupSimple", bound_s=180, wall_s=0.1, exit_code=2)
    assert died.outcome == FAIL and died.timed_out_after_s is None
    assert died.reason() == ("compat: the test binary exited (code 2) before it started: "
                             "panic: unable to create admin client: no seed brokers")

    report = builder.finish()
    assert report.timed_out_tests() == ["TestClient_Produce"]
    assert report.summary() == "franz-go pkg/kgo v1.22.3: 1 passed, 2 failed, 0 skipped, 1 not run"
    assert report.as_json()["tests"][0]["stuck_at"] == ["produce_request_test.go:69"]


def test_a_timeout_the_dump_gives_to_the_package_is_the_running_tests() -> None:
    """test2json may write the panic as the package's output and give the test no action of its own."""
    builder = ReportBuilder("v1.22.3", ["TestClient_Produce"])
    for line in [event("run", "TestClient_Produce"), *(event("output", None, text) for text in TIMEOUT_DUMP),
                 event("fail", None, elapsed=180.2)]:
        builder.feed(line)
    produce = builder.process_ended("TestClient_Produce", bound_s=180, wall_s=180.4, exit_code=2)
    assert produce.reason() == "compat: timed out after 180 s at produce_request_test.go:69"
    assert produce.elapsed_s == 180.4


def test_a_binary_killed_past_its_bound_is_a_timeout_and_a_dump_without_the_test_names_no_line() -> None:
    builder = ReportBuilder("v1.22.3", ["TestGroupETL"])
    builder.feed(event("run", "TestGroupETL"))
    killed = builder.process_ended("TestGroupETL", bound_s=60, wall_s=90.0, exit_code=None)
    assert killed.outcome == FAIL and killed.reason() == "compat: timed out after 60 s"
    assert stuck_at(TIMEOUT_DUMP, "TestGroupETL") == []


def test_the_doors_requests_during_a_test_are_the_counters_difference() -> None:
    before = {"ApiVersions/NONE": 3, "Produce/NONE": 10}
    after = {"ApiVersions/NONE": 4, "Produce/NONE": 10, "EndTxn/UNSUPPORTED_VERSION": 1}
    assert requests_between(before, after) == {"ApiVersions/NONE": 1, "EndTxn/UNSUPPORTED_VERSION": 1}
