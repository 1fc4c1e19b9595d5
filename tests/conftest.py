"""Session-wide fixtures shared by every test directory.

`kafka`: one real Apache Kafka broker (KRaft, single node) for the whole session, started on first
use under the session's tmp dir and stopped at the end. Tests that never ask for it (the unit
tests) never start a JVM. When a test that used the broker fails, its report gets a section with
the broker log path and the log's tail.

`secured_kafka`: likewise one secured broker (tests/secured_kafka.py: TLS from a CA the session makes, SASL
SCRAM/PLAIN, client certificates, ACLs), started on first use only; its log tail goes to the reports of
failing tests that used it.

Every JVM the tests start (Spark sessions, gateways run as commands, a standalone cluster's workers and
executors) keeps its scratch directories under the session's tmp dir (`SPARK_LOCAL_DIRS`), not in `/tmp`:
a JVM that a fault test kills leaves them behind, and they go with the session's directory, which
pytest removes after a run that passed (`tmp_path_retention_policy = "failed"` in pyproject.toml).

Every JVM the tests start compiles with C1 alone (`TEST_JVM_OPTIONS` in `JAVA_TOOL_OPTIONS`, which every JVM
reads and notes on its stderr): the tests' JVMs live seconds to minutes, where C2's compilations cost more CPU
than they save, and the suite is CPU-bound on two cores. `make bench` starts its JVMs with the JDK's tiered
compilation, as the gateway runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from embedded.local_kafka import LocalKafka

# No timing in tests: Hypothesis's per-example deadline (200 ms) is one, and on a busy machine any deadline
# fails tests that are right.
settings.register_profile("gateway", deadline=None)
settings.load_profile("gateway")

if TYPE_CHECKING:  # imported by the fixture: sessions without it need neither trustme nor cryptography
    from tests.secured_kafka import SecuredKafka

_BROKER_KEY = pytest.StashKey[LocalKafka]()
_SECURED_BROKER_KEY = pytest.StashKey["SecuredKafka"]()
_LOG_TAIL_LINES = 40
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
# Set on import, before any fixture starts a JVM (pytest-xdist's workers import this file too).
if TEST_JVM_OPTIONS not in os.environ.get("JAVA_TOOL_OPTIONS", ""):
    os.environ["JAVA_TOOL_OPTIONS"] = f"{os.environ.get('JAVA_TOOL_OPTIONS', '')} {TEST_JVM_OPTIONS}".strip()


@pytest.fixture(scope="session", autouse=True)
def spark_local_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    scratch = tmp_path_factory.mktemp("spark-local")
    # SPARK_LOCAL_DIRS: block manager and Python files; java.io.tmpdir of spark-submit's JVMs: the copies a
    # client-mode driver makes of the archives it ships (the packed environment, 154 MB each)
    settings = {"SPARK_LOCAL_DIRS": str(scratch),
                "SPARK_SUBMIT_OPTS": f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} -Djava.io.tmpdir={scratch}".strip()}
    before = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="session")
def kafka(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    broker = LocalKafka(tmp_path_factory.mktemp("kafka"))
    request.config.stash[_BROKER_KEY] = broker
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def secured_kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SecuredKafka]:
    from tests.secured_kafka import SecuredKafka

    broker = SecuredKafka(tmp_path_factory.mktemp("secured-kafka"))
    request.config.stash[_SECURED_BROKER_KEY] = broker
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if not report.failed:
        return report
    fixtures = getattr(item, "fixturenames", ())
    for fixture, key, title in (
        ("kafka", _BROKER_KEY, "kafka broker"),
        ("secured_kafka", _SECURED_BROKER_KEY, "secured kafka broker"),
    ):
        broker = item.config.stash.get(key, None)
        if broker is not None and fixture in fixtures:
            report.sections.append(
                (
                    title,
                    f"broker log: {broker.log_path}\nJVM output: {broker.stdout_path}\n"
                    f"{broker.log_tail(_LOG_TAIL_LINES)}",
                )
            )
    return report


# The longest test files (minutes each), longest first: under two workers (pyproject.toml) a long file handed
# out last would run alone at the end of the suite.
LONGEST_FIRST = (
    "tests/integration/test_faults.py",
    "tests/integration/test_secured_cluster.py",
    "tests/integration/test_door_failover.py",
    "tests/integration/test_make_run.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: the rest keep their order


@pytest.fixture(autouse=True)
def closed_partition_logs() -> Iterator[None]:
    """The partition logs the sink keeps open between micro-batches (`storage.open_logs`) belong to one test:
    closed after it (a later test's directories are others, and descriptors are not held for the session)."""
    yield
    module = sys.modules.get("sinks.partition_task")
    if module is not None:
        module.OPEN_LOGS.close_all()
