"""The pure-Python record walks over a v2 batch's records, as Kafka's `LogValidator` iterates them: the cheap
walks over an uncompressed area, the partial scan of a compressed stream (in-place path B), and the full
walk with `validateRecord` (key, KIP-937 timestamps, the LogAppendTime flag). `_walk_py` is the reference
of the native walk (validators/codec/_record_walk.c) and its fallback. A leaf of `log_validator`, which
turns what a walk finds into Kafka's errors: nothing here decides a batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from validators.codec import records as rec
from validators.codec.record_batch import (
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
)
from validators.codec.records import InvalidRecordError, _VarintTooLong, read_leb128
from validators.timestamps import (
    LONG_MAX,
    LONG_MIN,
    is_future,
    is_out_of_range,
    safe_window,
    to_long,
)


def _varlong_zigzag(data: bytes, pos: int, limit: int) -> int | None:
    """Raw (zigzag) varlong at pos, masked to 64 bits like Java; None if it runs past `limit` or is too long."""
    try:
        return read_leb128(data, pos, limit, 10)[0] & 0xFFFFFFFFFFFFFFFF
    except (IndexError, _VarintTooLong):
        return None


def _scan_timestamp_zigzags(data: bytes, end: int, count: int) -> list[int] | None:
    """`fast` mode, CreateTime: walk the record length chain and collect each record's raw zigzag
    timestamp delta, without looking at keys, values or headers.

    Returns None on anything a clean batch never has (negative or short length, a length varint over
    2 bytes, a record running past the batch, bytes left over): the caller then takes the full walk,
    which produces Kafka's exact error — or accepts, for the rare legal batch outside this fast shape."""
    zs: list[int] = []
    add = zs.append
    pos = RECORD_BATCH_OVERHEAD
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                if b & 1 or b < 12:  # negative, or a body under 6 bytes
                    return None
                nxt = pos + 1 + (b >> 1)
                pos += 2  # attributes byte skipped
            else:
                b2 = data[pos + 1]
                if b2 >= 0x80 or b & 1:
                    return None
                nxt = pos + 2 + (((b & 0x7F) | (b2 << 7)) >> 1)
                pos += 3
            t = data[pos]
            if t < 0x80:
                add(t)
            else:
                t2 = data[pos + 1]
                if t2 < 0x80:
                    add((t & 0x7F) | (t2 << 7))
                else:
                    z = _varlong_zigzag(data, pos, nxt)
                    if z is None:
                        return None
                    add(z)
            pos = nxt
    except IndexError:
        return None
    if pos != end:
        return None
    return zs


# bytes to skip for a 1-byte length varint followed by that many bytes (negative = null: none);
# 0 marks a multi-byte varint (handled inline)
_SKIP = tuple((1 if b & 1 else 1 + (b >> 1)) if b < 0x80 else 0 for b in range(256))


