"""Reading `go test -json`: one outcome per top-level test, and the summary line `make compat` prints.

Kept apart from the driver (tests/compat/franz_go.py) so the unit tests read it without Spark, Kafka or Go.
The stream is test2json's (`go doc cmd/test2json`): one JSON object per line with Action (start, run, pause,
cont, pass, fail, skip, output, bench), Package, Test and Output. Lines that are not JSON (a build failure,
the go command's own messages) are kept as the package's output.

The driver runs each top-level test in a test binary of its own (`go tool test2json ./kgo.test -test.run
'^Name$' -test.timeout N`), one after the other, and feeds every process's stream to one ReportBuilder, telling
it when a process ended (`process_ended`): a test whose binary's -test.timeout fired failed "timed out after
N s", with where its goroutine was waiting, and the others are not affected.
"""

from __future__ import annotations

import json
import re
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
# a frame of a goroutine dump in a test file: "\t/path/pkg/kgo/consumer_test.go:123 +0x1a5"
_TEST_FRAME = re.compile(r"^\s+\S*/([A-Za-z0-9_]+_test\.go:\d+)(?: \+0x[0-9a-f]+)?\s*$")
# how many of the timed-out test's own frames the report names (innermost first)
STUCK_FRAMES = 3


def stuck_at(dump: Iterable[str], test: str) -> list[str]:
    """Where `test` was when its binary's -test.timeout fired: the test-file frames (`file_test.go:line`,
    innermost first) of the goroutine that runs the test function itself, from the panic's goroutine dump;
    [] when the dump does not show it. That frame says what the test was waiting for (a WaitGroup, a poll)."""
    blocks: list[list[str]] = [[]]
    for text in dump:
        for line in text.splitlines():
            if line.startswith("goroutine ") or not line.strip():
                blocks.append([])
            blocks[-1].append(line)
    own = f".{test}("  # the function itself: kgo.TestX(0x...), not kgo.TestX.func2 (a goroutine it started)
    for block in blocks:
        if any(own in line for line in block):
            frames = [m.group(1) for line in block if (m := _TEST_FRAME.match(line))]
            return frames[:STUCK_FRAMES]
    return []


@dataclass
class TestOutcome:
    """One top-level test (its subtests' outcomes are folded into it, their output kept with it)."""

    name: str
    outcome: str = NOT_RUN
    elapsed_s: float | None = None
    output: list[str] = field(default_factory=list)
    timed_out_after_s: float | None = None  # its binary's -test.timeout fired while it ran
    stuck_at: list[str] = field(default_factory=list)  # then, its test-file frames (innermost first)
    # what the driver saw of it at the door: requests answered by API and error ("Produce/NONE": 12)
    door_requests: dict[str, int] = field(default_factory=dict)

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
                "timed_out_after_s": self.timed_out_after_s, "stuck_at": self.stuck_at,
                "door_requests": dict(sorted(self.door_requests.items())),
                "output_tail": [line.rstrip("\n") for line in tail]}


@dataclass
class Report:
    """What one `go test -json` run of one package said."""

    version: str
    tests: dict[str, TestOutcome] = field(default_factory=dict)
    package_outcome: str | None = None  # the package's own pass/fail; None when the stream ended without it
    package_output: list[str] = field(default_factory=list)
    timed_out: bool = False  # a -test.timeout fired (in one test binary of many, or in the only one)

    def timed_out_tests(self) -> list[str]:
        return sorted(t.name for t in self.tests.values() if t.timed_out_after_s is not None)

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
        # the current test binary's stream since its -test.timeout fired (the goroutine dump), else None
        self._dump: list[str] | None = None

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
        if isinstance(text, str):
            if self._dump is not None:
                self._dump.append(text)
            elif text.startswith(TIMED_OUT):  # test2json may give it to the package or to the running test
                self.report.timed_out = True
                self._dump = [text]
        if not test:  # the package's own events
            if isinstance(text, str):
                self.report.package_output.append(text)
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

    def process_ended(self, name: str, *, bound_s: float, wall_s: float, exit_code: int | None) -> TestOutcome:
        """The test binary run for the top-level test `name` alone ended (exit code `exit_code`, None when the
        driver killed it) after `wall_s` seconds, its -test.timeout `bound_s`: `name` failed if it never ended
        in it (timed out, or the binary died under it) or never started (the binary died first); the next
        binary's stream starts afresh. Returns `name`'s outcome."""
        dump, self._dump = self._dump, None
        timed_out = dump is not None or exit_code is None
        test = self.report.tests.setdefault(name, TestOutcome(name))
        # test2json (-test.v=test2json) gives the test that was running when -test.timeout fired a "fail" of its
        # own, the panic as its output: it timed out all the same
        cut_short = self._running | ({name} if test.outcome == NOT_RUN or timed_out else set())
        for running in sorted(cut_short):
            cut = self.report.tests.setdefault(running, TestOutcome(running))
            cut.outcome = FAIL
            if cut.elapsed_s is None:
                cut.elapsed_s = round(wall_s, 2)
            if timed_out:
                cut.timed_out_after_s = bound_s
                cut.stuck_at = stuck_at(dump or [], running)
                where = f" at {', '.join(cut.stuck_at)}" if cut.stuck_at else ""
                cut.output.append(f"{HARNESS_NOTE}timed out after {bound_s:.0f} s{where}\n")
            elif running in self._running:
                cut.output.append(f"{HARNESS_NOTE}it never ended: the test binary exited (code {exit_code}) under "
                                  "it\n")
            else:
                last = next((line.strip() for line in reversed(self.report.package_output) if line.strip()), "")
                cut.output.append(f"{HARNESS_NOTE}the test binary exited (code {exit_code}) before it started: "
                                  f"{last}\n")
        self._running.clear()
        return test

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
