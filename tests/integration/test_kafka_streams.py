"""Kafka Streams 4.2.1, unchanged, through the front door: a word count (`java/StreamsWordCount.java`) with
`processing.guarantee=at_least_once` joins its group through the door, creates its repartition and changelog
topics itself (CreateTopics) and writes the right counts. Closed gracefully and started again on an empty
state directory, it restores its store from the changelog through the door and the counts carry on from
there, none counted twice. Its purges of the repartition topic (DeleteRecords) move the topic's log start. With
`exactly_once_v2` (transactions with their consumer offsets), killed and started again, its counts are exact."""

from __future__ import annotations

import re
import struct
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.front_door_harness import FRONT_DOOR_TOPICS, RunningDoor, running_front_door
from tests.integration.polling import until
from tests.integration.streams_app import WordCountApp, compile_word_count

pytestmark = pytest.mark.integration

INPUT, OUTPUT, PARTITIONS = "text", "word-counts", 2
TOPICS = {**FRONT_DOOR_TOPICS, "topics": {**FRONT_DOOR_TOPICS["topics"], INPUT: {"partitions": PARTITIONS},
                                          OUTPUT: {"partitions": PARTITIONS}}}
WORDS = ("kafka", "spark", "door", "gateway", "stream", "count", "topic", "record")
# at_least_once is Streams' default; commits every 500 ms (default 30 s) and no record cache, so every count
# reaches the output topic soon after its line. replication.factor -1 (Streams' default): the broker's (the
# door's) default, one copy. Streams purges the repartition topic's consumed records (DeleteRecords) every 30 s by
# default; every 500 ms here, so the test sees it.
SETTINGS = ("processing.guarantee=at_least_once", "replication.factor=-1", "commit.interval.ms=500",
            "statestore.cache.max.bytes=0", "repartition.purge.interval.ms=500")
# StoreChangelogReader, INFO, when a store's changelog has been read back into it
RESTORED = re.compile(r"Finished restoring changelog (\S+) to store counts with a total number of (\d+) records")


@pytest.fixture
def door(spark, gateway_config) -> Iterator[RunningDoor]:
    with running_front_door(spark, gateway_config, topics=TOPICS) as running:
        yield running


@pytest.fixture(scope="module")
def word_count(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_word_count(tmp_path_factory.mktemp("word-count"))


def _sentences(first: int, count: int) -> list[str]:
    """Lines of a few words each, some repeated within a line, in mixed case and punctuation."""
    return [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(1 + i % 5)).capitalize() + "."
            for i in range(first, first + count)]


def _expected(lines: list[str]) -> Counter[str]:
    return Counter(w for line in lines for w in re.split(r"\W+", line.lower()) if w)


def _produce(door: RunningDoor, lines: list[str]) -> None:
    producer = Producer({"bootstrap.servers": door.bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 120000})
    errors: list[str] = []
    for line in lines:
        producer.produce(INPUT, value=line.encode(),
                         on_delivery=lambda err, _msg: err is not None and errors.append(str(err)))
    assert producer.flush(150) == 0
    assert errors == []


class CountsReader:
    """The output topic read through the door from the start: the latest count of each word."""

    def __init__(self, door: RunningDoor, isolation: str = "read_uncommitted") -> None:
        self.consumer = Consumer({"bootstrap.servers": door.bootstrap, "group.id": f"read-{uuid.uuid4().hex[:8]}",
                                  "enable.auto.commit": False, "isolation.level": isolation})
        self.consumer.assign([TopicPartition(OUTPUT, p, 0) for p in range(PARTITIONS)])
        self.latest: dict[str, int] = {}
        self.max_seen: dict[str, int] = {}

    def poll(self) -> dict[str, int]:
        for msg in self.consumer.consume(500, timeout=0.2):
            assert msg.error() is None, msg.error()
            (count,) = struct.unpack(">q", msg.value())  # Serdes.Long: 8 bytes, big-endian
            word = msg.key().decode()
            self.latest[word] = count
            self.max_seen[word] = max(count, self.max_seen.get(word, 0))
        return self.latest

    def low_watermarks(self, topic: str) -> list[int]:
        """Each partition's log start offset (ListOffsets, earliest) through the door."""
        return [self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[0] for p in range(PARTITIONS)]

    def close(self) -> None:
        self.consumer.close()