def _walk_records(
    data: bytes, end: int, count: int, start: int = RECORD_BATCH_OVERHEAD, contiguous: bool = False
) -> list[int] | None:
    """`full` mode: every record walked field by field as `DefaultRecord.readFrom` (ByteBuffer) reads
    it — length, attributes, timestampDelta, offsetDelta, key, value, headers — and the bytes consumed
    must equal the declared length; after `count` records the area must end.
    Returns the raw zigzag timestamp deltas, or None for anything outside the common shape (varints
    over 2 bytes — 3+ for timestamps —, negative lengths, any inconsistency): the caller then takes the
    complete walk, which accepts or rejects with Kafka's exact text. So everything accepted here is
    accepted by Kafka too — also by the stream reader of compressed batches (`readPartiallyFrom`),
    which reads the same fields in the same order and only skips the length check. With `contiguous`
    the offset deltas must also be 0, 1, 2, ... (path B's in-place condition). It runs where the C walk
    is not built, so it stays unrolled: 1- and 2-byte varints inline, no call per record."""
    zs: list[int] = []
    add = zs.append
    skip = _SKIP
    pos = start
    try:
        for i in range(count):
            b = data[pos]
            if b < 0x80:
                if b & 1:
                    return None
                nxt = pos + 1 + (b >> 1)
                p = pos + 2  # attributes byte skipped
            else:
                b2 = data[pos + 1]
                if b2 >= 0x80 or b & 1:
                    return None
                nxt = pos + 2 + (((b & 0x7F) | (b2 << 7)) >> 1)
                p = pos + 3
            t = data[p]  # timestampDelta
            if t < 0x80:
                add(t)
                p += 1
            else:
                t2 = data[p + 1]
                if t2 < 0x80:
                    add((t & 0x7F) | (t2 << 7))
                    p += 2
                else:
                    z = _varlong_zigzag(data, p, nxt)
                    if z is None:
                        return None
                    add(z)
                    while data[p] >= 0x80:
                        p += 1
                    p += 1
            o = data[p]  # offsetDelta (only path B uses it: contiguous 0, 1, 2, ...)
            if o < 0x80:
                if contiguous and o != i + i:
                    return None
                p += 1
            else:
                o2 = data[p + 1]
                if o2 >= 0x80 or (contiguous and (o & 0x7F) | (o2 << 7) != i + i):
                    return None
                p += 2
            n = skip[data[p]]  # key: length varint (< 0 is null) then the bytes
            if n:
                p += n
            else:
                k = data[p]
                k2 = data[p + 1]
                if k2 >= 0x80 or k & 1:
                    return None
                p += 2 + (((k & 0x7F) | (k2 << 7)) >> 1)
            n = skip[data[p]]  # value
            if n:
                p += n
            else:
                v = data[p]
                v2 = data[p + 1]
                if v2 >= 0x80 or v & 1:
                    return None
                p += 2 + (((v & 0x7F) | (v2 << 7)) >> 1)
            h = data[p]  # headers count
            if h:
                if h >= 0x80 or h & 1:
                    return None
                p += 1
                for _h in range(h >> 1):
                    k = data[p]  # header key: never null
                    if k >= 0x80 or k & 1:
                        return None
                    p += 1 + (k >> 1)
                    n = skip[data[p]]  # header value
                    if n:
                        p += n
                    else:
                        v = data[p]
                        v2 = data[p + 1]
                        if v2 >= 0x80 or v & 1:
                            return None
                        p += 2 + (((v & 0x7F) | (v2 << 7)) >> 1)
                p -= 1
            if p + 1 != nxt:
                return None
            pos = nxt
    except IndexError:
        return None
    if pos != end:
        return None
    return zs


_PREMATURE_EOF = "Incorrect declared batch size, premature EOF reached"


_RECORDS_REMAINING = "Incorrect declared batch size, records still remaining in file"


_STRUCTURE = "Found invalid record structure"


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


def _scan_partial(area: bytes, count: int) -> tuple[list[int], list[int], list[int], list[int]]:
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
        raise InvalidRecordError(_RECORDS_REMAINING)
    return ods, tds, kss, vss


# The record walk's result, the same from the native walk (validators/codec/_record_walk.c) and from the
# pure-Python reference (_walk_py): (error, max_timestamp, future_count, contiguous, record_errors).
#   error          None, or Kafka's InvalidRecordException text of the first structural error
#   max_timestamp  max timestamp of the records without an error, from -1 (NO_TIMESTAMP)
#   future_count   of those, records more than one hour ahead of now (KIP-937; CreateTime topics)
#   contiguous     offsetDeltas are 0, 1, 2, ... (LogValidator's in-place condition, path B)
#   record_errors  (batch_index, kind, offset, timestamp, raw key size, raw value size) per bad record
WalkError = tuple[int, int, int, int, int, int]


WalkResult = tuple[str | None, int, int, bool, list[WalkError]]


_KIND_NULL_KEY = 1  # validateKey: compacted topic, null key


_KIND_TIMESTAMP = 2  # validateTimestamp: out of the KIP-937 window


_KIND_LOG_APPEND_TIME = 3  # validateTimestamp: the producer set the LogAppendTime flag


def _walk_py(
    buf: bytes, start: int, end: int, count: int, base_timestamp: int, batch_lat: bool, lat_timestamp: int,
    check_timestamps: bool, now_ms: int, before_ms: int, after_ms: int, compacted: bool,
) -> WalkResult:
    """The reference `full` walk of the records area buf[start:end]: `DefaultRecord.readFrom(ByteBuffer)`
    for every record (records.scan_records), then `validateRecord` per record. The native walk
    (`_record_walk.walk`, same arguments) must return exactly this; without it this is the fallback."""
    area = buf[start:end]
    try:
        scan = rec.scan_records(area, count)
    except InvalidRecordError as e:
        return e.message, NO_TIMESTAMP, 0, False, []

    def sizes() -> tuple[list[int], list[int]]:
        # raw key/value sizes, only for an error tuple: a ByteBuffer walk that succeeded reads the same
        # fields as the stream reader (readPartiallyFrom), which keeps them
        _ods, _tds, key_sizes, value_sizes = _scan_partial(area, count)
        return key_sizes, value_sizes

    return (None, *_validate_records(scan.offset_deltas, scan.timestamp_deltas, scan.null_key_indices, sizes,
                                     count, base_timestamp, batch_lat, lat_timestamp, check_timestamps, now_ms,
                                     before_ms, after_ms, compacted))


