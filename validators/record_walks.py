"""LogValidator's record walk over a v2 batch: the records read as Kafka iterates them, `validateRecord` per
record (key, KIP-937 timestamps, the LogAppendTime flag) and `processRecordErrors`, with Kafka's texts
(`check_records`, raising RejectedBatch). `_walk_py` is the reference of the native walk
(validators/codec/_record_walk.c) and its fallback; the cheap walks over an uncompressed area are the fallback's
shortcuts, and the codec's stream reader (`records.scan_partial_records`) reads a compressed stream on the in-place
path B.

Record walk depth (`gateway.record.validation`, topic_config.RecordValidation): `full` (default)
reads every record as Kafka does — `DefaultRecord.readFrom(ByteBuffer)` uncompressed (path A),
`readPartiallyFrom(InputStream)` over the decompressed stream on the compressed in-place path B —
so the gateway accepts exactly what Kafka accepts and never stores a batch a consumer or
DumpLogSegments would fail on (docs/design.md: segment storage). The walk and `validateRecord` run in one native pass
(validators/codec/_record_walk.c, built by `pip install -e .`); its reference, and the fallback where it is
not built (one warning), is the Python walk: a tight walker for the common record shapes that hands
anything else to the codec's complete walk (records.scan_records), which gives Kafka's text. A clean
uncompressed batch is decided up to the producer-state step in one native call (`decide_in_place`:
steps 11-15, the walk and the path A rewrite); what it declines, `_stored_v2` decides with Kafka's texts.
`fast` trades that for speed (docs/performance.md): uncompressed LogAppendTime batches are decided from the
header alone, uncompressed CreateTime batches from the record length chain and timestamp deltas;
the layout inside records is then not verified (and on LogAppendTime topics not the record count).
The project's differential test against a real Kafka 4.2 broker agrees on every batch with `full`.

Corrupt compressed streams (valid batch CRC), found where the decision decompresses (`log_validator`):
UNKNOWN_SERVER_ERROR, "Failed to decompress record stream" — what a Kafka 4.2 broker answers (its codec IOException becomes a KafkaException); the
reference's CORRUPT_MESSAGE for testCorruptLz4ProduceRequest is the batch CRC check, which comes first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from validators.append_result import RecordError, Rejected, RejectedBatch
from validators.codec import native_walk
from validators.codec import records as rec
from validators.codec.record_batch import (
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TimestampType,
)
from validators.codec.records import InvalidRecordError, _VarintTooLong, read_leb128
from validators.errors import Errors
from validators.timestamps import (
    FUTURE_TIMESTAMP_WARN_MS,
    LONG_MAX,
    LONG_MIN,
    is_future,
    is_out_of_range,
    out_of_range_message,
    safe_window,
    to_long,
    window_bounds,
)
from validators.topic_config import RecordValidation, TopicConfig


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
        _ods, _tds, key_sizes, value_sizes = rec.scan_partial_records(area, count)
        return key_sizes, value_sizes

    return (None, *_validate_records(scan.offset_deltas, scan.timestamp_deltas, scan.null_key_indices, sizes,
                                     count, base_timestamp, batch_lat, lat_timestamp, check_timestamps, now_ms,
                                     before_ms, after_ms, compacted))


def _walk_stream(
    area: bytes, count: int, base_timestamp: int, batch_lat: bool, lat_timestamp: int, check_timestamps: bool,
    now_ms: int, before_ms: int, after_ms: int, compacted: bool,
) -> WalkResult:
    """Path B in place: the decompressed stream as `DefaultRecord.readPartiallyFrom(InputStream)` reads
    it (`records.scan_partial_records`; more lenient than the ByteBuffer reader: the record length is not enforced),
    then `validateRecord`. Only asked when the ByteBuffer walk found a structural error."""
    try:
        ods, tds, key_sizes, value_sizes = rec.scan_partial_records(area, count)
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


# LogValidator's record walk over a v2 batch: the walk chosen, then validateRecord's and processRecordErrors' answers.


@dataclass(frozen=True, slots=True)
class V2Header:
    """What the record walk needs of a v2 batch's header."""

    base_timestamp: int
    max_timestamp: int
    attributes: int
    count: int
    batch_size: int


