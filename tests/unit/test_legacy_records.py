"""Legacy magic 0/1 message sets: reading, CRC32, wrapper offsets/timestamps, up-conversion."""

from __future__ import annotations

import struct
import zlib

import pytest

from validators.codec.compression import CompressionType, CorruptCompressedDataError, compress
from validators.codec.legacy_records import (
    build_message_set,
    read_message_set,
    upconvert_to_v2,
)
from validators.codec.record_batch import CorruptRecordError, TimestampType, decode_record_batch, parse_header
from validators.codec.records import InvalidRecordError

T = 1700000000000
NOW = 1700000009999
THREE = [(T, b"k0", b"hello"), (T + 1, None, b"there"), (T + 2, b"k2", b"beautiful")]
LEGACY_CODECS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4]


def _message(magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None) -> bytes:
    body = struct.pack(">bB", magic, attributes) + (struct.pack(">q", timestamp) if magic else b"")
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    return struct.pack(">I", zlib.crc32(body)) + body


def _entry(offset: int, message: bytes) -> bytes:
    return struct.pack(">qi", offset, len(message)) + message


# ------------------------------------------------------------------ layout


def test_v0_and_v1_message_layout() -> None:
    v0 = build_message_set([(T, b"k", b"v")], magic=0)
    assert v0 == _entry(0, _message(0, 0, -1, b"k", b"v"))
    assert len(v0) == 12 + 14 + 2  # RECORD_OVERHEAD_V0 = 14
    v1 = build_message_set([(T, None, b"v")], magic=1, base_offset=7)
    assert v1 == _entry(7, _message(1, 0, T, None, b"v"))
    assert len(v1) == 12 + 22 + 1  # RECORD_OVERHEAD_V1 = 22


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_entries_one_per_record(magic: int) -> None:
    entries = read_message_set(build_message_set(THREE, magic=magic, base_offset=100))
    assert [e.offset for e in entries] == [100, 101, 102]
    records = [r for e in entries for r in e.records]
    assert [(r.offset, r.key, r.value) for r in records] == [
        (100 + i, k, v) for i, (_, k, v) in enumerate(THREE)
    ]
    if magic == 0:
        assert all(r.timestamp == -1 and r.timestamp_type is TimestampType.NO_TIMESTAMP_TYPE for r in records)
    else:
        assert [r.timestamp for r in records] == [T, T + 1, T + 2]
        assert all(r.timestamp_type is TimestampType.CREATE_TIME for r in records)
    assert all(e.is_valid and e.compression is CompressionType.NONE for e in entries)


def test_v0_attribute_bit_3_means_nothing() -> None:
    entries = read_message_set(_entry(0, _message(0, 0x08, -1, None, b"v")))
    assert entries[0].records[0].timestamp_type is TimestampType.NO_TIMESTAMP_TYPE


def test_v1_attribute_bit_3_is_log_append_time() -> None:
    entries = read_message_set(_entry(0, _message(1, 0x08, T, None, b"v")))
    assert entries[0].records[0].timestamp_type is TimestampType.LOG_APPEND_TIME


# ------------------------------------------------------------------ compressed wrappers


@pytest.mark.parametrize("codec", LEGACY_CODECS[1:])
def test_v0_wrapper_inner_offsets_are_absolute(codec: CompressionType) -> None:
    data = build_message_set(THREE, magic=0, compression=codec, base_offset=40)
    (entry,) = read_message_set(data)
    assert entry.offset == 42 and entry.compression is codec and entry.key is None
    assert [r.offset for r in entry.records] == [40, 41, 42]
    assert all(r.timestamp == -1 for r in entry.records)


