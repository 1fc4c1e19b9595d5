"""The append decision (Kafka's produce path; LogAppendTime, KIP-32, docs/design.md: what the stage decides).

Batches are built with kafka-python's codec (an independent implementation) or byte by byte with the
small encoder below, so the validator is never checked against its own codec. The ports of Kafka's
own tests are named after them (Kafka's `LogValidatorTest` and `ProduceRequestTest`).
"""

from __future__ import annotations

import logging
import struct
import zlib

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from validators.append_result import GATEWAY_LEADER_EPOCH, Accepted, PartitionState, RecordError, Rejected
from validators.codec.compression import compress
from validators.errors import Errors
from validators.log_validator import validate_and_assign
from validators.producer_state import (
    NO_PRODUCERS,
    producers_from_state,
    producers_to_json,
    producers_to_state,
)
from validators.timestamps import LONG_MAX, LONG_MIN
from validators.topic_config import TopicConfig, topic_config

NOW = 1_700_000_000_000
TP = "t-0"
HOUR = 3_600_000
DAY = 24 * HOUR
NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
VALUES = [b"hello", b"there", b"beautiful"]  # LogValidatorTest's "3 recs"
PAD = b"-compressible-" * 8  # kafka-python sends uncompressed when compression does not help


# ---- building batches (independent of validators' codec) ---------------------------------------------------


def kp(
    records: list[tuple],
    compression: int = NONE,
    *,
    producer: tuple[int, int, int] | None = None,
    transactional: bool = False,
) -> bytes:
    """A producer's v2 batch from kafka-python: records are (timestamp, key, value[, headers])."""
    b = DefaultRecordBatchBuilder(2, compression, transactional, -1, -1, -1, 1 << 30)
    if producer is not None:
        b.set_producer_state(producer[0], producer[1], producer[2], transactional)
    for i, r in enumerate(records):
        assert b.append(i, timestamp=r[0], key=r[1], value=r[2], headers=list(r[3]) if len(r) > 3 else []) is not None
    out = bytes(b.build())
    assert out[22] & 0x07 == compression, "kafka-python fell back to uncompressed: use compressible values"
    return out


def three(ts: list[int] | int, compression: int = NONE, **kw: object) -> bytes:
    stamps = ts if isinstance(ts, list) else [ts] * 3
    pad = PAD if compression else b""
    return kp([(t, None, v + pad) for t, v in zip(stamps, VALUES, strict=True)], compression, **kw)  # type: ignore[arg-type]


def fix_crc(data: bytes | bytearray) -> bytes:
    out = bytearray(data)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def patch(data: bytes, offset: int, fmt: str, value: int, *, crc: bool = True) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return fix_crc(out) if crc else bytes(out)


def uvarint(u: int) -> bytes:
    out = bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(v: int) -> bytes:
    return uvarint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)


def raw_record(offset_delta: int, ts_delta: int, key: bytes | None, value: bytes | None,
               headers: tuple = (), *, size_adjust: int = 0, body: bytes | None = None) -> bytes:
    if body is None:
        body = b"\x00" + varint(ts_delta) + varint(offset_delta)
        for field in (key, value):
            body += varint(-1) if field is None else varint(len(field)) + field
        body += varint(len(headers))
        for hk, hv in headers:
            body += varint(len(hk)) + hk + (varint(-1) if hv is None else varint(len(hv)) + hv)
    return varint(len(body) + size_adjust) + body


def raw_batch(area: bytes, count: int, *, last_offset_delta: int | None = None, base_ts: int = NOW,
              max_ts: int = NOW, attributes: int = 0, pid: int = -1, epoch: int = -1, seq: int = -1,
              base_offset: int = 0) -> bytes:
    lod = count - 1 if last_offset_delta is None else last_offset_delta
    header = struct.pack(">qiibIhiqqqhii", base_offset, 49 + len(area), -1, 2, 0, attributes, lod, base_ts, max_ts,
                         pid, epoch, seq, count)
    return fix_crc(header + area)


def raw_records(stamps: list[int], base_ts: int, keys: list[bytes | None] | None = None) -> bytes:
    keys = keys or [b"k"] * len(stamps)
    return b"".join(raw_record(i, t - base_ts, keys[i], b"v") for i, t in enumerate(stamps))


def legacy_message(magic: int, ts: int, key: bytes | None, value: bytes | None, attributes: int = 0) -> bytes:
    body = struct.pack(">bB", magic, attributes) + (struct.pack(">q", ts) if magic == 1 else b"")
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    return struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF) + body


def legacy_entry(offset: int, message: bytes) -> bytes:
    return struct.pack(">qi", offset, len(message)) + message


def legacy_set(magic: int, records: list[tuple], compression: int = NONE) -> bytes:
    """A magic 0/1 message set from kafka-python (records: (timestamp, key, value))."""
    b = LegacyRecordBatchBuilder(magic, compression, 1 << 30)
    for i, (ts, key, value) in enumerate(records):
        b.append(i, timestamp=ts, key=key, value=value)
    return bytes(b.build())


def legacy_wrapper(magic: int, codec: int, inner: bytes, *, offset: int = 0, ts: int = -1, lat: bool = False) -> bytes:
    payload = compress(codec, inner, magic=magic)
    return legacy_entry(offset, legacy_message(magic, ts, None, payload, codec | (0x08 if lat else 0)))


def read(stored: bytes) -> DefaultRecordBatch:
    """Read the stored batch back with kafka-python (what a consumer sees)."""
    batch = DefaultRecordBatch(stored)
    assert batch.validate_crc()
    return batch


# ---- topic configs and the call ------------------------------------------------------------------------


def cfg(configs: dict | None = None, **kw: object) -> TopicConfig:
    c = dict(configs or {})
    for k, v in kw.items():
        c[k.replace("_", ".")] = v
    return topic_config("t", 3, c, {})


CT = cfg()  # gateway.record.validation=full (the default): Kafka's complete record walk
LAT = cfg(message_timestamp_type="LogAppendTime")
FULL = CT
LAT_FULL = LAT
FAST_CT = cfg({"gateway.record.validation": "fast"})
FAST_LAT = cfg({"gateway.record.validation": "fast", "message.timestamp.type": "LogAppendTime"})
W1000 = cfg(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=1000)


def decide(batch: bytes, config: TopicConfig | None = CT, state: PartitionState | None = None, now: int = NOW,
           topic: str = "t", partition: int | None = 0) -> Accepted | Rejected:
    return validate_and_assign(batch, topic, partition, config, state or PartitionState(), now)


def accepted(result: Accepted | Rejected) -> Accepted:
    assert isinstance(result, Accepted), result
    return result


def rejected(result: Accepted | Rejected, error: Errors, message: str | None = None) -> Rejected:
    assert isinstance(result, Rejected), result
    assert result.error is error, result
    if message is not None:
        assert result.message == message
    return result


def ts_errors(result: Rejected) -> list[int]:
    assert result.error is Errors.INVALID_TIMESTAMP
    assert result.message == "One or more records have been rejected due to invalid timestamp"
    assert all(e.message for e in result.record_errors)
    return [e.batch_index for e in result.record_errors]


# =========================================================================================================
# Kafka's LogValidatorTest (the cases that apply to a v2 leader; legacy input is up-converted, docs/design.md: ingress topic)


@pytest.mark.parametrize("compression", [NONE, GZIP])
def test_invalid_create_time_v2(compression: int) -> None:
    # testInvalidCreateTimeNonCompressedV2 / testInvalidCreateTimeCompressedV2
    r = rejected(decide(three(NOW - 1001, compression), W1000), Errors.INVALID_TIMESTAMP)
    assert ts_errors(r) == [0, 1, 2]
    assert r.record_errors[0].message == (
        f"Timestamp {NOW - 1001} of message with offset 0 is out of range. "
        f"The timestamp should be within [{NOW - 1000}, {NOW + 1000}]"
    )
    assert r.window == (NOW - 1000, NOW + 1000)
    assert r.response_error_message == r.message


@pytest.mark.parametrize("compression", [NONE, GZIP])
def test_invalid_create_time_v1(compression: int) -> None:
    # testInvalidCreateTimeNonCompressedV1 / testInvalidCreateTimeCompressedV1 (legacy input)
    data = legacy_set(1, [(NOW - 1001, None, v + PAD) for v in VALUES], compression)
    r = rejected(decide(data, W1000), Errors.INVALID_TIMESTAMP)
    if compression:
        assert ts_errors(r) == [0, 1, 2]
    else:
        # uncompressed legacy entries are separate batches: processRecordErrors runs per batch
        assert ts_errors(r) == [0]


def test_invalid_timestamp_exception_has_batch_index() -> None:
    r = rejected(decide(three(NOW - 1001, GZIP), W1000), Errors.INVALID_TIMESTAMP)
    assert ts_errors(r) == [0, 1, 2]
    assert [e.message.split(" of message")[0] for e in r.record_errors] == [f"Timestamp {NOW - 1001}"] * 3


@pytest.mark.parametrize(("stamp", "name"), [(NOW - DAY - 5 * 60_000, "past"), (NOW + HOUR + 5 * 60_000, "future")])
def test_record_with_past_or_future_timestamp_is_rejected(stamp: int, name: str) -> None:
    # testRecordWithPastTimestampIsRejected / testRecordWithFutureTimestampIsRejected
    config = cfg(message_timestamp_before_max_ms=DAY, message_timestamp_after_max_ms=HOUR)
    r = rejected(decide(three(stamp, GZIP), config), Errors.INVALID_TIMESTAMP)
    assert ts_errors(r) == [0, 1, 2]
    assert f"[{NOW - DAY}, {NOW + HOUR}]" in r.record_errors[2].message


