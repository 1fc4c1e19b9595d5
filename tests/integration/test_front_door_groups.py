"""Consumer groups at the front door with real clients, each test that does not need the gateway run
against Apache Kafka 4.2.1 too (the same assertions: conformance): librdkafka and the Java client in one
group splitting partitions and rebalancing on join, leave and crash (session timeout) with nothing read
twice after a commit and nothing skipped; the roundrobin, sticky and cooperative-sticky assignors; a
static member back under its instance id without a rebalance; `kafka-console-consumer --group` and
`kafka-consumer-groups --list/--describe`; the admin client listing, describing and deleting groups.
Front door only: committed offsets and the group surviving a front-door restart (they last on the groups
topic) and the group metrics on the exporter."""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from prometheus_client import generate_latest

from embedded.local_kafka import java_executable
from storage.retention import enforce_retention
from tests.integration.front_door_harness import RunningDoor, running_front_door
from tests.integration.group_members import (
    JavaMember,
    KafkajsMember,
    LibrdkafkaMember,
    compile_group_consumer,
    until,
)
from tests.integration.group_members import split as split_among
from tests.producer_performance import tools_classpath

pytestmark = pytest.mark.integration

TOPIC = "spread"  # 8 partitions, two per node
PARTITIONS = 8


@dataclass
class Target:
    """Where the group consumers run: the front door (topic `spread` of its registry) or Apache Kafka itself
    (a topic of the same shape), so every test below that holds on one is shown to hold on the other."""

    bootstrap: str
    topic: str
    door: RunningDoor | None = None

    def produce(self, count: int, tag: str) -> set[str]:
        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "linger.ms": 5})
        values = {f"{tag}-{i}" for i in range(count)}
        for i, v in enumerate(sorted(values)):
            p.produce(self.topic, value=v.encode(), partition=i % PARTITIONS)
        assert p.flush(120) == 0
        return values

    def member(self, group: str, name: str, **config: Any) -> LibrdkafkaMember:
        return LibrdkafkaMember(self.bootstrap, group, self.topic, name, **config)

    def java(self, classes: Path, group: str, name: str, **kwargs: Any) -> JavaMember:
        return JavaMember(classes, self.bootstrap, group, self.topic, name, **kwargs)


@pytest.fixture
def door(spark, gateway_config) -> Iterator[Target]:
    with running_front_door(spark, gateway_config) as running:
        yield Target(running.bootstrap, TOPIC, running)


@pytest.fixture(params=["front_door", "kafka"])
def target(request: pytest.FixtureRequest, kafka) -> Target:
    if request.param == "kafka":
        topic = f"{TOPIC}-{uuid.uuid4().hex[:8]}"
        kafka.create_topics([(topic, PARTITIONS, {})])
        return Target(kafka.bootstrap_servers, topic)
    return request.getfixturevalue("door")


def split(members: list[Any]) -> bool:
    return split_among(members, PARTITIONS)


