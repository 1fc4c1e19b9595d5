"""The clients' pure parts: Kafka's partitioner, the record accumulator (linger, batch size,
compression, idempotent sequences), RecordMetadata and error semantics from responses; and the
consumer over real segment files written by the gateway's own storage code (no Kafka, no Spark)."""

from __future__ import annotations

import itertools
from concurrent.futures import Future

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from clients.accumulator import IdempotenceState, PendingRecord, RecordAccumulator
from clients.consumer import GatewayConsumer, OffsetAndTimestamp, OffsetOutOfRangeError, TopicPartition
from clients.errors import PART_OF_INVALID_BATCH, error_for_record
from clients.partitioner import murmur2, partition_for_key
from clients.record_metadata import metadata_from_response
from storage.batch_appender import append_batches
from validators.append_result import Accepted, PartitionState
from validators.codec.compression import CompressionType
from validators.codec.record_batch import TimestampType, build_record_batch, decode_record_batch
from validators.log_validator import validate_and_assign
from validators.topic_config import TopicRegistry

NOW = 1_714_564_800_000


# ------------------------------------------------------------------------------------------ partitioner


def test_murmur2_matches_kafka_vectors_and_kafka_python() -> None:
    # Kafka's UtilsTest.testMurmur2
    vectors = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    for data, expected in vectors.items():
        assert murmur2(data) == expected, data
    for n in range(0, 40):
        data = bytes((i * 37 + n) & 0xFF for i in range(n))
        assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(data)
    assert all(0 <= partition_for_key(f"k{i}".encode(), 7) < 7 for i in range(100))
    assert partition_for_key(b"21", 10) == (-973932308 & 0x7FFFFFFF) % 10


# ------------------------------------------------------------------------------------------ accumulator


def pending(ts: int = NOW) -> PendingRecord:
    return PendingRecord(Future(), None, ts, 1, 1)


def accumulator(batch_size: int = 16384, linger_ms: int = 5, compression: CompressionType = CompressionType.NONE,
                idempotence: IdempotenceState | None = None) -> RecordAccumulator:
    ids = itertools.count()
    return RecordAccumulator(batch_size, linger_ms, compression, idempotence, lambda: f"req-{next(ids)}")


def test_linger_holds_records_until_it_passes_then_one_batch_per_partition() -> None:
    acc = accumulator(linger_ms=50)
    for i in range(3):
        acc.append("t", 0, NOW + i, b"k", f"v{i}".encode(), (), pending(), now_ms=1000 + i)
    acc.append("t", 1, NOW, None, b"x", (("h", b"1"),), pending(), now_ms=1010)
    assert len(acc) == 4 and acc.next_deadline_ms() == 1050
    assert acc.drain(now_ms=1049) == []
    (b0,) = acc.drain(now_ms=1050)
    assert (b0.topic, b0.partition, b0.record_count, b0.key, b0.request_id) == ("t", 0, 3, b"t/0", "req-0")
    decoded = decode_record_batch(b0.value)
    assert decoded.is_valid and decoded.header.base_offset == 0
    assert [(r.offset, r.timestamp, r.value) for r in decoded.records] == [(0, NOW, b"v0"), (1, NOW + 1, b"v1"),
                                                                          (2, NOW + 2, b"v2")]
    assert decoded.header.producer_id == -1 and decoded.header.base_sequence == -1
    (b1,) = acc.drain(now_ms=1060)
    assert decode_record_batch(b1.value).records[0].headers == (("h", b"1"),)
    assert len(acc) == 0 and acc.next_deadline_ms() is None


def test_batch_size_closes_batches_and_a_big_record_gets_its_own() -> None:
    acc = accumulator(batch_size=300, linger_ms=10_000)
    full = False
    for _ in range(10):
        full = acc.append("t", 0, NOW, None, bytes(50), (), pending(), now_ms=1000) or full
    assert full  # batches filled up before linger
    acc.append("t", 0, NOW, None, bytes(1000), (), pending(), now_ms=1000)
    batches = acc.drain(now_ms=1000, force=True)
    sizes = [len(b.value) for b in batches]
    counts = [b.record_count for b in batches]
    assert sum(counts) == 11 and counts[-1] == 1 and sizes[-1] > 1000
    assert all(s <= 300 for s in sizes[:-1])