def test_a_streams_word_count_through_the_door_restores_its_changelog(door: RunningDoor, word_count: Path,
                                                                      tmp_path: Path) -> None:
    application_id = f"word-count-{uuid.uuid4().hex[:8]}"
    repartition, changelog = f"{application_id}-words-repartition", f"{application_id}-counts-changelog"
    written = _sentences(0, 120)
    _produce(door, written)
    reader = CountsReader(door)
    app = WordCountApp(word_count, tmp_path / "run-1", door.bootstrap, application_id, INPUT, OUTPUT,
                       tmp_path / "state-1", SETTINGS)
    try:
        app.wait_running()
        expected = _expected(written)
        until(lambda: reader.poll() == expected, "the counts of the first lines", timeout_s=180,
              detail=lambda: f"read {reader.latest}\nexpected {dict(expected)}\n{app.log_tail()}")

        # Streams' internal topics, made through the door's CreateTopics with Streams' configs
        repartition_spec, changelog_spec = door.registry.topic(repartition), door.registry.topic(changelog)
        assert repartition_spec is not None and changelog_spec is not None, (repartition_spec, changelog_spec)
        assert repartition_spec.partitions == changelog_spec.partitions == PARTITIONS
        assert changelog_spec.configs.get("cleanup.policy") == "compact", changelog_spec
        assert repartition_spec.configs.get("cleanup.policy") == "delete", repartition_spec
        # the records Streams has consumed from its repartition topic purged (DeleteRecords through the door)
        until(lambda: all(low > 0 for low in reader.low_watermarks(repartition)), "the repartition topic purged",
              timeout_s=120, detail=lambda: f"log start offsets {reader.low_watermarks(repartition)}\n{app.log_tail()}")
        app.stop()

        more = _sentences(120, 80)
        _produce(door, more)
        written += more
        # a new state directory: the store has nothing local and must be read back from its changelog
        app = WordCountApp(word_count, tmp_path / "run-2", door.bootstrap, application_id, INPUT, OUTPUT,
                           tmp_path / "state-2", SETTINGS)
        app.wait_running()
        expected = _expected(written)
        until(lambda: reader.poll() == expected, "the counts of all lines", timeout_s=180,
              detail=lambda: f"read {reader.latest}\nexpected {dict(expected)}\n{app.log_tail()}")
        restored = [(m[1], int(m[2])) for m in RESTORED.finditer(app.log_file.read_text())]
        assert {topic for topic, _ in restored} == {f"{changelog}-{p}" for p in range(PARTITIONS)}, restored
        assert sum(n for _, n in restored) > 0, restored
        app.stop()
    finally:
        app.kill()
        reader.close()


# exactly_once_v2: each task's output, changelog writes and input offsets in one transaction (AddOffsetsToTxn and
# TxnOffsetCommit at the door); its consumers read_committed
EXACTLY_ONCE = ("processing.guarantee=exactly_once_v2", *SETTINGS[1:])


def test_a_streams_word_count_exactly_once_through_a_kill(door: RunningDoor, word_count: Path, tmp_path: Path) -> None:
    """`exactly_once_v2`: killed (kill -9) with lines in flight and started again, the counts are exact — a
    count a transaction wrote and the killed instance did not commit is aborted, its input read again once."""
    application_id = f"word-count-eos-{uuid.uuid4().hex[:8]}"
    written = _sentences(0, 100)
    _produce(door, written)
    reader = CountsReader(door, isolation="read_committed")
    app = WordCountApp(word_count, tmp_path / "run-1", door.bootstrap, application_id, INPUT, OUTPUT,
                       tmp_path / "state-1", EXACTLY_ONCE)
    try:
        app.wait_running()
        expected = _expected(written)
        until(lambda: reader.poll() == expected, "the counts of the first lines", timeout_s=180,
              detail=lambda: f"read {reader.latest}\nexpected {dict(expected)}\n{app.log_tail()}")
        more = _sentences(100, 300)
        _produce(door, more)
        written += more
        app.kill()  # mid-stream: part of the new lines counted, part in an open transaction
        app = WordCountApp(word_count, tmp_path / "run-2", door.bootstrap, application_id, INPUT, OUTPUT,
                           tmp_path / "state-1", EXACTLY_ONCE)
        app.wait_running()
        expected = _expected(written)
        until(lambda: reader.poll() == expected, "the counts of all lines", timeout_s=240,
              detail=lambda: f"read {reader.latest}\nexpected {dict(expected)}\n{app.log_tail()}")
        # never more than the lines hold: no count went out twice
        assert all(count <= expected[word] for word, count in reader.max_seen.items()), reader.max_seen
        app.stop()
    finally:
        app.kill()
        reader.close()
