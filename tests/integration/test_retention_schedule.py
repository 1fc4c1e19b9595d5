"""Retention beside the real query: the schedule starts and stops with `start_gateway`'s query, a pass
deletes segments by `retention.ms` (`UnifiedLog.deleteRetentionMsBreachedSegments`), and the next produce response carries the log start
offset retention moved (docs/design.md: response topic `log_start_offset`), although the stage's state never saw it. The
storage the pipeline wrote is then read back with `read_segments` and compared with `log_reader.read`."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from sinks.segment_dataframe import read_segments
from storage.commit_record import read_commit
from storage.file_names import partition_dir, segment_bases
from storage.log_reader import EARLIEST_TIMESTAMP, offsets_for_times, read
from storage.retention import REASON_RETENTION_MS
from streaming.query import start_gateway
from streaming.retention_schedule import RetentionSchedule
from tests.integration.gateway_io import create_gateway_topics, produce_batches, read_responses

pytestmark = pytest.mark.integration

HOUR = 3600 * 1000
TOPICS = {
    "topics": {
        # segment.ms=1000: a batch whose CreateTime is > 1 s after the segment's first batch rolls
        "ret": {"partitions": 1, "configs": {"segment.ms": "1000", "retention.ms": str(24 * HOUR)}},
    },
}


def batch(timestamp: int, records: int = 3) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i in range(records):
        builder.append(i, timestamp=timestamp + i, key=b"k", value=f"v-{timestamp}-{i}".encode(), headers=[])
    return bytes(builder.build())


def run_available_now(spark, config) -> RetentionSchedule:
    query, sink = start_gateway(spark, config, available_now=True)
    query.awaitTermination()
    assert query.exception() is None
    schedule = sink.retention
    assert isinstance(schedule, RetentionSchedule)
    assert schedule.join(60), "the retention thread ends with its query"
    assert not schedule.running
    assert schedule.passes == 0, "no pass within an hour-long interval"
    return schedule


def test_retention_moves_the_log_start_offset_that_responses_report(spark, gateway_config, tmp_path):
    topics_file = tmp_path / "retention-topics.json"
    topics_file.write_text(json.dumps(TOPICS))
    config = replace(gateway_config, topics_file=str(topics_file), retention_check_interval_ms=HOUR)
    root = config.path(config.segments_root)
    create_gateway_topics(config)

    now = int(time.time() * 1000)
    ages = [40 * HOUR, 30 * HOUR, 20 * HOUR, HOUR]  # one segment each
    sent = produce_batches(config, [("ret", 0, batch(now - age)) for age in ages])
    schedule = run_available_now(spark, config)
    responses = {r["request_id"]: r for r in read_responses(config)}
    assert [(responses[s.request_id]["base_offset"], responses[s.request_id]["log_start_offset"]) for s in sent] == [
        (0, 0), (3, 0), (6, 0), (9, 0)
    ]
    d = partition_dir(root, "ret", 0)
    assert segment_bases(d) == [0, 3, 6, 9]

    # One scheduled pass (triggered here rather than waited for): segments older than retention.ms go.
    result = schedule.run_once()
    assert result.deleted_by_reason() == {REASON_RETENTION_MS: 2}
    assert schedule.deleted_segments == {("ret", REASON_RETENTION_MS): 2}
    assert segment_bases(d) == [6, 9]
    assert read_commit(d).log_start_offset == 6 == offsets_for_times(root, "ret", 0, EARLIEST_TIMESTAMP).offset

    # The stage's state still says log start offset 0; the response says what the storage holds.
    more = produce_batches(config, [("ret", 0, batch(now))])
    run_available_now(spark, config)
    response = {r["request_id"]: r for r in read_responses(config)}[more[0].request_id]
    assert (response["error_code"], response["base_offset"], response["log_start_offset"]) == (0, 12, 6)

    # What the pipeline wrote, read by Spark tasks, equals the consumer-view reader.
    rows = read_segments(spark, root, topics=["ret"]).collect()
    expected = read(root, "ret", 0, 6, 1000)
    assert [(r.offset, r.timestamp, r.create_time, r.log_append_time, bytes(r.value)) for r in rows] == [
        (r.offset, r.timestamp, r.create_time, r.log_append_time, r.value) for r in expected
    ]
    assert [r.offset for r in rows] == list(range(6, 15))
