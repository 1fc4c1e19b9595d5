"""v2 batches: CRC-32C check values vectors, CRC-32C, builder, framing, decoding as Kafka reports it."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from validators.codec.compression import (
    CompressionType,
    CorruptCompressedDataError,
    DecompressionLimitExceededError,
)
from validators.codec.record_batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    CorruptRecordError,
    TimestampType,
    assign_offsets_and_timestamp,
    build_record_batch,
    compute_crc,
    decode_record_batch,
    increment_sequence,
    is_valid,
    iter_batches,
    parse_header,
    records_area,
    wrap_long,
)
from validators.codec.records import InvalidRecordError, Record, encode_records

T = 1700000000000  # 0x0000018BCFE56800
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1

VECTOR_A = bytes.fromhex(
    "0000000000000000 0000003a ffffffff 02 bbcc4115 0000 00000000"
    "0000018bcfe56800 0000018bcfe56800 ffffffffffffffff ffff ffffffff 00000001"
    "10 00 00 00 01 04 6869 00"
)
VECTOR_B = bytes.fromhex(
    "0000000000000000 00000049 ffffffff 02 ee23c88d 0000 00000001"
    "0000018bcfe56800 0000018bcfe56805 ffffffffffffffff ffff ffffffff 00000002"
    "12 00 00 00 02 6b 04 7631 00"
    "1a 00 0a 02 02 6b 04 7632 02 02 68 02 78"
)
VECTOR_C = bytes.fromhex(
    "0000000000000000 0000003a 00000007 02 f76b7af9 0008 00000000"
    "0000018bcfe56800 0000018bcfe56cd2 ffffffffffffffff ffff ffffffff 00000001"
    "10 00 00 00 01 04 6869 00"
)


def _recrc(batch: bytes) -> bytes:
    out = bytearray(batch)
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(bytes(out[ATTRIBUTES_OFFSET:])))
    return bytes(out)


# ------------------------------------------------------------------ reference vectors


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283


def test_vector_a_byte_for_byte() -> None:
    batch = build_record_batch([(T, None, b"hi")])
    assert batch == VECTOR_A
    assert len(batch) == 70
    assert parse_header(batch).batch_length == 58
    assert compute_crc(batch) == 0xBBCC4115 and is_valid(batch)


def test_vector_b_byte_for_byte() -> None:
    batch = build_record_batch([(T, b"k", b"v1"), (T + 5, b"k", b"v2", [("h", b"x")])])
    assert batch == VECTOR_B
    header = parse_header(batch)
    assert (len(batch), header.batch_length, header.last_offset_delta) == (85, 0x49, 1)
    assert header.max_timestamp == T + 5 and header.crc == 0xEE23C88D


def test_vector_b_from_records_with_explicit_deltas() -> None:
    records = [Record(0, 0, b"k", b"v1"), Record(1, 5, b"k", b"v2", (("h", b"x"),))]
    assert build_record_batch(records, base_timestamp=T) == VECTOR_B


def test_vector_c_byte_for_byte() -> None:
    stamped = assign_offsets_and_timestamp(VECTOR_A, 0, TimestampType.LOG_APPEND_TIME, 1700000001234, 7)
    assert stamped == VECTOR_C
    assert compute_crc(stamped) == 0xF76B7AF9


def test_vector_c_decodes_as_a_kafka_reader_reports_it() -> None:
    decoded = decode_record_batch(VECTOR_C)
    assert decoded.is_valid and decoded.timestamp_type is TimestampType.LOG_APPEND_TIME
    (record,) = decoded.records
    assert record.timestamp == 1700000001234  # LogAppendTime: every record reports maxTimestamp
    assert record.create_time == T  # the producer's CreateTime survives in the delta
    assert record.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert (record.offset, record.key, record.value, record.headers) == (0, None, b"hi", ())


def test_vector_b_decodes() -> None:
    decoded = decode_record_batch(VECTOR_B)
    assert [(r.offset, r.timestamp, r.create_time, r.key, r.value, r.headers) for r in decoded.records] == [
        (0, T, T, b"k", b"v1", ()),
        (1, T + 5, T + 5, b"k", b"v2", (("h", b"x"),)),
    ]
    assert decoded.compression is CompressionType.NONE


# ------------------------------------------------------------------ builder


@pytest.mark.parametrize("codec", list(CompressionType))
def test_build_and_decode_every_codec(codec: CompressionType) -> None:
    records = [
        (T + i, None if i % 3 == 0 else b"key-%d" % i, b"value" * i, [("n", str(i).encode())])
        for i in range(50)
    ]
    batch = build_record_batch(records, compression=codec)
    header = parse_header(batch)
    assert header.compression_id == codec and is_valid(batch)
    decoded = decode_record_batch(batch)
    assert [(r.timestamp, r.key, r.value, list(r.headers)) for r in decoded.records] == [
        (t, k, v, h) for t, k, v, h in records
    ]
    assert records_area(batch) == encode_records(
        [
            Record(i, i, None if i % 3 == 0 else b"key-%d" % i, b"value" * i, (("n", str(i).encode()),))
            for i in range(50)
        ]
    )


def test_build_header_fields() -> None:
    batch = build_record_batch(
        [(T, b"k", b"v"), (T - 10, b"k", b"v")],
        base_offset=1234,
        producer_id=99,
        producer_epoch=3,
        base_sequence=41,
        is_transactional=True,
        partition_leader_epoch=5,
        attributes_extra=0x40,
    )
    h = parse_header(batch)
    assert (h.base_offset, h.partition_leader_epoch, h.producer_id, h.producer_epoch, h.base_sequence) == (
        1234,
        5,
        99,
        3,
        41,
    )
    assert h.is_transactional and not h.is_control_batch and h.attributes & 0x40
    assert (h.base_timestamp, h.max_timestamp, h.last_offset_delta, h.records_count) == (T, T, 1, 2)
    decoded = decode_record_batch(batch)
    assert [r.sequence for r in decoded.records] == [41, 42]
    assert [r.offset for r in decoded.records] == [1234, 1235]


def test_build_control_and_log_append_time_flags() -> None:
    batch = build_record_batch(
        [(T, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
        is_control=True,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        max_timestamp=T + 99,
    )
    h = parse_header(batch)
    assert (
        h.is_control_batch and h.timestamp_type is TimestampType.LOG_APPEND_TIME and h.max_timestamp == T + 99
    )
    assert decode_record_batch(batch).records[0].timestamp == T + 99


def test_build_count_and_offset_overrides_for_crafting_bad_batches() -> None:
    batch = build_record_batch([(T, None, b"a")] * 3, last_offset_delta=15, records_count=3)
    h = parse_header(batch)
    assert (h.last_offset_delta, h.records_count) == (15, 3)
    empty = build_record_batch([], last_offset_delta=5, records_count=0)
    h = parse_header(empty)
    assert (h.last_offset_delta, h.records_count, h.base_timestamp, len(empty)) == (5, 0, -1, 61)
    assert decode_record_batch(empty).records == ()


def test_build_magic_override() -> None:
    batch = build_record_batch([(T, None, b"a")], magic=3)
    assert batch[16] == 3


def test_build_requires_base_timestamp_for_record_items() -> None:
    with pytest.raises(ValueError, match="base_timestamp is required"):
        build_record_batch([Record(0, 0, None, b"a")])


def test_max_timestamp_starts_at_minus_one_like_memory_records_builder() -> None:
    h = parse_header(build_record_batch([(-5, None, b"a"), (-7, None, b"b")]))
    assert (h.base_timestamp, h.max_timestamp) == (-5, -1)
    h = parse_header(build_record_batch([(-1, None, b"a")]))
    assert h.max_timestamp == -1


def test_reject_negative_timestamps_like_the_rebuild_path() -> None:
    build_record_batch([(-1, None, b"a")], reject_negative_timestamps=True)
    with pytest.raises(ValueError, match="^Invalid negative timestamp -2$"):
        build_record_batch([(0, None, b"a"), (-2, None, b"b")], reject_negative_timestamps=True)


def test_extreme_timestamps_wrap_like_java_longs() -> None:
    records = [(LONG_MAX, None, b"a"), (LONG_MIN, None, b"b"), (0, None, b"c"), (-1, None, b"d")]
    batch = build_record_batch(records)
    decoded = decode_record_batch(batch)
    assert [r.timestamp for r in decoded.records] == [LONG_MAX, LONG_MIN, 0, -1]
    assert decoded.records[1].timestamp_delta == 1  # LONG_MIN - LONG_MAX wraps to 1
    assert decoded.header.max_timestamp == LONG_MAX


def test_wrap_long_and_increment_sequence() -> None:
    assert wrap_long(LONG_MAX + 1) == LONG_MIN
    assert wrap_long(LONG_MIN - 1) == LONG_MAX
    assert increment_sequence(2147483647, 1) == 0
    assert increment_sequence(2147483640, 10) == 2
    assert increment_sequence(5, 3) == 8


def test_sequence_wraps_past_int_max_in_decoded_records() -> None:
    batch = build_record_batch(
        [(T, None, b"a")] * 3, producer_id=1, producer_epoch=0, base_sequence=2147483646
    )
    assert [r.sequence for r in decode_record_batch(batch).records] == [2147483646, 2147483647, 0]


# ------------------------------------------------------------------ decoding errors


def test_negative_count_is_kafkas_text() -> None:
    batch = _recrc(VECTOR_A[:57] + struct.pack(">i", -1) + VECTOR_A[61:])
    with pytest.raises(InvalidRecordError, match="^Found invalid record count -1 in magic v2 batch$"):
        decode_record_batch(batch)


def test_count_mismatch_is_kafkas_text() -> None:
    two = _recrc(VECTOR_A[:57] + struct.pack(">i", 2) + VECTOR_A[61:])
    with pytest.raises(InvalidRecordError, match="premature EOF reached"):
        decode_record_batch(two)
    extra = build_record_batch([(T, None, b"a"), (T, None, b"b")], records_count=1)
    with pytest.raises(InvalidRecordError, match="records still remaining in file"):
        decode_record_batch(extra)


def test_count_zero_never_opens_the_compressed_stream() -> None:
    batch = build_record_batch([], compression=CompressionType.GZIP, records_count=0)
    garbage = batch + b"not gzip"
    garbage = _recrc(garbage[:8] + struct.pack(">i", len(garbage) - 12) + garbage[12:])
    assert decode_record_batch(garbage).records == ()


def test_unknown_codec_id() -> None:
    batch = _recrc(VECTOR_A[:21] + struct.pack(">h", 5) + VECTOR_A[23:])
    with pytest.raises(ValueError, match="^Unknown compression type id: 5$"):
        decode_record_batch(batch)
    with pytest.raises(ValueError, match="^Unknown compression type id: 5$"):
        records_area(batch)


def test_corrupt_compressed_records_and_bomb_limit() -> None:
    batch = bytearray(build_record_batch([(T, None, b"x" * 5000)], compression=CompressionType.LZ4))
    batch[RECORD_BATCH_OVERHEAD + 6] = 0  # the lz4 frame descriptor checksum
    with pytest.raises(CorruptCompressedDataError):
        decode_record_batch(_recrc(bytes(batch)))
    big = build_record_batch([(T, None, bytes(200_000))], compression=CompressionType.ZSTD)
    with pytest.raises(DecompressionLimitExceededError):
        records_area(big, max_output=100_000)
    with pytest.raises(DecompressionLimitExceededError):
        decode_record_batch(big, max_output=100_000)


def test_crc_is_reported_not_enforced() -> None:
    bad = bytearray(VECTOR_A)
    bad[-2] ^= 0x01
    decoded = decode_record_batch(bytes(bad))
    assert not decoded.is_valid and decoded.computed_crc != decoded.header.crc


def test_batch_shorter_than_header_or_size_field() -> None:
    with pytest.raises(CorruptRecordError, match="smaller than the minimum allowed overhead 61"):
        decode_record_batch(VECTOR_A[:40])
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_record_batch(VECTOR_A[:-1])
    small_size = VECTOR_A[:8] + struct.pack(">i", 14) + VECTOR_A[12:]
    with pytest.raises(CorruptRecordError, match="the size 26 is smaller"):
        decode_record_batch(small_size)
    with pytest.raises(ValueError, match="magic 1"):
        decode_record_batch(VECTOR_A[:16] + b"\x01" + VECTOR_A[17:])


def test_bytes_after_the_size_field_are_not_part_of_the_batch() -> None:
    assert decode_record_batch(VECTOR_A + b"next batch").records == decode_record_batch(VECTOR_A).records
    assert records_area(VECTOR_A + b"junk") == VECTOR_A[61:]


# ------------------------------------------------------------------ framing (ByteBufferLogInputStream)


def test_iter_batches_splits_back_to_back() -> None:
    data = VECTOR_A + VECTOR_B + VECTOR_C
    assert list(iter_batches(data)) == [VECTOR_A, VECTOR_B, VECTOR_C]
    assert list(iter_batches(memoryview(data))) == [VECTOR_A, VECTOR_B, VECTOR_C]


def test_iter_batches_ignores_a_trailing_fragment() -> None:
    assert list(iter_batches(VECTOR_A + VECTOR_B[:40])) == [VECTOR_A]
    assert list(iter_batches(VECTOR_A + VECTOR_B[:5])) == [VECTOR_A]
    assert list(iter_batches(b"")) == []


@pytest.mark.parametrize("size", [13, 0, -1, -2147483648])
def test_iter_batches_size_below_minimum_overhead(size: int) -> None:
    data = VECTOR_A[:8] + struct.pack(">i", size) + VECTOR_A[12:]
    with pytest.raises(
        CorruptRecordError, match=rf"^Record size {size} is less than the minimum record overhead \(14\)$"
    ):
        list(iter_batches(data))


@pytest.mark.parametrize("magic", [3, 127, -1, -128])
def test_iter_batches_invalid_magic(magic: int) -> None:
    data = VECTOR_A[:16] + struct.pack(">b", magic) + VECTOR_A[17:]
    with pytest.raises(CorruptRecordError, match=rf"^Invalid magic found in record: {magic}$"):
        list(iter_batches(data))
    assert isinstance(CorruptRecordError("x"), ValueError)


def test_iter_batches_size_check_comes_before_magic_check() -> None:
    data = VECTOR_A[:8] + struct.pack(">i", 3) + VECTOR_A[12:16] + b"\x09" + VECTOR_A[17:]
    with pytest.raises(CorruptRecordError, match="minimum record overhead"):
        list(iter_batches(data))


def test_iter_batches_short_header_is_a_fragment() -> None:
    # 12..16 bytes: size checked, magic not yet readable -> nothing yielded (nextBatchSize returns null)
    assert list(iter_batches(VECTOR_A[:15])) == []


def test_set_max_timestamp_clears_unused_attribute_bits_like_compute_attributes() -> None:
    """Kafka's `DefaultRecordBatch.setMaxTimestamp` rewrites the attributes from
    codec/type/transactional/control/delete-horizon only; a client's bit 7 or high byte is dropped
    when the header changes, and kept when `setMaxTimestamp` is a no-op."""
    batch = build_record_batch([(1000, b"k", b"v")], attributes_extra=0x0180 | 0x10)
    stamped = assign_offsets_and_timestamp(batch, 5, TimestampType.LOG_APPEND_TIME, 2000)
    assert parse_header(stamped).attributes == 0x10 | 0x08
    assert is_valid(stamped)
    unchanged = assign_offsets_and_timestamp(batch, 5, TimestampType.CREATE_TIME, 1000)
    assert parse_header(unchanged).attributes == 0x0190
