"""v2 records: varints, record layout, Kafka's error texts, and the fast scan."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.util import decode_varint as kp_decode_varint
from kafka.record.util import encode_varint as kp_encode_varint

from validators.codec.records import (
    InvalidRecordError,
    Record,
    decode_records,
    decode_varint,
    decode_varlong,
    encode_record,
    encode_records,
    encode_varint,
    encode_varlong,
    scan_records,
    size_of_varint,
    size_of_varlong,
)

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1

# ------------------------------------------------------------------ varints


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (100, "c801"),
        (-8193, "818001"),
        (INT_MAX, "feffffff0f"),
        (INT_MIN, "ffffffff0f"),
    ],
)
def test_varint_vectors(value: int, encoded: str) -> None:
    assert encode_varint(value).hex() == encoded
    assert decode_varint(bytes.fromhex(encoded)) == (value, len(encoded) // 2)
    assert size_of_varint(value) == len(encoded) // 2


def test_varlong_extremes_take_ten_bytes() -> None:
    assert encode_varlong(LONG_MAX).hex() == "feffffffffffffffff01"
    assert encode_varlong(LONG_MIN).hex() == "ffffffffffffffffff01"
    assert decode_varlong(encode_varlong(LONG_MIN)) == (LONG_MIN, 10)
    assert size_of_varlong(LONG_MAX) == 10


def test_varint_out_of_range_cannot_be_encoded() -> None:
    with pytest.raises(ValueError):
        encode_varint(INT_MAX + 1)
    with pytest.raises(ValueError):
        encode_varlong(LONG_MIN - 1)


def test_varint_longer_than_five_bytes_is_an_error() -> None:
    with pytest.raises(
        ValueError, match="Varint is too long, the most significant bit in the 5th byte is set"
    ):
        decode_varint(b"\xff\xff\xff\xff\xff\x01")
    with pytest.raises(ValueError, match="Varlong is too long, most significant bit in the 10th byte is set"):
        decode_varlong(b"\xff" * 10 + b"\x01")
    with pytest.raises(ValueError):
        decode_varint(b"\x80\x80")  # runs off the end


def test_varint_fifth_byte_high_bits_are_dropped_like_java_int() -> None:
    # ByteUtils.readVarint: value |= b << 28 in int arithmetic; bits 32+ vanish.
    assert decode_varint(b"\xff\xff\xff\xff\x7f") == (INT_MIN, 5)
    assert decode_varint(b"\x80\x80\x80\x80\x70") == (0, 5)
    # ByteUtils.readVarlong keeps only bit 63 from the 10th byte.
    assert decode_varlong(b"\xfe" + b"\xff" * 8 + b"\x7f") == (LONG_MAX, 10)


@given(st.integers(INT_MIN, INT_MAX))
def test_varint_round_trip_and_kafka_python_agreement(value: int) -> None:
    encoded = encode_varint(value)
    assert decode_varint(encoded) == (value, len(encoded))
    theirs = bytearray()
    kp_encode_varint(value, theirs.append)
    assert bytes(theirs) == encoded
    assert kp_decode_varint(bytearray(encoded), 0) == (value, len(encoded))


@given(st.integers(LONG_MIN, LONG_MAX))
def test_varlong_round_trip_and_kafka_python_agreement(value: int) -> None:
    encoded = encode_varlong(value)
    assert decode_varlong(encoded) == (value, len(encoded))
    theirs = bytearray()
    kp_encode_varint(value, theirs.append)
    assert bytes(theirs) == encoded


# ------------------------------------------------------------------ record layout


def test_record_layout_of_reference_vector_a() -> None:
    # a minimal record: len 8, attr 0, tsΔ 0, offΔ 0, key -1, value "hi", no headers
    assert encode_record(Record(0, 0, None, b"hi")).hex() == "1000000001046869" + "00"


def test_record_layout_of_reference_vector_b() -> None:
    first = encode_record(Record(0, 0, b"k", b"v1"))
    second = encode_record(Record(1, 5, b"k", b"v2", (("h", b"x"),)))
    assert first.hex() == "12000000026b04763100"
    assert second.hex() == "1a000a02026b0476320202680278"


def test_null_header_value_and_utf8_header_key() -> None:
    record = Record(0, 0, b"", None, (("clé", None), ("", b"")))
    area = encode_record(record)
    assert decode_records(area, 1) == [record]


def test_null_header_key_is_rejected_like_java() -> None:
    with pytest.raises(ValueError, match="Invalid null header key"):
        encode_record(Record(0, 0, None, None, ((None, b"v"),)))  # type: ignore[arg-type]


def test_undecodable_header_key_reads_with_replacement_like_java() -> None:
    area = encode_record(Record(0, 0, None, None, (("x", b"1"),))).replace(b"\x02x", b"\x02\xff")
    assert decode_records(area, 1)[0].headers == (("\ufffd", b"1"),)


# ------------------------------------------------------------------ strategies

headers_st = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8))), max_size=3
).map(tuple)
record_st = st.builds(
    Record,
    offset_delta=st.integers(INT_MIN, INT_MAX),
    timestamp_delta=st.integers(LONG_MIN, LONG_MAX),
    key=st.one_of(st.none(), st.binary(max_size=200)),
    value=st.one_of(st.none(), st.binary(max_size=300)),
    headers=headers_st,
    attributes=st.integers(0, 255),
)


@settings(max_examples=200)
@given(st.lists(record_st, max_size=30))
def test_decode_round_trip(records: list[Record]) -> None:
    area = encode_records(records)
    assert decode_records(area, len(records)) == records


@settings(max_examples=200)
@given(st.lists(record_st, max_size=30))
def test_scan_reports_deltas_and_null_keys(records: list[Record]) -> None:
    scan = scan_records(encode_records(records), len(records))
    assert scan.count == len(records)
    assert list(scan.offset_deltas) == [r.offset_delta for r in records]
    assert list(scan.timestamp_deltas) == [r.timestamp_delta for r in records]
    assert scan.null_key_indices == tuple(i for i, r in enumerate(records) if r.key is None)
    assert list(scan) == [(r.offset_delta, r.timestamp_delta, r.key is None) for r in records]
    assert all((i in scan.null_key_indices) == (r.key is None) for i, r in enumerate(records))
    assert isinstance(scan.offset_deltas, array) and scan.offset_deltas.typecode == "i"
    assert isinstance(scan.timestamp_deltas, array) and scan.timestamp_deltas.typecode == "q"


def test_offsets_contiguous() -> None:
    records = [Record(i, 0, None, b"v") for i in range(5)]
    assert list(scan_records(encode_records(records), 5).offset_deltas) == list(range(5))
    records[3] = Record(7, 0, None, b"v")
    assert list(scan_records(encode_records(records), 5).offset_deltas) != list(range(5))


def _outcome(fn, area: bytes, count: int):  # noqa: ANN001, ANN202
    try:
        result = fn(area, count)
    except InvalidRecordError as e:
        return ("error", e.message)
    if isinstance(result, list):
        return ("ok", [(r.offset_delta, r.timestamp_delta, r.key is None) for r in result])
    return ("ok", list(result))


@settings(max_examples=400)
@given(
    st.lists(record_st, min_size=1, max_size=8),
    st.data(),
)
def test_scan_and_decode_agree_on_mutated_areas(records: list[Record], data: st.DataObject) -> None:
    area = bytearray(encode_records(records))
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if kind == "flip" and area:
            i = data.draw(st.integers(0, len(area) - 1))
            area[i] = data.draw(st.integers(0, 255))
        elif kind == "cut" and area:
            i = data.draw(st.integers(0, len(area) - 1))
            del area[i : i + data.draw(st.integers(1, 4))]
        else:
            i = data.draw(st.integers(0, len(area)))
            area[i:i] = data.draw(st.binary(min_size=1, max_size=4))
    count = data.draw(st.integers(-2, len(records) + 2))
    assert _outcome(scan_records, bytes(area), count) == _outcome(decode_records, bytes(area), count)


# ------------------------------------------------------------------ Kafka's error texts


def _both_raise(area: bytes, count: int, message: str) -> None:
    for fn in (decode_records, scan_records):
        with pytest.raises(InvalidRecordError) as caught:
            fn(area, count)
        assert caught.value.message == message, fn.__name__


def test_negative_count() -> None:
    _both_raise(b"", -1, "Found invalid record count -1 in magic v2 batch")


def test_count_zero_reads_nothing() -> None:
    assert decode_records(b"anything at all", 0) == []
    assert scan_records(b"anything at all", 0).count == 0


def test_records_still_remaining() -> None:
    area = encode_records([Record(0, 0, None, b"a"), Record(1, 0, None, b"b")])
    _both_raise(area, 1, "Incorrect declared batch size, records still remaining in file")
    _both_raise(area + b"\x00", 2, "Incorrect declared batch size, records still remaining in file")


def test_premature_eof() -> None:
    area = encode_records([Record(0, 0, None, b"a")])
    _both_raise(area, 2, "Incorrect declared batch size, premature EOF reached")
    _both_raise(b"", 1, "Incorrect declared batch size, premature EOF reached")
    _both_raise(b"\x80", 1, "Incorrect declared batch size, premature EOF reached")


def test_record_larger_than_the_buffer() -> None:
    area = encode_record(Record(0, 0, None, b"abc"))
    _both_raise(
        area[:-1],
        1,
        f"Invalid record size: expected {area[0] >> 1} bytes in record payload, but instead the buffer has only "
        f"{len(area) - 2} remaining bytes.",
    )


def test_declared_size_differs_from_what_the_fields_take() -> None:
    good = encode_record(Record(0, 0, None, b"abc"))
    assert good[0] == 9 << 1  # body: attr, tsΔ, offΔ, key -1, value len, "abc", headers 0
    shorter = bytes((8 << 1,)) + good[1:] + b"\x00\x00"  # declares 8; fields read on past the body
    _both_raise(
        shorter, 1, "Invalid record size: expected to read 8 bytes in record payload, but instead read 9"
    )
    longer = bytes((10 << 1,)) + good[1:] + b"\x00"  # declares 10, fields take 9
    _both_raise(
        longer, 1, "Invalid record size: expected to read 10 bytes in record payload, but instead read 9"
    )
    negative = bytes((0x03,)) + good[1:]  # declares -2
    _both_raise(
        negative, 1, "Invalid record size: expected to read -2 bytes in record payload, but instead read 9"
    )


def test_negative_header_count() -> None:
    body = b"\x00\x00\x00\x01\x01\x03"  # attrs, tsΔ, offΔ, null key, null value, headers -2
    _both_raise(bytes((len(body) << 1,)) + body, 1, "Found invalid number of record headers -2")


def test_header_count_larger_than_the_buffer() -> None:
    body = b"\x00\x00\x00\x01\x01\x14"  # 10 headers, nothing left
    _both_raise(
        bytes((len(body) << 1,)) + body,
        1,
        "Found invalid number of record headers. 10 is larger than the remaining size of the buffer",
    )


def test_negative_header_key_size() -> None:
    body = b"\x00\x00\x00\x01\x01\x02\x03\x01"  # 1 header, key size -2
    _both_raise(bytes((len(body) << 1,)) + body, 1, "Invalid negative header key size -2")


@pytest.mark.parametrize(
    "body",
    [
        b"\x00\x00\x00\x10",  # key of 8 bytes, none present
        b"\x00\x00\x00\x01\x20ab",  # value of 16 bytes, 2 present
        b"\x00\x00\x00\x01\x01\x02\x02k\x10",  # header value runs past the end
        b"\x00\x00\x00\x01\x01\x02\x08k",  # header key runs past the end
        b"\x00",  # attributes only
        b"\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00",  # varlong of 11 bytes
        b"\x00\x00\xff\xff\xff\xff\xff\x00",  # varint of 6 bytes
    ],
)
def test_invalid_record_structure(body: bytes) -> None:
    _both_raise(bytes((len(body) << 1,)) + body, 1, "Found invalid record structure")


def test_too_long_size_varint_escapes_with_kafkas_varint_text() -> None:
    for fn in (decode_records, scan_records):
        with pytest.raises(InvalidRecordError, match="Varint is too long"):
            fn(b"\xff\xff\xff\xff\xff\x01", 1)


def test_huge_count_with_tiny_area_is_bounded() -> None:
    _both_raise(
        encode_record(Record(0, 0, None, b"")),
        INT_MAX,
        "Incorrect declared batch size, premature EOF reached",
    )