@pytest.mark.parametrize("codec", LEGACY_CODECS[1:])
def test_v1_wrapper_relative_inner_offsets(codec: CompressionType) -> None:
    data = build_message_set(THREE, magic=1, compression=codec, base_offset=40)
    (entry,) = read_message_set(data)
    assert entry.offset == 42  # absolute offset of the last inner message
    assert entry.timestamp == T + 2  # CreateTime wrapper: max inner timestamp
    assert [r.offset for r in entry.records] == [40, 41, 42]
    assert [r.timestamp for r in entry.records] == [T, T + 1, T + 2]


def test_v1_wrapper_offset_zero_means_base_zero() -> None:
    data = build_message_set(THREE, magic=1, compression=CompressionType.GZIP, wrapper_offset=0)
    assert [r.offset for r in read_message_set(data)[0].records] == [0, 1, 2]


def test_v1_wrapper_offset_below_last_inner_offset() -> None:
    data = build_message_set(THREE, magic=1, compression=CompressionType.GZIP, wrapper_offset=1)
    with pytest.raises(
        InvalidRecordError,
        match="^Found invalid wrapper offset in compressed v1 message set, wrapper offset '1' is less than the "
        "last inner message offset '2' and it is not zero.$",
    ):
        read_message_set(data)


def test_v1_log_append_time_wrapper_gives_its_timestamp_to_inner_records() -> None:
    data = build_message_set(
        THREE,
        magic=1,
        compression=CompressionType.SNAPPY,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        log_append_time=NOW,
    )
    (entry,) = read_message_set(data)
    assert entry.timestamp == NOW and entry.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert all(
        r.timestamp == NOW and r.timestamp_type is TimestampType.LOG_APPEND_TIME for r in entry.records
    )


def test_v1_inner_records_report_the_wrapper_timestamp_only_under_log_append_time() -> None:
    inner = _entry(0, _message(1, 0, 5, None, b"a")) + _entry(1, _message(1, 0, 6, None, b"b"))
    wrapper = _entry(
        1, _message(1, CompressionType.GZIP | 0x08, NOW, None, compress(CompressionType.GZIP, inner))
    )
    assert [r.timestamp for r in read_message_set(wrapper)[0].records] == [NOW, NOW]
    create = _entry(1, _message(1, CompressionType.GZIP, 99, None, compress(CompressionType.GZIP, inner)))
    assert [r.timestamp for r in read_message_set(create)[0].records] == [5, 6]


def test_v0_lz4_wrapper_uses_the_broken_header_checksum() -> None:
    data = build_message_set(THREE, magic=0, compression=CompressionType.LZ4)
    (entry,) = read_message_set(data)
    assert [r.value for r in entry.records] == [b"hello", b"there", b"beautiful"]
    frame = entry.value
    assert frame is not None and frame[6] != compress(CompressionType.LZ4, b"")[6]


def test_zstd_wrapper_is_invalid() -> None:
    inner = _entry(0, _message(1, 0, T, None, b"a"))
    data = _entry(0, _message(1, CompressionType.ZSTD, T, None, compress(CompressionType.ZSTD, inner)))
    with pytest.raises(
        InvalidRecordError, match="^Invalid wrapper compressionType found in legacy deep record iterator 1$"
    ):
        read_message_set(data)
    with pytest.raises(ValueError, match="zstd"):
        build_message_set(THREE, magic=1, compression=CompressionType.ZSTD)


def test_null_wrapper_value_and_empty_inner_set() -> None:
    with pytest.raises(
        InvalidRecordError, match=r"^Found invalid compressed record set with null value \(magic = 1\)$"
    ):
        read_message_set(_entry(0, _message(1, CompressionType.GZIP, T, None, None)))
    with pytest.raises(
        InvalidRecordError, match="^Found invalid compressed record set with no inner records$"
    ):
        read_message_set(
            _entry(0, _message(0, CompressionType.GZIP, -1, None, compress(CompressionType.GZIP, b"")))
        )


def test_inner_compressed_message_is_invalid() -> None:
    inner = _entry(0, _message(1, CompressionType.GZIP, T, None, b"x"))
    data = _entry(0, _message(1, CompressionType.GZIP, T, None, compress(CompressionType.GZIP, inner)))
    with pytest.raises(InvalidRecordError, match="^Inner messages must not be compressed$"):
        read_message_set(data)


