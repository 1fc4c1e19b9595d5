"""`make compat`: franz-go's own `pkg/kgo` integration tests run against the gateway's front door.

As Redpanda proves its compatibility with franz-go's suite, this runs that suite, unchanged, at a pinned
version, against the project's embedded stack started the way the integration tests start it: a local Apache
Kafka broker (`embedded.local_kafka`), the gateway query on local Spark and its front door
(`tests.integration.front_door_harness`), every port a free one and every file under one temporary directory.
It prints one line per test and the summary `franz-go pkg/kgo vX: N passed, M failed, K skipped`, and writes the
same as JSON. It is a report: it exits 0 whatever the tests say, 1 only when the harness itself cannot run
(no Go, the module not downloadable, the suite not compiling, the stack not starting).

    .venv/bin/python -m tests.compat.franz_go [--run REGEX] [--test-timeout 150] [--budget 1500] [--results PATH]

The suite is compiled once (`go test -c`); each top-level test then runs alone in a test binary of its own
(`go tool test2json -t ./kgo.test -test.run '^Name$' -test.timeout N`), one after the other, against the one
stack: a test that outlasts its bound fails "timed out after N s" (with the test-file line it was waiting at,
from the binary's goroutine dump) and the next one starts as if nothing happened. In one `go test` run a test
that never ends keeps every test after it from starting and `-timeout` kills them all; franz-go's tests also
mark themselves t.Parallel, so in one binary the slow ones would all run (and time out) at once. The unit
tests that need no broker end in milliseconds each. A whole-run budget (`--budget`) bounds the total: a test
gets at most what remains of it, and the tests it leaves no time for are NOT RUN.

For each test the report also keeps the requests the door answered while it ran, by API and error (the door's
requests_total counter before and after), which says whether the test talked to the door at all and what the
door refused; the door's and the gateway's log lines go to a `.door.log` beside the report, a `=== TestName`
line before each test's.

The suite's knobs (franz-go's pkg/kgo/helpers_test.go), set as franz-go's own CI sets them against Apache Kafka:
KGO_SEEDS is the door's PLAINTEXT listener; KGO_TEST_RF=1 (the door's topics have no replicas);
KGO_TEST_SCRAM_SEEDS and KGO_TEST_SCRAM a SASL_PLAINTEXT listener of the door with a SCRAM-SHA-256 user made
through the door, KGO_TEST_OAUTH_SEEDS that same listener (the door offers no OAUTHBEARER: that test says so
rather than being skipped). KGO_TEST_RECORDS bounds the ETL tests (GroupETL, TxnEtl, ShareGroupETL), 500 000
records by default, to what one test's bound allows through a produce path that answers per micro-batch.
KGO_TEST_MAX_TOPIC_PARTS, KGO_TEST_UNSAFE, KGO_TEST_TLS and KGO_TEST_CHAOS are left unset: the suite's topics
keep their 7, 11 and 31 partitions.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streaming.config import REPO_ROOT
from streaming.logs import LOG_FORMAT
from tests.compat.report import FAIL, HARNESS_NOTE, NOT_RUN, Report, ReportBuilder, TestOutcome

MODULE = "github.com/twmb/franz-go"
VERSION = "v1.22.3"
PACKAGE = "./pkg/kgo/"
IMPORT_PATH = f"{MODULE}/pkg/kgo"
DEFAULT_RESULTS = REPO_ROOT / "build" / "compat" / f"franz-go-{VERSION}.json"
# One test's bound (its binary's -test.timeout), in seconds. The suite's broker tests take seconds on Kafka; through
# the door a produce waits for a micro-batch (~0.3-1 s), and the slowest tests that end (TestPauseIssue489 and
# TestGroupETL, 200-210 s on a 2-core machine) set it. A test that needs longer fails "timed out".
DEFAULT_TEST_TIMEOUT_S = 240
# The whole run's bound for the tests, in seconds: with the compile (~1 min, cached after) and the stack's start
# and stop (~1 min), `make compat` ends within 30 minutes. A test starts only with at least MIN_TEST_S left.
DEFAULT_BUDGET_S = 26 * 60
MIN_TEST_S = 20
# Past a binary's -test.timeout, its goroutine dump and exit take a moment; the driver kills it after this grace.
KILL_GRACE_S = 30
# The ETL tests send and read back this many records (franz-go's default is 500 000: through a door that answers
# a produce per micro-batch, far more than a test's bound). With 10 000 TestGroupETL takes ~200 s.
DEFAULT_TEST_RECORDS = 10_000
# The registry the door starts with: empty. franz-go's tests create every topic they use (CreateTopics, random
# names); none of them reads a topic that exists before it.
COMPAT_TOPICS: Mapping[str, object] = {"topics": {}}
GO_PREPARE_TIMEOUT_S = 600
# The door's listeners: PLAINTEXT for the suite, SASL_PLAINTEXT with SCRAM-SHA-256 for its SASL tests (the shape of
# franz-go's CI broker); every port one of the kernel's choosing, never 9092/9093/9108.
DOOR_SECURITY = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                 "sasl.enabled.mechanisms": "SCRAM-SHA-256"}
SCRAM_USER = "franz-go"
log = logging.getLogger("compat")


@dataclass(frozen=True)
class Door:
    """Where the suite finds the running door, and its count of requests answered."""

    plaintext: str
    sasl_plaintext: str
    scram_user: str
    scram_password: str
    # "API/ERROR" -> requests the door answered so far (its requests_total counter)
    requests: Callable[[], dict[str, int]] = dict
    # deletes the topics a test left behind (one that timed out never ran its cleanup); returns their names
    remove_topics: Callable[[], list[str]] = list

    def suite_env(self) -> dict[str, str]:
        return {"KGO_SEEDS": self.plaintext, "KGO_TEST_RF": "1", "KGO_TEST_SCRAM_SEEDS": self.sasl_plaintext,
                "KGO_TEST_SCRAM": f"{self.scram_user}:{self.scram_password}:256",
                "KGO_TEST_OAUTH_SEEDS": self.sasl_plaintext}


class HarnessError(RuntimeError):
    """The harness cannot run the suite (not a test's failure): `make compat` exits 1 with this message."""


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise HarnessError("Go is not on PATH: franz-go's suite is Go; install Go 1.26 or later")
    return go


def _go_env(work: Path) -> dict[str, str]:
    """The go command's environment: modules from the proxy only (GOFLAGS=-mod=mod, the module's own go.sum
    checked), this machine's toolchain (no download of another), vet and test caches as usual."""
    env = dict(os.environ)
    env["GOFLAGS"] = " ".join(filter(None, [env.get("GOFLAGS", ""), "-mod=mod"]))
    env["GOTOOLCHAIN"] = "local"
    env.setdefault("GOTMPDIR", str(work))
    return env


def fetch_suite(work: Path, version: str = VERSION) -> Path:
    """franz-go's source at `version` from the Go module proxy, copied where it may be written (the module cache
    is read-only and `go test` writes nothing there, but the copy keeps the run away from other users of it)."""
    done = subprocess.run([_go(), "mod", "download", "-json", f"{MODULE}@{version}"], capture_output=True,
                          text=True, timeout=GO_PREPARE_TIMEOUT_S, env=_go_env(work), cwd=work)
    try:
        info = json.loads(done.stdout)
    except ValueError:
        info = {}
    if done.returncode != 0 or not info.get("Dir") or info.get("Error"):
        raise HarnessError(f"`go mod download {MODULE}@{version}` failed: {info.get('Error') or done.stderr.strip()}")
    source = work / f"franz-go-{version}"
    shutil.copytree(info["Dir"], source)
    for path in [source, *source.rglob("*")]:  # the module cache's files are read-only
        path.chmod(path.stat().st_mode | 0o200)
    return source


def build_suite(source: Path, work: Path) -> Path:
    """The package's test binary, compiled once (`go test -c`) before the stack starts: a suite that does not build
    is the harness's failure, not the gateway's."""
    binary = work / "kgo.test"
    done = subprocess.run([_go(), "test", "-c", "-o", str(binary), PACKAGE], capture_output=True, text=True,
                          timeout=GO_PREPARE_TIMEOUT_S, env=_go_env(work), cwd=source)
    if done.returncode != 0 or not binary.exists():
        raise HarnessError(f"franz-go's {PACKAGE} does not build here:\n{done.stdout}{done.stderr}")
    return binary


def list_tests(binary: Path, source: Path, run: str) -> list[str]:
    """The package's top-level tests matching `run` (`-test.list`: tests, fuzz targets, examples), in source order."""
    done = subprocess.run([str(binary), "-test.list", run], capture_output=True, text=True, timeout=120,
                          cwd=source / PACKAGE)
    if done.returncode != 0:
        raise HarnessError(f"`kgo.test -test.list` failed:\n{done.stdout}{done.stderr}")
    return [line for line in done.stdout.split() if line.startswith(("Test", "Fuzz", "Example"))]


def _test2json(work: Path) -> list[str]:
    """test2json's command: its binary, found once (`go tool -n`), so each of ~160 runs does not start the go command."""
    done = subprocess.run([_go(), "tool", "-n", "test2json"], capture_output=True, text=True,
                          timeout=GO_PREPARE_TIMEOUT_S, env=_go_env(work))
    path = done.stdout.strip()
    return [path] if done.returncode == 0 and path and Path(path).exists() else [_go(), "tool", "test2json"]


@contextmanager
def running_stack(work: Path) -> Iterator[Door]:
    """The embedded stack, started as the integration tests start it (tests/conftest.py's `kafka`,
    tests/integration/conftest.py's `spark` and `gateway_config`, front_door_harness's `running_front_door`,
    secured_door's users), and stopped in reverse order whatever happens; yields where the door listens."""
    # Imported here: the unit tests import this module for its parsing and need no Spark.
    from confluent_kafka.admin import ScramMechanism

    from embedded.local_kafka import LocalKafka
    from streaming.config import GatewayConfig
    from streaming.session import build_spark_session, stop_session
    from tests.integration.front_door_harness import running_front_door
    from tests.integration.secured_door import add_user

    # Spark's scratch (block manager, Python files) under the run's directory, as the test session keeps it,
    # so a stop that is cut short leaves nothing in /tmp beside it
    os.environ["SPARK_LOCAL_DIRS"] = str(work / "spark-local")
    broker = LocalKafka(work / "kafka")  # a free port of the kernel's for its listener and its controller
    broker.start()
    try:
        run = uuid.uuid4().hex[:8]
        topics_file = work / "topics.json"
        topics_file.write_text(json.dumps(COMPAT_TOPICS))
        config = GatewayConfig(
            bootstrap_servers=broker.bootstrap_servers, ingress_topic=f"ingress-{run}", ingress_partitions=2,
            response_topic=f"responses-{run}", dlq_topic=f"dlq-{run}", groups_topic=f"groups-{run}",
            topics_file=str(topics_file), segments_root=str(work / "segments"),
            checkpoint_root=str(work / "checkpoints"), query_name=f"compat_{run}", spark_master="local[2]",
            shuffle_partitions=2, ui_enabled=False, metrics_address="127.0.0.1:0",
            front_door_security=DOOR_SECURITY, security_topic=f"security-{run}")
        spark = build_spark_session(config, app_name="gateway-compat")
        try:
            with running_front_door(spark, config, COMPAT_TOPICS) as running:
                # node 1 of each listener: the suite's bootstrap, as a client's
                plain, sasl = (running.door.listener_addresses[name][0] for name in ("PLAINTEXT", "SASL_PLAINTEXT"))
                metrics = running.door.metrics
                door = Door(f"{plain.host}:{plain.port}", f"{sasl.host}:{sasl.port}", SCRAM_USER, uuid.uuid4().hex,
                            requests=lambda: door_requests(metrics.requests),
                            remove_topics=lambda: remove_topics(f"{plain.host}:{plain.port}"))
                # the user as franz-go's CI makes it on Kafka (kafka-configs.sh: SCRAM-SHA-256, 4096 iterations),
                # through the door's AlterUserScramCredentials
                add_user({"bootstrap.servers": door.plaintext}, door.scram_user, door.scram_password,
                         ScramMechanism.SCRAM_SHA_256, iterations=4096)
                yield door
        finally:
            stop_session(spark)
    finally:
        broker.stop()


def door_requests(counter: Any) -> dict[str, int]:
    """The door's requests_total counter as "API/ERROR" -> count."""
    counts: dict[str, int] = {}
    for family in counter.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                counts[f"{sample.labels['api']}/{sample.labels['error']}"] = int(sample.value)
    return counts


def remove_topics(bootstrap: str) -> list[str]:
    """Every topic the door lists (its registry starts empty: each one is a test's), deleted through the door, so a
    test that timed out before its cleanup does not leave its 31 partitions to the gateway's next micro-batches."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = sorted(name for name in admin.list_topics(timeout=30).topics if not name.startswith("__"))
    if topics:
        for future in admin.delete_topics(topics, operation_timeout=30).values():
            try:
                future.result(timeout=60)
            except Exception as e:  # noqa: BLE001 - reported, the run goes on
                log.warning("compat: deleting a leftover topic failed: %s", e)
    return topics


def requests_between(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """What the door answered between two reads of its counter."""
    return {key: n - before.get(key, 0) for key, n in after.items() if n > before.get(key, 0)}


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """test2json and the test binary: one process group of their own, ended together."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def _describe(test: TestOutcome) -> str:
    reason = test.reason()
    return f"{test.outcome:<7} {test.name}" + (f"  {reason}" if reason else "")


def _source_line(source: Path, frame: str) -> str:
    """The text of `file_test.go:N` in the package's source, to say what a timed-out test waited for."""
    name, _, line = frame.rpartition(":")
    try:
        return (source / PACKAGE / name).read_text().splitlines()[int(line) - 1].strip()
    except (OSError, ValueError, IndexError):
        return ""


def run_one(command: list[str], cwd: Path, env: Mapping[str, str], builder: ReportBuilder, raw: Any, name: str,
            bound_s: int) -> TestOutcome:
    """`name` alone in a test binary of its own, bounded by its -test.timeout and, should the binary not exit
    then, killed KILL_GRACE_S later; its stream fed to `builder` and kept in `raw`."""
    full = [*command, "-test.run", f"^{name}$", "-test.count=1", f"-test.timeout={bound_s}s"]
    started = time.monotonic()
    proc = subprocess.Popen(full, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    limit = threading.Timer(bound_s + KILL_GRACE_S, _kill_group, [proc])
    limit.daemon = True
    limit.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            raw.write(line)
            builder.feed(line)
        proc.wait()
    finally:
        limit.cancel()
        _kill_group(proc)
    killed = proc.returncode is not None and proc.returncode < 0  # by the timer's SIGKILL
    return builder.process_ended(name, bound_s=bound_s, wall_s=time.monotonic() - started,
                                 exit_code=None if killed else proc.returncode)


def run_suite(binary: Path, source: Path, work: Path, door: Door, *, test_timeout_s: int, budget_s: int,
              records: int, listed: list[str], raw_log: Path) -> Report:
    """Each of `listed` alone against `door`, in order, each printed as it ends; the streams kept in `raw_log`."""
    knobs = {**door.suite_env(), "KGO_TEST_RECORDS": str(records)}
    env = {**_go_env(work), **knobs}
    command = [*_test2json(work), "-t", "-p", IMPORT_PATH, str(binary), "-test.v=test2json"]
    shown = " ".join(f"{k}={v}" for k, v in knobs.items() if k != "KGO_TEST_SCRAM")  # the password stays out
    print(f"compat: {shown}; each test alone: kgo.test -test.run '^Name$' -test.timeout {test_timeout_s}s "
          f"(the run's budget {budget_s / 60:.0f} min)", flush=True)
    builder = ReportBuilder(VERSION, listed)
    deadline = time.monotonic() + budget_s
    with raw_log.open("w") as raw:
        for name in listed:
            left = int(deadline - time.monotonic())
            if left < MIN_TEST_S:
                test = builder.report.tests[name]
                test.output.append(f"{HARNESS_NOTE}not started: the run's budget ({budget_s} s) was spent\n")
                continue
            bound = min(test_timeout_s, left)
            log.info("=== %s (bound %d s)", name, bound)
            before = door.requests()
            test = run_one(command, source / PACKAGE, env, builder, raw, name, bound)
            test.door_requests = requests_between(before, door.requests())
            if test.door_requests and test.outcome == FAIL:
                try:
                    left = door.remove_topics()
                except Exception as e:  # noqa: BLE001 - the next test runs anyway
                    log.warning("compat: listing the topics %s left failed: %s", name, e)
                    left = []
                if left:
                    log.info("=== %s left %d topic(s), deleted: %s", name, len(left), ", ".join(left))
            if test.stuck_at and test.output:  # what the innermost test-file frame was doing
                waited = _source_line(source, test.stuck_at[0])
                if waited:
                    test.output[-1] = f"{test.output[-1].rstrip()} ({waited})\n"
            log.info("=== %s: %s; door: %s", name, test.outcome, test.door_requests or "no requests")
            print(_describe(test), flush=True)
    report = builder.finish()
    if all(t.outcome == NOT_RUN for t in report.tests.values()):
        raise HarnessError("no test of the package ran:\n" + "".join(report.package_output[-40:]))
    return report


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.compat.franz_go", description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", default=".", help="`-test.list` regex of the tests to run (default: every test)")
    parser.add_argument("--test-timeout", type=int, default=DEFAULT_TEST_TIMEOUT_S,
                        help="one test's bound in seconds, its binary's -test.timeout (default %(default)s)")
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET_S,
                        help="the tests' whole bound in seconds; tests it leaves no time for are NOT RUN "
                             "(default %(default)s)")
    parser.add_argument("--records", type=int, default=DEFAULT_TEST_RECORDS,
                        help="KGO_TEST_RECORDS, the ETL tests' record count (default %(default)s)")
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="the JSON report (default %(default)s)")
    parser.add_argument("--keep", action="store_true", help="keep the run's temporary directory (logs, segments)")
    return parser


