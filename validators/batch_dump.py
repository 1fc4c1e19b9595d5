"""JSON-able dump of a batch, field names as Kafka's `kafka.tools.DumpLogSegments` prints them.

`dump(batch)` describes one batch (v2, or a legacy magic 0/1 entry) with its records
(`--deep-iteration`); `dump_all(data)` every batch of back-to-back bytes (a `.log` segment or an
ingress value). Keys and values are UTF-8 text when they decode, else hex, with the encoding named
next to them. A records area that cannot be decoded is reported in `recordsError` (the header is
still dumped); only a buffer without a readable header raises.
"""

from __future__ import annotations

import struct
from typing import Any

from validators.codec.compression import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    CompressionType,
    CorruptCompressedDataError,
)
from validators.codec.legacy_records import LegacyEntry, LegacyRecord, read_message_set
from validators.codec.record_batch import (
    DELETE_HORIZON_FLAG_MASK,
    MAGIC_OFFSET,
    CorruptRecordError,
    DecodedRecord,
    compute_crc,
    decode_record_batch,
    increment_sequence,
    iter_batches,
    parse_header,
)
from validators.codec.records import InvalidRecordError

__all__ = ["dump", "dump_all"]


def _bytes_field(data: bytes | None) -> tuple[str | None, str | None]:
    """(text, encoding): UTF-8 text when valid, else lowercase hex; (None, None) for null."""
    if data is None:
        return None, None
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return data.hex(), "hex"


def _codec_name(codec_id: int) -> str:
    try:
        return CompressionType.for_id(codec_id).kafka_name
    except ValueError:
        return f"unknown({codec_id})"


def _payload(record: dict[str, Any], key: bytes | None, value: bytes | None) -> None:
    record["keySize"] = -1 if key is None else len(key)
    record["valueSize"] = -1 if value is None else len(value)
    record["key"], record["keyEncoding"] = _bytes_field(key)
    record["value"], record["valueEncoding"] = _bytes_field(value)


def _v2_record(r: DecodedRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "offset": r.offset,
        "timestamp": r.timestamp,
        "timestampType": r.timestamp_type.kafka_name,
        "createTime": r.create_time,
        "sequence": r.sequence,
        "headerKeys": [k for k, _ in r.headers],
    }
    _payload(out, r.key, r.value)
    headers = []
    for header_key, header_value in r.headers:
        text, encoding = _bytes_field(header_value)
        headers.append({"key": header_key, "value": text, "valueEncoding": encoding})
    out["headers"] = headers
    return out


def _dump_v2(batch: bytes, max_output: int) -> dict[str, Any]:
    header = parse_header(batch)
    size = min(header.size_in_bytes, len(batch))
    computed = compute_crc(batch[:size])
    out: dict[str, Any] = {
        "baseOffset": header.base_offset,
        "lastOffset": header.last_offset,
        "count": header.records_count,
        "baseSequence": header.base_sequence,
        "lastSequence": increment_sequence(header.base_sequence, header.last_offset_delta)
        if header.base_sequence >= 0
        else -1,
        "producerId": header.producer_id,
        "producerEpoch": header.producer_epoch,
        "partitionLeaderEpoch": header.partition_leader_epoch,
        "isTransactional": header.is_transactional,
        "isControl": header.is_control_batch,
        "deleteHorizonMs": header.base_timestamp if header.attributes & DELETE_HORIZON_FLAG_MASK else None,
        "timestampType": header.timestamp_type.kafka_name,
        header.timestamp_type.kafka_name: header.max_timestamp,
        "baseTimestamp": header.base_timestamp,
        "maxTimestamp": header.max_timestamp,
        "size": header.size_in_bytes,
        "magic": header.magic,
        "attributes": header.attributes,
        "compresscodec": _codec_name(header.compression_id),
        "crc": header.crc,
        "computedCrc": computed,
        "isValid": size >= 61 and computed == header.crc,
        "records": [],
    }
    try:
        decoded = decode_record_batch(batch, max_output=max_output)
    except (InvalidRecordError, CorruptCompressedDataError, CorruptRecordError, ValueError) as e:
        out["recordsError"] = getattr(e, "message", None) or str(e)
        return out
    out["records"] = [_v2_record(r) for r in decoded.records]
    return out


def _legacy_record(r: LegacyRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "offset": r.offset,
        "magic": r.magic,
        "timestamp": r.timestamp,
        "timestampType": r.timestamp_type.kafka_name,
        "compresscodec": _codec_name(r.attributes & 0x07),
        "crc": r.crc,
        "isValid": r.is_valid,
    }
    _payload(out, r.key, r.value)
    return out


def _legacy_entry(entry: LegacyEntry) -> dict[str, Any]:
    return {
        "offset": entry.offset,
        "lastOffset": entry.last_offset,
        "magic": entry.magic,
        "attributes": entry.attributes,
        "timestampType": entry.timestamp_type.kafka_name,
        "timestamp": entry.timestamp,
        "size": entry.size_in_bytes,
        "compresscodec": _codec_name(entry.attributes & 0x07),
        "crc": entry.crc,
        "computedCrc": entry.computed_crc,
        "isValid": entry.is_valid,
        "records": [_legacy_record(r) for r in entry.records],
    }


def _dump_legacy(batch: bytes, max_output: int) -> dict[str, Any]:
    offset, size = struct.unpack_from(">qi", batch, 0)
    try:
        entries = read_message_set(batch, verify_crc=False, max_output=max_output)
        if not entries:  # the size field claims more bytes than were given
            raise CorruptRecordError(
                f"Legacy entry is truncated: size field says {size + 12} bytes, {len(batch)} present"
            )
    except (InvalidRecordError, CorruptCompressedDataError, CorruptRecordError, ValueError) as e:
        return {
            "offset": offset,
            "magic": batch[MAGIC_OFFSET],
            "size": size + 12,
            "crc": struct.unpack_from(">I", batch, 12)[0],
            "records": [],
            "recordsError": getattr(e, "message", None) or str(e),
        }
    return _legacy_entry(entries[0])


def dump(
    batch: bytes | bytearray | memoryview, max_output: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> dict[str, Any]:
    """One batch (v2) or legacy entry (magic 0/1) with its records, as a JSON-able dict.

    Raises CorruptRecordError when fewer bytes than a header are given or the magic is not 0-2."""
    buf = bytes(batch)
    if len(buf) < 17:
        raise CorruptRecordError(f"Batch of {len(buf)} bytes has no header")
    magic = struct.unpack_from(">b", buf, MAGIC_OFFSET)[0]
    if magic == 2:
        if len(buf) < 61:
            raise CorruptRecordError(
                f"Record batch is corrupt (the size {len(buf)} is smaller than the minimum allowed overhead 61)"
            )
        return _dump_v2(buf, max_output)
    if magic in (0, 1):
        if len(buf) < 26:
            raise CorruptRecordError(f"Legacy entry of {len(buf)} bytes is shorter than its header")
        return _dump_legacy(buf, max_output)
    raise CorruptRecordError(f"Invalid magic found in record: {magic}")


def dump_all(
    data: bytes | bytearray | memoryview, max_output: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> list[dict[str, Any]]:
    """Every batch of back-to-back bytes, each with its byte `position` (DumpLogSegments' field).
    Raises CorruptRecordError for broken framing (iter_batches)."""
    out = []
    position = 0
    for batch in iter_batches(data):
        entry = dump(batch, max_output)
        entry["position"] = position
        position += len(batch)
        out.append(entry)
    return out