def test_subscribed_consumers_split_partitions_hand_them_over_and_keep_offsets_across_a_restart(door: Target) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    a, b = door.member(group, "a"), door.member(group, "b")
    until(lambda: split([a, b]), [a, b], "two members to split the partitions")
    first = door.produce(80, "a")
    until(lambda: set(a.read) | set(b.read) >= first, [a, b], "every record of the first batch")
    assert not set(a.read) & set(b.read)
    assert {p for p, _ in a.read.values()} <= a.assigned and {p for p, _ in b.read.values()} <= b.assigned

    # b leaves: a takes every partition over and reads only what b had not committed (nothing here)
    b.close()
    second = door.produce(40, "b")
    until(lambda: a.assigned == set(range(PARTITIONS)), [a], "the survivor to own every partition")
    until(lambda: set(a.read) >= second, [a], "every record of the second batch")
    assert not (set(a.read) & set(b.read))
    committed = {tp.partition: tp.offset for tp in a.consumer.committed(
        [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)}
    assert sum(committed.values()) == 120
    a.close()

    # the front door restarts (its coordinator with it): the group's offsets are read back from the topic
    assert door.door is not None
    door.door.restart()
    third = door.produce(16, "c")
    c = door.member(group, "c")
    until(lambda: set(c.read) >= third, [c], "the records after the restart")
    assert set(c.read) == third, "a restarted group resumes at its commits: nothing read twice, nothing skipped"
    c.close()


def test_the_admin_client_lists_describes_and_deletes_groups(target: Target) -> None:
    group = f"admin-{uuid.uuid4().hex[:8]}"
    target.produce(8, "d")
    m = target.member(group, "m")
    until(lambda: m.assigned == set(range(PARTITIONS)), [m], "the member's assignment")
    until(lambda: len(m.read) >= 8, [m], "the records")
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    listed = admin.list_consumer_groups().result(timeout=30)
    assert group in {g.group_id for g in listed.valid}
    described = admin.describe_consumer_groups([group])[group].result(timeout=30)
    assert str(described.state).endswith("STABLE") and described.partition_assignor == "range"
    assert [mem.client_id for mem in described.members] == ["m"]
    assert {tp.partition for tp in described.members[0].assignment.topic_partitions} == set(range(PARTITIONS))

    if target.door is not None:  # the front door's exporter: the group's members, commits, rebalances, lag
        text = generate_latest(target.door.door.metrics.registry).decode()
        assert f'gateway_front_door_group_members{{group="{group}"}} 1.0' in text
        assert f'gateway_front_door_group_offset_commits_total{{group="{group}"}}' in text
        assert f'gateway_front_door_group_rebalances_total{{group="{group}"}}' in text
        lag = f'gateway_front_door_group_lag{{group="{group}"'
        lags = [line for line in text.splitlines() if line.startswith(lag)]
        assert len(lags) == PARTITIONS and all(line.endswith(" 0.0") for line in lags)

    deleted = admin.delete_consumer_groups([group])[group]
    with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
        deleted.result(timeout=30)
    m.close()
    admin.delete_consumer_groups([group])[group].result(timeout=30)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(timeout=30).valid}


def kafka_tool(main_class: str, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """One of Kafka's command-line tools (kafka-tools 4.2.1), as `bin/kafka-*.sh` runs it."""
    return subprocess.run([java_executable(), "-cp", tools_classpath(), main_class, *args], capture_output=True,
                          text=True, timeout=timeout_s)


CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def test_kafka_console_consumer_with_a_group_and_kafka_consumer_groups(target: Target) -> None:
    group = f"console-{uuid.uuid4().hex[:8]}"
    values = target.produce(24, "e")
    read = kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", target.bootstrap, "--topic", target.topic, "--group", group,
                      "--from-beginning", "--max-messages", "24", "--timeout-ms", "60000")
    assert read.returncode == 0, read.stderr[-3000:]
    assert set(read.stdout.split()) == values

    listed = kafka_tool(CONSUMER_GROUPS, "--bootstrap-server", target.bootstrap, "--list")
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert group in listed.stdout.split()
    described = kafka_tool(CONSUMER_GROUPS, "--bootstrap-server", target.bootstrap, "--describe", "--group", group)
    assert described.returncode == 0, described.stderr[-3000:]
    rows = [line.split() for line in described.stdout.splitlines() if line.startswith(group)]
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
    assert sorted(int(r[2]) for r in rows) == list(range(PARTITIONS))
    assert all(r[1] == target.topic and r[3] == r[4] == "3" and r[5] == "0" for r in rows), described.stdout


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_group_consumer(tmp_path_factory.mktemp("group-consumer"))


def no_duplicates(members: list[Any]) -> None:
    seen: dict[str, str] = {}
    for m in members:
        assert not m.duplicates, f"{m.name} read {m.duplicates[:3]} twice"
        for value in m.read:
            assert value not in seen, f"{value} read by {seen[value]} and {m.name}"
            seen[value] = m.name


