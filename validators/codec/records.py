"""v2 records inside a (decompressed) records area: varints, encode, decode, fast scan.

Kafka's `clients/.../record/DefaultRecord.java`, `DefaultRecordBatch.RecordIterator`,
`utils/ByteUtils.java`:

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value | headersCount varint |
    headers: (headerKeyLength varint, headerKey UTF-8, headerValueLength varint, headerValue)*

Varints are zigzag + LEB128; a varint is at most 5 bytes and a varlong 10, with the bits above 32/64
dropped as Java's int/long arithmetic drops them.

Errors are Kafka's `InvalidRecordException` texts, in Kafka's order, for the records area read as
`DefaultRecordBatch.uncompressedIterator` reads it (fields are read against the end of the whole
area, then the consumed size is compared with the declared one). They map to INVALID_RECORD (87).
`decode_records` and `scan_records` accept and reject exactly the same inputs with the same message.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = [
    "MAX_RECORD_OVERHEAD",
    "InvalidRecordError",
    "Record",
    "RecordScan",
    "decode_records",
    "decode_varint",
    "decode_varlong",
    "encode_record",
    "encode_records",
    "encode_varint",
    "encode_varlong",
    "scan_records",
    "size_of_varint",
    "size_of_varlong",
]

MAX_RECORD_OVERHEAD = 21  # DefaultRecord.MAX_RECORD_OVERHEAD: 5 length + 1 attr + 10 ts + 5 offset

_INT_MIN = -(1 << 31)
_INT_MAX = (1 << 31) - 1
_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1
_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF

_PREMATURE_EOF = "Incorrect declared batch size, premature EOF reached"
_REMAINING = "Incorrect declared batch size, records still remaining in file"
_STRUCTURE = "Found invalid record structure"


class InvalidRecordError(Exception):
    """Kafka's `InvalidRecordException` for a malformed records area; `message` is Kafka's text."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


_VARINT_BYTES = 5
_VARLONG_BYTES = 10


class _VarintTooLong(Exception):
    """ByteUtils.illegalVarintException / illegalVarlongException (an IllegalArgumentException)."""

    def __init__(self, value: int, max_bytes: int) -> None:
        if max_bytes == _VARINT_BYTES:
            text = f"Varint is too long, the most significant bit in the 5th byte is set, converted value: {value & _M32:x}"
        else:
            text = f"Varlong is too long, most significant bit in the 10th byte is set, converted value: {value & _M64:x}"
        super().__init__(text)


@dataclass(frozen=True, slots=True)
class Record:
    """One v2 record as stored: deltas relative to the batch's baseOffset / baseTimestamp.

    `attributes` is the raw (unused) attribute byte, 0-255. Header keys are text (Kafka's `String`,
    undecodable UTF-8 read with replacement characters as Java does); values are nullable bytes."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    attributes: int = 0


# --------------------------------------------------------------------------------------------
# varints (ByteUtils)


def size_of_varint(value: int) -> int:
    """Bytes `encode_varint(value)` takes (ByteUtils.sizeOfVarint)."""
    return len(encode_varint(value))


def size_of_varlong(value: int) -> int:
    """Bytes `encode_varlong(value)` takes (ByteUtils.sizeOfVarlong)."""
    return len(encode_varlong(value))


def _leb128(unsigned: int) -> bytes:
    out = bytearray()
    while unsigned > 0x7F:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zigzag varint of a Java int (ByteUtils.writeVarint); ValueError outside int32."""
    if not _INT_MIN <= value <= _INT_MAX:
        raise ValueError(f"Varint value out of int32 range: {value}")
    return _leb128(((value << 1) ^ (value >> 31)) & _M32)


def encode_varlong(value: int) -> bytes:
    """Zigzag varlong of a Java long (ByteUtils.writeVarlong); ValueError outside int64."""
    if not _LONG_MIN <= value <= _LONG_MAX:
        raise ValueError(f"Varlong value out of int64 range: {value}")
    return _leb128(((value << 1) ^ (value >> 63)) & _M64)


