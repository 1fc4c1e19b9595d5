"""`kafka_cluster.publisher.Publication` against the real broker: the produce responses go in one
`produce_batch` call, the dead letters (headers, a timestamp) one `produce` each, and both must land as
`produce` alone would put them — same partition per key, same bytes, nothing lost when the local queue
is full, a clear error for what the broker would never take."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

import kafka_cluster.publisher as kp
from embedded.local_kafka import LocalKafka
from kafka_cluster.admin import create_topics
from kafka_cluster.publisher import OutgoingMessage, Publication

MAX_BYTES = 1 << 20


def _read(bootstrap: str, topic: str, expected: int) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"test-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    partitions = list(c.list_topics(topic, timeout=10).topics[topic].partitions)
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    out: list = []
    for _ in range(200):
        if len(out) >= expected:
            break
        for m in c.consume(1000, timeout=0.5):
            assert m.error() is None, m.error()
            out.append(m)
    c.close()
    assert len(out) == expected, f"{topic}: read {len(out)} of {expected}"
    return out


@pytest.fixture
def topics(kafka: LocalKafka) -> Iterator[tuple[str, str]]:
    batch, single = f"pub-batch-{uuid.uuid4().hex[:8]}", f"pub-single-{uuid.uuid4().hex[:8]}"
    create_topics(kafka.cluster, [(batch, 4, {}), (single, 4, {})])
    yield batch, single


def test_batched_responses_land_where_produce_puts_them(kafka: LocalKafka, topics: tuple[str, str]) -> None:
    batched, single = topics
    messages = [OutgoingMessage(f"req-{i}".encode(), f"response {i}".encode() * (i % 7 + 1)) for i in range(500)]
    publication = Publication(kafka.cluster, MAX_BYTES)
    assert publication.send(batched, messages) == 500
    publication.finish()
    # the same producer, one produce() per message: the partitioner's answer for each key
    reference = Producer({"bootstrap.servers": kafka.bootstrap_servers, "enable.idempotence": True, "acks": "all"})
    for m in messages:
        reference.produce(single, key=m.key, value=m.value)
    assert reference.flush(30) == 0

    def by_key(topic: str) -> dict[bytes, tuple[int, bytes]]:
        return {m.key(): (m.partition(), m.value()) for m in _read(kafka.bootstrap_servers, topic, 500)}

    got, want = by_key(batched), by_key(single)
    assert got == want
    assert len({partition for partition, _ in got.values()}) == 4  # the keys spread: the check above means something
    # in the order sent, within each partition
    order = [int(m.key()[4:]) for m in _read(kafka.bootstrap_servers, batched, 500) if m.partition() == 0]
    assert order == sorted(order)


def test_dead_letters_keep_headers_and_timestamps_beside_batched_responses(
    kafka: LocalKafka, topics: tuple[str, str]
) -> None:
    topic, _ = topics
    letters = [OutgoingMessage(f"dl-{i}".encode(), b"batch", [("gw.error.code", str(i).encode())], 1_700_000_000_000 + i)
               for i in range(20)]
    responses = [OutgoingMessage(f"req-{i}".encode(), b"ok") for i in range(30)]
    mixed = [m for pair in zip(letters, responses, strict=False) for m in pair] + responses[20:]
    publication = Publication(kafka.cluster, MAX_BYTES)
    assert publication.send(topic, mixed) == 50
    publication.finish()
    read = {m.key(): m for m in _read(kafka.bootstrap_servers, topic, 50)}
    for i in range(20):
        m = read[f"dl-{i}".encode()]
        assert m.headers() == [("gw.error.code", str(i).encode())]
        assert m.timestamp()[1] == 1_700_000_000_000 + i
    for i in range(30):
        assert read[f"req-{i}".encode()].value() == b"ok"
        assert not read[f"req-{i}".encode()].headers()


def test_a_full_local_queue_waits_and_loses_nothing(
    kafka: LocalKafka, topics: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    topic, _ = topics
    small = Producer({"bootstrap.servers": kafka.bootstrap_servers, "enable.idempotence": True, "acks": "all",
                      "queue.buffering.max.messages": 16})
    monkeypatch.setitem(kp._producers, (kafka.bootstrap_servers, MAX_BYTES, kp.DEFAULT_PUBLISH_TIMEOUT_MS), small)
    messages = [OutgoingMessage(f"req-{i}".encode(), b"v" * 50) for i in range(400)]
    publication = Publication(kafka.cluster, MAX_BYTES)
    assert publication.send(topic, messages) == 400
    publication.finish()
    read = _read(kafka.bootstrap_servers, topic, 400)
    assert sorted(m.key() for m in read) == sorted(m.key for m in messages)


def test_a_message_over_the_producer_limit_is_a_clear_error(kafka: LocalKafka, topics: tuple[str, str]) -> None:
    topic, _ = topics
    publication = Publication(kafka.cluster, 10_000)
    with pytest.raises(KafkaException, match="MSG_SIZE_TOO_LARGE"):
        publication.send(topic, [OutgoingMessage(b"ok", b"small"), OutgoingMessage(b"big", b"x" * 20_000)])
