"""Fuzzing the decoders: random bytes and mutated valid batches may only raise our documented
exceptions (InvalidRecordError, CorruptCompressedDataError, ValueError/CorruptRecordError for
framing and codec ids) - never IndexError, struct.error, MemoryError, UnicodeError - and every
example finishes within the hypothesis deadline (bounded work, bounded output)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from validators.batch_dump import dump, dump_all
from validators.codec.compression import CompressionType, CorruptCompressedDataError, compress, decompress
from validators.codec.legacy_records import build_message_set, read_message_set, upconvert_to_v2
from validators.codec.record_batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    TimestampType,
    build_record_batch,
    decode_record_batch,
    iter_batches,
    records_area,
)
from validators.codec.records import InvalidRecordError, decode_records, scan_records

MAX_OUTPUT = 1 << 20
FUZZ = settings(
    max_examples=300,
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def _only_documented(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a decoder; documented failures are fine, anything else fails the test."""
    try:
        return fn(*args, **kwargs)
    except (InvalidRecordError, CorruptCompressedDataError):
        return None
    except ValueError as e:
        assert not isinstance(e, UnicodeError), repr(e)
        return None


def _exercise(data: bytes) -> None:
    """Every entry point that takes untrusted bytes."""
    _only_documented(lambda: list(iter_batches(data)))
    _only_documented(decode_record_batch, data, max_output=MAX_OUTPUT)
    _only_documented(records_area, data, max_output=MAX_OUTPUT)
    _only_documented(read_message_set, data, max_output=MAX_OUTPUT)
    _only_documented(upconvert_to_v2, data, max_output=MAX_OUTPUT)
    _only_documented(dump, data, max_output=MAX_OUTPUT)
    _only_documented(dump_all, data, max_output=MAX_OUTPUT)
    batches = _only_documented(lambda: list(iter_batches(data))) or []
    for batch in batches:
        _only_documented(decode_record_batch, batch, max_output=MAX_OUTPUT)
        _only_documented(read_message_set, batch, max_output=MAX_OUTPUT)
        _only_documented(dump, batch, max_output=MAX_OUTPUT)


def _recrc(batch: bytearray) -> bytearray:
    if len(batch) >= 61 and batch[16] == 2:
        struct.pack_into(">I", batch, CRC_OFFSET, crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return batch


@st.composite
def mutated(draw: st.DrawFn, data: bytes, protect: int = 0) -> bytes:
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["flip", "byte", "cut", "truncate", "insert", "int32"]))
        if not out:
            out += draw(st.binary(min_size=1, max_size=8))
            continue
        i = draw(st.integers(min(protect, len(out) - 1), len(out) - 1))
        if kind == "flip":
            out[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "byte":
            out[i] = draw(st.integers(0, 255))
        elif kind == "cut":
            del out[i : i + draw(st.integers(1, 16))]
        elif kind == "truncate":
            del out[i:]
        elif kind == "insert":
            out[i:i] = draw(st.binary(min_size=1, max_size=16))
        elif i + 4 <= len(out):
            value = draw(st.sampled_from([0, -1, 1, 13, 14, 61, 0x7FFFFFFF, -0x80000000, 1 << 20]))
            struct.pack_into(">i", out, i, value)
    return bytes(out)


record_items = st.lists(
    st.tuples(
        st.integers(-(1 << 63), (1 << 63) - 1),
        st.one_of(st.none(), st.binary(max_size=20)),
        st.one_of(st.none(), st.binary(max_size=60)),
        st.lists(st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=4))), max_size=2),
    ),
    min_size=1,
    max_size=12,
)


@st.composite
def valid_v2(draw: st.DrawFn) -> bytes:
    records = draw(record_items)
    base = records[0][0]
    # keep deltas in a Java long so the batch is one a producer could write
    records = [(base if abs(t - base) >= 1 << 62 else t, k, v, h) for t, k, v, h in records]
    return build_record_batch(
        records,
        compression=draw(st.sampled_from(list(CompressionType))),
        timestamp_type=draw(st.sampled_from([TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME])),
        base_sequence=draw(st.sampled_from([-1, 0, 2147483647])),
    )


@st.composite
def valid_legacy(draw: st.DrawFn) -> bytes:
    records = draw(
        st.lists(
            st.tuples(
                st.integers(-1, 1 << 45), st.one_of(st.none(), st.binary(max_size=20)), st.binary(max_size=40)
            ),
            min_size=1,
            max_size=8,
        )
    )
    codec = draw(
        st.sampled_from(
            [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4]
        )
    )
    return build_message_set(records, magic=draw(st.sampled_from([0, 1])), compression=codec)


