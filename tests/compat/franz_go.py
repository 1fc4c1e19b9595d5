"""`make compat`: franz-go's own `pkg/kgo` integration tests run against the gateway's front door.

As Redpanda proves its compatibility with franz-go's suite, this runs that suite, unchanged, at a pinned
version, against the project's embedded stack started the way the integration tests start it: a local Apache
Kafka broker (`embedded.local_kafka`), the gateway query on local Spark and its front door
(`tests.integration.front_door_harness`), every port a free one and every file under one temporary directory.
It prints one line per test and the summary `franz-go pkg/kgo vX: N passed, M failed, K skipped`, and writes the
same as JSON. It is a report: it exits 0 whatever the tests say, 1 only when the harness itself cannot run
(no Go, the module not downloadable, the suite not compiling, the stack not starting).

    .venv/bin/python -m tests.compat.franz_go [--run REGEX] [--results PATH] [--go-timeout 20m]

The suite's knobs (franz-go's pkg/kgo/helpers_test.go), set as franz-go's own CI sets them against Apache Kafka:
KGO_SEEDS is the door's PLAINTEXT listener; KGO_TEST_RF=1 (the door's topics have no replicas);
KGO_TEST_SCRAM_SEEDS and KGO_TEST_SCRAM a SASL_PLAINTEXT listener of the door with a SCRAM-SHA-256 user made
through the door, KGO_TEST_OAUTH_SEEDS that same listener (the door offers no OAUTHBEARER: that test says so
rather than being skipped). KGO_TEST_RECORDS bounds the ETL tests (GroupETL, TxnEtl), 500 000 records by
default, to what the run's time bound allows through a produce path that answers per micro-batch.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from streaming.config import REPO_ROOT
from tests.compat.report import FAIL, Report, ReportBuilder

MODULE = "github.com/twmb/franz-go"
VERSION = "v1.22.3"
PACKAGE = "./pkg/kgo/"
DEFAULT_RESULTS = REPO_ROOT / "build" / "compat" / f"franz-go-{VERSION}.json"
# `go test -timeout`: the suite's own bound; a test still running then fails and the rest do not start.
DEFAULT_GO_TIMEOUT = "20m"
# Past the suite's bound, the stack's start (~1 min) and stop, the whole run must end within 25 minutes: the
# harness kills the test binary's process group at this many seconds after `go test` starts, whatever it does.
GO_HARD_LIMIT_S = 21 * 60
# The ETL tests send and read back this many records (franz-go's default is 500 000: through a door that answers
# a produce per micro-batch, more than the run's whole time bound).
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


@dataclass(frozen=True)
class Door:
    """Where the suite finds the running door."""

    plaintext: str
    sasl_plaintext: str
    scram_user: str
    scram_password: str

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


def list_tests(source: Path, work: Path, run: str) -> list[str]:
    """The package's tests matching `run` (`go test -list`, which also compiles the suite once, before the stack
    starts: a suite that does not build is the harness's failure, not the gateway's)."""
    done = subprocess.run([_go(), "test", "-count=1", "-list", run, PACKAGE], capture_output=True, text=True,
                          timeout=GO_PREPARE_TIMEOUT_S, env=_go_env(work), cwd=source)
    if done.returncode != 0:
        raise HarnessError(f"franz-go's {PACKAGE} does not build here:\n{done.stdout}{done.stderr}")
    return [line for line in done.stdout.split() if line.startswith(("Test", "Fuzz", "Example"))]


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
                door = Door(f"{plain.host}:{plain.port}", f"{sasl.host}:{sasl.port}", SCRAM_USER, uuid.uuid4().hex)
                # the user as franz-go's CI makes it on Kafka (kafka-configs.sh: SCRAM-SHA-256, 4096 iterations),
                # through the door's AlterUserScramCredentials
                add_user({"bootstrap.servers": door.plaintext}, door.scram_user, door.scram_password,
                         ScramMechanism.SCRAM_SHA_256, iterations=4096)
                yield door
        finally:
            stop_session(spark)
    finally:
        broker.stop()


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """The go command, its compiler and the test binary: one process group of their own, ended together."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def run_suite(source: Path, work: Path, door: Door, *, run: str, go_timeout: str, records: int,
              listed: list[str], raw_log: Path) -> Report:
    """`go test -json` of the package against `door`, each test printed as it ends; the stream kept whole in
    `raw_log`."""
    knobs = {**door.suite_env(), "KGO_TEST_RECORDS": str(records)}
    env = {**_go_env(work), **knobs}
    command = [_go(), "test", "-json", "-count=1", f"-timeout={go_timeout}", "-run", run, PACKAGE]
    shown = " ".join(f"{k}={v}" for k, v in knobs.items() if k != "KGO_TEST_SCRAM")  # the password stays out
    print(f"compat: {shown} go {' '.join(command[1:])}", flush=True)
    builder = ReportBuilder(VERSION, listed)
    proc = subprocess.Popen(command, cwd=source, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    # the hard bound: `-timeout` ends the test binary, not a go command stuck before or after it
    limit = threading.Timer(GO_HARD_LIMIT_S, _kill_group, [proc])
    limit.daemon = True
    limit.start()
    try:
        assert proc.stdout is not None
        with raw_log.open("w") as raw:
            for line in proc.stdout:
                raw.write(line)
                ended = builder.feed(line)
                if ended is not None:
                    reason = ended.reason()
                    print(f"{ended.outcome:<7} {ended.name}" + (f"  {reason}" if reason else ""), flush=True)
        proc.wait()
    finally:
        limit.cancel()
        _kill_group(proc)
    report = builder.finish()
    if report.package_outcome is None and not report.tests:
        raise HarnessError(f"`go test` ended (exit {proc.returncode}) without running a test:\n"
                           + "".join(report.package_output[-40:]))
    return report


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.compat.franz_go", description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", default=".", help="`go test -run` regex (default: every test of pkg/kgo)")
    parser.add_argument("--go-timeout", default=DEFAULT_GO_TIMEOUT, help="`go test -timeout` (default %(default)s)")
    parser.add_argument("--records", type=int, default=DEFAULT_TEST_RECORDS,
                        help="KGO_TEST_RECORDS, the ETL tests' record count (default %(default)s)")
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="the JSON report (default %(default)s)")
    parser.add_argument("--keep", action="store_true", help="keep the run's temporary directory (logs, segments)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="franz-go-compat-"))
    args.results.parent.mkdir(parents=True, exist_ok=True)
    try:
        source = fetch_suite(work)
        listed = list_tests(source, work, args.run)
        print(f"compat: {MODULE}@{VERSION} in {source}: {len(listed)} tests in {PACKAGE}", flush=True)
        with running_stack(work) as door:
            print(f"compat: broker, gateway and front door up after {time.monotonic() - started:.0f} s", flush=True)
            report = run_suite(source, work, door, run=args.run, go_timeout=args.go_timeout, records=args.records,
                               listed=listed, raw_log=args.results.with_suffix(".jsonl"))
    except HarnessError as e:
        print(f"compat: the harness could not run franz-go's suite: {e}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"compat: kept {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print()
    for line in report.lines():
        print(line)
    if report.timed_out:
        print(f"compat: the suite's -timeout ({args.go_timeout}) fired; the tests that had not started are NOT RUN")
    elapsed = time.monotonic() - started
    print(f"\n{report.summary()}  ({elapsed / 60:.1f} min)")
    args.results.write_text(json.dumps({**report.as_json(), "run": args.run, "elapsed_s": round(elapsed, 1),
                                        "failed_tests": [t.name for t in report.tests.values() if t.outcome == FAIL]},
                                       indent=1) + "\n")
    print(f"compat: results in {args.results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
