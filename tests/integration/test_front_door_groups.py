"""Consumer groups at the front door with librdkafka (confluent-kafka), on a running gateway: consumers
that `subscribe()` split a topic's partitions and rebalance when one leaves, commits hand partitions over
without a record read twice or skipped, committed offsets and the group survive a front-door restart
(they last on the groups topic), the admin client lists, describes and deletes groups, and the group
metrics (members, committed offsets, lag, rebalances, commits) are on the exporter.
(Every client and tool against both Apache Kafka and the front door: `test_group_clients.py`.)"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from prometheus_client import generate_latest

from embedded.local_kafka import java_executable
from tests.integration.front_door_harness import RunningDoor, running_front_door
from tests.integration.group_members import JavaMember, LibrdkafkaMember, compile_group_consumer, until
from tests.integration.group_members import split as split_among
from tests.producer_performance import tools_classpath

pytestmark = pytest.mark.integration

TOPIC = "spread"  # 8 partitions, two per node
PARTITIONS = 8


@pytest.fixture
def door(spark, gateway_config) -> Iterator[RunningDoor]:
    with running_front_door(spark, gateway_config) as running:
        yield running


def produce(door: RunningDoor, count: int, tag: str) -> set[str]:
    p = Producer({"bootstrap.servers": door.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    values = {f"{tag}-{i}" for i in range(count)}
    for i, v in enumerate(sorted(values)):
        p.produce(TOPIC, value=v.encode(), partition=i % PARTITIONS)
    assert p.flush(120) == 0
    return values


def member(door: RunningDoor, group: str, name: str, **config: Any) -> LibrdkafkaMember:
    return LibrdkafkaMember(door.bootstrap, group, TOPIC, name, **config)


def split(members: list[Any]) -> bool:
    return split_among(members, PARTITIONS)


def test_subscribed_consumers_split_partitions_hand_them_over_and_keep_offsets_across_a_restart(door: RunningDoor) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    a, b = member(door, group, "a"), member(door, group, "b")
    until(lambda: split([a, b]), [a, b], "two members to split the partitions")
    first = produce(door, 80, "a")
    until(lambda: set(a.read) | set(b.read) >= first, [a, b], "every record of the first batch")
    assert not set(a.read) & set(b.read)
    assert {p for p, _ in a.read.values()} <= a.assigned and {p for p, _ in b.read.values()} <= b.assigned

    # b leaves: a takes every partition over and reads only what b had not committed (nothing here)
    b.close()
    second = produce(door, 40, "b")
    until(lambda: a.assigned == set(range(PARTITIONS)), [a], "the survivor to own every partition")
    until(lambda: set(a.read) >= second, [a], "every record of the second batch")
    assert not (set(a.read) & set(b.read))
    committed = {tp.partition: tp.offset for tp in a.consumer.committed(
        [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)}
    assert sum(committed.values()) == 120
    a.close()

    # the front door restarts (its coordinator with it): the group's offsets are read back from the topic
    door.restart()
    third = produce(door, 16, "c")
    c = member(door, group, "c")
    until(lambda: set(c.read) >= third, [c], "the records after the restart")
    assert set(c.read) == third, "a restarted group resumes at its commits: nothing read twice, nothing skipped"
    c.close()


def test_the_admin_client_lists_describes_and_deletes_groups(door: RunningDoor) -> None:
    group = f"admin-{uuid.uuid4().hex[:8]}"
    produce(door, 8, "d")
    m = member(door, group, "m")
    until(lambda: m.assigned == set(range(PARTITIONS)), [m], "the member's assignment")
    until(lambda: len(m.read) >= 8, [m], "the records")
    admin = AdminClient({"bootstrap.servers": door.bootstrap})
    listed = admin.list_consumer_groups().result(timeout=30)
    assert group in {g.group_id for g in listed.valid}
    described = admin.describe_consumer_groups([group])[group].result(timeout=30)
    assert str(described.state).endswith("STABLE") and described.partition_assignor == "range"
    assert [mem.client_id for mem in described.members] == ["m"]
    assert {tp.partition for tp in described.members[0].assignment.topic_partitions} == set(range(PARTITIONS))

    text = generate_latest(door.door.metrics.registry).decode()
    assert f'gateway_front_door_group_members{{group="{group}"}} 1.0' in text
    assert f'gateway_front_door_group_offset_commits_total{{group="{group}"}}' in text
    assert f'gateway_front_door_group_rebalances_total{{group="{group}"}}' in text
    lags = [line for line in text.splitlines() if line.startswith(f'gateway_front_door_group_lag{{group="{group}"')]
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


def test_kafka_console_consumer_with_a_group_and_kafka_consumer_groups(door: RunningDoor) -> None:
    group = f"console-{uuid.uuid4().hex[:8]}"
    values = produce(door, 24, "e")
    read = kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", door.bootstrap, "--topic", TOPIC, "--group", group,
                      "--from-beginning", "--max-messages", "24", "--timeout-ms", "60000")
    assert read.returncode == 0, read.stderr[-3000:]
    assert {line.encode() for line in read.stdout.split()} == values

    listed = kafka_tool(CONSUMER_GROUPS, "--bootstrap-server", door.bootstrap, "--list")
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert group in listed.stdout.split()
    described = kafka_tool(CONSUMER_GROUPS, "--bootstrap-server", door.bootstrap, "--describe", "--group", group)
    assert described.returncode == 0, described.stderr[-3000:]
    rows = [line.split() for line in described.stdout.splitlines() if line.startswith(group)]
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
    assert sorted(int(r[2]) for r in rows) == list(range(PARTITIONS))
    assert all(r[1] == TOPIC and r[3] == r[4] == "3" and r[5] == "0" for r in rows), described.stdout


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


def test_java_and_librdkafka_members_share_a_group_through_join_leave_and_crash(door: RunningDoor,
                                                                                 java_classes: Path) -> None:
    group = f"mixed-{uuid.uuid4().hex[:8]}"
    lib = member(door, group, "librdkafka")
    j1 = JavaMember(java_classes, door.bootstrap, group, TOPIC, "java-1")
    j2 = JavaMember(java_classes, door.bootstrap, group, TOPIC, "java-2")
    everyone: list[Any] = [lib, j1, j2]
    try:
        until(lambda: split([lib, j1, j2]), everyone, "three members to split the partitions")
        produced = produce(door, 48, "one")
        until(lambda: set().union(*(m.read for m in everyone)) >= produced, everyone, "the first records")
        no_duplicates(everyone)

        j2.close()  # leaves the group: the others take its partitions over from its commits
        until(lambda: split([lib, j1]), [lib, j1], "two members after a leave")
        produced |= produce(door, 24, "two")
        until(lambda: set().union(*(m.read for m in everyone)) >= produced and j1.all_committed(), [lib, j1],
              "the records after the leave")

        j1.crash()  # kill -9: no LeaveGroup; its session times out (6 s) and librdkafka takes everything
        until(lambda: lib.assigned == set(range(PARTITIONS)), [lib], "the survivor after the crash")
        produced |= produce(door, 16, "three")
        until(lambda: set().union(*(m.read for m in everyone)) >= produced, [lib], "the records after the crash")
        no_duplicates(everyone)  # nothing read twice after a commit, nothing skipped
        assert set().union(*(m.read for m in everyone)) == produced
        assert not j1.errors and not j2.errors
    finally:
        for m in (j1, j2):
            if m.proc.poll() is None:
                m.crash()
        lib.close()


@pytest.mark.parametrize("assignor", ["roundrobin", "cooperative-sticky"])
def test_assignors_shared_by_java_and_librdkafka(door: RunningDoor, java_classes: Path, assignor: str) -> None:
    group = f"{assignor}-{uuid.uuid4().hex[:8]}"
    lib = member(door, group, "librdkafka", assignor=assignor)
    java = JavaMember(java_classes, door.bootstrap, group, TOPIC, "java", assignor=assignor)
    try:
        until(lambda: split([lib, java]), [lib, java], f"{assignor} to split the partitions")
        produced = produce(door, 32, assignor)
        until(lambda: set(lib.read) | set(java.read) >= produced, [lib, java], "every record")
        no_duplicates([lib, java])
        java.close()
        until(lambda: lib.assigned == set(range(PARTITIONS)), [lib], "librdkafka to own every partition")
    finally:
        if java.proc.poll() is None:
            java.crash()
        lib.close()


def test_a_static_member_restarted_under_its_instance_id_gets_its_partitions_back(door: RunningDoor,
                                                                                   java_classes: Path) -> None:
    group = f"static-{uuid.uuid4().hex[:8]}"
    other = JavaMember(java_classes, door.bootstrap, group, TOPIC, "other", assignor="sticky", instance_id="other")
    first = JavaMember(java_classes, door.bootstrap, group, TOPIC, "static", assignor="sticky", instance_id="static-1")
    try:
        until(lambda: split([other, first]), [other, first], "two static members to split the partitions")
        mine = set(first.assigned)
        before = len(other.events)
        first.crash()  # a static member that goes away without leaving keeps its place for a session
        again = JavaMember(java_classes, door.bootstrap, group, TOPIC, "static", assignor="sticky",
                           instance_id="static-1")
        until(lambda: again.assigned == mine, [other, again], "the restarted static member's partitions")
        assert not any(e["event"] == "revoked" and e["partitions"] for e in other.events[before:]), \
            "the other member kept its partitions: no rebalance"
        again.close()
    finally:
        for m in (other, first):
            if m.proc.poll() is None:
                m.crash()