def test_inner_size_below_minimum_overhead() -> None:
    inner = struct.pack(">qi", 0, 10) + b"x" * 10
    data = _entry(0, _message(0, CompressionType.GZIP, -1, None, compress(CompressionType.GZIP, inner)))
    with pytest.raises(
        CorruptRecordError, match=r"^Record size is less than the minimum record overhead \(14\)$"
    ):
        read_message_set(data)


def test_inner_trailing_fragment_is_ignored() -> None:
    inner = _entry(0, _message(0, 0, -1, None, b"a")) + _entry(1, _message(0, 0, -1, None, b"b"))[:-3]
    data = _entry(1, _message(0, CompressionType.GZIP, -1, None, compress(CompressionType.GZIP, inner)))
    assert [r.value for r in read_message_set(data)[0].records] == [b"a"]


def test_corrupt_wrapper_payload() -> None:
    data = _entry(0, _message(1, CompressionType.GZIP, T, None, b"\x1f\x8bnot really gzip"))
    with pytest.raises(CorruptCompressedDataError):
        read_message_set(data)


# ------------------------------------------------------------------ CRC32


@pytest.mark.parametrize("magic", [0, 1])
def test_outer_crc_mismatch_is_kafkas_text(magic: int) -> None:
    data = bytearray(build_message_set(THREE[:1], magic=magic))
    data[-1] ^= 0x01
    stored = struct.unpack_from(">I", data, 12)[0]
    computed = zlib.crc32(bytes(data[16:]))
    with pytest.raises(
        CorruptRecordError, match=rf"^Record is corrupt \(stored crc = {stored}, computed crc = {computed}\)$"
    ):
        read_message_set(bytes(data))
    (entry,) = read_message_set(bytes(data), verify_crc=False)
    assert not entry.is_valid and entry.computed_crc == computed


@pytest.mark.parametrize("codec", LEGACY_CODECS[1:])
@pytest.mark.parametrize("magic", [0, 1])
def test_inner_crc_zeroed_is_corrupt(codec: CompressionType, magic: int) -> None:
    # LogValidatorTest.checkInvalidChecksum: an inner record's CRC zeroed inside a compressed wrapper.
    inner = _message(magic, 0, T, b"k", b"v")
    broken = b"\x00\x00\x00\x00" + inner[4:]
    payload = _entry(0, broken) + _entry(1, _message(magic, 0, T, None, b"w"))
    data = _entry(1, _message(magic, codec, T, None, compress(codec, payload, magic=magic)))
    computed = zlib.crc32(inner[4:])
    with pytest.raises(
        CorruptRecordError, match=rf"^Record is corrupt \(stored crc = 0, computed crc = {computed}\)$"
    ):
        read_message_set(data)
    records = read_message_set(data, verify_crc=False)[0].records
    assert not records[0].is_valid and records[1].is_valid


def test_message_too_small_for_v1_fields() -> None:
    body = struct.pack(">bB", 1, 0) + b"\x00" * 10  # 16 bytes: >= 14 but < 22
    message = struct.pack(">I", zlib.crc32(body)) + body
    with pytest.raises(InvalidRecordError, match="^Found invalid record structure$"):
        read_message_set(_entry(0, message))


def test_key_length_past_the_message_is_invalid_structure() -> None:
    body = struct.pack(">bBi", 0, 0, 100) + struct.pack(">i", -1)
    message = struct.pack(">I", zlib.crc32(body)) + body
    with pytest.raises(InvalidRecordError, match="^Found invalid record structure$"):
        read_message_set(_entry(0, message))


def test_v2_batch_inside_a_legacy_set_is_refused() -> None:
    from validators.codec.record_batch import build_record_batch

    data = build_message_set(THREE[:1], magic=1) + build_record_batch([(T, None, b"x")])
    with pytest.raises(ValueError, match="Batch magic 2"):
        read_message_set(data)