def test_java_and_librdkafka_members_share_a_group_through_join_leave_and_crash(target: Target,
                                                                                 java_classes: Path) -> None:
    group = f"mixed-{uuid.uuid4().hex[:8]}"
    lib = target.member(group, "librdkafka")
    j1 = target.java(java_classes, group, "java-1")
    j2 = target.java(java_classes, group, "java-2")
    everyone: list[Any] = [lib, j1, j2]
    try:
        until(lambda: split([lib, j1, j2]), everyone, "three members to split the partitions")
        produced = target.produce(48, "one")
        until(lambda: set().union(*(m.read for m in everyone)) >= produced, everyone, "the first records")
        no_duplicates(everyone)

        j2.close()  # leaves the group: the others take its partitions over from its commits
        until(lambda: split([lib, j1]), [lib, j1], "two members after a leave")
        produced |= target.produce(24, "two")
        until(lambda: set().union(*(m.read for m in everyone)) >= produced and j1.all_committed(), [lib, j1],
              "the records after the leave")

        j1.crash()  # kill -9: no LeaveGroup; its session times out (6 s) and librdkafka takes everything
        until(lambda: lib.assigned == set(range(PARTITIONS)), [lib], "the survivor after the crash")
        produced |= target.produce(16, "three")
        until(lambda: set().union(*(m.read for m in everyone)) >= produced, [lib], "the records after the crash")
        no_duplicates(everyone)  # nothing read twice after a commit, nothing skipped
        assert set().union(*(m.read for m in everyone)) == produced
        assert not j1.errors and not j2.errors
        # resuming from commits (which carry leader epoch 0), the Java client validated its positions
        # (KIP-320): OffsetForLeaderEpoch answered without an error, epoch 0 ending at the log end
        answers = [line for m in (j1, j2) for line in m.log_file.read_text().splitlines()
                   if "Received OFFSET_FOR_LEADER_EPOCH response" in line]
        ends = re.findall(r"EpochEndOffset\(errorCode=(-?\d+), partition=\d+, leaderEpoch=(-?\d+)", "\n".join(answers))
        assert ends and set(ends) == {("0", "0")}, answers[:3]
    finally:
        for m in (j1, j2):
            if m.proc.poll() is None:
                m.crash()
        lib.close()


@pytest.mark.parametrize("assignor", ["roundrobin", "cooperative-sticky"])
def test_assignors_shared_by_java_and_librdkafka(target: Target, java_classes: Path, assignor: str) -> None:
    group = f"{assignor}-{uuid.uuid4().hex[:8]}"
    lib = target.member(group, "librdkafka", assignor=assignor)
    java = target.java(java_classes, group, "java", assignor=assignor)
    try:
        until(lambda: split([lib, java]), [lib, java], f"{assignor} to split the partitions")
        produced = target.produce(32, assignor)
        until(lambda: set(lib.read) | set(java.read) >= produced, [lib, java], "every record")
        no_duplicates([lib, java])
        java.close()
        until(lambda: lib.assigned == set(range(PARTITIONS)), [lib], "librdkafka to own every partition")
    finally:
        if java.proc.poll() is None:
            java.crash()
        lib.close()


def test_a_static_member_restarted_under_its_instance_id_gets_its_partitions_back(target: Target,
                                                                                   java_classes: Path) -> None:
    group = f"static-{uuid.uuid4().hex[:8]}"
    # Java's default session (45 s), as static members use it: the restarted member's JVM must rejoin
    # within it, which a loaded 2-core machine does not promise in the other tests' 6 s.
    session = ("session.timeout.ms=45000",)
    other = target.java(java_classes, group, "other", assignor="sticky", instance_id="other", settings=session)
    first = target.java(java_classes, group, "static", assignor="sticky", instance_id="static-1", settings=session)
    try:
        until(lambda: split([other, first]), [other, first], "two static members to split the partitions")
        mine = set(first.assigned)
        before = len(other.events)
        first.crash()  # a static member that goes away without leaving keeps its place for a session
        again = target.java(java_classes, group, "static", assignor="sticky",
                           instance_id="static-1", settings=session)
        until(lambda: again.assigned == mine, [other, again], "the restarted static member's partitions")
        assert not any(e["event"] == "revoked" and e["partitions"] for e in other.events[before:]), \
            f"the other member kept its partitions: no rebalance; its events since: {other.events[before:]}, " \
            f"before: {other.events[:before]}, the restarted member's: {again.events}"
        again.close()
    finally:
        for m in (other, first):
            if m.proc.poll() is None:
                m.crash()


