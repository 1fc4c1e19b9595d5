"""Reading `go test -json`: one outcome per top-level test, and the summary line `make compat` prints.

Kept apart from the driver (tests/compat/franz_go.py) so the unit tests read it without Spark, Kafka or Go.
The stream is test2json's (`go doc cmd/test2json`): one JSON object per line with Action (start, run, pause,
cont, pass, fail, skip, output, bench), Package, Test and Output. Lines that are not JSON (a build failure,
the go command's own messages) are kept as the package's output.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

PASS, FAIL, SKIP, NOT_RUN = "PASS", "FAIL", "SKIP", "NOT RUN"
# A failing test's output is kept to its end, where the error is: a test that timed out logs for minutes.
OUTPUT_TAIL_LINES = 60
# the marks of an error line in a Go test's output: t.Errorf/t.Fatalf lines name their file, a panic says so
_ERROR_MARKS = ("_test.go:", "panic:", "--- FAIL")
# what test2json writes for the package itself when `go test -timeout` fires: the tests still running are named
# after it, and none of them gets an action of its own
TIMED_OUT = "panic: test timed out after"
# the line the report adds to a test that never ended, saying why
HARNESS_NOTE = "compat: "


@dataclass
class TestOutcome:
    """One top-level test (its subtests' outcomes are folded into it, their output kept with it)."""

    name: str
    outcome: str = NOT_RUN
    elapsed_s: float | None = None
    output: list[str] = field(default_factory=list)

    def reason(self) -> str:
        """The first error line of a failing test's output (what t.Errorf, t.Fatalf or a panic wrote) or a skipped
        test's t.Skip line, for the one-line report; '' for a test that passed or never ran."""
        if self.outcome == SKIP:
            return next((line.strip() for line in self.output if "_test.go:" in line), "")
        if self.outcome != FAIL:
            return ""
        if self.output and self.output[-1].startswith(HARNESS_NOTE):  # cut short: what it logged before is no cause
            return self.output[-1].strip()
        for line in self.output:
            text = line.strip()
            if any(mark in text for mark in _ERROR_MARKS) and not text.startswith("--- FAIL"):
                return text
        return self.output[-1].strip() if self.output else ""

    def as_json(self) -> dict[str, Any]:
        tail = self.output[-OUTPUT_TAIL_LINES:] if self.outcome == FAIL else []  # a passing test's log says nothing
        return {"name": self.name, "outcome": self.outcome, "elapsed_s": self.elapsed_s, "reason": self.reason(),
                "output_tail": [line.rstrip("\n") for line in tail]}


@dataclass
class Report:
    """What one `go test -json` run of one package said."""

    version: str
    tests: dict[str, TestOutcome] = field(default_factory=dict)
    package_outcome: str | None = None  # the package's own pass/fail; None when the stream ended without it
    package_output: list[str] = field(default_factory=list)
    timed_out: bool = False

    def count(self, outcome: str) -> int:
        return sum(1 for t in self.tests.values() if t.outcome == outcome)

    def summary(self) -> str:
        """`franz-go pkg/kgo vX: N passed, M failed, K skipped` (and how many never started, when a timeout
        or a crash ended the package early: they are neither passed nor failed)."""
        line = (f"franz-go pkg/kgo {self.version}: {self.count(PASS)} passed, {self.count(FAIL)} failed, "
                f"{self.count(SKIP)} skipped")
        not_run = self.count(NOT_RUN)
        return line + (f", {not_run} not run" if not_run else "")

    def lines(self) -> list[str]:
        """One line per test, in name order: outcome, name, seconds and, for a failure, its first error line."""
        out = []
        for test in sorted(self.tests.values(), key=lambda t: t.name):
            seconds = f" ({test.elapsed_s:.2f}s)" if test.elapsed_s is not None else ""
            reason = test.reason()
            out.append(f"{test.outcome:<7} {test.name}{seconds}" + (f"  {reason}" if reason else ""))
        return out

    def as_json(self) -> dict[str, Any]:
        return {"module": "github.com/twmb/franz-go", "package": "pkg/kgo", "version": self.version,
                "summary": self.summary(),
                "counts": {"passed": self.count(PASS), "failed": self.count(FAIL), "skipped": self.count(SKIP),
                           "not_run": self.count(NOT_RUN)},
                "package_outcome": self.package_outcome, "timed_out": self.timed_out,
                "tests": [t.as_json() for t in sorted(self.tests.values(), key=lambda t: t.name)],
                "package_output_tail": [line.rstrip("\n") for line in self.package_output[-OUTPUT_TAIL_LINES:]]}


class ReportBuilder:
    """Feeds on `go test -json` lines one at a time (the driver prints each test as it ends, during a run of
    many minutes) and makes the Report at the end."""

    def __init__(self, version: str, listed: Iterable[str] = ()) -> None:
        # `listed`: the package's tests from `go test -list`, so those a timeout kept from starting are reported
        self.report = Report(version, {name: TestOutcome(name) for name in listed})
        self._running: set[str] = set()

    def feed(self, line: str) -> TestOutcome | None:
        """One line of the stream; the top-level test it ended, if it ended one."""
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if not isinstance(event, dict):
            self.report.package_output.append(line)
            return None
        action, test, text = event.get("Action"), event.get("Test"), event.get("Output")
        if not test:  # the package's own events
            if isinstance(text, str):
                self.report.package_output.append(text)
                if text.startswith(TIMED_OUT):
                    self.report.timed_out = True
            if action in ("pass", "fail", "skip"):
                self.report.package_outcome = action
            return None
        top, _, sub = str(test).partition("/")
        outcome = self.report.tests.setdefault(top, TestOutcome(top))
        if isinstance(text, str):
            outcome.output.append(text)
        if action == "run" and not sub:
            self._running.add(top)
        if action in ("pass", "fail", "skip") and not sub:
            outcome.outcome = {"pass": PASS, "fail": FAIL, "skip": SKIP}[action]
            if isinstance(event.get("Elapsed"), (int, float)):
                outcome.elapsed_s = float(event["Elapsed"])
            self._running.discard(top)
            return outcome
        return None

    def finish(self) -> Report:
        """The report; a test that started and never ended (the package timed out or crashed under it) failed,
        with why in its output."""
        for name in sorted(self._running):
            test = self.report.tests[name]
            test.outcome = FAIL
            cause = ("the package's -timeout fired while it ran" if self.report.timed_out
                     else "it never ended: the test binary exited under it")
            test.output.append(f"{HARNESS_NOTE}{cause}\n")
        self._running.clear()
        return self.report


def parse(lines: Iterable[str], version: str, listed: Iterable[str] = ()) -> Report:
    """A whole `go test -json` stream read into a Report."""
    builder = ReportBuilder(version, listed)
    for line in lines:
        builder.feed(line)
    return builder.finish()
