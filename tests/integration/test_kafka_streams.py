"""Kafka Streams 4.2.1, unchanged, through the front door: a word count (`java/StreamsWordCount.java`) with
`processing.guarantee=at_least_once` joins its group through the door, creates its repartition and changelog
topics itself (CreateTopics) and writes the right counts. Closed gracefully and started again on an empty
state directory, it restores its store from the changelog through the door and the counts carry on from
there, none counted twice. Its purges of the repartition topic (DeleteRecords) move the topic's log start. With
`exactly_once_v2` (transactions with their consumer offsets), killed and started again, its counts are exact."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.front_door_harness import FRONT_DOOR_TOPICS, RunningDoor, running_front_door
from tests.integration.polling import until
from tests.integration.streams_app import (
    INPUT,
    OUTPUT,
    PARTITIONS,
    CountsReader,
    WordCountApp,
    compile_word_count,
    expected_counts,
    produce_lines,
    sentences,
)

pytestmark = pytest.mark.integration

TOPICS = {**FRONT_DOOR_TOPICS, "topics": {**FRONT_DOOR_TOPICS["topics"], INPUT: {"partitions": PARTITIONS},
                                          OUTPUT: {"partitions": PARTITIONS}}}
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


def test_a_streams_word_count_through_the_door_restores_its_changelog(door: RunningDoor, word_count: Path,
                                                                      tmp_path: Path) -> None:
    application_id = f"word-count-{uuid.uuid4().hex[:8]}"
    repartition, changelog = f"{application_id}-words-repartition", f"{application_id}-counts-changelog"
    written = sentences(0, 120)
    produce_lines(door.bootstrap, written)
    reader = CountsReader(door.bootstrap)
    app = WordCountApp(word_count, tmp_path / "run-1", door.bootstrap, application_id, INPUT, OUTPUT,
                       tmp_path / "state-1", SETTINGS)
    try:
        app.wait_running()
        expected = expected_counts(written)
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

        more = sentences(120, 80)
        produce_lines(door.bootstrap, more)
        written += more
        # a new state directory: the store has nothing local and must be read back from its changelog
        app = WordCountApp(word_count, tmp_path / "run-2", door.bootstrap, application_id, INPUT, OUTPUT,
                           tmp_path / "state-2", SETTINGS)
        app.wait_running()
        expected = expected_counts(written)
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
    written = sentences(0, 100)
    produce_lines(door.bootstrap, written)
    reader = CountsReader(door.bootstrap, isolation="read_committed")
    app = WordCountApp(word_count, tmp_path / "run-1", door.bootstrap, application_id, INPUT, OUTPUT,
                       tmp_path / "state-1", EXACTLY_ONCE)
    try:
        app.wait_running()
        expected = expected_counts(written)
        until(lambda: reader.poll() == expected, "the counts of the first lines", timeout_s=180,
              detail=lambda: f"read {reader.latest}\nexpected {dict(expected)}\n{app.log_tail()}")
        more = sentences(100, 300)
        produce_lines(door.bootstrap, more)
        written += more
        app.kill()  # mid-stream: part of the new lines counted, part in an open transaction
        app = WordCountApp(word_count, tmp_path / "run-2", door.bootstrap, application_id, INPUT, OUTPUT,
                           tmp_path / "state-1", EXACTLY_ONCE)
        app.wait_running()
        expected = expected_counts(written)
        until(lambda: reader.poll() == expected, "the counts of all lines", timeout_s=240,
              detail=lambda: f"read {reader.latest}\nexpected {dict(expected)}\n{app.log_tail()}")
        # never more than the lines hold: no count went out twice
        assert all(count <= expected[word] for word, count in reader.max_seen.items()), reader.max_seen
        app.stop()
    finally:
        app.kill()
        reader.close()
