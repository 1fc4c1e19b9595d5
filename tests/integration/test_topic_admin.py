"""Topics created, altered, grown and deleted through the front door, on a running gateway: with the admin
client (librdkafka) and Kafka's own `kafka-topics` and `kafka-configs` (TopicCommand, ConfigCommand 4.2.1),
with Kafka's errors for what Kafka refuses; a created topic is served and decided with its configs, a grown
one's new partitions take batches, a re-created one starts empty under a new topic id; and two stores creating
one name at once agree on one winner."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    ConsumerGroupTopicPartitions,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from embedded.local_kafka import run_kafka_tool
from kafka_cluster.registry_store import RegistryStore, TopicExists
from tests.integration.front_door_harness import FRONT_DOOR_TOPICS, RunningDoor, running_front_door
from tests.integration.test_front_door_groups import kafka_tool

pytestmark = pytest.mark.integration

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"


@pytest.fixture
def door(spark, gateway_config) -> Iterator[RunningDoor]:
    with running_front_door(spark, gateway_config) as running:
        yield running


def _produce(door: RunningDoor, topic: str, records: list[tuple[int, bytes]]) -> None:
    """Each (partition, value) produced with acks=all and acknowledged without an error."""
    producer = Producer({"bootstrap.servers": door.bootstrap, "acks": "all", "linger.ms": 0,
                         "message.timeout.ms": 120000})
    errors: list[str] = []
    for partition, value in records:
        producer.produce(topic, value=value, partition=partition,
                         on_delivery=lambda err, _msg: err is not None and errors.append(str(err)))
    assert producer.flush(150) == 0
    assert errors == []


def _read(door: RunningDoor, topic: str, partition: int, count: int, offset: int = 0) -> list[tuple[int, bytes, int]]:
    """(offset, value, timestamp type) of the first `count` records of a partition from `offset`."""
    consumer = Consumer({"bootstrap.servers": door.bootstrap, "group.id": f"read-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, offset)])
    got: list[tuple[int, bytes, int]] = []
    try:
        for _ in range(600):
            if len(got) >= count:
                break
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append((msg.offset(), msg.value(), msg.timestamp()[0]))
    finally:
        consumer.close()
    return got


def _error(future: object) -> str:
    with pytest.raises(Exception) as e:  # noqa: PT011 - the admin client's KafkaException; its text is asserted
        future.result(timeout=60)  # type: ignore[attr-defined]
    return str(e.value)


def test_a_topic_created_altered_grown_deleted_and_re_created_through_the_door(door: RunningDoor) -> None:
    admin = AdminClient({"bootstrap.servers": door.bootstrap})
    name = "made"
    created = admin.create_topics([NewTopic(name, 3, 1, config={"message.timestamp.type": "LogAppendTime",
                                                                 "min.insync.replicas": "1"})])
    assert created[name].result(timeout=60) is None
    # Kafka's refusals, each with its error
    assert "TOPIC_ALREADY_EXISTS" in _error(admin.create_topics([NewTopic(name, 1, 1)])[name])
    assert "code=TOPIC_EXCEPTION" in _error(admin.create_topics([NewTopic("bad name!", 1, 1)])["bad name!"])
    assert "INVALID_CONFIG" in _error(admin.create_topics([NewTopic("cfg", 1, 1, config={"retention.ms": "x"})])["cfg"])
    assert "INVALID_REPLICATION_FACTOR" in _error(admin.create_topics([NewTopic("rf", 1, 9)])["rf"])
    assert admin.create_topics([NewTopic("dry", 2, 1)], validate_only=True)["dry"].result(timeout=60) is None
    listed = admin.list_topics(timeout=30).topics
    assert "dry" not in listed and len(listed[name].partitions) == 3
    first_id = admin.describe_topics(TopicCollection([name]))[name].result(timeout=60).topic_id

    # served and decided with its configs: LogAppendTime stamps
    _produce(door, name, [(p, f"v{p}".encode()) for p in range(3)])
    assert [(o, v, t) for o, v, t in _read(door, name, 1, 1)] == [(0, b"v1", TIMESTAMP_LOG_APPEND_TIME)]

    # configs altered, shown with their source; a value Kafka refuses is INVALID_CONFIG
    alter = ConfigResource("topic", name, incremental_configs=[
        ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)])
    assert next(iter(admin.incremental_alter_configs([alter]).values())).result(timeout=60) is None
    described = next(iter(admin.describe_configs([ConfigResource("topic", name)]).values())).result(timeout=60)
    assert (described["retention.ms"].value, described["retention.ms"].source) == \
        ("86400000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert described["message.timestamp.type"].value == "LogAppendTime"  # kept by the incremental change
    bad = ConfigResource("topic", name, incremental_configs=[
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])
    assert "INVALID_CONFIG" in _error(next(iter(admin.incremental_alter_configs([bad]).values())))

    # grown: the new partitions take batches
    assert admin.create_partitions([NewPartitions(name, 5)])[name].result(timeout=60) is None
    assert "INVALID_PARTITIONS" in _error(admin.create_partitions([NewPartitions(name, 4)])[name])
    _produce(door, name, [(4, b"grown")])
    assert [v for _, v, _ in _read(door, name, 4, 1)] == [b"grown"]

    # deleted, then re-created: a new id, and nothing of the old topic in it
    assert admin.delete_topics([name])[name].result(timeout=60) is None
    assert name not in admin.list_topics(timeout=30).topics
    assert "UNKNOWN_TOPIC_OR_PART" in _error(admin.delete_topics([name])[name])
    assert admin.create_topics([NewTopic(name, 2, 1)])[name].result(timeout=60) is None
    assert admin.describe_topics(TopicCollection([name]))[name].result(timeout=60).topic_id != first_id
    _produce(door, name, [(1, b"fresh")])
    assert [(o, v) for o, v, _ in _read(door, name, 1, 1)] == [(0, b"fresh")]
    assert not any(p.name.startswith(f"{name}-") and "delete" in p.name for p in door.segments_root.iterdir())


def test_kafka_topics_and_kafka_configs_manage_topics_at_the_door(door: RunningDoor) -> None:
    server = ("--bootstrap-server", door.bootstrap)
    name = "cli"
    made = kafka_tool(TOPIC_COMMAND, *server, "--create", "--topic", name, "--partitions", "2",
                      "--replication-factor", "1", "--config", "retention.ms=3600000")
    assert made.returncode == 0 and f"Created topic {name}." in made.stdout, made.stdout + made.stderr[-2000:]
    grown = kafka_tool(TOPIC_COMMAND, *server, "--alter", "--topic", name, "--partitions", "4")
    assert grown.returncode == 0, grown.stderr[-2000:]
    window = run_kafka_tool(CONFIG_COMMAND, [*server, "--alter", "--entity-type", "topics", "--entity-name", name,
                                             "--add-config", "message.timestamp.after.max.ms=5000"])
    assert window.returncode == 0, window.stderr[-2000:]
    shown = kafka_tool(TOPIC_COMMAND, *server, "--describe", "--topic", name)
    assert "PartitionCount: 4" in shown.stdout and "message.timestamp.after.max.ms=5000" in shown.stdout, shown.stdout
    assert door.registry.current().topics[name].message_timestamp_after_max_ms == 5000
    gone = kafka_tool(TOPIC_COMMAND, *server, "--delete", "--topic", name)
    assert gone.returncode == 0, gone.stderr[-2000:]
    assert name not in door.registry.current()


def test_two_stores_creating_one_topic_at_once_agree_on_one(door: RunningDoor) -> None:
    config = door.config
    stores = [RegistryStore(config.cluster, config.registry_topic_name) for _ in range(2)]
    outcomes: list[object] = [None, None]
    try:
        for store in stores:
            store.load()
            store.start()
        start = threading.Barrier(2)

        def create(i: int) -> None:
            start.wait()
            try:
                outcomes[i] = stores[i].create("raced", 1, {})
            except TopicExists as e:
                outcomes[i] = e

        threads = [threading.Thread(target=create, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert sorted(type(o).__name__ for o in outcomes) == ["TopicExists", "TopicSpec"]
        winner = next(o for o in outcomes if not isinstance(o, TopicExists))
        ids = {str(s.current().topics["raced"].id) for s in stores}
        assert ids == {winner.topic_id}  # type: ignore[attr-defined]
    finally:
        for store in stores:
            store.close()


DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def test_delete_records_and_offset_delete_as_kafkas_tools_ask(door: RunningDoor, tmp_path) -> None:
    admin = AdminClient({"bootstrap.servers": door.bootstrap})
    name = "purged"
    assert admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=60) is None
    _produce(door, name, [(0, b"r%d" % i) for i in range(6)])
    # kafka-delete-records.sh: the log start offset moves to 4, reads below it are out of range
    offsets = tmp_path / "delete.json"
    offsets.write_text(json.dumps({"version": 1, "partitions": [{"topic": name, "partition": 0, "offset": 4}]}))
    done = kafka_tool(DELETE_RECORDS, "--bootstrap-server", door.bootstrap, "--offset-json-file", str(offsets))
    assert done.returncode == 0 and "low_watermark: 4" in done.stdout, done.stdout + done.stderr[-2000:]
    low, high = Consumer({"bootstrap.servers": door.bootstrap, "group.id": "wm"}).get_watermark_offsets(
        TopicPartition(name, 0), timeout=30)
    assert (low, high) == (4, 6)
    assert [v for _, v, _ in _read(door, name, 0, 2, offset=4)] == [b"r4", b"r5"]  # from the log start on
    too_far = admin.delete_records([TopicPartition(name, 0, 99)])
    assert "OFFSET_OUT_OF_RANGE" in _error(next(iter(too_far.values())))

    # kafka-consumer-groups.sh --delete-offsets: an empty group's offsets of the topic go
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": door.bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(name, 0, 5)], asynchronous=False)
    consumer.close()
    deleted = kafka_tool(CONSUMER_GROUPS, "--bootstrap-server", door.bootstrap, "--delete-offsets", "--group", group,
                         "--topic", name)
    assert deleted.returncode == 0 and "Successful" in deleted.stdout, deleted.stdout + deleted.stderr[-2000:]
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(name, 0)])])
    assert next(iter(listed.values())).result(timeout=30).topic_partitions[0].offset < 0


def test_auto_create_topics_enable_creates_a_produced_topic_with_num_partitions(spark, gateway_config) -> None:
    topics = {**FRONT_DOOR_TOPICS, "defaults": {**FRONT_DOOR_TOPICS["defaults"], "auto.create.topics.enable": "true",
                                                "num.partitions": "3"}}
    with running_front_door(spark, gateway_config, topics=topics) as door:
        _produce(door, "auto-made", [(0, b"first")])  # librdkafka's Metadata allows auto-creation
        config = door.registry.current().topics["auto-made"]
        assert config.partitions == 3
        assert [v for _, v, _ in _read(door, "auto-made", 0, 1)] == [b"first"]
        consumer = Consumer({"bootstrap.servers": door.bootstrap, "group.id": "meta",
                             "allow.auto.create.topics": False})
        try:  # a client that does not allow it creates nothing
            assert consumer.list_topics("never-made", timeout=30).topics["never-made"].error is not None
        finally:
            consumer.close()
        assert "never-made" not in door.registry.current()


def test_a_topic_deleted_under_load_stops_nothing_else(door: RunningDoor) -> None:
    admin = AdminClient({"bootstrap.servers": door.bootstrap})
    assert admin.create_topics([NewTopic("doomed", 2, 1)])["doomed"].result(timeout=60) is None
    producer = Producer({"bootstrap.servers": door.bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 30000})
    outcomes: dict[str, list[str | None]] = {"ct": [], "doomed-before": [], "doomed-after": []}

    def send(topic: str, what: str, count: int) -> None:
        for i in range(count):
            producer.produce(topic, value=b"%d" % i, partition=i % 2, on_delivery=lambda err, _m, what=what:
                             outcomes[what].append(None if err is None else err.name()))

    send("ct", "ct", 40)
    send("doomed", "doomed-before", 40)
    assert producer.flush(120) == 0
    assert admin.delete_topics(["doomed"])["doomed"].result(timeout=60) is None
    send("ct", "ct", 40)
    send("doomed", "doomed-after", 10)
    assert producer.flush(120) == 0
    # what was acknowledged before the delete was acknowledged; the other topic's load goes on untouched; a batch
    # for the deleted topic gets an error, none is left unanswered
    assert outcomes["ct"] == [None] * 80 and outcomes["doomed-before"] == [None] * 40
    assert len(outcomes["doomed-after"]) == 10 and all(e is not None for e in outcomes["doomed-after"])
    consumer = Consumer({"bootstrap.servers": door.bootstrap, "group.id": "wm"})
    try:
        ends = [consumer.get_watermark_offsets(TopicPartition("ct", p), timeout=30)[1] for p in (0, 1)]
    finally:
        consumer.close()
    assert sum(ends) == 80