@dataclass(frozen=True, slots=True)
class CheckedRecords:
    """Outcome of a successful record check: the batch's max record timestamp (-1: none) and the KIP-937 future
    count."""

    max_timestamp: int
    future_count: int


def check_records(
    data: bytes, area: bytes | None, header: V2Header, in_place: bool, lat_topic: bool, tp: str, config: TopicConfig,
    now_ms: int, lso: int,
) -> CheckedRecords:
    """The record walk. With the native walk built, `full` mode is one call of it (_full_walk). Without
    it (the fallback), the cheap Python walkers accept only what they fully verified and anything
    else goes to the full walk, which reports Kafka's exact outcome. Raises RejectedBatch."""
    if in_place and not config.compacted and not header.attributes & TIMESTAMP_TYPE_MASK:
        zs: list[int] | None = None
        if area is not None:
            if native_walk.NATIVE_WALK is None:
                zs = _walk_records(area, len(area), header.count, 0, contiguous=True)
        elif config.record_validation is RecordValidation.FAST:
            if lat_topic:
                return CheckedRecords(NO_TIMESTAMP, 0)  # header only (docs/performance.md)
            zs = _scan_timestamp_zigzags(data, header.batch_size, header.count)
        elif native_walk.NATIVE_WALK is None:
            zs = _walk_records(data, header.batch_size, header.count)
        if zs is not None:
            checked = (NO_TIMESTAMP, 0) if lat_topic else _check_create_times(zs, header, config, now_ms)
            if checked is not None:  # None: not fully verified by the cheap walk
                return CheckedRecords(*checked)
    return _full_walk(data, header, tp, config, now_ms, lso, in_place=in_place, area=area)


def _check_create_times(zs: list[int], h: V2Header, config: TopicConfig, now_ms: int) -> tuple[int, int] | None:
    """Accept a CreateTime batch from its raw zigzag timestamp deltas when every record is inside the
    window, or return None (the full walk then reports every bad record)."""
    lo, hi = safe_window(now_ms, config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms)
    base = h.base_timestamp
    dlo = lo - base
    dhi = hi - base
    if not dlo <= 0 <= dhi:
        return None
    zmax = max(zs)
    # zigzag z <= min(2*dhi, -2*dlo - 1)  <=>  delta in [dlo, dhi] for both signs; then base + delta is
    # inside the safe window (no long wrap) and the Java check accepts every record
    if zmax > min(2 * dhi, -2 * dlo - 1):
        return None
    max_delta = zmax >> 1 if not zmax & 1 else max((z >> 1) ^ -(z & 1) for z in zs)
    max_ts = max(base + max_delta, NO_TIMESTAMP)
    future = 0
    if is_future(max_ts, now_ms):
        limit = now_ms + FUTURE_TIMESTAMP_WARN_MS - base
        future = sum(1 for z in zs if (z >> 1) ^ -(z & 1) > limit)
    return max_ts, future