def _walk_stream(
    area: bytes, count: int, base_timestamp: int, batch_lat: bool, lat_timestamp: int, check_timestamps: bool,
    now_ms: int, before_ms: int, after_ms: int, compacted: bool,
) -> WalkResult:
    """Path B in place: the decompressed stream as `DefaultRecord.readPartiallyFrom(InputStream)` reads
    it (_scan_partial; more lenient than the ByteBuffer reader: the record length is not enforced),
    then `validateRecord`. Only asked when the ByteBuffer walk found a structural error."""
    try:
        ods, tds, key_sizes, value_sizes = _scan_partial(area, count)
    except InvalidRecordError as e:
        return e.message, NO_TIMESTAMP, 0, False, []
    nulls = [i for i, k in enumerate(key_sizes) if k < 0]
    return (None, *_validate_records(ods, tds, nulls, lambda: (key_sizes, value_sizes), count, base_timestamp,
                                     batch_lat, lat_timestamp, check_timestamps, now_ms, before_ms, after_ms,
                                     compacted))


def _validate_records(
    ods: Sequence[int], tds: Sequence[int], nulls: Sequence[int], sizes: Callable[[], tuple[list[int], list[int]]],
    count: int, base: int, batch_lat: bool, lat_timestamp: int, check_timestamps: bool, now_ms: int,
    before: int, after: int, compacted: bool,
) -> tuple[int, int, bool, list[WalkError]]:
    """`LogValidator.validateRecord` over walked records (`LogValidator.validateMessagesAndAssignOffsets`): validateKey, then
    validateTimestamp (Java long arithmetic); (max_timestamp, future_count, contiguous, errors)."""
    contiguous = list(ods) == list(range(count))
    if not count:
        return NO_TIMESTAMP, 0, contiguous, []
    if not batch_lat and not (compacted and nulls):
        mn = base + min(tds)
        mx = base + max(tds)
        if not check_timestamps and LONG_MIN <= mn and mx <= LONG_MAX:
            return max(mx, NO_TIMESTAMP), 0, contiguous, []
        lo, hi = safe_window(now_ms, before, after)
        if check_timestamps and lo <= mn and mx <= hi:  # every record inside the window, no long wrap
            future = 0
            if is_future(mx, now_ms):
                future = sum(1 for d in tds if is_future(base + d, now_ms))
            return max(mx, NO_TIMESTAMP), future, contiguous, []

    # per record, in Kafka's order
    null_set = set(nulls) if compacted else set()
    bad: list[tuple[int, int, int, int]] = []
    max_ts = NO_TIMESTAMP
    future = 0
    for i in range(count):
        offset = ods[i]  # record.offset(): baseOffset (0) + offsetDelta
        ts = lat_timestamp if batch_lat else to_long(base + tds[i])
        if i in null_set:  # validateKey: a key error suppresses the timestamp check
            bad.append((i, _KIND_NULL_KEY, offset, ts))
            continue
        if check_timestamps and ts != NO_TIMESTAMP:
            if is_out_of_range(ts, now_ms, before, after):
                bad.append((i, _KIND_TIMESTAMP, offset, ts))
                continue
        elif batch_lat:  # LogAppendTime topic, or ts == -1, with the LogAppendTime flag set
            bad.append((i, _KIND_LOG_APPEND_TIME, offset, ts))
            continue
        if ts > max_ts:
            max_ts = ts
        if check_timestamps and is_future(ts, now_ms):
            future += 1
    errors: list[WalkError] = []
    if bad:
        key_sizes, value_sizes = sizes()
        errors = [(i, kind, offset, ts, key_sizes[i], value_sizes[i]) for i, kind, offset, ts in bad]
    return max_ts, future, contiguous, errors


