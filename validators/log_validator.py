"""The append decision: Kafka's `LogValidator` + the leader checks around it, as one pure function
of (batch bytes, topic config, partition state, clock) — reference §1.1 steps 4-17, DESIGN §4.2.

Nothing here reads a clock or does I/O: `now_ms` is the micro-batch clock passed in. The only side
effect is a WARN log line for accepted records more than one hour in the future (KIP-937).

Order of checks (Kafka's; the first failing one decides):

    §1.1 step 1   transactional batch without a transactional.id           53 (see below)
    §6.3 / step 8 illegal topic name (Topic.validate) / internal topic      17
    step 4        topic not in the registry, partition out of range          3
    step 5        framing (ByteBufferLogInputStream, validateRecords)        2 / 87
    step 11b-e    baseOffset != 0 (87), size > max.message.bytes (10),
                  CRC / size < 61 (2), codec id 5-7 (-1)
    step 12       LogValidator (§1.2): validateBatch (87), record iteration
                  structure (87), per-record key / timestamp errors (87 / 32)
    step 13       rebuilt batch > max.message.bytes                          10
    step 15       batch > segment.bytes                                      18
    step 17       idempotent producer: duplicate (ack), epoch (47), sequence (45)

Gateway decisions (documented differences; everything else follows the reference):

* Clock (DESIGN §4.2): `append_time = max(now_ms, state.last_append_time_ms)`; LogAppendTime topics
  stamp `append_time` (Kafka stamps its raw wall clock); window checks use `now_ms`.
* One batch per ingress message (DESIGN §4.1): a second complete v2 batch is Kafka's Produce v13
  `validateRecords` error "Produce requests with version 13 are only allowed to contain exactly one
  record batch per partition" (87); a trailing fragment shorter than a batch is dropped as Kafka's
  `trimInvalidBytes` does, unless its size field or magic is corrupt (2).
* Legacy magic 0/1 input is accepted and up-converted (DESIGN §4.1), as Kafka's LogValidator does for
  `toMagic = 2` (§4.6): v0 records get timestamp -1, v1 keep theirs; the rebuilt batch keeps the
  source codec (compression.type=producer). Kafka 4.x itself rejects magic < 2 on Produce v3+.
* Transactional batches: the ingress carries no transactional.id and the gateway has no transaction
  coordinator, so they get Kafka's answer to a produce request with transactional records and a null
  transactional.id: TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53).
* Rebuilds (Path C, §1.2.3) happen where Kafka rebuilds: a topic `compression.type` other than
  `producer` and other than the batch's codec (the batch is recompressed with the topic's codec), and
  legacy input. The records are re-encoded like `MemoryRecordsBuilder`; compressed output bytes may
  differ from Java's codec libraries (the records are identical). The common path —
  compression.type=producer, v2 — is always in place: header rewrite only, record bytes untouched.
  A compressed batch with non-contiguous inner offsets is answered like Kafka 4.2 answers it:
  UNKNOWN_SERVER_ERROR (its rebuild from PartialDefaultRecords throws; seen on a real broker).
* Record walk depth (`gateway.record.validation`, topic_config.RecordValidation): `full` (default)
  reads every record as Kafka does — `DefaultRecord.readFrom(ByteBuffer)` uncompressed (path A),
  `readPartiallyFrom(InputStream)` over the decompressed stream on the compressed in-place path B —
  so the gateway accepts exactly what Kafka accepts and never stores a batch a consumer or
  DumpLogSegments would fail on (DESIGN §4.5). The walk and `validateRecord` run in one native pass
  (validators/_record_walk.c, built by `pip install -e .`); its reference, and the fallback where it is
  not built (one warning), is the Python walk: a tight walker for the common record shapes that hands
  anything else to the codec's complete walk (records.scan_records), which gives Kafka's text.
  `fast` trades that for speed (DESIGN §6): uncompressed LogAppendTime batches are decided from the
  header alone, uncompressed CreateTime batches from the record length chain and timestamp deltas;
  the layout inside records is then not verified (and on LogAppendTime topics not the record count).
  The project's differential test against a real Kafka 4.2 broker agrees on every batch with `full`.
* Corrupt compressed streams (valid batch CRC): UNKNOWN_SERVER_ERROR, "Failed to decompress record
  stream" — what a Kafka 4.2 broker answers (its codec IOException becomes a KafkaException); the
  reference's CORRUPT_MESSAGE for testCorruptLz4ProduceRequest is the batch CRC check, which comes first.
* Idempotent producers (producer_state.py): a duplicate is acknowledged with the original offsets and
  `log_append_time_ms` = the cached batch timestamp — Kafka's quirk is kept: on CreateTime topics that
  is the original batch's max CreateTime, not -1 (§3.3). Expiry uses the gateway's append time.
* KIP-937 future timestamps: `future_timestamp_count` counts accepted records of CreateTime topics more
  than one hour ahead of `now_ms` (LogAppendTime records all read the append time: 0).
* Error messages: `Rejected.message` is always the exception text Kafka would log; Kafka's
  ProduceResponse carries it as ErrorMessage only for per-record errors (`response_error_message`).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import os
import shutil
import struct
import sys
import tempfile
import zipfile
import zipimport
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType

from crc32c import crc32c

from validators import legacy_records, producer_state
from validators import record_batch as rb
from validators import records as rec
from validators.compression import CompressionType, CorruptCompressedDataError
from validators.errors import Errors
from validators.producer_state import (
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateError,
    producers_from_json,
    producers_to_json,
)
from validators.record_batch import CorruptRecordError, TimestampType
from validators.records import InvalidRecordError
from validators.timestamps import (
    FUTURE_TIMESTAMP_WARN_MS,
    LONG_MAX,
    LONG_MIN,
    NO_TIMESTAMP,
    is_out_of_range,
    out_of_range_message,
    safe_window,
    to_long,
    window_bounds,
)
from validators.topic_config import INTERNAL_TOPICS, RecordValidation, TopicConfig, topic_name_error

log = logging.getLogger(__name__)


def _load_native() -> ModuleType | None:
    """`validators._record_walk` (the C record walk), or None: the pure-Python reference walk is then
    used, with one warning. Spark cluster mode ships the package as a zip (streaming/session.py) and
    zipimport cannot load an extension module: a matching shared object in that zip is copied to a
    private temporary directory, loaded, and the copy removed (the loaded mapping stays valid)."""
    try:
        from validators import _record_walk

        return _record_walk
    except ImportError as e:
        reason = str(e)
    package_loader = getattr(sys.modules.get("validators"), "__loader__", None)
    if isinstance(package_loader, zipimport.zipimporter):
        try:
            module = _load_native_from_zip(package_loader.archive)
            if module is not None:
                return module
            reason = f"no validators/_record_walk{importlib.machinery.EXTENSION_SUFFIXES[0]} in {package_loader.archive}"
        except (OSError, ImportError, zipfile.BadZipFile) as e:
            reason = str(e)
    log.warning("validators._record_walk is not available (%s): the pure-Python record walk is used (slower); "
                "build it with `pip install -e .`", reason)
    return None


def _load_native_from_zip(archive: str) -> ModuleType | None:
    names = [f"validators/_record_walk{suffix}" for suffix in importlib.machinery.EXTENSION_SUFFIXES]
    with zipfile.ZipFile(archive) as zf:
        present = set(zf.namelist())
        name = next((n for n in names if n in present), None)
        if name is None:
            return None
        blob = zf.read(name)
    directory = tempfile.mkdtemp(prefix="gateway-native-")
    try:
        path = os.path.join(directory, name.rsplit("/", 1)[1])
        with open(path, "wb") as f:
            f.write(blob)
        spec = importlib.util.spec_from_file_location("validators._record_walk", path)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    sys.modules[spec.name] = module
    return module


_native = _load_native()


# The gateway is the only leader of its partitions and never changes epoch.
GATEWAY_LEADER_EPOCH = 0
# The produce request version whose texts the gateway speaks (Kafka 4.1+ clients send v13).
PRODUCE_VERSION = 13

_LOG_OVERHEAD = 12
_BATCH_OVERHEAD = 61
_RECORD_OVERHEAD_V0 = 14
_HEADER_UP_TO_MAGIC = 17
_ATTR_LAT = 0x08
_ATTR_TXN = 0x10
_ATTR_CONTROL = 0x20
_HEADER = struct.Struct(">qiibIhiqqqhii")
_SIZE_AT_8 = struct.Struct(">i")
_CRC_AT_17 = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What a partition leader remembers between appends (the Spark stage keeps it as columns
    log_start_offset, log_end_offset, last_append_time_ms and producers = producers_to_json(...))."""

    log_start_offset: int = 0
    log_end_offset: int = 0
    last_append_time_ms: int = -1
    producers: tuple[ProducerStateEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class RecordError:
    """Kafka's `ProduceResponse.RecordError`: 0-based position of the record in its batch, and why."""

    batch_index: int
    message: str

    def __str__(self) -> str:
        # RecordError.toString, as processRecordErrors prints the first three
        return f"RecordError(batchIndex={self.batch_index}, message='{self.message}')"


@dataclass(frozen=True, slots=True)
class Accepted:
    records: bytes  # the batch as stored (empty for an idempotent duplicate: nothing is appended)
    base_offset: int
    last_offset: int
    max_timestamp: int  # header maxTimestamp as stored: append time (LogAppendTime) or max CreateTime (-1: none)
    log_append_time_ms: int  # what the produce response carries: -1 for CreateTime topics (duplicates: §3.3)
    append_time_ms: int  # the gateway's monotonic append time of this decision, for every topic
    record_count: int
    state: PartitionState
    clock_held: bool = False  # append time was clamped to the last one (clock behind)
    future_timestamp_count: int = 0  # KIP-937: accepted records > 1 h ahead of now_ms (CreateTime topics)
    duplicate: bool = False  # idempotent retry of a cached batch: original offsets, nothing stored
    producer_max_timestamp: int = NO_TIMESTAMP  # header maxTimestamp as the producer sent it (unverified for LAT)
    input_magic: int = 2  # 0/1: a legacy message set, up-converted
    rebuilt: bool = False  # Path C: records re-encoded (legacy up-conversion, or recompression to the topic codec)

    @property
    def log_start_offset(self) -> int:
        return self.state.log_start_offset


@dataclass(frozen=True, slots=True)
class Rejected:
    error: Errors
    message: str
    record_errors: tuple[RecordError, ...] = ()
    log_start_offset: int = -1  # §3.3: the log start offset, or -1 for Kafka's "known" exceptions
    window: tuple[int, int] | None = None  # INVALID_TIMESTAMP on CreateTime: [now-before, now+after] as printed

    @property
    def response_error_message(self) -> str | None:
        """ProduceResponse ErrorMessage: Kafka fills it only for RecordValidationException (§2.4, §6.1)."""
        return self.message if self.record_errors else None


AppendResult = Accepted | Rejected


class _Reject(Exception):
    """Internal: carries a Rejected out of nested helpers."""

    def __init__(self, result: Rejected) -> None:
        super().__init__(result.message)
        self.result = result


def _tp(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


_topic_name_error = lru_cache(maxsize=4096)(topic_name_error)


def validate_and_assign(
    batch: bytes,
    topic: str,
    partition: int | None,
    config: TopicConfig | None,
    state: PartitionState,
    now_ms: int,
) -> AppendResult:
    """Decide one produce batch for `topic`-`partition` at the micro-batch clock `now_ms`.

    Accepted: the bytes to store (offsets from `state.log_end_offset`), the new state, and what the
    produce response carries. Rejected: Kafka's error, message and record errors; state unchanged."""
    data = batch if type(batch) is bytes else bytes(batch)
    try:
        return _decide(data, topic, partition, config, state, now_ms)
    except _Reject as r:
        return r.result


def _decide(
    data: bytes, topic: str, partition: int | None, config: TopicConfig | None, state: PartitionState, now_ms: int
) -> AppendResult:
    frame = _frame(data)  # (batch_size, magic) or a framing error, reported in Kafka's order below
    # §1.1 step 1 (KafkaApis): transactional records need an authorized transactional.id; ingress has none
    if isinstance(frame, tuple) and frame[1] == 2 and data[22] & _ATTR_TXN:
        return Rejected(
            Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED.default_message or "",
        )
    name_error = _topic_name_error(topic)
    if name_error is not None:
        return Rejected(Errors.INVALID_TOPIC_EXCEPTION, name_error)
    if topic in INTERNAL_TOPICS:  # step 8: ReplicaManager.appendToLocalLog
        return Rejected(Errors.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}")
    if config is None or partition is None or not 0 <= partition < config.partitions:  # step 4
        return Rejected(Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.UNKNOWN_TOPIC_OR_PARTITION.default_message or "")
    tp = _tp(topic, partition)
    if isinstance(frame, Rejected):  # step 5
        return frame
    batch_size, magic = frame
    if magic < 2:
        return _decide_legacy(data, tp, config, state, now_ms)
    return _decide_v2(data, batch_size, tp, config, state, now_ms)


# ------------------------------------------------------------------------------------------------
# step 5: ProduceRequest.validateRecords over ByteBufferLogInputStream


def _next_batch_size(data: bytes, pos: int) -> tuple[int, int] | Rejected | None:
    """`ByteBufferLogInputStream.nextBatchSize` + `nextBatch`: (size, magic), a CORRUPT_MESSAGE, or
    None when no complete batch starts at `pos`."""
    remaining = len(data) - pos
    if remaining < _LOG_OVERHEAD:
        return None
    size = _SIZE_AT_8.unpack_from(data, pos + 8)[0]
    if size < _RECORD_OVERHEAD_V0:
        return Rejected(
            Errors.CORRUPT_MESSAGE,
            f"Record size {size} is less than the minimum record overhead ({_RECORD_OVERHEAD_V0})",
        )
    if remaining < _HEADER_UP_TO_MAGIC:
        return None
    magic = struct.unpack_from(">b", data, pos + 16)[0]
    if magic < 0 or magic > 2:
        return Rejected(Errors.CORRUPT_MESSAGE, f"Invalid magic found in record: {magic}")
    if remaining < size + _LOG_OVERHEAD:
        return None
    return size + _LOG_OVERHEAD, magic


def _frame(data: bytes) -> tuple[int, int] | Rejected:
    first = _next_batch_size(data, 0)
    if first is None:
        return Rejected(
            Errors.INVALID_RECORD,
            f"Produce requests with version {PRODUCE_VERSION} must have at least one record batch per partition",
        )
    if isinstance(first, Rejected) or first[1] < 2:
        return first  # legacy message sets are framed by legacy_records (several entries are legal)
    second = _next_batch_size(data, first[0])
    if isinstance(second, Rejected):
        return second
    if second is not None:
        return Rejected(
            Errors.INVALID_RECORD,
            f"Produce requests with version {PRODUCE_VERSION} are only allowed to contain exactly one record "
            "batch per partition",
        )
    return first


# ------------------------------------------------------------------------------------------------
# magic 2


def _decide_v2(
    data: bytes, batch_size: int, tp: str, config: TopicConfig, state: PartitionState, now_ms: int
) -> AppendResult:
    lso = state.log_start_offset
    # §1.1 step 11 (UnifiedLog.analyzeAndValidateRecords)
    base_offset = struct.unpack_from(">q", data, 0)[0]
    if base_offset != 0:  # 11b
        return Rejected(
            Errors.INVALID_RECORD,
            f"The baseOffset of the record batch in the append to {tp} should be 0, but it is {base_offset}",
            log_start_offset=lso,
        )
    if batch_size > config.max_message_bytes:  # 11c (sic: stray ")")
        return Rejected(
            Errors.MESSAGE_TOO_LARGE,
            f"The record batch size in the append to {tp} is {batch_size} bytes which exceeds the maximum "
            f"configured value of {config.max_message_bytes}).",
        )
    stored_crc = _CRC_AT_17.unpack_from(data, 17)[0]
    if batch_size < _BATCH_OVERHEAD or stored_crc != crc32c(memoryview(data)[21:batch_size]):  # 11d
        return Rejected(Errors.CORRUPT_MESSAGE, f"Record is corrupt (stored crc = {stored_crc}) in topic partition {tp}.")
    (_, _, _, _, _, attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
     base_sequence, count) = _HEADER.unpack_from(data, 0)
    codec_id = attributes & 0x07
    if codec_id > 4:  # 11e: CompressionType.forId throws IllegalArgumentException -> UNKNOWN_SERVER_ERROR
        return Rejected(Errors.UNKNOWN_SERVER_ERROR, f"Unknown compression type id: {codec_id}", log_start_offset=lso)

    # §1.2 validateBatch (origin CLIENT, magic 2; baseOffset is 0 here)
    count_from_offsets = last_offset_delta + 1
    if count_from_offsets <= 0:
        return _invalid(f"Batch has an invalid offset range: [0, {last_offset_delta}] in topic partition {tp}", lso)
    if count <= 0:
        return _invalid(f"Invalid reported count for record batch: {count} in topic partition {tp}", lso)
    if count_from_offsets != count:
        return _invalid(
            f"Inconsistent batch offset range [0, {last_offset_delta}] and count of records {count} in topic "
            f"partition {tp}",
            lso,
        )
    if attributes & _ATTR_CONTROL:
        return _invalid(f"Clients are not allowed to write control records in topic partition {tp}", lso)
    if producer_id >= 0 and base_sequence < 0:
        return _invalid(
            f"Invalid sequence number {base_sequence} in record batch with producerId {producer_id} in topic "
            f"partition {tp}",
            lso,
        )

    lat_topic = config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
    target_id = config.target_compression_id
    in_place = target_id is None or target_id == codec_id  # §1.2.2: codec equality decides (not the level)
    append_time = now_ms if now_ms >= state.last_append_time_ms else state.last_append_time_ms
    header = _V2Header(base_timestamp, max_timestamp, attributes, count, batch_size)

    # The record walk. With the native walk built, `full` mode is one call of it (_full_walk). Without
    # it (the fallback), the cheap Python walkers accept only what they fully verified and anything
    # else goes to the full walk, which reports Kafka's exact outcome.
    checked: _Checked | None = None
    area: bytes | None = None
    if in_place and not config.compacted and not attributes & _ATTR_LAT:
        zs: list[int] | None = None
        if codec_id:
            area = _decompress(data, header, codec_id, lso)
            if _native is None:
                zs = _walk_records(area, len(area), count, 0, contiguous=True)
        elif config.record_validation is RecordValidation.FAST:
            if lat_topic:
                checked = _Checked(NO_TIMESTAMP, 0)  # header only (DESIGN §6)
            else:
                zs = _scan_timestamp_zigzags(data, batch_size, count)
        elif _native is None:
            zs = _walk_records(data, batch_size, count)
        if zs is not None:
            checked = _Checked(NO_TIMESTAMP, 0) if lat_topic else _check_create_times(zs, header, config, now_ms)
    if checked is None:
        checked = _full_walk(data, header, codec_id, tp, config, now_ms, lso, in_place=in_place, area=area)

    max_ts = append_time if lat_topic else checked.max_timestamp
    if in_place:
        stored = rb.assign_offsets_and_timestamp(
            data if batch_size == len(data) else data[:batch_size],
            state.log_end_offset,
            config.message_timestamp_type,
            max_ts,
            GATEWAY_LEADER_EPOCH,
        )
    else:
        stored = _rebuild_v2(data, header, codec_id, target_id, tp, config, state, append_time, lso,
                             producer_id, producer_epoch, base_sequence)
    size = len(stored)
    if size > config.segment_bytes:  # step 15
        return Rejected(
            Errors.RECORD_LIST_TOO_LARGE,
            f"Message batch size is {size} bytes in append to partition {tp}, which exceeds the maximum "
            f"configured segment size of {config.segment_bytes}.",
        )

    producers = state.producers
    if producers:
        producers = producer_state.expire(producers, now_ms, config.producer_id_expiration_ms)
    first_offset = state.log_end_offset
    last_offset = first_offset + count - 1
    if producer_id >= 0:  # step 17: UnifiedLog.analyzeAndValidateProducerState
        entry = producer_state.find(producers, producer_id, now_ms, config.producer_id_expiration_ms)
        last_seq = producer_state.increment_sequence(base_sequence, last_offset_delta)
        duplicate = entry.find_duplicate(producer_epoch, base_sequence, last_seq) if entry is not None else None
        if duplicate is not None:
            return Accepted(
                records=b"",
                base_offset=duplicate.first_offset,
                last_offset=duplicate.last_offset,
                max_timestamp=duplicate.timestamp,
                log_append_time_ms=duplicate.timestamp,
                append_time_ms=append_time,
                record_count=count,
                state=state,
                clock_held=append_time > now_ms,
                duplicate=True,
                producer_max_timestamp=max_timestamp,
            )
        try:
            producer_state.check_append(entry, producer_id, producer_epoch, base_sequence, first_offset, tp)
        except ProducerStateError as e:
            return Rejected(e.error, e.message, log_start_offset=lso)
        producers = producer_state.append_batch(
            producers, entry, producer_id, producer_epoch,
            BatchMetadata(base_sequence, last_seq, first_offset, last_offset, max_ts), append_time,
        )

    return Accepted(
        records=stored,
        base_offset=first_offset,
        last_offset=last_offset,
        max_timestamp=max_ts,
        log_append_time_ms=append_time if lat_topic else NO_TIMESTAMP,
        append_time_ms=append_time,
        record_count=count,
        state=PartitionState(state.log_start_offset, last_offset + 1, append_time, producers),
        clock_held=append_time > now_ms,
        future_timestamp_count=checked.future_count,
        producer_max_timestamp=max_timestamp,
        rebuilt=not in_place,
    )


def _invalid(message: str, lso: int) -> Rejected:
    return Rejected(Errors.INVALID_RECORD, message, log_start_offset=lso)


@dataclass(frozen=True, slots=True)
class _V2Header:
    base_timestamp: int
    max_timestamp: int
    attributes: int
    count: int
    batch_size: int


@dataclass(frozen=True, slots=True)
class _Checked:
    """Outcome of a successful record check: the batch's max record timestamp (-1: none) and the
    KIP-937 future count."""

    max_timestamp: int
    future_count: int


# ---- cheap walks over an uncompressed records area ----------------------------------------------------------


def _varlong_zigzag(data: bytes, pos: int, limit: int) -> int | None:
    """Raw (zigzag) varlong at pos, masked to 64 bits like Java; None if it runs past `limit` or is too long."""
    value = 0
    shift = 0
    while pos < limit and shift <= 63:
        b = data[pos]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value & 0xFFFFFFFFFFFFFFFF
        pos += 1
        shift += 7
    return None


def _scan_timestamp_zigzags(data: bytes, end: int, count: int) -> list[int] | None:
    """`fast` mode, CreateTime: walk the record length chain and collect each record's raw zigzag
    timestamp delta, without looking at keys, values or headers.

    Returns None on anything a clean batch never has (negative or short length, a length varint over
    2 bytes, a record running past the batch, bytes left over): the caller then takes the full walk,
    which produces Kafka's exact error — or accepts, for the rare legal batch outside this fast shape."""
    zs: list[int] = []
    add = zs.append
    pos = _BATCH_OVERHEAD
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
    data: bytes, end: int, count: int, start: int = _BATCH_OVERHEAD, contiguous: bool = False
) -> list[int] | None:
    """`full` mode: every record walked field by field as `DefaultRecord.readFrom` (ByteBuffer) reads
    it — length, attributes, timestampDelta, offsetDelta, key, value, headers — and the bytes consumed
    must equal the declared length; after `count` records the area must end.
    Returns the raw zigzag timestamp deltas, or None for anything outside the common shape (varints
    over 2 bytes — 3+ for timestamps —, negative lengths, any inconsistency): the caller then takes the
    complete walk, which accepts or rejects with Kafka's exact text. So everything accepted here is
    accepted by Kafka too — also by the stream reader of compressed batches (`readPartiallyFrom`),
    which reads the same fields in the same order and only skips the length check. With `contiguous`
    the offset deltas must also be 0, 1, 2, ... (path B's in-place condition)."""
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


def _check_create_times(zs: list[int], h: _V2Header, config: TopicConfig, now_ms: int) -> _Checked | None:
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
    if max_ts - now_ms > FUTURE_TIMESTAMP_WARN_MS:
        limit = now_ms + FUTURE_TIMESTAMP_WARN_MS - base
        future = sum(1 for z in zs if (z >> 1) ^ -(z & 1) > limit)
    return _Checked(max_ts, future)


# ---- a compressed records stream, as the in-place path B reads it ------------------------------------------

_PREMATURE_EOF = "Incorrect declared batch size, premature EOF reached"
_RECORDS_REMAINING = "Incorrect declared batch size, records still remaining in file"
_STRUCTURE = "Found invalid record structure"


class _StreamError(Exception):
    pass


def _stream_varint(area: bytes, pos: int, n: int, long: bool) -> tuple[int, int]:
    """`ByteUtils.readVarint/readVarlong(InputStream)`: at the end of the stream `read()` returns -1,
    which reads as a continuation byte, so an exhausted stream ends in "too long" (IllegalArgumentException)."""
    value = 0
    shift = 0
    limit = 63 if long else 28
    while True:
        b = area[pos] if pos < n else -1
        pos += 1
        if not b & 0x80:
            break
        value |= (b & 0x7F) << shift
        shift += 7
        if shift > limit:
            raise _StreamError
    value |= b << shift
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


# ---- full walk: Kafka's record iteration + validateRecord ------------------------------------------------


def _decompress(data: bytes, h: _V2Header, codec_id: int, lso: int) -> bytes:
    try:
        return rb.records_area(data[: h.batch_size])
    except CorruptCompressedDataError as e:
        # the codec stream's IOException surfaces as KafkaException("Failed to decompress record
        # stream"), not an ApiException: UNKNOWN_SERVER_ERROR (seen on a Kafka 4.2 broker)
        raise _Reject(Rejected(
            Errors.UNKNOWN_SERVER_ERROR, f"Failed to decompress record stream: {e}", log_start_offset=lso,
        )) from None


# The record walk's result, the same from the native walk (validators/_record_walk.c) and from the
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
    """`LogValidator.validateRecord` over walked records (reference §1.2): validateKey, then
    validateTimestamp (§2.2, Java long arithmetic); (max_timestamp, future_count, contiguous, errors)."""
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
            if mx - now_ms > FUTURE_TIMESTAMP_WARN_MS:
                future = sum(1 for d in tds if base + d - now_ms > FUTURE_TIMESTAMP_WARN_MS)
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
        if check_timestamps and ts - now_ms > FUTURE_TIMESTAMP_WARN_MS:
            future += 1
    errors: list[WalkError] = []
    if bad:
        key_sizes, value_sizes = sizes()
        errors = [(i, kind, offset, ts, key_sizes[i], value_sizes[i]) for i, kind, offset, ts in bad]
    return max_ts, future, contiguous, errors


def _full_walk(
    data: bytes, h: _V2Header, codec_id: int, tp: str, config: TopicConfig, now_ms: int, lso: int, *,
    in_place: bool, area: bytes | None = None,
) -> _Checked:
    """Records as LogValidator iterates them (path A uncompressed, path B compressed), then
    `validateRecord` per record and `processRecordErrors`. Raises _Reject."""
    if codec_id == 0:  # path A: the records area in place, no copy
        buf, start, end = data, _BATCH_OVERHEAD, h.batch_size
    else:
        buf = area if area is not None else _decompress(data, h, codec_id, lso)
        start, end = 0, len(buf)
    partial = codec_id != 0 and in_place  # skipKeyValueIterator -> PartialDefaultRecord
    lat_topic = config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    checks = (h.base_timestamp, bool(h.attributes & _ATTR_LAT), h.max_timestamp, not lat_topic, now_ms, before, after,
              config.compacted)
    walk = _walk_py if _native is None else _native.walk  # one walk at run time: the native one when built
    error, max_ts, future, contiguous, walk_errors = walk(buf, start, end, h.count, *checks)
    if error is not None and partial:
        # the stream reader accepts what the ByteBuffer reader accepts, and more: it decides
        error, max_ts, future, contiguous, walk_errors = _walk_stream(buf, h.count, *checks)
    if error is not None:
        # DefaultRecord.readFrom(ByteBuffer) reads the length outside its try block: a too-long varint
        # escapes as an IllegalArgumentException, not an ApiException -> UNKNOWN_SERVER_ERROR
        code = Errors.UNKNOWN_SERVER_ERROR if error.startswith("Varint is too long") else Errors.INVALID_RECORD
        raise _Reject(Rejected(code, error, log_start_offset=lso))

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
        raise _Reject(_record_errors(errors, now_ms, config, lso))

    if partial and not contiguous:
        # §1.2.2: non-contiguous inner offsets abandon in-place assignment and the batch is rebuilt
        # from the records read so far - PartialDefaultRecords, whose key() throws (Kafka 4.2 answers
        # UNKNOWN_SERVER_ERROR; seen on a real broker). The gateway answers the same.
        raise _Reject(Rejected(
            Errors.UNKNOWN_SERVER_ERROR, "key is skipped in PartialDefaultRecord", log_start_offset=lso
        ))
    return _Checked(max_ts, future)


def _record_errors(errors: list[tuple[Errors, RecordError]], now_ms: int, config: TopicConfig, lso: int) -> Rejected:
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


# ---- Path C: rebuild (buildRecordsAndAssignOffsets) -------------------------------------------------------


def _rebuild_v2(
    data: bytes, h: _V2Header, codec_id: int, target_id: int | None, tp: str, config: TopicConfig,
    state: PartitionState, append_time: int, lso: int, producer_id: int, producer_epoch: int, base_sequence: int,
) -> bytes:
    """MemoryRecordsBuilder over the validated records: fresh offsets from the log end offset, the
    records' own timestamps, the topic's timestamp type and target codec, producer fields copied."""
    area = data[_BATCH_OVERHEAD : h.batch_size] if codec_id == 0 else rb.records_area(data[: h.batch_size])
    decoded = rec.decode_records(area, h.count)
    batch_lat = bool(h.attributes & _ATTR_LAT)
    lat_topic = config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
    items = [
        (h.max_timestamp if batch_lat else to_long(h.base_timestamp + r.timestamp_delta), r.key, r.value, r.headers)
        for r in decoded
    ]
    try:
        rebuilt = rb.build_record_batch(
            items,
            base_offset=state.log_end_offset,
            compression=codec_id if target_id is None else target_id,
            timestamp_type=config.message_timestamp_type,
            max_timestamp=append_time if lat_topic else None,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=False,
            partition_leader_epoch=GATEWAY_LEADER_EPOCH,
            reject_negative_timestamps=True,
        )
    except ValueError as e:  # "Invalid negative timestamp <ts>": IllegalArgumentException -> -1
        raise _Reject(Rejected(Errors.UNKNOWN_SERVER_ERROR, str(e), log_start_offset=lso)) from None
    _check_rebuilt_size(rebuilt, tp, config)
    return rebuilt


def _check_rebuilt_size(rebuilt: bytes, tp: str, config: TopicConfig) -> None:
    """§1.1 step 13: a rebuilt batch is re-checked against max.message.bytes (sic: "append topartition")."""
    if len(rebuilt) > config.max_message_bytes:
        raise _Reject(
            Rejected(
                Errors.MESSAGE_TOO_LARGE,
                f"Message batch size is {len(rebuilt)} bytes in append topartition {tp} which exceeds the "
                f"maximum configured size of {config.max_message_bytes}.",
            )
        )


# ------------------------------------------------------------------------------------------------
# magic 0/1: accepted and up-converted (DESIGN §4.1; LogValidator with toMagic = 2, reference §4.6)


def _legacy_record_string(r: legacy_records.LegacyRecord) -> str:
    """`AbstractLegacyRecordBatch.toString` around `LegacyRecord.toString`."""
    key = 0 if r.key is None else len(r.key)
    value = 0 if r.value is None else len(r.value)
    codec = CompressionType.for_id(r.attributes & 0x07).kafka_name if r.attributes & 0x07 <= 4 else "unknown"
    if r.magic > 0:
        inner = (f"Record(magic={r.magic}, attributes={r.attributes}, compression={codec}, crc={r.crc}, "
                 f"{r.timestamp_type.kafka_name}={r.timestamp}, key={key} bytes, value={value} bytes)")
    else:
        inner = (f"Record(magic={r.magic}, attributes={r.attributes}, compression={codec}, crc={r.crc}, "
                 f"key={key} bytes, value={value} bytes)")
    return f"LegacyRecordBatch(offset={r.offset}, {inner})"


def _decide_legacy(data: bytes, tp: str, config: TopicConfig, state: PartitionState, now_ms: int) -> AppendResult:
    lso = state.log_start_offset
    try:
        shallow = list(rb.iter_batches(data))
    except CorruptRecordError as e:
        return Rejected(Errors.CORRUPT_MESSAGE, e.message)
    # §1.1 step 11 over every shallow entry, before LogValidator
    source = CompressionType.NONE
    for entry in shallow:
        magic = entry[16]
        if magic == 2 and struct.unpack_from(">q", entry, 0)[0] != 0:  # 11b (magic >= 2 only)
            base_offset = struct.unpack_from(">q", entry, 0)[0]
            return _invalid(
                f"The baseOffset of the record batch in the append to {tp} should be 0, but it is {base_offset}", lso
            )
        if len(entry) > config.max_message_bytes:  # 11c
            return Rejected(
                Errors.MESSAGE_TOO_LARGE,
                f"The record batch size in the append to {tp} is {len(entry)} bytes which exceeds the maximum "
                f"configured value of {config.max_message_bytes}).",
            )
        if magic == 2:
            stored = _CRC_AT_17.unpack_from(entry, 17)[0]
            valid = len(entry) >= _BATCH_OVERHEAD and stored == crc32c(memoryview(entry)[21:])
            codec_id = entry[22] & 0x07
        else:  # LegacyRecord.isValid: CRC32 over magic..end of the outer message
            stored = struct.unpack_from(">I", entry, _LOG_OVERHEAD)[0]
            valid = zlib.crc32(memoryview(entry)[_LOG_OVERHEAD + 4 :]) & 0xFFFFFFFF == stored
            codec_id = entry[_LOG_OVERHEAD + 5] & 0x07
        if not valid:  # 11d
            return Rejected(Errors.CORRUPT_MESSAGE, f"Record is corrupt (stored crc = {stored}) in topic partition {tp}.")
        if codec_id > 4:  # 11e
            return Rejected(Errors.UNKNOWN_SERVER_ERROR, f"Unknown compression type id: {codec_id}", log_start_offset=lso)
        if codec_id:
            source = CompressionType(codec_id)

    # LogValidator.getFirstBatchAndMaybeValidateNoMoreBatches
    if source is not CompressionType.NONE and len(shallow) > 1:
        return _invalid("Compressed outer record has more than one batch", lso)
    lat_topic = config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    first_magic = shallow[0][16]
    entries: list[legacy_records.LegacyEntry] = []
    max_ts = NO_TIMESTAMP
    future = 0
    for entry_bytes in shallow:
        # validateBatch: same magic as the first batch (toMagic 2 > legacy: no producer-id checks apply)
        if entry_bytes[16] != first_magic:
            return _invalid(
                f"Batch magic {entry_bytes[16]} is not the same as the first batch's magic byte {first_magic} in "
                f"topic partition {tp}",
                lso,
            )
        try:
            (entry,) = legacy_records.read_message_set(entry_bytes, verify_crc=False)
        except CorruptRecordError as e:
            return Rejected(Errors.CORRUPT_MESSAGE, e.message)
        except InvalidRecordError as e:
            return _invalid(e.message, lso)
        except CorruptCompressedDataError as e:
            return Rejected(Errors.CORRUPT_MESSAGE, f"Failed to decompress record stream in topic partition {tp}: {e.message}")
        except ValueError as e:
            return Rejected(Errors.UNKNOWN_SERVER_ERROR, str(e), log_start_offset=lso)
        entries.append(entry)
        compressed = entry.compression is not CompressionType.NONE
        # per batch: batchIndex restarts at 0 and processRecordErrors runs after each batch (§1.2)
        errors: list[tuple[Errors, RecordError]] = []
        # (validateRecordCompression never fires: the deep iterator already threw "Inner messages must not
        # be compressed", which read_message_set raises as InvalidRecordError above)
        for i, r in enumerate(entry.records):
            if r.magic != entry.magic:  # record.hasMagic(batch.magic())
                errors.append((Errors.INVALID_RECORD, RecordError(
                    i, f"Record {_legacy_record_string(r)}'s magic does not match outer magic {entry.magic} in topic "
                       f"partition {tp}")))
                continue
            if compressed and not r.is_valid:  # inner CRC of a compressed legacy batch: CorruptRecordException
                return Rejected(
                    Errors.CORRUPT_MESSAGE, f"Record is corrupt (stored crc = {r.crc}, computed crc = {r.computed_crc})"
                )
            if config.compacted and r.key is None:
                errors.append((Errors.INVALID_RECORD, RecordError(
                    i, f"Compacted topic cannot accept message without key in topic partition {tp}")))
                continue
            ts = r.timestamp
            if not lat_topic and ts != NO_TIMESTAMP:
                if is_out_of_range(ts, now_ms, before, after):
                    errors.append((Errors.INVALID_TIMESTAMP,
                                   RecordError(i, out_of_range_message(ts, r.offset, now_ms, before, after))))
                    continue
            elif entry.timestamp_type == TimestampType.LOG_APPEND_TIME:
                errors.append((Errors.INVALID_TIMESTAMP, RecordError(
                    i, f"Invalid timestamp type in message {_legacy_record_string(r)}. Producer should not set "
                       "timestamp type to LogAppendTime.")))
                continue
            if ts > max_ts:
                max_ts = ts
            if not lat_topic and ts - now_ms > FUTURE_TIMESTAMP_WARN_MS:
                future += 1
        if errors:
            return _record_errors(errors, now_ms, config, lso)

    # Path C (convertAndAssignOffsetsNonCompressed / buildRecordsAndAssignOffsets): one v2 batch
    append_time = now_ms if now_ms >= state.last_append_time_ms else state.last_append_time_ms
    records = tuple(r for e in entries for r in e.records)
    conversion = legacy_records.UpConversion(tuple(entries), records, first_magic, source)
    target_id = config.target_compression_id
    try:
        stored = conversion.to_v2_batch(
            base_offset=state.log_end_offset,
            compression=source if target_id is None else target_id,
            timestamp_type=config.message_timestamp_type,
            log_append_time=append_time if lat_topic else None,
            partition_leader_epoch=GATEWAY_LEADER_EPOCH,
        )
        _check_rebuilt_size(stored, tp, config)
    except ValueError as e:  # MemoryRecordsBuilder: "Invalid negative timestamp <ts>" -> -1
        return Rejected(Errors.UNKNOWN_SERVER_ERROR, str(e), log_start_offset=lso)
    except _Reject as r:
        return r.result
    if len(stored) > config.segment_bytes:  # step 15
        return Rejected(
            Errors.RECORD_LIST_TOO_LARGE,
            f"Message batch size is {len(stored)} bytes in append to partition {tp}, which exceeds the maximum "
            f"configured segment size of {config.segment_bytes}.",
        )
    count = len(records)
    first_offset = state.log_end_offset
    if lat_topic:
        max_ts = append_time
    producers = state.producers
    if producers:
        producers = producer_state.expire(producers, now_ms, config.producer_id_expiration_ms)
    return Accepted(
        records=stored,
        base_offset=first_offset,
        last_offset=first_offset + count - 1,
        max_timestamp=max_ts,
        log_append_time_ms=append_time if lat_topic else NO_TIMESTAMP,
        append_time_ms=append_time,
        record_count=count,
        state=PartitionState(state.log_start_offset, first_offset + count, append_time, producers),
        clock_held=append_time > now_ms,
        future_timestamp_count=future,
        producer_max_timestamp=max((e.timestamp for e in entries), default=NO_TIMESTAMP),
        input_magic=first_magic,
        rebuilt=True,
    )


__all__ = [
    "GATEWAY_LEADER_EPOCH",
    "LONG_MAX",
    "LONG_MIN",
    "PRODUCE_VERSION",
    "Accepted",
    "AppendResult",
    "PartitionState",
    "RecordError",
    "Rejected",
    "producers_from_json",
    "producers_to_json",
    "validate_and_assign",
]