def test_batch_with_invalid_records_and_invalid_timestamp() -> None:
    # testBatchWithInvalidRecordsAndInvalidTimestamp: a v1 gzip wrapper holding one v1 record with a very old
    # timestamp and five v0 records (magic mismatch): INVALID_TIMESTAMP wins, all 6 errors reported
    inner = legacy_entry(0, legacy_message(1, 1200, None, b"old"))
    inner += b"".join(legacy_entry(i, legacy_message(0, -1, None, b"v0")) for i in range(1, 6))
    data = legacy_wrapper(1, GZIP, inner, offset=5, ts=1200)
    r = rejected(decide(data, cfg(message_timestamp_before_max_ms=1000)), Errors.INVALID_TIMESTAMP)
    assert [e.batch_index for e in r.record_errors] == [0, 1, 2, 3, 4, 5]
    assert r.record_errors[0].message.startswith("Timestamp 1200 of message with offset 0 is out of range.")
    assert "'s magic does not match outer magic 1 in topic partition t-0" in r.record_errors[1].message
    assert r.message == "One or more records have been rejected due to invalid timestamp"


def test_invalid_record_exception_has_batch_index() -> None:
    # testInvalidRecordExceptionHasBatchIndex: v0 gzip wrapper with 20 v1 inner records
    inner = b"".join(legacy_entry(i, legacy_message(1, NOW, None, b"v1")) for i in range(20))
    r = rejected(decide(legacy_wrapper(0, GZIP, inner)), Errors.INVALID_RECORD)
    assert [e.batch_index for e in r.record_errors] == list(range(20))
    assert all("'s magic does not match outer magic 0 in topic partition t-0" in e.message for e in r.record_errors)
    first = r.record_errors[0]
    assert first.message.startswith("Record LegacyRecordBatch(offset=0, Record(magic=1, attributes=0, compression=none, ")
    assert r.message.startswith(
        "One or more records have been rejected due to 20 record errors in total, and only showing the first three "
        "errors at most: [RecordError(batchIndex=0, message='Record LegacyRecordBatch(offset=0, "
    )
    assert r.message.count("RecordError(") == 3 and r.message.endswith("')]")


def test_check_non_compressed_v2() -> None:
    # checkNonCompressed(magic 2): ts [now-1, now+1, now], pid 1324 epoch 10 seq 984 (non-transactional here:
    # transactional batches are refused by the gateway, see test_transactional_batches_are_refused)
    data = three([NOW - 1, NOW + 1, NOW], producer=(1324, 10, 984))
    r = accepted(decide(data, W1000, PartitionState(log_end_offset=0)))
    assert (r.base_offset, r.last_offset, r.record_count, r.max_timestamp) == (0, 2, 3, NOW + 1)
    assert r.log_append_time_ms == -1 and not r.rebuilt and len(r.records) == len(data)
    b = read(r.records)
    assert b.timestamp_type == 0 and b.first_timestamp == NOW - 1 and b.max_timestamp == NOW + 1
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (1324, 10, 984)
    assert b.leader_epoch == GATEWAY_LEADER_EPOCH
    assert [(x.offset, x.timestamp, x.value) for x in b] == list(zip([0, 1, 2], [NOW - 1, NOW + 1, NOW], VALUES, strict=True))


def test_check_non_compressed_v1_up_converts() -> None:
    data = legacy_set(1, [(t, None, v) for t, v in zip([NOW - 1, NOW + 1, NOW], VALUES, strict=True)])
    r = accepted(decide(data, W1000))
    assert (r.base_offset, r.last_offset, r.record_count, r.max_timestamp, r.input_magic) == (0, 2, 3, NOW + 1, 1)
    b = read(r.records)
    assert b.compression_type == NONE and b.first_timestamp == NOW - 1 and b.max_timestamp == NOW + 1
    assert b.producer_id == -1 and b.timestamp_type == 0
    assert [(x.offset, x.timestamp, x.value) for x in b] == list(zip([0, 1, 2], [NOW - 1, NOW + 1, NOW], VALUES, strict=True))


def test_check_compressed_v2_is_in_place() -> None:
    # checkCompressed(magic 2): gzip -> gzip (compression.type=producer): payload byte-for-byte
    data = three([NOW - 1, NOW + 1, NOW], GZIP)
    r = accepted(decide(data, W1000))
    assert r.max_timestamp == NOW + 1 and not r.rebuilt
    assert r.records[61:] == data[61:] and len(r.records) == len(data)
    b = read(r.records)
    assert b.compression_type == GZIP and b.max_timestamp == NOW + 1
    assert [x.timestamp for x in b] == [NOW - 1, NOW + 1, NOW]


def test_check_compressed_v1_is_rebuilt_as_v2_with_the_source_codec() -> None:
    data = legacy_set(1, [(t, None, v + PAD) for t, v in zip([NOW - 1, NOW + 1, NOW], VALUES, strict=True)], GZIP)
    r = accepted(decide(data, W1000))
    assert r.rebuilt and r.input_magic == 1 and r.max_timestamp == NOW + 1
    b = read(r.records)
    assert b.compression_type == GZIP
    assert [(x.offset, x.timestamp) for x in b] == [(0, NOW - 1), (1, NOW + 1), (2, NOW)]


def test_check_recompression() -> None:
    # checkRecompression: none -> gzip topic: one rebuilt gzip batch, record timestamps preserved
    data = three([NOW - 1, NOW + 1, NOW])
    config = cfg(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=1000, compression_type="gzip")
    r = accepted(decide(data, config))
    assert r.rebuilt and r.max_timestamp == NOW + 1
    b = read(r.records)
    assert b.compression_type == GZIP and b.first_timestamp == NOW - 1 and b.max_timestamp == NOW + 1
    assert [(x.timestamp, x.value) for x in b] == list(zip([NOW - 1, NOW + 1, NOW], VALUES, strict=True))


def test_check_log_append_time_non_compressed_v2() -> None:
    data = three(1234)
    r = accepted(decide(data, LAT, now=NOW))
    assert r.max_timestamp == NOW == r.log_append_time_ms == r.append_time_ms
    assert r.records[61:] == data[61:]  # record bytes untouched: each CreateTime delta survives (KIP-32)
    b = read(r.records)
    assert b.timestamp_type == 1 and b.max_timestamp == NOW and b.first_timestamp == 1234
    assert [x.timestamp for x in b] == [NOW] * 3  # every record reads the append time
    assert r.producer_max_timestamp == 1234


@pytest.mark.parametrize(("magic", "base_ts"), [(0, -1), (1, 1234)])
def test_check_log_append_time_non_compressed_legacy(magic: int, base_ts: int) -> None:
    r = accepted(decide(legacy_set(magic, [(1234, None, v) for v in VALUES]), LAT))
    assert r.max_timestamp == NOW and r.log_append_time_ms == NOW and r.input_magic == magic
    b = read(r.records)
    assert b.timestamp_type == 1 and b.max_timestamp == NOW and b.first_timestamp == base_ts
    assert [x.timestamp for x in b] == [NOW] * 3


def test_check_log_append_time_without_recompression_v2() -> None:
    data = three(1234, GZIP)
    r = accepted(decide(data, LAT))
    assert len(r.records) == len(data) and r.records[61:] == data[61:]
    b = read(r.records)
    assert b.timestamp_type == 1 and b.max_timestamp == NOW and b.first_timestamp == 1234
    assert [x.timestamp for x in b] == [NOW] * 3


def test_check_log_append_time_with_recompression_from_v0() -> None:
    data = legacy_set(0, [(-1, None, v + PAD) for v in VALUES], GZIP)
    r = accepted(decide(data, LAT))
    assert r.rebuilt and r.max_timestamp == NOW
    b = read(r.records)
    assert b.compression_type == GZIP and b.timestamp_type == 1 and b.max_timestamp == NOW and b.first_timestamp == -1


def test_create_time_up_conversion_v1_to_v2() -> None:
    t = NOW - 10
    r = accepted(decide(legacy_set(1, [(t, None, v + PAD) for v in VALUES], GZIP), W1000))
    b = read(r.records)
    assert (b.first_timestamp, b.max_timestamp, b.timestamp_type, b.producer_id) == (t, t, 0, -1)
    assert r.max_timestamp == t and r.record_count == 3


@pytest.mark.parametrize("compression", [NONE, GZIP])
def test_create_time_up_conversion_from_v0(compression: int) -> None:
    r = accepted(decide(legacy_set(0, [(NOW, None, v + PAD) for v in VALUES], compression), W1000))
    b = read(r.records)
    assert b.max_timestamp == -1 and b.timestamp_type == 0 and r.max_timestamp == -1
    assert [x.timestamp for x in b] == [-1, -1, -1]  # KIP-32: v0 records have no timestamp


def test_record_batch_with_count_overrides() -> None:
    # testRecordBatchWithCountOverrides: lastOffsetDelta 2, count 3, LogAppendTime, gzip target
    data = raw_batch(raw_records([1234] * 3, 1234), 3, last_offset_delta=2, base_ts=1234, max_ts=1234)
    r = accepted(decide(data, cfg(message_timestamp_type="LogAppendTime", compression_type="gzip")))
    b = read(r.records)
    assert b.compression_type == GZIP and b.timestamp_type == 1 and b.max_timestamp == NOW and len(list(b)) == 3