# ------------------------------------------------------------------ up-conversion


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_upconvert_v0_gets_timestamps_minus_one(codec: CompressionType) -> None:
    # LogValidatorTest.checkCreateTimeUpConversionFromV0
    conversion = upconvert_to_v2(build_message_set(THREE, magic=0, compression=codec))
    assert conversion.source_magic == 0 and conversion.source_compression is codec
    assert [r.timestamp for r in conversion.records] == [-1, -1, -1]
    batch = conversion.to_v2_batch(base_offset=1234567)
    h = parse_header(batch)
    assert (h.magic, h.base_offset, h.last_offset, h.base_timestamp, h.max_timestamp) == (
        2,
        1234567,
        1234569,
        -1,
        -1,
    )
    assert h.timestamp_type is TimestampType.CREATE_TIME and h.compression_id == codec
    assert h.producer_id == -1 and h.base_sequence == -1
    decoded = decode_record_batch(batch)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in decoded.records] == [
        (1234567 + i, -1, k, v) for i, (_, k, v) in enumerate(THREE)
    ]


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_upconvert_v1_preserves_timestamps(codec: CompressionType) -> None:
    # LogValidatorTest.testCreateTimeUpConversionV1ToV2
    conversion = upconvert_to_v2(build_message_set(THREE, magic=1, compression=codec))
    batch = conversion.to_v2_batch()
    h = parse_header(batch)
    assert (h.base_timestamp, h.max_timestamp) == (T, T + 2)
    assert [r.timestamp for r in decode_record_batch(batch).records] == [T, T + 1, T + 2]


def test_upconvert_under_log_append_time() -> None:
    # LogValidatorTest.checkLogAppendTimeWithRecompression: v0 gzip in, LAT out
    conversion = upconvert_to_v2(build_message_set(THREE, magic=0, compression=CompressionType.GZIP))
    batch = conversion.to_v2_batch(timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=NOW)
    h = parse_header(batch)
    assert (
        h.timestamp_type is TimestampType.LOG_APPEND_TIME
        and h.max_timestamp == NOW
        and h.base_timestamp == -1
    )
    assert [r.timestamp for r in decode_record_batch(batch).records] == [NOW] * 3
    with pytest.raises(ValueError, match="log_append_time"):
        conversion.to_v2_batch(timestamp_type=TimestampType.LOG_APPEND_TIME)


def test_upconvert_target_codec_and_leader_epoch() -> None:
    conversion = upconvert_to_v2(build_message_set(THREE, magic=1, compression=CompressionType.SNAPPY))
    batch = conversion.to_v2_batch(compression=CompressionType.ZSTD, partition_leader_epoch=3)
    h = parse_header(batch)
    assert h.compression_id == CompressionType.ZSTD and h.partition_leader_epoch == 3


def test_upconvert_source_compression_is_the_last_non_none_codec() -> None:
    data = build_message_set(THREE[:1], magic=1) + build_message_set(
        THREE[1:], magic=1, compression=CompressionType.LZ4, base_offset=1
    )
    conversion = upconvert_to_v2(data)
    assert conversion.source_compression is CompressionType.LZ4
    assert [r.offset for r in conversion.records] == [0, 1, 2]
    assert len(conversion.entries) == 2


def test_upconvert_rejects_negative_timestamps_like_the_builder() -> None:
    conversion = upconvert_to_v2(build_message_set([(-5, None, b"x")], magic=1))
    assert conversion.records[0].timestamp == -5  # reported for the validator's timestamp checks
    with pytest.raises(ValueError, match="^Invalid negative timestamp -5$"):
        conversion.to_v2_batch()


def test_upconvert_empty_set() -> None:
    with pytest.raises(InvalidRecordError, match="^Record batch has no batches at all$"):
        upconvert_to_v2(b"")