def read_leb128(buf: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """The one varint loop (ByteUtils.readVarint / readVarlong): the raw unsigned LEB128 value at `pos`
    (zigzag not undone, bits above the type not dropped) and the next position. Raises IndexError when
    it reaches `end` (BufferUnderflowException) and _VarintTooLong when byte `max_bytes` still has its
    continuation bit."""
    value = 0
    shift = 0
    limit = 7 * (max_bytes - 1)
    while True:
        if pos >= end:
            raise IndexError(pos)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > limit:
            raise _VarintTooLong(value, max_bytes)


def _varint_slow(buf: bytes, pos: int) -> tuple[int, int]:
    """ByteUtils.readVarint: at most 5 bytes, bits above 32 dropped."""
    value, pos = read_leb128(buf, pos, len(buf), _VARINT_BYTES)
    value &= _M32
    return (value >> 1) ^ -(value & 1), pos


def _varlong_slow(buf: bytes, pos: int) -> tuple[int, int]:
    """ByteUtils.readVarlong: at most 10 bytes, bits above 64 dropped."""
    value, pos = read_leb128(buf, pos, len(buf), _VARLONG_BYTES)
    value &= _M64
    return (value >> 1) ^ -(value & 1), pos


def decode_varint(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """(value, next position). ValueError on a varint longer than 5 bytes or running past the end."""
    try:
        return _varint_slow(bytes(buf) if not isinstance(buf, bytes) else buf, pos)
    except _VarintTooLong as e:
        raise ValueError(str(e)) from None
    except IndexError:
        raise ValueError("Varint runs past the end of the buffer") from None


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """(value, next position). ValueError on a varlong longer than 10 bytes or running past the end."""
    try:
        return _varlong_slow(bytes(buf) if not isinstance(buf, bytes) else buf, pos)
    except _VarintTooLong as e:
        raise ValueError(str(e)) from None
    except IndexError:
        raise ValueError("Varlong runs past the end of the buffer") from None


# Zigzag values of every 1- and 2-byte encoding, indexed by the 14-bit LEB128 payload: the hot
# paths decode (b & 0x7F) | (b2 << 7) with one list lookup.
_ZZ = [(u >> 1) ^ -(u & 1) for u in range(1 << 14)]


# --------------------------------------------------------------------------------------------
# encoding (DefaultRecord.writeTo)


def encode_record(record: Record) -> bytes:
    """One record with its length prefix, exactly as `DefaultRecord.writeTo` lays it out."""
    parts = [
        bytes((record.attributes & 0xFF,)),
        encode_varlong(record.timestamp_delta),
        encode_varint(record.offset_delta),
    ]
    for field in (record.key, record.value):
        if field is None:
            parts.append(b"\x01")  # varint -1
        else:
            parts.append(encode_varint(len(field)))
            parts.append(bytes(field))
    parts.append(encode_varint(len(record.headers)))
    for header_key, header_value in record.headers:
        if header_key is None:
            raise ValueError("Invalid null header key found in headers")
        raw_key = header_key.encode("utf-8")
        parts.append(encode_varint(len(raw_key)))
        parts.append(raw_key)
        if header_value is None:
            parts.append(b"\x01")
        else:
            parts.append(encode_varint(len(header_value)))
            parts.append(bytes(header_value))
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def encode_records(records: Iterable[Record]) -> bytes:
    """A records area: the records back to back (what a batch compresses or stores)."""
    return b"".join(encode_record(r) for r in records)


# --------------------------------------------------------------------------------------------
# decoding (DefaultRecordBatch.RecordIterator + DefaultRecord.readFrom(ByteBuffer))


def _check_count(count: int) -> None:
    if count < 0:
        raise InvalidRecordError(f"Found invalid record count {count} in magic v2 batch")


def _read_size(area: bytes, pos: int) -> tuple[int, int]:
    """The length prefix, read outside DefaultRecord's try block: underflow is the iterator's
    'premature EOF', a too-long varint escapes as Kafka's IllegalArgumentException text."""
    try:
        return _varint_slow(area, pos)
    except IndexError:
        raise InvalidRecordError(_PREMATURE_EOF) from None
    except _VarintTooLong as e:
        raise InvalidRecordError(str(e)) from None


def _size_errors(size: int, start: int, pos: int, end: int) -> None:
    if pos > end:  # a key/value/header slice ran past the buffer (BufferUnderflowException)
        raise InvalidRecordError(_STRUCTURE)
    if pos - start != size:
        raise InvalidRecordError(
            f"Invalid record size: expected to read {size} bytes in record payload, but instead read {pos - start}"
        )


def decode_records(area: bytes | bytearray | memoryview, count: int) -> list[Record]:
    """All `count` records of a records area, fully decoded (keys, values, headers copied).

    Raises InvalidRecordError with Kafka's text; see the module docstring. `count == 0` reads
    nothing (Kafka returns an empty iterator without looking at the bytes)."""
    _check_count(count)
    buf = area if isinstance(area, bytes) else bytes(area)
    end = len(buf)
    pos = 0
    records: list[Record] = []
    for _ in range(count):
        size, pos = _read_size(buf, pos)
        if end - pos < size:
            raise InvalidRecordError(
                f"Invalid record size: expected {size} bytes in record payload, but instead the buffer "
                f"has only {end - pos} remaining bytes."
            )
        start = pos
        try:
            attributes = buf[pos]
            timestamp_delta, pos = _varlong_slow(buf, pos + 1)
            offset_delta, pos = _varint_slow(buf, pos)
            key_len, pos = _varint_slow(buf, pos)
            key = None
            if key_len >= 0:
                if pos + key_len > end:
                    raise IndexError
                key = buf[pos : pos + key_len]
                pos += key_len
            value_len, pos = _varint_slow(buf, pos)
            value = None
            if value_len >= 0:
                if pos + value_len > end:
                    raise IndexError
                value = buf[pos : pos + value_len]
                pos += value_len
            header_count, pos = _varint_slow(buf, pos)
            if header_count < 0:
                raise InvalidRecordError(f"Found invalid number of record headers {header_count}")
            if header_count > end - pos:
                raise InvalidRecordError(
                    f"Found invalid number of record headers. {header_count} is larger than the remaining "
                    "size of the buffer"
                )
            headers: list[tuple[str, bytes | None]] = []
            for _h in range(header_count):
                header_key_len, pos = _varint_slow(buf, pos)
                if header_key_len < 0:
                    raise InvalidRecordError(f"Invalid negative header key size {header_key_len}")
                if pos + header_key_len > end:
                    raise IndexError
                header_key = buf[pos : pos + header_key_len].decode("utf-8", errors="replace")
                pos += header_key_len
                header_value_len, pos = _varint_slow(buf, pos)
                header_value = None
                if header_value_len >= 0:
                    if pos + header_value_len > end:
                        raise IndexError
                    header_value = buf[pos : pos + header_value_len]
                    pos += header_value_len
                headers.append((header_key, header_value))
        except (IndexError, _VarintTooLong):
            raise InvalidRecordError(_STRUCTURE) from None
        _size_errors(size, start, pos, end)
        records.append(Record(offset_delta, timestamp_delta, key, value, tuple(headers), attributes))
    if count and pos != end:
        raise InvalidRecordError(_REMAINING)
    return records


@dataclass(frozen=True, slots=True)
class RecordScan:
    """What the validator needs of every record, without copying keys, values or headers.

    `offset_deltas` (array 'i') and `timestamp_deltas` (array 'q') are parallel, in record order;
    `null_key_indices` lists the records whose key is null (key length < 0)."""

    offset_deltas: array
    timestamp_deltas: array
    null_key_indices: tuple[int, ...]

    @property
    def count(self) -> int:
        return len(self.offset_deltas)

    def __iter__(self) -> Iterator[tuple[int, int, bool]]:
        """(offset_delta, timestamp_delta, key_is_null) per record."""
        nulls = set(self.null_key_indices)
        for i, (od, td) in enumerate(zip(self.offset_deltas, self.timestamp_deltas, strict=True)):
            yield od, td, i in nulls


def scan_records(area: bytes | bytearray | memoryview, count: int) -> RecordScan:
    """Validate the structure of `count` records and return their deltas and null-key positions.

    Same acceptance and error texts as `decode_records`, but keys, values and header bytes are only
    skipped (Kafka's `skipKeyValueIterator` idea). It is the reference of the C walk and the
    validator's walk where that is not built, so it is written for speed: one pass, 1- and 2-byte
    varints decoded inline, no per-record objects or calls."""
    _check_count(count)
    buf = area if isinstance(area, bytes) else bytes(area)
    end = len(buf)
    # A record takes at least 7 bytes, so at most end // 7 of them can be read before the buffer
    # runs out: this bounds the preallocation whatever `count` says, and index < slots always holds.
    slots = min(count, end // 7 + 1)
    offset_deltas = [0] * slots
    timestamp_deltas = [0] * slots
    nulls: list[int] = []
    pos = 0
    zz = _ZZ
    varint = _varint_slow
    varlong = _varlong_slow
    for index in range(count):
        # length prefix (outside DefaultRecord.readFrom's try block)
        try:
            b = buf[pos]
            if b < 0x80:
                size = zz[b]
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    size = zz[(b & 0x7F) | (b2 << 7)]
                    pos += 2
                else:
                    size, pos = varint(buf, pos)
        except IndexError:
            raise InvalidRecordError(_PREMATURE_EOF) from None
        except _VarintTooLong as e:
            raise InvalidRecordError(str(e)) from None
        if end - pos < size:
            raise InvalidRecordError(
                f"Invalid record size: expected {size} bytes in record payload, but instead the buffer "
                f"has only {end - pos} remaining bytes."
            )
        start = pos
        try:
            # attributes (skipped), then timestampDelta varlong
            b = buf[pos + 1]
            if b < 0x80:
                timestamp_deltas[index] = zz[b]
                pos += 2
            else:
                b2 = buf[pos + 2]
                if b2 < 0x80:
                    timestamp_deltas[index] = zz[(b & 0x7F) | (b2 << 7)]
                    pos += 3
                else:
                    timestamp_deltas[index], pos = varlong(buf, pos + 1)
            # offsetDelta varint
            b = buf[pos]
            if b < 0x80:
                offset_deltas[index] = zz[b]
                pos += 1
            else:
                offset_deltas[index], pos = varint(buf, pos)
            # key length (0x01 = -1 = null key), key skipped
            b = buf[pos]
            if b == 1:
                nulls.append(index)
                pos += 1
            else:
                if b < 0x80:
                    n = zz[b]
                    pos += 1
                else:
                    n, pos = varint(buf, pos)
                if n >= 0:
                    pos += n
                else:
                    nulls.append(index)
            # value length, value skipped (the next read catches a key running past the end)
            b = buf[pos]
            if b < 0x80:
                n = zz[b]
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    n = zz[(b & 0x7F) | (b2 << 7)]
                    pos += 2
                else:
                    n, pos = varint(buf, pos)
            if n > 0:
                pos += n
            # headers count; header keys and values skipped
            if buf[pos]:
                header_count, p = varint(buf, pos)
                if header_count < 0:
                    raise InvalidRecordError(f"Found invalid number of record headers {header_count}")
                if header_count > end - p:
                    raise InvalidRecordError(
                        f"Found invalid number of record headers. {header_count} is larger than the "
                        "remaining size of the buffer"
                    )
                for _h in range(header_count):
                    hk, p = varint(buf, p)
                    if hk < 0:
                        raise InvalidRecordError(f"Invalid negative header key size {hk}")
                    hv, p = varint(buf, p + hk)
                    if hv > 0:
                        p += hv
                pos = p
            else:
                pos += 1
        except (IndexError, _VarintTooLong):
            raise InvalidRecordError(_STRUCTURE) from None
        if pos - start != size or pos > end:
            _size_errors(size, start, pos, end)
    if count and pos != end:
        raise InvalidRecordError(_REMAINING)
    return RecordScan(array("i", offset_deltas), array("q", timestamp_deltas), tuple(nulls))


class _StreamError(Exception):
    pass


def _stream_varint(area: bytes, pos: int, n: int, long: bool) -> tuple[int, int]:
    """`ByteUtils.readVarint/readVarlong(InputStream)`: at the end of the stream `read()` returns -1,
    which reads as a continuation byte, so an exhausted stream ends in "too long" (IllegalArgumentException)."""
    try:
        value, pos = read_leb128(area, pos, n, 10 if long else 5)
    except (IndexError, _VarintTooLong):
        raise _StreamError from None
    value &= 0xFFFFFFFFFFFFFFFF if long else 0xFFFFFFFF
    return (value >> 1) ^ -(value & 1), pos


def scan_partial_records(area: bytes, count: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """`DefaultRecordBatch.skipKeyValueIterator` over a decompressed records stream (path B in place):
    `DefaultRecord.readPartiallyFrom(InputStream)` reads the fields one after another — the record
    length is read but not enforced — and skips keys, values and headers (`skipBytes`); after the last
    record the stream must be exhausted. Returns offset deltas, timestamp deltas, key sizes and value
    sizes (raw: -1 for null). Raises InvalidRecordError with Kafka's texts."""
    n = len(area)
    pos = 0
    ods: list[int] = []
    tds: list[int] = []
    kss: list[int] = []
    vss: list[int] = []

    def skip(size: int) -> None:
        nonlocal pos
        if size <= 0:
            return
        if n - pos < size:
            remaining = size - max(n - pos, 0)
            pos = n
            raise InvalidRecordError(f"Reached end of input stream before skipping all bytes. Remaining bytes:{remaining}")
        pos += size

    for _ in range(count):
        try:
            _size, pos = _stream_varint(area, pos, n, False)
        except _StreamError:
            raise InvalidRecordError(_PREMATURE_EOF) from None
        try:
            pos += 1 if pos < n else 0  # attributes: (byte) input.read(), -1 at the end
            td, pos = _stream_varint(area, pos, n, True)
            od, pos = _stream_varint(area, pos, n, False)
            ks, pos = _stream_varint(area, pos, n, False)
            skip(ks)
            vs, pos = _stream_varint(area, pos, n, False)
            skip(vs)
            headers, pos = _stream_varint(area, pos, n, False)
            if headers < 0:
                raise InvalidRecordError(f"Found invalid number of record headers {headers}")
            for _h in range(headers):
                hk, pos = _stream_varint(area, pos, n, False)
                if hk < 0:
                    raise InvalidRecordError(f"Invalid negative header key size {hk}")
                skip(hk)
                hv, pos = _stream_varint(area, pos, n, False)
                skip(hv)
        except _StreamError:
            raise InvalidRecordError(_STRUCTURE) from None
        ods.append(od)
        tds.append(td)
        kss.append(ks)
        vss.append(vs)
    if count and pos < n:  # StreamRecordIterator.ensureNoneRemaining
        raise InvalidRecordError(_REMAINING)
    return ods, tds, kss, vss
