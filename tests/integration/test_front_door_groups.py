"""Consumer groups at the front door with librdkafka (confluent-kafka), on a running gateway: consumers
that `subscribe()` split a topic's partitions and rebalance when one leaves, commits hand partitions over
without a record read twice or skipped, committed offsets and the group survive a front-door restart
(they last on the groups topic), the admin client lists, describes and deletes groups, and the group
metrics (members, committed offsets, lag, rebalances, commits) are on the exporter.
(Every client and tool against both Apache Kafka and the front door: `test_group_clients.py`.)"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from prometheus_client import generate_latest

from tests.integration.front_door_harness import RunningDoor, running_front_door

pytestmark = pytest.mark.integration

TOPIC = "spread"  # 8 partitions, two per node
PARTITIONS = 8
SESSION_MS = 6_000  # Kafka's group.min.session.timeout.ms


@pytest.fixture
def door(spark, gateway_config) -> Iterator[RunningDoor]:
    with running_front_door(spark, gateway_config) as running:
        yield running


def produce(door: RunningDoor, count: int, tag: str) -> set[bytes]:
    p = Producer({"bootstrap.servers": door.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    values = {f"{tag}-{i}".encode() for i in range(count)}
    for i, v in enumerate(sorted(values)):
        p.produce(TOPIC, value=v, partition=i % PARTITIONS)
    assert p.flush(120) == 0
    return values


class Member:
    """One librdkafka group consumer: what it was assigned and what it read, commits by hand."""

    def __init__(self, door: RunningDoor, group: str, name: str, **config: Any) -> None:
        self.name = name
        self.assigned: set[int] = set()
        self.read: dict[bytes, tuple[int, int]] = {}
        self.consumer = Consumer({"bootstrap.servers": door.bootstrap, "group.id": group, "client.id": name,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 500, **config})
        self.consumer.subscribe([TOPIC], on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, _c: Consumer, partitions: list[TopicPartition]) -> None:
        self.assigned = {tp.partition for tp in partitions}

    def _revoke(self, _c: Consumer, _partitions: list[TopicPartition]) -> None:
        self.assigned = set()

    def poll(self) -> None:
        m = self.consumer.poll(0.2)
        if m is None:
            return
        assert m.error() is None or m.error().code() == KafkaError._PARTITION_EOF, m.error()
        if m.error() is None:
            assert m.value() not in self.read, f"{self.name} read {m.value()!r} twice"
            self.read[m.value()] = (m.partition(), m.offset())

    def commit(self) -> None:
        self.consumer.commit(asynchronous=False)


def until(condition: Any, members: list[Member], what: str, timeout_s: float = 90) -> None:
    """Poll every member until `condition()` holds (the group's own progress, not a duration)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for m in members:
            m.poll()


def split(members: list[Member]) -> bool:
    owned = [p for m in members for p in m.assigned]
    return len(owned) == PARTITIONS and set(owned) == set(range(PARTITIONS)) and all(m.assigned for m in members)


def test_subscribed_consumers_split_partitions_hand_them_over_and_keep_offsets_across_a_restart(door: RunningDoor) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    a, b = Member(door, group, "a"), Member(door, group, "b")
    until(lambda: split([a, b]), [a, b], "two members to split the partitions")
    first = produce(door, 80, "a")
    until(lambda: set(a.read) | set(b.read) >= first, [a, b], "every record of the first batch")
    assert not set(a.read) & set(b.read)
    assert {p for p, _ in a.read.values()} <= a.assigned and {p for p, _ in b.read.values()} <= b.assigned
    a.commit()
    b.commit()

    # b leaves: a takes every partition over and reads only what b had not committed (nothing here)
    b.consumer.close()
    second = produce(door, 40, "b")
    until(lambda: a.assigned == set(range(PARTITIONS)), [a], "the survivor to own every partition")
    until(lambda: set(a.read) >= second, [a], "every record of the second batch")
    assert not (set(a.read) & set(b.read))
    a.commit()
    committed = {tp.partition: tp.offset for tp in a.consumer.committed(
        [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)}
    assert sum(committed.values()) == 120
    a.consumer.close()

    # the front door restarts (its coordinator with it): the group's offsets are read back from the topic
    door.restart()
    third = produce(door, 16, "c")
    c = Member(door, group, "c")
    until(lambda: set(c.read) >= third, [c], "the records after the restart")
    assert set(c.read) == third, "a restarted group resumes at its commits: nothing read twice, nothing skipped"
    c.consumer.close()


def test_the_admin_client_lists_describes_and_deletes_groups(door: RunningDoor) -> None:
    group = f"admin-{uuid.uuid4().hex[:8]}"
    produce(door, 8, "d")
    m = Member(door, group, "m")
    until(lambda: m.assigned == set(range(PARTITIONS)), [m], "the member's assignment")
    until(lambda: len(m.read) >= 8, [m], "the records")
    m.commit()
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
    m.consumer.close()
    admin.delete_consumer_groups([group])[group].result(timeout=30)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(timeout=30).valid}