@pytest.mark.parametrize(
    ("last_offset_delta", "message"),
    [
        (0, "Inconsistent batch offset range [0, 0] and count of records 3 in topic partition t-0"),
        (15, "Inconsistent batch offset range [0, 15] and count of records 3 in topic partition t-0"),
        (-3, "Batch has an invalid offset range: [0, -3] in topic partition t-0"),
    ],
)
def test_inconsistent_count_and_offset(last_offset_delta: int, message: str) -> None:
    data = raw_batch(raw_records([NOW] * 3, NOW), 3, last_offset_delta=last_offset_delta)
    for config in (CT, LAT, FAST_CT, FAST_LAT):
        r = rejected(decide(data, config, PartitionState(log_start_offset=7)), Errors.INVALID_RECORD, message)
        assert r.log_start_offset == 7 and r.record_errors == () and r.response_error_message is None


@pytest.mark.parametrize(
    ("last_offset_delta", "count", "message"),
    [(5, 6, "Incorrect declared batch size, premature EOF reached"),
     (1, 2, "Incorrect declared batch size, records still remaining in file")],
)
@pytest.mark.parametrize("config", [CT, LAT, FAST_CT], ids=["full", "lat-full", "fast"])
def test_unmatched_number_of_records(last_offset_delta: int, count: int, message: str, config: TopicConfig) -> None:
    data = raw_batch(raw_records([NOW] * 3, NOW), count, last_offset_delta=last_offset_delta)
    rejected(decide(data, config), Errors.INVALID_RECORD, message)


@pytest.mark.parametrize("compression", CODECS)
def test_batch_without_records_not_allowed(compression: int) -> None:
    data = raw_batch(b"", 0, last_offset_delta=5, attributes=compression)
    rejected(decide(data), Errors.INVALID_RECORD, "Invalid reported count for record batch: 0 in topic partition t-0")


def test_validation_of_batches_with_non_sequential_inner_offsets_v2() -> None:
    # 20 gzip records all appended at offset 0: lastOffsetDelta 0 with count 20
    b = DefaultRecordBatchBuilder(2, GZIP, False, -1, -1, -1, 1 << 30)
    for i in range(20):
        b.append(0, timestamp=NOW, key=None, value=b"v%d" % i + PAD, headers=[])
    rejected(decide(bytes(b.build())), Errors.INVALID_RECORD,
             "Inconsistent batch offset range [0, 0] and count of records 20 in topic partition t-0")


def test_validation_of_batches_with_non_sequential_inner_offsets_v0_is_repaired() -> None:
    inner = b"".join(legacy_entry(0, legacy_message(0, -1, None, b"v%d" % i)) for i in range(20))
    r = accepted(decide(legacy_wrapper(0, GZIP, inner), state=PartitionState(log_end_offset=100)))
    assert [x.offset for x in read(r.records)] == list(range(100, 120))


def test_compressed_v2_with_non_contiguous_inner_offsets() -> None:
    # Path B abandons in-place assignment and rebuilds from PartialDefaultRecords, whose key() throws:
    # a Kafka 4.2 broker answers UNKNOWN_SERVER_ERROR, and so does the gateway. With a different target
    # codec the full records are read (streamingIterator) and the rebuild repairs the offsets.
    area = b"".join(raw_record(d, 0, b"k", b"v" * 50) for d in (0, 2, 1))
    data = raw_batch(compress(GZIP, area), 3, attributes=GZIP)
    rejected(decide(data, state=PartitionState(log_start_offset=2)), Errors.UNKNOWN_SERVER_ERROR,
             "key is skipped in PartialDefaultRecord")
    r = accepted(decide(data, cfg(compression_type="lz4"), PartitionState(log_end_offset=10)))
    b = read(r.records)
    assert r.rebuilt and [x.offset for x in b] == [10, 11, 12] and b.compression_type == LZ4
    # record errors are reported before the rebuild is attempted
    rejected(decide(data, cfg(message_timestamp_before_max_ms=1), now=NOW + 10), Errors.INVALID_TIMESTAMP)


def test_only_one_batch() -> None:
    # checkOnlyOneBatch
    one = three(NOW)
    rejected(decide(one + one), Errors.INVALID_RECORD,
             "Produce requests with version 13 are only allowed to contain exactly one record batch per partition")
    gz1 = legacy_set(1, [(NOW, None, b"a" + PAD)], GZIP)
    rejected(decide(gz1 + gz1), Errors.INVALID_RECORD, "Compressed outer record has more than one batch")
    rejected(decide(legacy_set(1, [(NOW, None, b"x")]) + gz1), Errors.INVALID_RECORD,
             "Compressed outer record has more than one batch")


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("target", ["producer", "gzip"])
def test_allow_multi_batch_legacy_uncompressed(magic: int, target: str) -> None:
    # checkAllowMultiBatch: several uncompressed legacy entries are one append
    data = legacy_set(magic, [(NOW, None, b"a")]) + legacy_set(magic, [(NOW, None, b"b")])
    r = accepted(decide(data, cfg(compression_type=target), PartitionState(log_end_offset=5)))
    b = read(r.records)
    assert [(x.offset, x.value) for x in b] == [(5, b"a"), (6, b"b")]
    assert b.compression_type == (GZIP if target == "gzip" else NONE)


@pytest.mark.parametrize(("batch_magic", "record_magic"), [(0, 1), (1, 0)])
def test_mismatch_magic(batch_magic: int, record_magic: int) -> None:
    inner = b"".join(legacy_entry(i, legacy_message(record_magic, NOW, None, b"x")) for i in range(3))
    r = rejected(decide(legacy_wrapper(batch_magic, GZIP, inner, offset=2)), Errors.INVALID_RECORD)
    assert len(r.record_errors) == 3
    assert all(f"'s magic does not match outer magic {batch_magic} in topic partition t-0" in e.message
               for e in r.record_errors)


@pytest.mark.parametrize("codec", [GZIP, LZ4, SNAPPY])
def test_invalid_checksum_of_a_legacy_inner_record(codec: int) -> None:
    good = legacy_message(1, NOW, None, b"x" * 20)
    bad = b"\x00\x00\x00\x00" + good[4:]
    inner = legacy_entry(0, good) + legacy_entry(1, bad)
    computed = zlib.crc32(good[4:]) & 0xFFFFFFFF
    rejected(decide(legacy_wrapper(1, codec, inner, offset=1)), Errors.CORRUPT_MESSAGE,
             f"Record is corrupt (stored crc = 0, computed crc = {computed})")


def test_invalid_sequence() -> None:
    # checkInvalidSequence: baseSequence overwritten to -2 (byte 53); the CRC is fixed so validateBatch is reached
    data = patch(three(NOW, producer=(1324, 10, 0)), 53, ">i", -2)
    rejected(decide(data), Errors.INVALID_RECORD,
             "Invalid sequence number -2 in record batch with producerId 1324 in topic partition t-0")


@pytest.mark.parametrize("compression", CODECS)
def test_no_key_compacted_topic(compression: int) -> None:
    r = rejected(decide(three(NOW, compression), cfg(cleanup_policy="compact")), Errors.INVALID_RECORD)
    text = "Compacted topic cannot accept message without key in topic partition t-0"
    assert r.record_errors == tuple(RecordError(i, text) for i in range(3))
    assert r.message == (
        "One or more records have been rejected due to 3 record errors in total, and only showing the first three "
        f"errors at most: [RecordError(batchIndex=0, message='{text}'), RecordError(batchIndex=1, message='{text}'), "
        f"RecordError(batchIndex=2, message='{text}')]"
    )
    assert r.response_error_message == r.message


def test_empty_key_is_fine_on_a_compacted_topic() -> None:
    accepted(decide(kp([(NOW, b"", b"v")]), cfg(cleanup_policy="compact")))


def test_control_records_not_allowed_from_clients() -> None:
    data = patch(three(NOW), 21, ">h", 0x20)
    rejected(decide(data), Errors.INVALID_RECORD, "Clients are not allowed to write control records in topic partition t-0")


def test_non_increasing_offset_record_batch() -> None:
    # testNonIncreasingOffsetRecordBatchHasMetricsLogged: offsets 0,2,3 then setLastOffset(2) -> baseOffset -1
    area = b"".join(raw_record(d, 0, None, b"v") for d in (0, 2, 3))
    data = raw_batch(area, 3, last_offset_delta=3, base_offset=-1)
    rejected(decide(data, state=PartitionState(log_start_offset=3)), Errors.INVALID_RECORD,
             "The baseOffset of the record batch in the append to t-0 should be 0, but it is -1")
    rejected(decide(raw_batch(area, 3, last_offset_delta=3)), Errors.INVALID_RECORD,
             "Inconsistent batch offset range [0, 3] and count of records 3 in topic partition t-0")


@pytest.mark.parametrize("compression", [NONE, GZIP])
def test_absolute_offset_assignment_v2(compression: int) -> None:
    # testAbsoluteOffsetAssignment* / testRelativeOffsetAssignment*: offsets from the counter (LEO)
    r = accepted(decide(three(NOW, compression), state=PartitionState(log_end_offset=1234567)))
    assert [x.offset for x in read(r.records)] == [1234567, 1234568, 1234569]
    assert (r.base_offset, r.last_offset, r.state.log_end_offset) == (1234567, 1234569, 1234570)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression", [NONE, GZIP])
