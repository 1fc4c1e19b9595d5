"""Several front doors finding each other on the doors topic (`front_door/cluster/door_cluster.py`), against a real
broker: every door lists every live door's nodes in Metadata with the same leaders; a group is coordinated by
one door, and when that door stops the other takes the group over from the groups topic with its committed
offsets; a door started with the id of a live door elsewhere is refused; a door that loses the cluster says
so in /readyz."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from embedded.local_kafka import LocalKafka
from front_door.cluster.door_cluster import DuplicateDoorError, first_node_id
from front_door.metrics import FrontDoorMetrics
from front_door.server import FrontDoor
from sinks.registry_watcher import RegistryWatcher
from streaming.config import GatewayConfig
from tests.integration.fault_harness import GatewayDriver, _wait_for
from tests.integration.gateway_io import create_gateway_topics
from tests.integration.ports import free_port, free_ports
from tests.integration.test_front_door_groups import CONSUMER_GROUPS, kafka_tool

TOPIC = "orders"
PARTITIONS = 6
NODES = 2  # per door


@pytest.fixture
def doors_config(gateway_config: GatewayConfig) -> GatewayConfig:
    topics = {"topics": {TOPIC: {"partitions": PARTITIONS}}}
    Path(gateway_config.topics_file).write_text(json.dumps(topics))
    config = gateway_config.with_overrides(doors_topic=f"doors-{uuid.uuid4().hex[:8]}", front_door_nodes=NODES,
                                           front_door_address="127.0.0.1:0", front_door_session_timeout_ms=6000)
    create_gateway_topics(config)
    return config


def _door(config: GatewayConfig, door_id: int) -> FrontDoor:
    settings = config.with_overrides(front_door_id=door_id).front_door_settings()
    door = FrontDoor(settings, RegistryWatcher(config.path(config.topics_file)).current, FrontDoorMetrics())
    door.start()
    return door


@pytest.fixture
def doors(doors_config: GatewayConfig) -> Iterator[list[FrontDoor]]:
    started: list[FrontDoor] = []
    try:
        started.append(_door(doors_config, 1))
        started.append(_door(doors_config, 2))
        yield started
    finally:
        for door in started:
            door.stop()


def _bootstrap(door: FrontDoor) -> str:
    assert door.address is not None
    return f"{door.address.host}:{door.address.port}"


def _until(check: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout_s} s")
        time.sleep(0.1)


def _settled(doors: list[FrontDoor]) -> bool:
    """No group moving between the doors (each has loaded what it coordinates)."""
    return not any(d.context.groups.loading or d.context.groups.moving for d in doors)  # type: ignore[union-attr]


def _cluster(door: FrontDoor) -> tuple[list[tuple[int, str, int]], dict[int, int]]:
    """(brokers, partition -> leader) as a client of `door` is told."""
    meta = AdminClient({"bootstrap.servers": _bootstrap(door)}).list_topics(TOPIC, timeout=30)
    brokers = sorted((b.id, b.host, b.port) for b in meta.brokers.values())
    return brokers, {p.id: p.leader for p in meta.topics[TOPIC].partitions.values()}


def _java_offsets(door: FrontDoor, group: str) -> dict[int, int]:
    """partition -> committed offset of `group` on TOPIC as `kafka-consumer-groups.sh --describe` prints them."""
    described = kafka_tool(CONSUMER_GROUPS, "--bootstrap-server", _bootstrap(door), "--describe", "--group", group)
    assert described.returncode == 0, described.stdout + described.stderr
    rows = [line.split() for line in described.stdout.splitlines()]
    return {int(row[2]): int(row[3]) for row in rows if len(row) > 3 and row[:2] == [group, TOPIC]}


def test_every_door_tells_clients_of_every_live_door(doors: list[FrontDoor]) -> None:
    both = sorted([*(n.node_id for n in doors[0].context.nodes), *(n.node_id for n in doors[1].context.nodes)])  # type: ignore[union-attr]
    assert both == [1, 2, first_node_id(2), first_node_id(2) + 1]
    _until(lambda: [b[0] for b in _cluster(doors[0])[0]] == both == [b[0] for b in _cluster(doors[1])[0]],
           "agreement on the brokers")
    first, second = _cluster(doors[0]), _cluster(doors[1])
    assert first == second
    brokers, leaders = first
    assert {leader // 100 for leader in leaders.values()} == {0, 1}  # partitions led by both doors
    addresses = {b[0]: (b[1], b[2]) for b in brokers}
    for door in doors:
        for node in door.context.nodes:  # type: ignore[union-attr]
            assert addresses[node.node_id] == (node.host, node.port)


def test_a_stopped_doors_groups_are_taken_over_with_their_offsets(doors_config: GatewayConfig,
                                                                   doors: list[FrontDoor]) -> None:
    _until(lambda: len(_cluster(doors[0])[0]) == len(_cluster(doors[1])[0]) == 2 * NODES and _settled(doors),
           "agreement")
    # a group coordinated by door 2, found from door 1 (FindCoordinator names door 2's node)
    group = next(f"app-{i}" for i in range(1000) if doors[0].context.coordinator(f"app-{i}") > 100)  # type: ignore[union-attr]
    admin = AdminClient({"bootstrap.servers": _bootstrap(doors[0])})
    committed = [TopicPartition(TOPIC, p, 100 + p) for p in range(PARTITIONS)]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, committed)])[group].result(timeout=30)
    described = admin.describe_consumer_groups([group])[group].result(timeout=30)
    assert described.coordinator.id > 100
    assert _java_offsets(doors[0], group) == {p: 100 + p for p in range(PARTITIONS)}  # Java's admin, via door 1

    doors[1].stop()  # its registration deleted: door 1 takes over at once, from the groups topic
    _until(lambda: [b[0] for b in _cluster(doors[0])[0]] == [1, 2] and _settled(doors[:1]), "door 1 alone")
    admin = AdminClient({"bootstrap.servers": _bootstrap(doors[0])})  # one that never knew door 2
    fetched = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    assert sorted((tp.partition, tp.offset) for tp in fetched.topic_partitions) == \
        [(p, 100 + p) for p in range(PARTITIONS)]
    assert admin.describe_consumer_groups([group])[group].result(timeout=30).coordinator.id in (1, 2)
    assert _java_offsets(doors[0], group) == {p: 100 + p for p in range(PARTITIONS)}


def test_a_door_with_the_id_of_a_live_door_elsewhere_is_refused(doors_config: GatewayConfig,
                                                                 doors: list[FrontDoor]) -> None:
    with pytest.raises(DuplicateDoorError, match="front_door_id 2 is held by a live door at 127.0.0.1:"):
        _door(doors_config, 2)


def _readyz(port: int) -> tuple[int, str]:
    """(status, detail) of the door's /readyz; (0, why) before its server listens."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as answer:
            return answer.status, json.loads(answer.read())["detail"]
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())["detail"]
    except urllib.error.URLError as e:
        return 0, str(e.reason)