def _log_to(path: Path) -> logging.Handler:
    """The door's, the gateway's and this driver's log lines (INFO and up) into `path`, not onto the report."""
    handler = logging.FileHandler(path, mode="w")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    return handler


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="franz-go-compat-"))
    args.results.parent.mkdir(parents=True, exist_ok=True)
    door_log = args.results.with_suffix(".door.log")
    handler = _log_to(door_log)
    try:
        source = fetch_suite(work)
        binary = build_suite(source, work)
        listed = list_tests(binary, source, args.run)
        print(f"compat: {MODULE}@{VERSION} in {source}: {len(listed)} tests in {PACKAGE}, compiled after "
              f"{time.monotonic() - started:.0f} s", flush=True)
        with running_stack(work) as door:
            print(f"compat: broker, gateway and front door up after {time.monotonic() - started:.0f} s", flush=True)
            report = run_suite(binary, source, work, door, test_timeout_s=args.test_timeout, budget_s=args.budget,
                               records=args.records, listed=listed, raw_log=args.results.with_suffix(".jsonl"))
    except HarnessError as e:
        print(f"compat: the harness could not run franz-go's suite: {e}", file=sys.stderr)
        return 1
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
        if args.keep:
            print(f"compat: kept {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print()
    for line in report.lines():
        print(line)
    timed_out = report.timed_out_tests()
    if timed_out:
        print(f"compat: {len(timed_out)} test(s) timed out: {', '.join(timed_out)}")
    talked = sorted(t.name for t in report.tests.values() if t.door_requests)
    elapsed = time.monotonic() - started
    print(f"compat: {len(talked)} of {len(report.tests)} tests sent requests to the door")
    print(f"\n{report.summary()}  ({elapsed / 60:.1f} min)")
    args.results.write_text(json.dumps({**report.as_json(), "run": args.run, "elapsed_s": round(elapsed, 1),
                                        "test_timeout_s": args.test_timeout, "budget_s": args.budget,
                                        "records": args.records, "door_tests": talked,
                                        "failed_tests": [t.name for t in report.tests.values() if t.outcome == FAIL]},
                                       indent=1) + "\n")
    print(f"compat: results in {args.results}, the door's log in {door_log}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