def test_offset_assignment_after_up_conversion(magic: int, compression: int) -> None:
    data = legacy_set(magic, [(NOW, None, v + PAD) for v in VALUES], compression)
    r = accepted(decide(data, state=PartitionState(log_end_offset=1234567)))
    assert [x.offset for x in read(r.records)] == [1234567, 1234568, 1234569]


def test_different_level_does_not_cause_recompression() -> None:
    area = b"".join(raw_record(i, 0, None, b"x" * 100) for i in range(3))
    data = raw_batch(zlib.compress(area, 9, wbits=31), 3, attributes=GZIP)  # gzip at max level
    r = accepted(decide(data, cfg(compression_type="gzip")))
    assert not r.rebuilt and r.records[61:] == data[61:]


def test_different_codec_causes_recompression() -> None:
    r = accepted(decide(three(NOW, GZIP), cfg(compression_type="lz4")))
    b = read(r.records)
    assert r.rebuilt and b.compression_type == LZ4
    assert [x.value for x in b] == [v + PAD for v in VALUES]


# =========================================================================================================
# Kafka's ProduceRequestTest


def test_simple_produce_request() -> None:
    r1 = accepted(decide(kp([(NOW, b"key", b"value")])))
    assert (r1.base_offset, r1.log_append_time_ms) == (0, -1)
    r2 = accepted(decide(kp([(NOW, b"key1", b"value1" + PAD), (NOW, b"key2", b"value2" + PAD)], GZIP), state=r1.state))
    assert (r2.base_offset, r2.log_append_time_ms, r2.state.log_end_offset) == (1, -1, 3)


@pytest.mark.parametrize(
    ("configs", "stamp"),
    [({"message.timestamp.before.max.ms": 1000}, NOW - 5 * HOUR), ({"message.timestamp.after.max.ms": 1000}, NOW + 5 * HOUR)],
)
def test_produce_with_invalid_timestamp(configs: dict, stamp: int) -> None:
    r = rejected(decide(three(stamp, GZIP), cfg(configs)), Errors.INVALID_TIMESTAMP)
    assert ts_errors(r) == [0, 1, 2]


def test_corrupt_lz4_produce_request() -> None:
    data = bytearray(kp([(1_000_000, b"key", b"value" * 30)], LZ4))
    assert data[61 + 6] != 0
    data[61 + 6] = 0  # the lz4 frame header checksum (not the batch CRC)
    crc = struct.unpack_from(">I", data, 17)[0]
    r = rejected(decide(bytes(data)), Errors.CORRUPT_MESSAGE,
                 f"Record is corrupt (stored crc = {crc}) in topic partition t-0.")
    assert r.log_start_offset == -1
    # with a recomputed batch CRC the broken frame itself is what fails: the codec's IOException becomes
    # KafkaException("Failed to decompress record stream"), UNKNOWN_SERVER_ERROR on a Kafka 4.2 broker
    r = rejected(decide(fix_crc(data)), Errors.UNKNOWN_SERVER_ERROR)
    assert r.message.startswith("Failed to decompress record stream: lz4: ")


# =========================================================================================================
# error paths in Kafka's order


def test_unknown_topic_or_partition() -> None:
    data = three(NOW)
    message = "This server does not host this topic-partition."
    rejected(decide(data, None), Errors.UNKNOWN_TOPIC_OR_PARTITION, message)
    for partition in (3, -1, None):
        r = rejected(decide(data, CT, partition=partition), Errors.UNKNOWN_TOPIC_OR_PARTITION, message)
        assert r.log_start_offset == -1


def test_illegal_topic_names_and_internal_topics() -> None:
    data = three(NOW)
    rejected(decide(data, None, topic="bad/name"), Errors.INVALID_TOPIC_EXCEPTION,
             "Topic name is invalid: 'bad/name' contains one or more characters other than ASCII alphanumerics, "
             "'.', '_' and '-'")
    rejected(decide(data, None, topic=""), Errors.INVALID_TOPIC_EXCEPTION,
             "Topic name is invalid: the empty string is not allowed")
    rejected(decide(data, None, topic="__consumer_offsets"), Errors.INVALID_TOPIC_EXCEPTION,
             "Cannot append to internal topic __consumer_offsets")