def test_a_door_that_loses_the_cluster_says_so_in_readyz(gateway_config: GatewayConfig, tmp_path: Path,
                                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    """`gateway door` against a broker of its own, stopped and started again: /readyz turns 503 naming the
    cluster, then 200 again."""
    broker = LocalKafka(tmp_path_factory.mktemp("door-kafka")).start()
    door: GatewayDriver | None = None
    try:
        config = gateway_config.with_overrides(bootstrap_servers=broker.bootstrap_servers,
                                               front_door_address=f"127.0.0.1:{free_ports(4)}",
                                               metrics_address=f"127.0.0.1:{(metrics := free_port())}")
        door = GatewayDriver(config, tmp_path, "door", command="door").start()
        _wait_for(lambda: _readyz(metrics)[0] == 200, "the door to be ready", 120)
        broker.stop()
        _wait_for(lambda: _readyz(metrics)[0] == 503, "/readyz to fail", 60)
        assert "does not answer" in _readyz(metrics)[1]
        broker.start()
        _wait_for(lambda: _readyz(metrics)[0] == 200, "/readyz to pass again", 120)
        assert "not ready" in door.log() and "ready again" in door.log()
        assert door.stop() == 0, door.log()[-3000:]
    finally:
        if door is not None and door.proc is not None and door.proc.poll() is None:
            door.kill()
        broker.stop()