# ------------------------------------------------------------------ random bytes


@FUZZ
@given(st.binary(max_size=600))
def test_random_bytes(data: bytes) -> None:
    _exercise(data)


@FUZZ
@given(st.binary(max_size=300), st.integers(-5, 1 << 31))
def test_random_records_areas(area: bytes, count: int) -> None:
    _only_documented(decode_records, area, count)
    _only_documented(scan_records, area, count)


@FUZZ
@given(st.sampled_from(list(CompressionType)), st.binary(max_size=600), st.sampled_from([0, 1, 2]))
def test_random_compressed_streams(codec: CompressionType, data: bytes, magic: int) -> None:
    _only_documented(decompress, codec, data, max_output=MAX_OUTPUT, magic=magic)


@FUZZ
@given(st.sampled_from(list(CompressionType)), st.binary(max_size=32), st.binary(max_size=400))
def test_random_bytes_behind_a_valid_stream_header(
    codec: CompressionType, prefix: bytes, tail: bytes
) -> None:
    header = compress(codec, prefix)[:16]
    _only_documented(decompress, codec, header + tail, max_output=MAX_OUTPUT)


@FUZZ
@given(
    st.binary(min_size=61 - 12, max_size=400),
    st.sampled_from([0, 1, 2, 3, 4, 5, 7]),
    st.integers(-3, (1 << 31) - 1),
)
def test_random_records_behind_a_valid_v2_header(body: bytes, codec: int, count: int) -> None:
    batch = bytearray(struct.pack(">qi", 0, len(body)) + body)
    batch[16] = 2
    struct.pack_into(">h", batch, 21, codec)
    struct.pack_into(">i", batch, 57, count)
    _exercise(bytes(_recrc(batch)))


# ------------------------------------------------------------------ mutated valid input


@FUZZ
@given(st.data())
def test_mutated_v2_batches(data: st.DataObject) -> None:
    batch = data.draw(valid_v2())
    broken = data.draw(mutated(batch))
    _exercise(broken)
    _exercise(bytes(_recrc(bytearray(broken))))


@FUZZ
@given(st.data())
def test_mutated_v2_records_area_behind_an_intact_header(data: st.DataObject) -> None:
    batch = data.draw(valid_v2())
    broken = bytearray(data.draw(mutated(batch, protect=61)))
    if len(broken) >= 12:
        struct.pack_into(">i", broken, 8, len(broken) - 12)  # keep the framing consistent
    _exercise(bytes(_recrc(broken)))


@FUZZ
@given(st.data())
def test_mutated_compressed_payloads(data: st.DataObject) -> None:
    codec = data.draw(st.sampled_from([c for c in CompressionType if c is not CompressionType.NONE]))
    payload = data.draw(st.binary(max_size=3000) | st.just(bytes(70000)))
    stream = compress(codec, payload, magic=data.draw(st.sampled_from([0, 2])))
    broken = data.draw(mutated(stream))
    out = _only_documented(decompress, codec, broken, max_output=MAX_OUTPUT)
    assert out is None or len(out) <= MAX_OUTPUT


@FUZZ
@given(st.data())
def test_mutated_legacy_message_sets(data: st.DataObject) -> None:
    message_set = data.draw(valid_legacy())
    _exercise(data.draw(mutated(message_set)))


@FUZZ
@given(st.data())
def test_mixed_back_to_back_batches(data: st.DataObject) -> None:
    parts = data.draw(st.lists(st.one_of(valid_v2(), valid_legacy()), min_size=1, max_size=4))
    joined = b"".join(parts)
    assert list(iter_batches(joined)) == [p for part in parts for p in iter_batches(part)]
    _exercise(data.draw(mutated(joined)))


# ------------------------------------------------------------------ bombs behind valid headers


@settings(max_examples=20, deadline=5000)
@given(st.sampled_from([c for c in CompressionType if c is not CompressionType.NONE]))
def test_bomb_inside_a_valid_batch_is_bounded(codec: CompressionType) -> None:
    batch = build_record_batch([(0, None, bytes(4 * MAX_OUTPUT))], compression=codec)
    assert len(batch) < MAX_OUTPUT
    assert _only_documented(decode_record_batch, batch, max_output=MAX_OUTPUT) is None
    assert _only_documented(records_area, batch, max_output=MAX_OUTPUT) is None
    dumped = dump(batch, max_output=MAX_OUTPUT)
    assert "exceeds the limit" in dumped["recordsError"]