def test_transactional_batches_are_refused() -> None:
    data = three(NOW, producer=(1324, 10, 984), transactional=True)
    rejected(decide(data), Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Transactional Id authorization failed.")
    rejected(decide(data, None), Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)  # step 1 precedes the topic lookup


def test_framing_errors() -> None:
    at_least_one = "Produce requests with version 13 must have at least one record batch per partition"
    rejected(decide(b""), Errors.INVALID_RECORD, at_least_one)
    rejected(decide(b"\x00" * 11), Errors.INVALID_RECORD, at_least_one)
    good = three(NOW)
    rejected(decide(good[:-1]), Errors.INVALID_RECORD, at_least_one)  # truncated: no complete batch
    rejected(decide(patch(good, 8, ">i", 13, crc=False)), Errors.CORRUPT_MESSAGE,
             "Record size 13 is less than the minimum record overhead (14)")
    rejected(decide(patch(good, 16, ">b", 3, crc=False)), Errors.CORRUPT_MESSAGE, "Invalid magic found in record: 3")
    rejected(decide(patch(good, 16, ">b", -1, crc=False)), Errors.CORRUPT_MESSAGE, "Invalid magic found in record: -1")


def test_trailing_bytes() -> None:
    good = three(NOW)
    r = accepted(decide(good + b"\x00" * 11))  # a fragment shorter than a batch is dropped (trimInvalidBytes)
    assert r.records[8:] == accepted(decide(good)).records[8:] and len(r.records) == len(good)
    r = accepted(decide(good + good[:40]))  # declared size not all there: not a batch either
    assert len(r.records) == len(good)
    rejected(decide(good + struct.pack(">qi", 0, 3)), Errors.CORRUPT_MESSAGE,
             "Record size 3 is less than the minimum record overhead (14)")
    rejected(decide(good + good[:16] + b"\x07"), Errors.CORRUPT_MESSAGE, "Invalid magic found in record: 7")


def test_base_offset_must_be_zero() -> None:
    r = rejected(decide(patch(three(NOW), 0, ">q", 42, crc=False), state=PartitionState(log_start_offset=9)),
                 Errors.INVALID_RECORD,
                 "The baseOffset of the record batch in the append to t-0 should be 0, but it is 42")
    assert r.log_start_offset == 9


def test_message_too_large_has_kafkas_stray_parenthesis() -> None:
    data = three(NOW)
    accepted(decide(data, cfg(max_message_bytes=len(data))))
    r = rejected(decide(data, cfg(max_message_bytes=len(data) - 1)), Errors.MESSAGE_TOO_LARGE,
                 f"The record batch size in the append to t-0 is {len(data)} bytes which exceeds the maximum "
                 f"configured value of {len(data) - 1}).")
    assert r.log_start_offset == -1  # RecordTooLargeException is one of the "known" exceptions


def test_crc_mismatch_and_short_batch() -> None:
    data = bytearray(three(NOW))
    data[-1] ^= 0xFF
    crc = struct.unpack_from(">I", data, 17)[0]
    rejected(decide(bytes(data)), Errors.CORRUPT_MESSAGE, f"Record is corrupt (stored crc = {crc}) in topic partition t-0.")
    short = struct.pack(">qiibI", 0, 48, -1, 2, 0xDEADBEEF) + b"\x00" * 39  # size 60 < 61
    rejected(decide(short), Errors.CORRUPT_MESSAGE, "Record is corrupt (stored crc = 3735928559) in topic partition t-0.")


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_is_an_unknown_server_error(codec_id: int) -> None:
    data = patch(three(NOW), 21, ">h", codec_id)
    r = rejected(decide(data, state=PartitionState(log_start_offset=4)), Errors.UNKNOWN_SERVER_ERROR,
                 f"Unknown compression type id: {codec_id}")
    assert r.log_start_offset == 4


def test_corrupt_compressed_stream() -> None:
    data = raw_batch(b"\x1f\x8b\x08\x00garbage-not-gzip", 1, attributes=GZIP)
    r = rejected(decide(data, state=PartitionState(log_start_offset=6)), Errors.UNKNOWN_SERVER_ERROR)
    assert r.message.startswith("Failed to decompress record stream: gzip: ") and r.log_start_offset == 6


GOOD = raw_record(0, 0, b"k", b"v")
FRAMING_ERRORS = {
    # a record longer than what is left in the batch
    raw_record(0, 0, b"k", b"v", size_adjust=50):
        "Invalid record size: expected 58 bytes in record payload, but instead the buffer has only 8 remaining bytes.",
}
INNER_ERRORS = {
    # negative header count
    raw_record(0, 0, b"k", b"v", body=b"\x00\x00\x00\x02k\x02v\x01"): "Found invalid number of record headers -1",
    # body longer than its fields
    raw_record(0, 0, b"k", b"v", body=b"\x00\x00\x00\x02k\x02v\x00\x00"):
        "Invalid record size: expected to read 9 bytes in record payload, but instead read 8",
    # a key running past the end of the batch
    raw_record(0, 0, b"k", b"v", body=b"\x00\x00\x00\x7ek\x02v\x00"): "Found invalid record structure",
}


@pytest.mark.parametrize("config", [CT, LAT, FAST_CT], ids=["full", "lat-full", "fast"])
def test_record_framing_errors_have_no_record_errors(config: TopicConfig) -> None:
    for record, message in FRAMING_ERRORS.items():
        r = rejected(decide(raw_batch(GOOD + record, 2), config), Errors.INVALID_RECORD, message)
        assert r.record_errors == ()


@pytest.mark.parametrize("config", [CT, LAT, cfg({"cleanup.policy": "compact", "gateway.record.validation": "fast"})],
                         ids=["full", "lat-full", "fast-compacted"])
def test_record_layout_errors_with_the_full_walk(config: TopicConfig) -> None:
    for record, message in INNER_ERRORS.items():
        r = rejected(decide(raw_batch(GOOD + record, 2), config), Errors.INVALID_RECORD, message)
        assert r.record_errors == ()


def test_fast_walk_does_not_look_inside_records() -> None:
    """The documented gap of `gateway.record.validation=fast` (docs/performance.md): LogAppendTime batches are
    decided from the header and CreateTime batches from the record length chain and timestamp deltas,
    so a layout error inside a record whose length is consistent is only caught with `full`."""
    for record in INNER_ERRORS:
        data = raw_batch(GOOD + record, 2)
        accepted(decide(data, FAST_CT))
        accepted(decide(data, FAST_LAT))
    # LogAppendTime batches are not even walked for their declared count in fast mode
    accepted(decide(raw_batch(GOOD + GOOD, 3), FAST_LAT))
    # ... but on CreateTime a fast-path anomaly is re-checked by the full walk, with Kafka's text
    rejected(decide(raw_batch(GOOD + GOOD, 3), FAST_CT), Errors.INVALID_RECORD,
             "Incorrect declared batch size, premature EOF reached")


def test_too_long_length_varint_is_an_unknown_server_error() -> None:
    # DefaultRecord.readFrom reads the length outside its try block: IllegalArgumentException -> -1
    data = raw_batch(b"\xff\xff\xff\xff\xff\x01" + b"\x00" * 8, 1)
    rejected(decide(data), Errors.UNKNOWN_SERVER_ERROR,
             "Varint is too long, the most significant bit in the 5th byte is set, converted value: ffffffff")


def test_structure_error_wins_over_record_errors() -> None:
    area = raw_record(0, -10 * DAY, b"k", b"v") + raw_record(1, 0, b"k", b"v", size_adjust=40)
    rejected(decide(raw_batch(area, 2), W1000), Errors.INVALID_RECORD)


# =========================================================================================================
# timestamps


@pytest.mark.parametrize("config", [W1000, cfg({"gateway.record.validation": "fast",
                                                "message.timestamp.before.max.ms": 1000,
                                                "message.timestamp.after.max.ms": 1000})], ids=["full", "fast"])
def test_window_is_inclusive_and_minus_one_is_exempt(config: TopicConfig) -> None:
    ok = [NOW - 1000, NOW + 1000, -1, NOW]
    r = accepted(decide(kp([(t, b"k", b"v") for t in ok]), config))
    assert r.max_timestamp == NOW + 1000
    r = rejected(decide(kp([(t, b"k", b"v") for t in [NOW - 1001, NOW, -1, NOW + 1001]]), config),
                 Errors.INVALID_TIMESTAMP)
    assert ts_errors(r) == [0, 3]
    assert r.record_errors[1].message == (
        f"Timestamp {NOW + 1001} of message with offset 3 is out of range. "
        f"The timestamp should be within [{NOW - 1000}, {NOW + 1000}]"
    )


def test_all_minus_one_gives_max_timestamp_minus_one() -> None:
    r = accepted(decide(raw_batch(raw_records([-1, -1], -1), 2, base_ts=-1, max_ts=-1)))
    assert r.max_timestamp == -1 and read(r.records).max_timestamp == -1


def test_other_negative_timestamps_pass_under_the_default_before_window() -> None:
    r = accepted(decide(raw_batch(raw_records([-5, 10], -5), 2, base_ts=-5, max_ts=10)))
    assert r.max_timestamp == 10
    rejected(decide(raw_batch(raw_records([-5], -5), 1, base_ts=-5, max_ts=-5), W1000), Errors.INVALID_TIMESTAMP)


def test_long_min_timestamp_wraps_and_is_rejected_with_the_default_windows() -> None:
    data = raw_batch(raw_records([LONG_MIN], LONG_MIN), 1, base_ts=LONG_MIN, max_ts=LONG_MIN)
    for config in (CT, FAST_CT):
        r = rejected(decide(data, config), Errors.INVALID_TIMESTAMP)
        assert r.record_errors == (RecordError(0, (
            "Timestamp -9223372036854775808 of message with offset 0 is out of range. "
            "The timestamp should be within [-9223370336854775807, 1700003600000]")),)
        assert r.window == (NOW - LONG_MAX, NOW + HOUR)


def test_timestamp_delta_wraps_like_java() -> None:
    # baseTimestamp + timestampDelta overflows a long: the record's timestamp is the wrapped value
    data = raw_batch(raw_record(0, 10, b"k", b"v"), 1, base_ts=LONG_MAX, max_ts=LONG_MAX)
    r = rejected(decide(data), Errors.INVALID_TIMESTAMP)
    assert r.record_errors[0].message.startswith(f"Timestamp {LONG_MIN + 9} of message with offset 0")


def test_upper_bound_overflow_prints_negative() -> None:
    config = cfg(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=LONG_MAX)
    r = rejected(decide(kp([(NOW - 2000, b"k", b"v")]), config), Errors.INVALID_TIMESTAMP)
    assert r.record_errors[0].message.endswith(f"[{NOW - 1000}, {NOW + LONG_MAX - 2**64}]")
    accepted(decide(kp([(NOW + 10 * 365 * DAY, b"k", b"v")]), config))


def test_offset_in_the_message_is_the_offset_as_sent() -> None:
    area = b"".join(raw_record(i, 0 if i != 2 else -DAY, b"k", b"v") for i in range(3))
    r = rejected(decide(raw_batch(area, 3), W1000, PartitionState(log_end_offset=500)), Errors.INVALID_TIMESTAMP)
    assert r.record_errors[0].batch_index == 2
    assert f"Timestamp {NOW - DAY} of message with offset 2 is out" in r.record_errors[0].message


def test_invalid_timestamp_wins_over_invalid_record_and_lists_every_error() -> None:
    config = cfg(cleanup_policy="compact", message_timestamp_before_max_ms=1000)
    data = kp([(NOW, None, b"a"), (NOW - 5000, b"k", b"b"), (NOW - 5000, None, b"c"), (NOW, b"k", b"d")])
    r = rejected(decide(data, config), Errors.INVALID_TIMESTAMP)
    assert [e.batch_index for e in r.record_errors] == [0, 1, 2]
    key_error = "Compacted topic cannot accept message without key in topic partition t-0"
    # a key error suppresses the timestamp check of that record (record 2 is reported once, for its key)
    assert r.record_errors[0].message == key_error and r.record_errors[2].message == key_error
    assert r.record_errors[1].message.startswith(f"Timestamp {NOW - 5000} of message with offset 1")


def test_invalid_record_message_shows_the_first_three_of_more_errors() -> None:
    r = rejected(decide(kp([(NOW, None, b"v")] * 4), cfg(cleanup_policy="compact")), Errors.INVALID_RECORD)
    assert len(r.record_errors) == 4
    assert r.message.startswith("One or more records have been rejected due to 4 record errors in total")
    assert r.message.count("RecordError(") == 3


def test_producer_max_timestamp_is_recomputed_on_create_time_topics() -> None:
    data = patch(kp([(NOW - 5, b"k", b"v"), (NOW - 7, b"k", b"v")]), 35, ">q", NOW + 999)  # the producer lies
    r = accepted(decide(data))
    assert r.max_timestamp == NOW - 5 and r.producer_max_timestamp == NOW + 999
    assert read(r.records).max_timestamp == NOW - 5  # rewritten, CRC recomputed


# ---- batches that carry the LogAppendTime bit -----------------------------------------------------


def lat_bit(data: bytes, max_ts: int) -> bytes:
    return patch(patch(data, 21, ">h", struct.unpack_from(">h", data, 21)[0] | 0x08, crc=False), 35, ">q", max_ts)


def test_log_append_time_bit_on_a_log_append_time_topic() -> None:
    data = lat_bit(kp([(NOW, b"k", b"v"), (NOW, None, b"vv")]), NOW - 3)
    r = rejected(decide(data, LAT), Errors.INVALID_TIMESTAMP)
    assert [e.message for e in r.record_errors] == [
        f"Invalid timestamp type in message DefaultRecord(offset=0, timestamp={NOW - 3}, key=1 bytes, value=1 bytes). "
        "Producer should not set timestamp type to LogAppendTime.",
        f"Invalid timestamp type in message DefaultRecord(offset=1, timestamp={NOW - 3}, key=0 bytes, value=2 bytes). "
        "Producer should not set timestamp type to LogAppendTime.",
    ]
    assert r.window is None


def test_log_append_time_bit_compressed_prints_partial_records() -> None:
    data = lat_bit(kp([(NOW, None, b"v" + PAD)], GZIP), NOW)
    r = rejected(decide(data, LAT), Errors.INVALID_TIMESTAMP)
    assert r.record_errors[0].message == (
        f"Invalid timestamp type in message PartialDefaultRecord(offset=0, timestamp={NOW}, key=-1 bytes, "
        f"value={1 + len(PAD)} bytes). Producer should not set timestamp type to LogAppendTime."
    )


def test_log_append_time_bit_on_a_create_time_topic() -> None:
    # records read as the header maxTimestamp: window-checked against it; the bit is cleared, max kept
    data = lat_bit(kp([(1234, b"k", b"v"), (1235, b"k", b"v")]), NOW - 10)
    r = accepted(decide(data))
    assert r.max_timestamp == NOW - 10 and r.log_append_time_ms == -1
    b = read(r.records)
    assert b.timestamp_type == 0 and b.max_timestamp == NOW - 10
    assert [x.timestamp for x in b] == [1234, 1235]  # readers now see the deltas (Kafka's quirk)
    r = rejected(decide(data, cfg(message_timestamp_before_max_ms=5)), Errors.INVALID_TIMESTAMP)
    assert ts_errors(r) == [0, 1]
    assert r.record_errors[1].message.startswith(f"Timestamp {NOW - 10} of message with offset 1 is out of range.")
    r = rejected(decide(lat_bit(kp([(1234, b"k", b"v")]), -1)), Errors.INVALID_TIMESTAMP)
    assert r.record_errors[0].message == (
        "Invalid timestamp type in message DefaultRecord(offset=0, timestamp=-1, key=1 bytes, value=1 bytes). "
        "Producer should not set timestamp type to LogAppendTime."
    )


def test_log_append_time_bit_on_a_create_time_topic_out_of_window() -> None:
    data = lat_bit(kp([(NOW, b"k", b"v"), (NOW, b"k", b"v")]), NOW - 5000)
    r = rejected(decide(data, W1000), Errors.INVALID_TIMESTAMP)
    assert [e.message for e in r.record_errors] == [
        f"Timestamp {NOW - 5000} of message with offset {i} is out of range. "
        f"The timestamp should be within [{NOW - 1000}, {NOW + 1000}]" for i in range(2)
    ]


# =========================================================================================================
# LogAppendTime stamping, the monotonic clock, segment size, future timestamps


def test_log_append_time_matches_the_reference_vector() -> None:
    # CRC-32C check values (a) -> (c): attributes 0x0008, maxTimestamp L, baseTimestamp T, CRC 0xf76b7af9
    a = bytes.fromhex(
        "0000000000000000" "0000003a" "ffffffff" "02" "bbcc4115" "0000" "00000000"
        "0000018bcfe56800" "0000018bcfe56800" "ffffffffffffffff" "ffff" "ffffffff" "00000001"
        "10" "00" "00" "00" "01" "04" "6869" "00"
    )
    L = 1700000001234
    r = accepted(decide(a, LAT, PartitionState(log_end_offset=3), now=L))
    assert r.records[21:] == bytes.fromhex(
        "0008" "00000000" "0000018bcfe56800" "0000018bcfe56cd2" "ffffffffffffffff" "ffff" "ffffffff" "00000001"
        "10" "00" "00" "00" "01" "04" "6869" "00"
    )
    assert r.records[17:21] == bytes.fromhex("f76b7af9")
    assert struct.unpack_from(">qiib", r.records) == (3, 58, GATEWAY_LEADER_EPOCH, 2)


def test_create_time_header_only_changes_where_it_must() -> None:
    data = kp([(NOW, b"k", b"v")])
    r = accepted(decide(data, state=PartitionState(log_end_offset=77)))
    assert r.records[16:] == data[16:]  # same type and max: no CRC rewrite (setMaxTimestamp is a no-op)
    assert struct.unpack_from(">qi", r.records)[0] == 77


def test_monotonic_clock_holds_when_the_batch_clock_is_behind() -> None:
    state = PartitionState(log_end_offset=10, last_append_time_ms=NOW + 5000)
    r = accepted(decide(three(1234), LAT, state))
    assert r.append_time_ms == r.log_append_time_ms == r.max_timestamp == NOW + 5000 and r.clock_held
    assert read(r.records).max_timestamp == NOW + 5000
    assert r.state.last_append_time_ms == NOW + 5000
    # the window still uses the batch clock, not the held append time
    r = accepted(decide(kp([(NOW + HOUR, b"k", b"v")]), CT, state))
    assert r.clock_held and r.append_time_ms == NOW + 5000 and r.log_append_time_ms == -1
    rejected(decide(kp([(NOW + HOUR + 1, b"k", b"v")]), CT, state), Errors.INVALID_TIMESTAMP)
    # clock ahead again: no hold, append time moves forward
    r = accepted(decide(three(1234), LAT, state, now=NOW + 6000))
    assert not r.clock_held and r.state.last_append_time_ms == NOW + 6000


def test_state_advances_only_on_accept() -> None:
    state = PartitionState(log_start_offset=2, log_end_offset=10, last_append_time_ms=NOW - 1)
    r = accepted(decide(three(NOW), CT, state))
    assert r.state == PartitionState(2, 13, NOW, NO_PRODUCERS) and r.log_start_offset == 2


def test_record_list_too_large() -> None:
    data = kp([(NOW, b"k", b"x" * 1_100_000)])
    config = cfg(segment_bytes=1048576, max_message_bytes=2_000_000)
    r = rejected(decide(data, config), Errors.RECORD_LIST_TOO_LARGE,
                 f"Message batch size is {len(data)} bytes in append to partition t-0, which exceeds the maximum "
                 "configured segment size of 1048576.")
    assert r.log_start_offset == -1


def test_rebuilt_batch_is_rechecked_against_max_message_bytes() -> None:
    # LogValidator's size check of a rebuilt batch (sic: "append topartition"): a gzip batch recompressed with snappy grows
    values = [bytes([i % 251]) * 400 for i in range(20)]
    data = kp([(NOW, None, v) for v in values], GZIP)
    config = cfg(compression_type="uncompressed", max_message_bytes=len(data) + 10)
    r = rejected(decide(data, config), Errors.MESSAGE_TOO_LARGE)
    assert r.message.startswith("Message batch size is ") and " bytes in append topartition t-0 which exceeds the " \
        f"maximum configured size of {len(data) + 10}." in r.message


def test_future_timestamps_are_counted_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    """The count reaches the stage, which logs it throttled (streaming.logs); the pure core logs nothing."""
    for config in (cfg(message_timestamp_after_max_ms=2 * HOUR),
                   cfg({"message.timestamp.after.max.ms": 2 * HOUR, "gateway.record.validation": "fast"})):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="validators.log_validator"):
            r = accepted(decide(kp([(NOW, b"k", b"v"), (NOW + HOUR, b"k", b"v"), (NOW + HOUR + 1, b"k", b"v"),
                                    (NOW + 2 * HOUR, b"k", b"v")]), config))
        assert r.future_timestamp_count == 2
        assert caplog.text == ""
    assert accepted(decide(kp([(NOW + HOUR, b"k", b"v")]))).future_timestamp_count == 0
    assert accepted(decide(kp([(NOW + 5 * HOUR, b"k", b"v")]), LAT)).future_timestamp_count == 0


