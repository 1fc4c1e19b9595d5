"""Test-side I/O with the gateway's Kafka topics: produce raw batches to the ingress topic, read
responses and dead letters back. Real confluent-kafka clients against the real broker."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Consumer, Producer, TopicPartition

from contract.limits import IngressLimits
from contract.responses import decode_response
from kafka_cluster.admin import create_topics, watermarks
from streaming.config import GatewayConfig
from streaming.query import topic_specs


def create_gateway_topics(config: GatewayConfig) -> None:
    create_topics(config.cluster, topic_specs(config))


@dataclass(frozen=True)
class SentBatch:
    request_id: str
    topic: str
    partition: int
    batch: bytes
    produced_at_ms: int


def produce_batches(config: GatewayConfig, batches: list[tuple[str, int, bytes]], acks: str | None = None) -> list[SentBatch]:
    # sized from the front door's request limit alone: a producer to the ingress topic does not read the
    # registry, which a test may have made invalid on purpose (the gateway keeps its last good one)
    limits = IngressLimits(config.front_door_max_request_bytes)
    p = Producer(config.cluster.client({"message.max.bytes": limits.ingress_message_bytes, "enable.idempotence": True}))
    sent = []
    for topic, partition, batch in batches:
        rid = uuid.uuid4().hex
        headers = [("gw.topic", topic.encode()), ("gw.partition", str(partition).encode()), ("gw.request.id", rid.encode()),
                   ("gw.client.id", b"tests")]
        if acks is not None:
            headers.append(("gw.acks", acks.encode()))
        sent.append(SentBatch(rid, topic, partition, bytes(batch), int(time.time() * 1000)))
        p.produce(config.ingress_topic, key=f"{topic}/{partition}".encode(), value=bytes(batch), headers=headers)
    assert p.flush(60) == 0
    return sent


def read_all(config: GatewayConfig, topic: str, timeout_s: float = 60.0) -> list:
    """Every message of `topic` up to its current end offsets. Use after the query has finished
    (available-now trigger): what the gateway published is all there, so this reads a known end."""
    c = Consumer(config.cluster.client({"group.id": config.cluster.group_id("test-read"), "enable.auto.commit": False,
                                        "auto.offset.reset": "earliest"}))
    meta = c.list_topics(topic, timeout=10)
    partitions = list(meta.topics[topic].partitions)
    ends = {p: watermarks(c, topic, p, 30)[1] for p in partitions}
    c.assign([TopicPartition(topic, p, 0) for p in partitions if ends[p] > 0])
    out = []
    remaining = {p: e for p, e in ends.items() if e > 0}
    deadline = time.monotonic() + timeout_s
    while remaining and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        out.append(m)
        if m.offset() + 1 >= remaining.get(m.partition(), 0):
            remaining.pop(m.partition(), None)
    c.close()
    assert not remaining, f"could not read {topic} to its end: {remaining}"
    return out


def read_responses(config: GatewayConfig) -> list[dict]:
    return [decode_response(m.value()) for m in read_all(config, config.response_topic)]