def _full_walk(
    data: bytes, h: V2Header, tp: str, config: TopicConfig, now_ms: int, lso: int, *,
    in_place: bool, area: bytes | None,
) -> CheckedRecords:
    """Records as LogValidator iterates them (path A uncompressed, path B compressed), then
    `validateRecord` per record and `processRecordErrors`. Raises RejectedBatch."""
    if area is None:  # path A: the records area in place, no copy
        buf, start, end = data, RECORD_BATCH_OVERHEAD, h.batch_size
    else:
        buf, start, end = area, 0, len(area)
    partial = area is not None and in_place  # skipKeyValueIterator -> PartialDefaultRecord
    lat_topic = config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    checks = (h.base_timestamp, bool(h.attributes & TIMESTAMP_TYPE_MASK), h.max_timestamp, not lat_topic, now_ms, before, after,
              config.compacted)
    walk = _walk_py if native_walk.NATIVE_WALK is None else native_walk.NATIVE_WALK.walk  # one walk at run time: the native one when built
    error, max_ts, future, contiguous, walk_errors = walk(buf, start, end, h.count, *checks)
    if error is not None and partial:
        # the stream reader accepts what the ByteBuffer reader accepts, and more: it decides
        error, max_ts, future, contiguous, walk_errors = _walk_stream(buf, h.count, *checks)
    if error is not None:
        # DefaultRecord.readFrom(ByteBuffer) reads the length outside its try block: a too-long varint
        # escapes as an IllegalArgumentException, not an ApiException -> UNKNOWN_SERVER_ERROR
        code = Errors.UNKNOWN_SERVER_ERROR if error.startswith("Varint is too long") else Errors.INVALID_RECORD
        raise RejectedBatch(Rejected(code, error, log_start_offset=lso))

    if walk_errors:  # processRecordErrors
        record = "PartialDefaultRecord" if partial else "DefaultRecord"
        errors: list[tuple[Errors, RecordError]] = []
        for i, kind, offset, ts, key_size, value_size in walk_errors:
            if kind == _KIND_NULL_KEY:
                errors.append((Errors.INVALID_RECORD, RecordError(
                    i, f"Compacted topic cannot accept message without key in topic partition {tp}")))
            elif kind == _KIND_TIMESTAMP:
                errors.append((Errors.INVALID_TIMESTAMP,
                               RecordError(i, out_of_range_message(ts, offset, now_ms, before, after))))
            else:
                # Record.toString: DefaultRecord prints a null key/value as 0 bytes, PartialDefaultRecord
                # its raw size (-1 for null)
                if not partial:
                    key_size, value_size = max(key_size, 0), max(value_size, 0)
                errors.append((Errors.INVALID_TIMESTAMP, RecordError(
                    i, f"Invalid timestamp type in message {record}(offset={offset}, timestamp={ts}, "
                       f"key={key_size} bytes, value={value_size} bytes). Producer should not set timestamp type "
                       "to LogAppendTime.")))
        raise RejectedBatch(record_errors(errors, now_ms, config, lso))

    if partial and not contiguous:
        # non-contiguous inner offsets abandon in-place assignment and the batch is rebuilt
        # from the records read so far - PartialDefaultRecords, whose key() throws (Kafka 4.2 answers
        # UNKNOWN_SERVER_ERROR; seen on a real broker). The gateway answers the same.
        raise RejectedBatch(Rejected(
            Errors.UNKNOWN_SERVER_ERROR, "key is skipped in PartialDefaultRecord", log_start_offset=lso
        ))
    return CheckedRecords(max_ts, future)


def record_errors(errors: list[tuple[Errors, RecordError]], now_ms: int, config: TopicConfig, lso: int) -> Rejected:
    """`LogValidator.processRecordErrors`: INVALID_TIMESTAMP wins; every record error is reported."""
    record_errors = tuple(e for _, e in errors)
    if any(code is Errors.INVALID_TIMESTAMP for code, _ in errors):
        window = None
        if config.message_timestamp_type == TimestampType.CREATE_TIME:
            window = window_bounds(now_ms, config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms)
        return Rejected(
            Errors.INVALID_TIMESTAMP,
            "One or more records have been rejected due to invalid timestamp",
            record_errors,
            log_start_offset=lso,
            window=window,
        )
    shown = ", ".join(str(e) for e in record_errors[:3])
    return Rejected(
        Errors.INVALID_RECORD,
        f"One or more records have been rejected due to {len(record_errors)} record errors in total, and only "
        f"showing the first three errors at most: [{shown}]",
        record_errors,
        log_start_offset=lso,
    )
