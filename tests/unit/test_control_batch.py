"""End-transaction marker batches (control_batch.py): Kafka's exact bytes, round trips, the header
flags and CRC read back by the batch codec, and every way the parser refuses a batch — with hostile
bytes only ever raising ValueError."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from validators.codec.compression import CompressionType
from validators.codec.control_batch import (
    CONTROL_RECORD_KEY_SIZE,
    END_TXN_MARKER_VALUE_SIZE,
    ControlRecordType,
    EndTransactionMarker,
    build_end_txn_marker,
    encode_control_key,
    encode_end_txn_value,
    parse_control_key,
    parse_end_txn_marker,
    parse_end_txn_value,
    read_end_txn_marker,
)
from validators.codec.record_batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_FLAG_MASK,
    TimestampType,
    build_record_batch,
    compute_crc,
    decode_record_batch,
    is_valid,
    parse_header,
)
from validators.codec.records import Record

T = 1700000000000
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
COMMIT_5 = EndTransactionMarker(ControlRecordType.COMMIT, 5)

# MemoryRecords.withEndTransactionMarker(42, 1700000000000, 7, 1000L, (short) 3,
#     new EndTransactionMarker(COMMIT, 5)) as kafka-clients 4.2.1 writes it
KAFKA_COMMIT_5 = bytes.fromhex(
    "000000000000002a 00000042 00000007 02 8a773c25 0030 00000000"
    "0000018bcfe56800 0000018bcfe56800 00000000000003e8 0003 ffffffff 00000001"
    "20 00 00 00 08 0000 0001 0c 0000 00000005 00"
)
FUZZ = settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])


def _marker_batch(marker: EndTransactionMarker = COMMIT_5, **overrides: int) -> bytes:
    args = {"producer_id": 1000, "producer_epoch": 3, "base_offset": 42, "timestamp": T,
            "partition_leader_epoch": 7} | overrides
    return build_end_txn_marker(marker, **args)


def _control_batch(records: list, **kwargs: object) -> bytes:
    """A batch with any records, the control and transactional flags set unless told otherwise."""
    args: dict[str, object] = {"producer_id": 1000, "producer_epoch": 3, "is_transactional": True,
                               "is_control": True, "base_timestamp": T}
    return build_record_batch(records, **(args | kwargs))


def _recrc(batch: bytes | bytearray) -> bytes:
    out = bytearray(batch)
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(bytes(out[ATTRIBUTES_OFFSET:])))
    return bytes(out)


def _with_record(key: bytes | None, value: bytes | None) -> bytes:
    return _control_batch([Record(0, 0, key, value)])


# --------------------------------------------------------------------------------------------
# what Kafka writes


def test_kafka_vector_is_reproduced_and_parsed() -> None:
    assert _marker_batch() == KAFKA_COMMIT_5
    assert parse_end_txn_marker(KAFKA_COMMIT_5) == COMMIT_5


def test_header_fields_and_flags() -> None:
    h = parse_header(_marker_batch())
    assert (h.base_offset, h.batch_length, h.partition_leader_epoch, h.magic) == (42, 66, 7, 2)
    assert h.size_in_bytes == 78 == RECORD_BATCH_OVERHEAD + 17
    assert h.attributes == TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK == 0x30
    assert h.is_control_batch and h.is_transactional and h.compression_id == 0
    assert h.timestamp_type is TimestampType.CREATE_TIME
    assert (h.last_offset_delta, h.base_timestamp, h.max_timestamp) == (0, T, T)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (1000, 3, -1, 1)


def test_record_bytes_key_and_value_layout() -> None:
    batch = _marker_batch(EndTransactionMarker(ControlRecordType.ABORT, -2))
    # length 16 | attributes 0 | timestampDelta 0 | offsetDelta 0 | keyLength 4 | key | valueLength 6 |
    # value | headers 0 (varints zigzag-encoded)
    assert batch[RECORD_BATCH_OVERHEAD:] == bytes.fromhex("20 00 00 00 08 0000 0000 0c 0000 fffffffe 00")
    (record,) = decode_record_batch(batch).records
    assert record.key == b"\x00\x00\x00\x00" == encode_control_key(ControlRecordType.ABORT)
    assert record.value == b"\x00\x00\xff\xff\xff\xfe" == encode_end_txn_value(-2)
    assert (record.offset_delta, record.timestamp_delta, record.attributes, record.headers) == (0, 0, 0, ())
    assert record.offset == 42 and record.timestamp == T and record.sequence == -1
    assert encode_control_key(ControlRecordType.COMMIT) == b"\x00\x00\x00\x01"
    assert len(encode_control_key(ControlRecordType.COMMIT)) == CONTROL_RECORD_KEY_SIZE == 4
    assert len(encode_end_txn_value(INT32_MAX)) == END_TXN_MARKER_VALUE_SIZE == 6


def test_crc_is_valid_and_covers_the_record() -> None:
    batch = _marker_batch()
    decoded = decode_record_batch(batch)
    assert is_valid(batch) and decoded.is_valid and decoded.computed_crc == parse_header(batch).crc
    assert compute_crc(batch) == 0x8A773C25
    flipped = bytearray(batch)
    flipped[-2] ^= 1  # the coordinator epoch's last byte
    assert not is_valid(bytes(flipped))


def test_no_timestamp_keeps_minus_one() -> None:
    h = parse_header(_marker_batch(timestamp=-1))
    assert (h.base_timestamp, h.max_timestamp) == (-1, -1)


@given(
    control_type=st.sampled_from([ControlRecordType.ABORT, ControlRecordType.COMMIT]),
    coordinator_epoch=st.integers(INT32_MIN, INT32_MAX),
    producer_id=st.integers(LONG_MIN, LONG_MAX).filter(lambda v: v != -1),
    producer_epoch=st.integers(-(1 << 15), (1 << 15) - 1).filter(lambda v: v != -1),
    base_offset=st.integers(LONG_MIN, LONG_MAX),
    timestamp=st.one_of(st.just(-1), st.integers(0, LONG_MAX)),
    leader_epoch=st.integers(INT32_MIN, INT32_MAX),
)
@FUZZ
def test_round_trip(control_type: ControlRecordType, coordinator_epoch: int, producer_id: int,
                    producer_epoch: int, base_offset: int, timestamp: int, leader_epoch: int) -> None:
    marker = EndTransactionMarker(control_type, coordinator_epoch)
    batch = build_end_txn_marker(marker, producer_id=producer_id, producer_epoch=producer_epoch,
                                 base_offset=base_offset, timestamp=timestamp,
                                 partition_leader_epoch=leader_epoch)
    assert len(batch) == 78 and is_valid(batch)
    assert parse_end_txn_marker(batch) == marker
    assert read_end_txn_marker(decode_record_batch(batch)) == marker
    h = parse_header(batch)
    assert (h.base_offset, h.partition_leader_epoch, h.producer_id, h.producer_epoch) == (
        base_offset, leader_epoch, producer_id, producer_epoch)
    assert h.base_timestamp == h.max_timestamp == timestamp
    assert batch[RECORD_BATCH_OVERHEAD + 5 : RECORD_BATCH_OVERHEAD + 9] == struct.pack(">hh", 0, control_type)
    assert batch[-7:-1] == struct.pack(">hi", 0, coordinator_epoch)


def test_marker_takes_a_plain_type_id() -> None:
    marker = EndTransactionMarker(1, 9)  # type: ignore[arg-type]
    assert marker.control_type is ControlRecordType.COMMIT
    assert marker == EndTransactionMarker(ControlRecordType.COMMIT, 9)
    assert hash(marker) == hash(EndTransactionMarker(ControlRecordType.COMMIT, 9))


# --------------------------------------------------------------------------------------------
# what the builder refuses (Kafka's IllegalArgumentException texts, in Kafka's order)


@pytest.mark.parametrize(("overrides", "message"), [
    ({"producer_id": -1}, "End transaction marker requires a valid producerId"),
    ({"producer_id": -1, "timestamp": -2, "producer_epoch": -1}, "End transaction marker requires a valid producerId"),
    ({"timestamp": -2}, "Invalid negative timestamp -2"),
    ({"timestamp": LONG_MIN, "producer_epoch": -1}, f"Invalid negative timestamp {LONG_MIN}"),
    ({"producer_epoch": -1}, "Invalid negative producer epoch"),
    ({"producer_id": LONG_MAX + 1}, "producer_id"),
    ({"producer_epoch": 1 << 15}, "producer_epoch"),
    ({"base_offset": LONG_MIN - 1}, "base_offset"),
    ({"timestamp": LONG_MAX + 1}, "timestamp"),
    ({"partition_leader_epoch": INT32_MAX + 1}, "partition_leader_epoch"),
    ({"producer_epoch": True}, "producer_epoch must be an int"),
])
def test_builder_refuses(overrides: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _marker_batch(**overrides)


def test_builder_takes_other_negative_epochs_as_kafka_does() -> None:
    # validateProducerState only refuses exactly -1
    assert parse_header(_marker_batch(producer_epoch=-7)).producer_epoch == -7


@pytest.mark.parametrize(("control_type", "message"), [
    (ControlRecordType.LEADER_CHANGE, r"end transaction marker: LEADER_CHANGE \(2\)"),
    (ControlRecordType.KRAFT_VOTERS, r"end transaction marker: KRAFT_VOTERS \(6\)"),
    (7, "Unknown control record type 7"),
    (-1, "Unknown control record type -1"),
])
def test_marker_refuses_other_types(control_type: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EndTransactionMarker(control_type, 0)  # type: ignore[arg-type]


@pytest.mark.parametrize("epoch", [INT32_MAX + 1, INT32_MIN - 1])
def test_marker_refuses_epoch_outside_int32(epoch: int) -> None:
    with pytest.raises(ValueError, match="coordinator_epoch"):
        EndTransactionMarker(ControlRecordType.ABORT, epoch)
    with pytest.raises(ValueError, match="coordinator_epoch"):
        encode_end_txn_value(epoch)


# --------------------------------------------------------------------------------------------
# key and value as EndTransactionMarker.deserialize reads them


def test_key_and_value_tolerate_newer_versions_and_trailing_bytes() -> None:
    assert parse_control_key(b"\x00\x01\x00\x01") is ControlRecordType.COMMIT
    assert parse_control_key(b"\x00\x00\x00\x00\xff\xff") is ControlRecordType.ABORT
    assert parse_end_txn_value(ControlRecordType.ABORT, b"\x00\x03\x00\x00\x00\x09") == EndTransactionMarker(
        ControlRecordType.ABORT, 9)
    assert parse_end_txn_value(ControlRecordType.COMMIT, b"\x00\x00\x7f\xff\xff\xff\x00") == EndTransactionMarker(
        ControlRecordType.COMMIT, INT32_MAX)
    assert parse_end_txn_marker(_with_record(b"\x00\x05\x00\x01\x00", b"\x00\x02\x00\x00\x00\x04\x01")) == (
        EndTransactionMarker(ControlRecordType.COMMIT, 4))


@pytest.mark.parametrize(("key", "message"), [
    (None, "Control record has a null key"),
    (b"", "at least 4 bytes, but found only 0"),
    (b"\x00\x00\x00", "at least 4 bytes, but found only 3"),
    (b"\xff\xff\x00\x01", "Invalid version found for control record: -1"),
    (b"\x80\x00\x00\x01", "Invalid version found for control record: -32768"),
    (b"\x00\x00\x00\x07", "Unknown control record type id 7"),
    (b"\x00\x00\xff\xff", "Unknown control record type id -1"),
])
def test_bad_keys(key: bytes | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_control_key(key)
    with pytest.raises(ValueError, match=message):
        parse_end_txn_marker(_with_record(key, encode_end_txn_value(1)))


@pytest.mark.parametrize("type_id", [2, 3, 4, 5, 6])
def test_kraft_control_records_are_not_markers(type_id: int) -> None:
    name = ControlRecordType(type_id).name
    with pytest.raises(ValueError, match=f"Invalid control record type for end transaction marker: {name}"):
        parse_end_txn_marker(_with_record(struct.pack(">hh", 0, type_id), encode_end_txn_value(1)))


@pytest.mark.parametrize(("value", "message"), [
    (None, "End transaction marker has a null value"),
    (b"", "at least 6 bytes, but found only 0"),
    (b"\x00\x00\x00\x00\x01", "at least 6 bytes, but found only 5"),
    (b"\xff\xfe\x00\x00\x00\x01", "Invalid version found for end transaction marker: -2"),
])
def test_bad_values(value: bytes | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_end_txn_value(ControlRecordType.COMMIT, value)
    with pytest.raises(ValueError, match=message):
        parse_end_txn_marker(_with_record(encode_control_key(ControlRecordType.COMMIT), value))


# --------------------------------------------------------------------------------------------
# batches that are not one end-transaction control batch


def _set(batch: bytes, offset: int, fmt: str, value: int, recrc: bool = True) -> bytes:
    out = bytearray(batch)
    struct.pack_into(fmt, out, offset, value)
    return _recrc(out) if recrc else bytes(out)


KEY, VALUE = encode_control_key(ControlRecordType.COMMIT), encode_end_txn_value(5)


KEY_ONLY = _control_batch([(T, KEY, VALUE)])


@pytest.mark.parametrize(("batch", "message"), [
    pytest.param(b"", "needs at least 61 bytes, got 0", id="empty"),
    pytest.param(KAFKA_COMMIT_5[:60], "needs at least 61 bytes, got 60", id="short-header"),
    pytest.param(_set(KAFKA_COMMIT_5, 16, ">b", 1, recrc=False), "Not a v2 record batch: magic 1", id="magic-1"),
    pytest.param(_set(KAFKA_COMMIT_5, 16, ">b", -1, recrc=False), "Not a v2 record batch: magic -1", id="magic-neg"),
    pytest.param(KAFKA_COMMIT_5[:-1], "size field says 78 bytes, 77 given", id="truncated"),
    pytest.param(KAFKA_COMMIT_5 + b"\x00", "size field says 78 bytes, 79 given", id="trailing-byte"),
    pytest.param(KAFKA_COMMIT_5 + KAFKA_COMMIT_5, "size field says 78 bytes, 156 given", id="two-batches"),
    pytest.param(_set(KAFKA_COMMIT_5, 8, ">i", -1, recrc=False), "size field says 11 bytes, 78 given",
                 id="negative-length"),
    pytest.param(_set(KAFKA_COMMIT_5, 73, ">i", 6, recrc=False),
                 r"Record batch is corrupt \(stored crc = 2323069989, computed crc = \d+\)", id="epoch-changed"),
    pytest.param(_set(KAFKA_COMMIT_5, CRC_OFFSET, ">I", 0, recrc=False), "stored crc = 0, computed crc = 2323069989",
                 id="crc-zeroed"),
    pytest.param(build_record_batch([(T, KEY, VALUE)], producer_id=1000, producer_epoch=3, base_sequence=0),
                 r"Not a control batch \(attributes 0x0000\)", id="data-batch"),
    pytest.param(build_record_batch([(T, KEY, VALUE)], producer_id=1000, producer_epoch=3, base_sequence=0,
                                    is_transactional=True), r"Not a control batch \(attributes 0x0010\)",
                 id="transactional-data-batch"),
    pytest.param(_control_batch([(T, KEY, VALUE)], is_transactional=False),
                 "depends on batch transactional flag being enabled", id="not-transactional"),
    pytest.param(_control_batch([(T, KEY, VALUE)], producer_id=-1), "requires a valid producerId", id="no-producer"),
    pytest.param(_control_batch([]), "exactly one control record, found 0", id="no-record"),
    pytest.param(_control_batch([(T, KEY, VALUE), (T, KEY, VALUE)]), "exactly one control record, found 2",
                 id="two-records"),
    pytest.param(_control_batch([(T, KEY, VALUE)], records_count=-1), "exactly one control record, found -1",
                 id="count-negative"),
    pytest.param(_control_batch([(T, KEY, VALUE)], records_count=INT32_MAX),
                 "exactly one control record, found 2147483647", id="count-huge"),
    pytest.param(_control_batch([(T, KEY, VALUE), (T, KEY, VALUE)], records_count=1),
                 "malformed records area: Incorrect declared batch size, records still remaining",
                 id="extra-record-bytes"),
    pytest.param(_set(KEY_ONLY, 61, ">b", 0x7E), "malformed records area: Invalid record size: expected 63 bytes",
                 id="record-length-past-end"),
    pytest.param(_set(KEY_ONLY, 65, ">b", 0x7F), "malformed records area", id="key-length-negative"),
    pytest.param(_set(KEY_ONLY, ATTRIBUTES_OFFSET, ">h", 0x37), "malformed records area: Unknown compression type id: 7",
                 id="codec-7"),
    pytest.param(_set(KEY_ONLY, ATTRIBUTES_OFFSET, ">h", 0x31), "malformed records area", id="gzip-flag-plain-bytes"),
])
def test_parser_refuses(batch: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_end_txn_marker(batch)


def test_compressed_marker_batch_is_read_as_kafka_reads_it() -> None:
    # Kafka never compresses a marker, but its readers decompress any control batch they are given
    batch = _control_batch([(T, KEY, VALUE)], compression=CompressionType.GZIP)
    assert parse_header(batch).compression_id == 1
    assert parse_end_txn_marker(batch) == COMMIT_5


def test_log_append_time_marker_is_read() -> None:
    # a leader of a LogAppendTime topic stamps the marker batch too
    batch = _control_batch([(T, KEY, VALUE)], timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=T + 5)
    assert parse_end_txn_marker(batch) == COMMIT_5


def test_read_end_txn_marker_checks_the_decoded_header() -> None:
    data = decode_record_batch(build_record_batch([(T, KEY, VALUE)], producer_id=1, producer_epoch=0))
    with pytest.raises(ValueError, match="Not a control batch"):
        read_end_txn_marker(data)
    two = decode_record_batch(_control_batch([(T, KEY, VALUE), (T, KEY, VALUE)]))
    with pytest.raises(ValueError, match="exactly one control record, found 2"):
        read_end_txn_marker(two)
    emptied = dataclasses.replace(decode_record_batch(KAFKA_COMMIT_5), records=())
    with pytest.raises(ValueError, match="exactly one control record, found 0"):
        read_end_txn_marker(emptied)
    assert read_end_txn_marker(decode_record_batch(KAFKA_COMMIT_5)) == COMMIT_5


def test_header_is_judged_before_the_records() -> None:
    # a data batch with a broken records area is reported as not a control batch
    broken = _set(build_record_batch([(T, KEY, VALUE)], producer_id=1, producer_epoch=0), 61, ">b", 0x7E)
    with pytest.raises(ValueError, match="Not a control batch"):
        parse_end_txn_marker(broken)


# --------------------------------------------------------------------------------------------
# hostile bytes: a marker or a ValueError, never anything else


def _parse_or_value_error(data: bytes) -> EndTransactionMarker | None:
    try:
        marker = parse_end_txn_marker(data)
    except ValueError as e:
        assert str(e), "a ValueError must say what is wrong"
        return None
    assert isinstance(marker, EndTransactionMarker)
    assert marker.control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT)
    return marker


@given(st.binary(max_size=200))
@FUZZ
def test_random_bytes(data: bytes) -> None:
    _parse_or_value_error(data)


@given(st.binary(max_size=200))
@FUZZ
def test_random_bytes_behind_a_valid_header(tail: bytes) -> None:
    # the header's framing, flags, count and CRC made right, so the records area itself is attacked
    batch = bytearray(KAFKA_COMMIT_5[:RECORD_BATCH_OVERHEAD] + tail)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    _parse_or_value_error(_recrc(batch))


@given(st.lists(st.tuples(st.integers(0, 77), st.integers(0, 255)), min_size=1, max_size=6), st.booleans())
@FUZZ
def test_mutated_marker(edits: list[tuple[int, int]], recrc: bool) -> None:
    batch = bytearray(KAFKA_COMMIT_5)
    for index, byte in edits:
        batch[index] = byte
    data = _recrc(batch) if recrc else bytes(batch)
    marker = _parse_or_value_error(data)
    if not recrc and bytes(batch[ATTRIBUTES_OFFSET:]) != KAFKA_COMMIT_5[ATTRIBUTES_OFFSET:]:
        assert marker is None  # the CRC catches any change it covers


@pytest.mark.parametrize("length", range(len(KAFKA_COMMIT_5)))
def test_every_truncation_is_refused(length: int) -> None:
    with pytest.raises(ValueError):
        parse_end_txn_marker(KAFKA_COMMIT_5[:length])