@pytest.mark.parametrize("codec", list(CompressionType))
def test_compression(codec: CompressionType) -> None:
    acc = accumulator(compression=codec)
    for i in range(20):
        acc.append("t", 0, NOW + i, None, b"abc" * 50, (), pending(), now_ms=0)
    (b,) = acc.drain(0, force=True)
    decoded = decode_record_batch(b.value)
    assert decoded.compression is codec and decoded.is_valid and len(decoded.records) == 20


def test_idempotent_sequences_per_partition_and_recovery_after_rejection() -> None:
    state = IdempotenceState(producer_id=4242, epoch=3)
    acc = accumulator(idempotence=state)
    for _ in range(3):
        acc.append("t", 0, NOW, None, b"v", (), pending(), 0)
    acc.append("t", 1, NOW, None, b"v", (), pending(), 0)
    first = {(b.topic, b.partition): b for b in acc.drain(0, force=True)}
    for _ in range(2):
        acc.append("t", 0, NOW, None, b"v", (), pending(), 0)
    (second,) = acc.drain(0, force=True)
    h = decode_record_batch(first[("t", 0)].value).header
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (4242, 3, 0)
    assert decode_record_batch(first[("t", 1)].value).header.base_sequence == 0
    assert (second.base_sequence, state.next_sequence("t", 0)) == (3, 5)
    # the latest batch of a partition is rejected: its numbers are given back, no gap
    state.on_rejected(second)
    assert state.next_sequence("t", 0) == 3 and state.epoch == 3
    for _ in range(2):
        acc.append("t", 0, NOW, None, b"v", (), pending(), 0)
    (third,) = acc.drain(0, force=True)
    assert third.base_sequence == 3
    # an earlier one is rejected while a later one is in flight: the epoch is bumped, sequences restart
    state.on_rejected(first[("t", 0)])
    assert state.epoch == 4 and state.next_sequence("t", 0) == 0 and state.next_sequence("t", 1) == 0
    state.on_rejected(third)  # of the old epoch: already recovered
    assert state.epoch == 4
    assert state.take("t", 0, 1) == (4, 0)


def test_sequence_errors_and_expiry_bump_the_epoch() -> None:
    state = IdempotenceState(producer_id=9)
    acc = accumulator(idempotence=state)
    acc.append("t", 0, NOW, None, b"v", (), pending(), 0)
    (b,) = acc.drain(0, force=True)
    state.on_rejected(b, "OUT_OF_ORDER_SEQUENCE_NUMBER")
    assert state.epoch == 1 and state.next_sequence("t", 0) == 0
    acc.append("t", 0, NOW, None, b"v", (), pending(), 0)
    (b,) = acc.drain(0, force=True)
    state.on_rejected(b, "REQUEST_TIMED_OUT")  # perhaps appended: its numbers are never reused
    assert state.epoch == 2
    state.epoch = 32767
    acc.append("t", 0, NOW, None, b"v", (), pending(), 0)
    (b,) = acc.drain(0, force=True)
    state.on_rejected(b, "OUT_OF_ORDER_SEQUENCE_NUMBER")  # epoch exhausted: a new producer id
    assert state.epoch == 0 and state.producer_id != 9


def test_sequence_wraps_like_kafka() -> None:
    state = IdempotenceState(1)
    state._next[("t", 0)] = (1 << 31) - 2
    assert state.take("t", 0, 5) == (0, (1 << 31) - 2)
    assert state.next_sequence("t", 0) == 3


# ------------------------------------------------------------------------------------------ metadata, errors