# =========================================================================================================
# idempotent producers (LogValidator, step 17)


def idem(seq: int, n: int = 3, epoch: int = 0, pid: int = 1324, ts: int = NOW) -> bytes:
    return kp([(ts + i, b"k", b"v") for i in range(n)], producer=(pid, epoch, seq))


def test_idempotent_appends_and_duplicates_on_a_create_time_topic() -> None:
    r1 = accepted(decide(idem(0)))
    r2 = accepted(decide(idem(3), state=r1.state, now=NOW + 10))
    assert (r2.base_offset, r2.state.log_end_offset) == (3, 6)
    dup = accepted(decide(idem(0), state=r2.state, now=NOW + 20))
    assert dup.duplicate and dup.records == b"" and dup.state is r2.state
    assert (dup.base_offset, dup.last_offset, dup.record_count) == (0, 2, 3)
    # Kafka's quirk kept: the cached batch timestamp, i.e. its max CreateTime, not -1
    assert dup.log_append_time_ms == dup.max_timestamp == NOW + 2
    (entry,) = r2.state.producers
    assert (entry.producer_id, entry.producer_epoch, entry.last_seq, entry.last_timestamp) == (1324, 0, 5, NOW + 10)


def test_idempotent_duplicate_on_a_log_append_time_topic_returns_the_original_append_time() -> None:
    r1 = accepted(decide(idem(0), LAT, now=NOW))
    dup = accepted(decide(idem(0), LAT, r1.state, now=NOW + 500))
    assert dup.duplicate and dup.log_append_time_ms == NOW and dup.base_offset == 0


def test_sequence_gap_stale_epoch_and_new_epoch() -> None:
    s = accepted(decide(idem(0, epoch=5), state=PartitionState(log_start_offset=1, log_end_offset=1))).state
    r = rejected(decide(idem(4, epoch=5), state=s), Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                 "Out of order sequence number for producer 1324 at offset 4 in partition t-0: 4 (incoming seq. number), "
                 "2 (current end sequence number)")
    assert r.log_start_offset == 1
    rejected(decide(idem(3, epoch=4), state=s), Errors.INVALID_PRODUCER_EPOCH,
             "Epoch of producer 1324 at offset 4 in t-0 is 4, which is smaller than the last seen epoch 5")
    rejected(decide(idem(3, epoch=6), state=s), Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
             "Invalid sequence number for new epoch of producer 1324at offset 4 in partition t-0: 6 (request epoch), "
             "3 (seq. number), 5 (current producer epoch)")
    r = accepted(decide(idem(0, epoch=6), state=s))
    (entry,) = r.state.producers
    assert entry.producer_epoch == 6 and len(entry.batches) == 1
    # a retry of the old epoch's batch is no longer a duplicate: its epoch is stale
    rejected(decide(idem(0, epoch=5), state=r.state), Errors.INVALID_PRODUCER_EPOCH)