def test_kafkajs_shares_a_group_with_librdkafka(target: Target) -> None:
    group = f"kafkajs-{uuid.uuid4().hex[:8]}"
    lib = target.member(group, "librdkafka", assignor="roundrobin")
    js = KafkajsMember(target.bootstrap, group, target.topic, "kafkajs")
    try:
        until(lambda: split([lib, js]), [lib, js], "kafkajs and librdkafka to split the partitions")
        produced = target.produce(32, "js")
        until(lambda: set(lib.read) | set(js.read) >= produced, [lib, js], "every record")
        no_duplicates([lib, js])
        assert not js.errors
        js.close()  # disconnect: kafkajs leaves the group
        until(lambda: lib.assigned == set(range(PARTITIONS)), [lib], "librdkafka to own every partition")
    finally:
        if js.proc.poll() is None:
            js.crash()
        lib.close()


def test_a_commit_below_the_log_start_after_retention_resets_by_auto_offset_reset(door: Target) -> None:
    """Kafka's answer: the committed position is out of range, Fetch says OFFSET_OUT_OF_RANGE, and the
    consumer resets by `auto.offset.reset` (earliest: the new log start)."""
    assert door.door is not None
    rolling = Target(door.bootstrap, "rolling", door.door)  # a segment per micro-batch (segment.ms=1)
    group = f"reset-{uuid.uuid4().hex[:8]}"

    def produce(tag: str) -> None:
        p = Producer({"bootstrap.servers": door.bootstrap, "enable.idempotence": True})
        for i in range(5):
            p.produce("rolling", value=f"{tag}-{i}".encode(), partition=0)
        assert p.flush(120) == 0

    produce("old")
    first = rolling.member(group, "first")
    until(lambda: len(first.read) == 5, [first], "the first records, committed")
    first.close()
    produce("gone")
    produce("kept")
    root = door.door.segments_root
    config = replace(door.door.registry.current().topics["rolling"], retention_ms=1)
    report = enforce_retention(root, "rolling", 0, config, now_ms=int(time.time() * 1000) + 60_000)
    assert report is not None and report.log_start_offset == 10  # the two closed segments are gone

    second = rolling.member(group, "second")
    until(lambda: len(second.read) == 5, [second], "the records after the reset")
    assert sorted(second.read.values()) == [(0, o) for o in range(10, 15)]  # reset to the log start, not 5
    second.close()


def test_kafka_consumer_groups_resets_offsets_and_deletes_a_group(target: Target) -> None:
    group = f"tools-{uuid.uuid4().hex[:8]}"
    values = target.produce(16, "r")
    m = target.member(group, "m")
    until(lambda: set(m.read) >= values, [m], "every record, committed")
    m.close()
    reset = kafka_tool(CONSUMER_GROUPS, "--bootstrap-server", target.bootstrap, "--reset-offsets", "--group", group,
                       "--topic", target.topic, "--to-earliest", "--execute")
    assert reset.returncode == 0, reset.stderr[-3000:]
    again = target.member(group, "again")  # the group starts over from the reset offsets
    until(lambda: set(again.read) >= values, [again], "every record again after the reset")
    again.close()
    deleted = kafka_tool(CONSUMER_GROUPS, "--bootstrap-server", target.bootstrap, "--delete", "--group", group)
    assert deleted.returncode == 0 and "successful" in deleted.stdout, deleted.stdout + deleted.stderr[-2000:]
    listed = kafka_tool(CONSUMER_GROUPS, "--bootstrap-server", target.bootstrap, "--list")
    assert group not in listed.stdout.split()