def response(**kw) -> dict:
    base = {"request_id": "r", "client_id": "c", "topic": "t", "partition": 1, "error_code": 0, "error_name": None,
            "error_message": None, "base_offset": 40, "log_append_time_ms": -1, "log_start_offset": 0,
            "record_errors": [], "record_count": 3, "ingress_partition": 0, "ingress_offset": 9}
    base.update(kw)
    return base


def test_record_metadata_follows_kip32() -> None:
    md = metadata_from_response(response(), 2, create_time=NOW - 5, key_size=1, value_size=3, topic="t", partition=1)
    assert (md.offset, md.timestamp, md.timestamp_type) == (42, NOW - 5, TimestampType.CREATE_TIME)
    assert md.has_offset() and md.has_timestamp() and md.serialized_value_size == 3
    lat = metadata_from_response(response(log_append_time_ms=NOW), 0, NOW - 86_400_000, 1, 1, "t", 1)
    assert (lat.offset, lat.timestamp, lat.timestamp_type) == (40, NOW, TimestampType.LOG_APPEND_TIME)
    unknown = metadata_from_response(response(base_offset=-1), 2, NOW, 1, 1, "t", 1)
    assert unknown.offset == -1 and not unknown.has_offset()


def test_errors_carry_kafka_names_messages_and_record_errors() -> None:
    r = response(error_code=32, error_name="INVALID_TIMESTAMP", base_offset=-1,
                 error_message="One or more records have been rejected due to invalid timestamp",
                 record_errors=[{"batch_index": 1, "message": "Timestamp 9 of message with offset 1 is out of range."}])
    own = error_for_record(r, 1)
    assert (own.error_name, own.error_code, own.exception_name) == ("INVALID_TIMESTAMP", 32, "InvalidTimestampException")
    assert own.message.startswith("Timestamp 9") and own.record_error.batch_index == 1
    assert own.batch_message == "One or more records have been rejected due to invalid timestamp"
    other = error_for_record(r, 0)
    assert other.error_name == "INVALID_TIMESTAMP" and other.message == PART_OF_INVALID_BATCH
    assert other.exception_name == "KafkaException" and [e.batch_index for e in other.record_errors] == [1]
    plain = error_for_record(response(error_code=3, error_name=None, error_message=None, base_offset=-1), 0)
    assert plain.error_name == "UNKNOWN_TOPIC_OR_PARTITION" and plain.message == "This server does not host this topic-partition."
    assert plain.retriable and plain.exception_name == "UnknownTopicOrPartitionException"
    many = error_for_record(response(error_code=87, error_name="INVALID_RECORD", error_message="x",
                                     record_errors=[{"batch_index": 0, "message": "a"}, {"batch_index": 1, "message": "b"}]), 1)
    assert many.exception_name == "InvalidRecordException" and many.message == "b"


# ------------------------------------------------------------------------------------------ consumer


REGISTRY = TopicRegistry.from_json({"topics": {
    "ct": {"partitions": 1, "configs": {"message.timestamp.type": "CreateTime"}},
    "lat": {"partitions": 1, "configs": {"message.timestamp.type": "LogAppendTime"}},
}})


def append(root, topic: str, batches: list[list[int]], now_ms: int, batch_id: int, state: PartitionState) -> PartitionState:
    """Decide each batch as the gateway does (the real validator) and store it with the real log code."""
    stored = []
    for timestamps in batches:
        raw = build_record_batch([(ts, f"k{ts}".encode(), f"v{ts}".encode()) for ts in timestamps])
        result = validate_and_assign(raw, topic, 0, REGISTRY.get(topic), state, now_ms)
        assert isinstance(result, Accepted), result
        state = result.state
        stored.append((result.base_offset, result.last_offset, result.records, result.append_time_ms))
    append_batches(root, topic, 0, batch_id, stored, REGISTRY.get(topic))
    return state