def test_only_the_last_five_batches_are_duplicates() -> None:
    state = PartitionState()
    for seq in range(0, 18, 3):
        state = accepted(decide(idem(seq), state=state)).state
    assert accepted(decide(idem(3), state=state)).duplicate  # 2nd of 6: still cached
    rejected(decide(idem(0), state=state), Errors.OUT_OF_ORDER_SEQUENCE_NUMBER)  # evicted


def test_duplicate_check_comes_after_the_log_validator() -> None:
    state = accepted(decide(idem(0))).state
    # the same bytes a day later fall out of a 1 h window: Kafka validates before looking for duplicates
    r = rejected(decide(idem(0), cfg(message_timestamp_before_max_ms=HOUR), state, now=NOW + DAY), Errors.INVALID_TIMESTAMP)
    assert len(r.record_errors) == 3


def test_producer_expiry() -> None:
    config = cfg(producer_id_expiration_ms=1000)
    state = accepted(decide(idem(0), config)).state
    assert state.producers
    rejected(decide(idem(7), config, state, now=NOW + 999), Errors.OUT_OF_ORDER_SEQUENCE_NUMBER)
    r = accepted(decide(idem(7), config, state, now=NOW + 1000))  # forgotten: any sequence is accepted
    assert r.state.producers.get(1324).batches[0].first_seq == 7
    # unrelated appends also drop expired producers from the state
    r = accepted(decide(three(NOW + 5000), config, state, now=NOW + 5000))
    assert not r.state.producers


@pytest.mark.parametrize("encoding", ["state", "json"])
def test_producer_state_survives_the_state_column(encoding: str) -> None:
    """The stage's encoding, and the JSON of earlier checkpoints, which the stage still reads."""
    state = accepted(decide(idem(0))).state
    text = producers_to_state(state.producers) if encoding == "state" else producers_to_json(state.producers)
    restored = PartitionState(state.log_start_offset, state.log_end_offset, state.last_append_time_ms,
                              producers_from_state(text))
    assert restored == state
    assert accepted(decide(idem(0), state=restored)).duplicate


def test_sequence_of_a_full_batch_wraps() -> None:
    s = accepted(decide(idem(2**31 - 2))).state
    assert s.producers.get(1324).last_seq == 0  # (2^31-2) + 2 wraps past Integer.MAX_VALUE
    accepted(decide(idem(1), state=s))


# =========================================================================================================
# fast and full record walks decide identically (CreateTime)

_ts = st.one_of(
    st.integers(NOW - 3000, NOW + 3000),
    st.just(-1),
    st.integers(-10, 10),
    st.sampled_from([LONG_MIN, LONG_MAX, NOW - LONG_MAX, NOW + HOUR, NOW + HOUR + 1]),
    st.integers(LONG_MIN, LONG_MAX),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stamps=st.lists(_ts, min_size=1, max_size=12),
    base_from=st.integers(0, 11),
    null_keys=st.lists(st.booleans(), min_size=12, max_size=12),
    before=st.sampled_from([0, 1000, HOUR, LONG_MAX]),
    after=st.sampled_from([0, 1000, 2 * HOUR, LONG_MAX]),
    value_len=st.sampled_from([0, 1, 70, 9000]),
    count_delta=st.sampled_from([0, 0, 0, 1, -1]),
)
def test_fast_and_full_walks_agree(stamps: list[int], base_from: int, null_keys: list[bool], before: int, after: int,
                                   value_len: int, count_delta: int) -> None:
    base = stamps[base_from % len(stamps)]
    area = b"".join(
        raw_record(i, ((t - base + 2**63) % 2**64) - 2**63, None if null_keys[i] else b"k", b"x" * value_len)
        for i, t in enumerate(stamps)
    )
    count = max(len(stamps) + count_delta, 1)
    data = raw_batch(area, count, base_ts=base, max_ts=max(stamps))
    common = {"message.timestamp.before.max.ms": before, "message.timestamp.after.max.ms": after}
    fast = decide(data, cfg({**common, "gateway.record.validation": "fast"}))
    full = decide(data, cfg(common))
    assert fast == full


# =========================================================================================================
# more paths: fast-walk fallbacks, legacy analysis, rebuild failures


def test_fast_walk_handles_long_records_and_large_timestamp_deltas() -> None:
    big = kp([(NOW, b"k", b"x" * 20_000), (NOW + 1, b"k", b"y")])  # 3-byte length varint: full walk
    assert accepted(decide(big)).max_timestamp == NOW + 1
    wide = kp([(NOW - 2 * DAY, b"k", b"v"), (NOW, b"k", b"v"), (NOW - 40 * DAY, b"k", b"v")])  # 3-5 byte deltas
    r = accepted(decide(wide))
    assert r.max_timestamp == NOW
    r = rejected(decide(wide, cfg(message_timestamp_before_max_ms=DAY)), Errors.INVALID_TIMESTAMP)
    assert ts_errors(r) == [0, 2]


def test_an_overlong_timestamp_varlong_is_a_structure_error() -> None:
    body = b"\x00" + b"\xff" * 10 + b"\x01" + b"\x00\x02k\x02v\x00"
    data = raw_batch(raw_record(0, 0, None, None, body=body), 1)
    rejected(decide(data), Errors.INVALID_RECORD, "Found invalid record structure")


def test_negative_timestamp_on_the_rebuild_path_is_an_unknown_server_error() -> None:
    data = raw_batch(raw_records([-5], -5), 1, base_ts=-5, max_ts=-5)
    accepted(decide(data))  # in place: stored verbatim
    rejected(decide(data, cfg(compression_type="gzip"), PartitionState(log_start_offset=1)),
             Errors.UNKNOWN_SERVER_ERROR, "Invalid negative timestamp -5")


def test_trailing_fragment_shorter_than_a_header_up_to_magic() -> None:
    good = three(NOW)
    assert len(accepted(decide(good + struct.pack(">qi", 0, 100) + b"\x00\x00")).records) == len(good)


def legacy_lat_set(ts: int, key: bytes | None = b"k") -> tuple[bytes, bytes]:
    message = legacy_message(1, ts, key, b"v", 0x08)
    return legacy_entry(0, message), message


def test_legacy_log_append_time_flag() -> None:
    data, message = legacy_lat_set(NOW - 7)
    crc = struct.unpack_from(">I", message)[0]
    r = rejected(decide(data, LAT), Errors.INVALID_TIMESTAMP)
    assert r.record_errors == (RecordError(0, (
        f"Invalid timestamp type in message LegacyRecordBatch(offset=0, Record(magic=1, attributes=8, "
        f"compression=none, crc={crc}, LogAppendTime={NOW - 7}, key=1 bytes, value=1 bytes)). Producer should not "
        "set timestamp type to LogAppendTime.")),)
    # a CreateTime topic checks the record's own timestamp
    assert accepted(decide(data)).max_timestamp == NOW - 7


def test_legacy_analysis_order() -> None:
    v1 = legacy_set(1, [(NOW, b"k", b"v")])
    v0 = legacy_set(0, [(NOW, b"k", b"v")])
    rejected(decide(v1, cfg(max_message_bytes=len(v1) - 1)), Errors.MESSAGE_TOO_LARGE,
             f"The record batch size in the append to t-0 is {len(v1)} bytes which exceeds the maximum configured "
             f"value of {len(v1) - 1}).")
    bad = bytearray(v1)
    bad[-1] ^= 1
    stored = struct.unpack_from(">I", bad, 12)[0]
    rejected(decide(bytes(bad)), Errors.CORRUPT_MESSAGE, f"Record is corrupt (stored crc = {stored}) in topic partition t-0.")
    odd_codec = legacy_entry(0, legacy_message(1, NOW, b"k", b"v", 5))
    rejected(decide(odd_codec), Errors.UNKNOWN_SERVER_ERROR, "Unknown compression type id: 5")
    rejected(decide(v0 + v1), Errors.INVALID_RECORD,
             "Batch magic 1 is not the same as the first batch's magic byte 0 in topic partition t-0")
    rejected(decide(v1 + three(NOW)), Errors.INVALID_RECORD,
             "Batch magic 2 is not the same as the first batch's magic byte 1 in topic partition t-0")
    rejected(decide(v1 + patch(three(NOW), 0, ">q", 3, crc=False)), Errors.INVALID_RECORD,
             "The baseOffset of the record batch in the append to t-0 should be 0, but it is 3")
    rejected(decide(v1 + struct.pack(">qi", 0, 2)), Errors.CORRUPT_MESSAGE,
             "Record size 2 is less than the minimum record overhead (14)")


def test_legacy_structure_and_stream_errors() -> None:
    short = legacy_entry(0, legacy_message(1, NOW, b"k", b"v")[:-3])  # value length beyond the message
    short = legacy_entry(0, struct.pack(">I", zlib.crc32(short[16:]) & 0xFFFFFFFF) + short[16:])
    rejected(decide(short), Errors.INVALID_RECORD, "Found invalid record structure")
    garbage = legacy_entry(0, legacy_message(1, NOW, None, b"not gzip at all", GZIP))
    r = rejected(decide(garbage), Errors.CORRUPT_MESSAGE)
    assert r.message.startswith("Failed to decompress record stream in topic partition t-0")
    inner = legacy_entry(0, legacy_message(1, NOW, None, b"x", GZIP))  # an inner message claiming compression
    rejected(decide(legacy_wrapper(1, GZIP, inner)), Errors.INVALID_RECORD, "Inner messages must not be compressed")


def test_legacy_key_future_negative_and_segment_checks(caplog: pytest.LogCaptureFixture) -> None:
    r = rejected(decide(legacy_set(1, [(NOW, None, b"v")]), cfg(cleanup_policy="compact")), Errors.INVALID_RECORD)
    assert r.record_errors == (RecordError(0, "Compacted topic cannot accept message without key in topic partition t-0"),)
    with caplog.at_level(logging.WARNING, logger="validators.log_validator"):
        r = accepted(decide(legacy_set(1, [(NOW + 2 * HOUR, b"k", b"v")]), cfg(message_timestamp_after_max_ms=3 * HOUR)))
    assert r.future_timestamp_count == 1 and caplog.text == ""
    rejected(decide(legacy_set(1, [(-5, b"k", b"v")]), state=PartitionState(log_start_offset=2)),
             Errors.UNKNOWN_SERVER_ERROR, "Invalid negative timestamp -5")
    big = legacy_set(0, [(-1, b"k", b"x" * 1_100_000)])
    r = rejected(decide(big, cfg(segment_bytes=1048576, max_message_bytes=2_000_000)), Errors.RECORD_LIST_TOO_LARGE)
    assert r.message.endswith("which exceeds the maximum configured segment size of 1048576.")


def test_legacy_rebuild_rechecks_max_message_bytes() -> None:
    # uncompressed v0 entries become one v2 batch whose size differs from the sum of the entries
    data = b"".join(legacy_set(0, [(-1, b"k", b"v" * 40)]) for _ in range(3))
    converted = len(accepted(decide(data)).records)
    config = cfg(max_message_bytes=converted - 1)
    r = rejected(decide(data, config), Errors.MESSAGE_TOO_LARGE,
                 f"Message batch size is {converted} bytes in append topartition t-0 which exceeds the maximum "
                 f"configured size of {converted - 1}.")
    assert r.log_start_offset == -1


def test_legacy_append_expires_producers() -> None:
    config = cfg(producer_id_expiration_ms=10)
    state = accepted(decide(idem(0), config)).state
    assert accepted(decide(legacy_set(1, [(NOW, b"k", b"v")]), config, state, now=NOW + 10)).state.producers == NO_PRODUCERS


# =========================================================================================================
# the cheap exact walker never accepts what Kafka's walk rejects; the compressed stream semantics


_records = st.lists(
    st.tuples(
        st.integers(-(1 << 20), 1 << 20),  # timestamp delta
        st.one_of(st.none(), st.binary(max_size=70)),  # key
        st.one_of(st.none(), st.binary(max_size=200)),  # value
        st.lists(st.tuples(st.binary(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=2),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=400, deadline=None)
@given(records=_records, mutate=st.one_of(st.none(), st.tuples(st.integers(0, 10_000), st.integers(0, 255))),
       count_delta=st.sampled_from([0, 0, 1, -1]))
def test_exact_walker_agrees_with_the_codecs_complete_walk(records: list, mutate: tuple | None, count_delta: int) -> None:
    from validators import record_walks as lv
    from validators.codec import records as rec

    area = bytearray(b"".join(raw_record(i, td, k, v, tuple(h)) for i, (td, k, v, h) in enumerate(records)))
    if mutate is not None:
        area[mutate[0] % len(area)] = mutate[1]
    count = max(len(records) + count_delta, 1)
    data = raw_batch(bytes(area), count)
    zs = lv._walk_records(data, len(data), count)
    try:
        scan = rec.scan_records(bytes(area), count)
    except rec.InvalidRecordError:
        assert zs is None
        return
    if zs is not None:
        assert [(z >> 1) ^ -(z & 1) for z in zs] == list(scan.timestamp_deltas)
    # either way the decision is the complete walk's
    full = decide(data, cfg({"cleanup.policy": "delete"}))
    assert isinstance(full, Accepted) or full.error is not Errors.INVALID_RECORD


@settings(max_examples=400, deadline=None)
@given(records=_records, mutate=st.one_of(st.none(), st.tuples(st.integers(0, 10_000), st.integers(0, 255))),
       count_delta=st.sampled_from([0, 0, 1, -1]))
def test_exact_walker_accepts_only_what_the_stream_reader_accepts(records: list, mutate: tuple | None,
                                                                  count_delta: int) -> None:
    """Compressed in-place batches: the cheap walker (with the contiguous-offsets condition) may only
    accept an area that Kafka's stream reader (`readPartiallyFrom`) reads to the same timestamps."""
    from validators import record_walks as lv
    from validators.codec import records as rec

    area = bytearray(b"".join(raw_record(i, td, k, v, tuple(h)) for i, (td, k, v, h) in enumerate(records)))
    if mutate is not None:
        area[mutate[0] % len(area)] = mutate[1]
    area_bytes = bytes(area)
    count = max(len(records) + count_delta, 1)
    zs = lv._walk_records(area_bytes, len(area_bytes), count, 0, contiguous=True)
    if zs is None:
        return
    ods, tds, _keys, _values = rec.scan_partial_records(area_bytes, count)
    assert ods == list(range(count))
    assert [(z >> 1) ^ -(z & 1) for z in zs] == tds
    rec.scan_records(area_bytes, count)  # and the ByteBuffer reader too


def test_exact_walker_takes_headers_and_null_fields() -> None:
    records = [(NOW, None, b"v", [("h1", b"x"), ("h2", None)]), (NOW + 1, b"k", None), (NOW + 2, b"", b"")]
    data = kp(records)
    from validators import record_walks as lv

    assert lv._walk_records(data, len(data), 3) == [0, 2, 4]
    assert accepted(decide(data)).max_timestamp == NOW + 2


def gz_batch(area: bytes, count: int, **kw: object) -> bytes:
    return raw_batch(compress(GZIP, area), count, attributes=GZIP, **kw)  # type: ignore[arg-type]


def test_compressed_records_are_read_as_a_stream() -> None:
    """Path B in place reads `PartialDefaultRecord`s from the decompressed stream (Kafka 4.x
    `readPartiallyFrom(InputStream)`): field after field, the record length is not enforced."""
    good = raw_record(0, 0, b"k", b"v")
    second = raw_record(1, 0, b"k", b"v")
    accepted(decide(gz_batch(good + raw_record(1, 0, b"k", b"v", size_adjust=1), 2)))  # length 1 too long
    accepted(decide(gz_batch(good + raw_record(1, 0, b"k", b"v", size_adjust=-1), 2)))  # 1 too short
    rejected(decide(gz_batch(good + second, 3)), Errors.INVALID_RECORD, "Incorrect declared batch size, premature EOF reached")
    rejected(decide(gz_batch(good + second, 1)), Errors.INVALID_RECORD,
             "Incorrect declared batch size, records still remaining in file")
    rejected(decide(gz_batch(good + raw_record(1, 0, b"k", b"v", body=b"\x00\x00\x02\x02k\x02v\x01"), 2)),
             Errors.INVALID_RECORD, "Found invalid number of record headers -1")
    rejected(decide(gz_batch(good + raw_record(1, 0, b"k", b"v", body=b"\x00\x00\x02\x02k\x02v\x02\x01"), 2)),
             Errors.INVALID_RECORD, "Invalid negative header key size -1")
    rejected(decide(gz_batch(good + raw_record(1, 0, b"k", b"v", body=b"\x00\x00\x02\x7ek\x02v\x00"), 2)),
             Errors.INVALID_RECORD, "Reached end of input stream before skipping all bytes. Remaining bytes:59")
    rejected(decide(gz_batch(good + b"\x0c\x00\xff\xff", 2)), Errors.INVALID_RECORD, "Found invalid record structure")
    # the same bytes uncompressed follow DefaultRecord.readFrom(ByteBuffer): the length is enforced
    rejected(decide(raw_batch(good + raw_record(1, 0, b"k", b"v", size_adjust=-1), 2)), Errors.INVALID_RECORD,
             "Invalid record size: expected to read 7 bytes in record payload, but instead read 8")


def test_compressed_log_append_time_flag_prints_raw_sizes() -> None:
    area = raw_record(0, 0, None, b"abc") + raw_record(1, 0, b"kk", None)
    r = rejected(decide(lat_bit(gz_batch(area, 2), NOW - 1), LAT), Errors.INVALID_TIMESTAMP)
    assert [e.message.split(". Producer")[0] for e in r.record_errors] == [
        f"Invalid timestamp type in message PartialDefaultRecord(offset=0, timestamp={NOW - 1}, key=-1 bytes, value=3 bytes)",
        f"Invalid timestamp type in message PartialDefaultRecord(offset=1, timestamp={NOW - 1}, key=2 bytes, value=-1 bytes)",
    ]