def test_consumer_reads_both_timestamps_with_kip32_rules(tmp_path) -> None:
    ct = TopicPartition("ct", 0)
    lat = TopicPartition("lat", 0)
    s_ct = append(tmp_path, "ct", [[NOW - 3000, NOW - 1000], [NOW - 2000]], NOW, 0, PartitionState())
    s_lat = append(tmp_path, "lat", [[NOW - 86_400_000, NOW - 1]], NOW, 0, PartitionState())
    append(tmp_path, "ct", [[NOW + 500]], NOW + 10_000, 1, s_ct)
    append(tmp_path, "lat", [[NOW]], NOW + 10_000, 1, s_lat)

    consumer = GatewayConsumer(tmp_path)
    consumer.assign([ct, lat, TopicPartition("ct-never", 0)])
    records = consumer.poll()
    by_tp = {tp: [r for r in records if r.topic_partition == tp] for tp in (ct, lat)}
    assert [r.offset for r in by_tp[ct]] == [0, 1, 2, 3]
    assert [(r.timestamp, r.timestamp_type) for r in by_tp[ct]] == [
        (NOW - 3000, TimestampType.CREATE_TIME), (NOW - 1000, TimestampType.CREATE_TIME),
        (NOW - 2000, TimestampType.CREATE_TIME), (NOW + 500, TimestampType.CREATE_TIME)]
    assert [r.create_time for r in by_tp[ct]] == [r.timestamp for r in by_tp[ct]]
    assert [r.log_append_time for r in by_tp[ct]] == [NOW, NOW, NOW, NOW + 10_000]  # the append-time index
    assert [(r.timestamp, r.timestamp_type, r.create_time) for r in by_tp[lat]] == [
        (NOW, TimestampType.LOG_APPEND_TIME, NOW - 86_400_000), (NOW, TimestampType.LOG_APPEND_TIME, NOW - 1),
        (NOW + 10_000, TimestampType.LOG_APPEND_TIME, NOW)]
    assert all(r.log_append_time == r.timestamp for r in by_tp[lat])
    assert by_tp[ct][0].key == f"k{NOW - 3000}".encode() and by_tp[ct][0].serialized_value_size == len(f"v{NOW - 3000}")
    assert consumer.poll() == [] and consumer.position(ct) == 4 and consumer.position(lat) == 3

    # seek, max records, offsets_for_times (first offset whose timestamp >= t), begin/end offsets
    consumer.seek(ct, 1)
    assert [r.offset for r in consumer.poll(max_records=2)] == [1, 2]
    assert consumer.offsets_for_times({ct: NOW - 1500, lat: NOW + 1}) == {
        ct: OffsetAndTimestamp(1, NOW - 1000, 0), lat: OffsetAndTimestamp(2, NOW + 10_000, 0)}
    assert consumer.offsets_for_times({ct: NOW + 501}) == {ct: None}
    assert consumer.beginning_offsets([ct]) == {ct: 0} and consumer.end_offsets([ct, lat]) == {ct: 4, lat: 3}
    consumer.seek_to_beginning(lat)
    assert consumer.position(lat) == 0
    consumer.seek_to_end()
    assert consumer.poll(timeout_s=0.1) == []
    with pytest.raises(ValueError, match="negative"):
        consumer.offsets_for_times({ct: -5})
    with pytest.raises(ValueError, match="No current assignment"):
        consumer.seek(TopicPartition("other", 0), 0)
    consumer.close()


def test_consumer_offset_reset_policies(tmp_path) -> None:
    ct = TopicPartition("ct", 0)
    append(tmp_path, "ct", [[NOW], [NOW]], NOW, 0, PartitionState())
    latest = GatewayConsumer(tmp_path, auto_offset_reset="latest")
    latest.assign([ct])
    assert latest.position(ct) == 2 and latest.poll() == []
    strict = GatewayConsumer(tmp_path, auto_offset_reset="none")
    strict.assign([ct])
    strict.seek(ct, 99)
    with pytest.raises(OffsetOutOfRangeError):
        strict.poll()
    earliest = GatewayConsumer(tmp_path)
    earliest.assign([ct])
    earliest.seek(ct, 99)
    assert [r.offset for r in earliest.poll()] == [0, 1]
