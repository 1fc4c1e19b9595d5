"""The records of the gateway's transaction state topic, in Kafka's own `__transaction_state` layout
(transaction-coordinator module, `TransactionLogKey`/`TransactionLogValue`, written and read by the broker's
`TransactionLog.keyToBytes`/`valueToBytes`/`readTxnRecordKey`/`readTxnRecordValue`), so Kafka's tooling reads
the topic too (`kafka-console-consumer --formatter org.apache.kafka.tools.consumer.TransactionLogMessageFormatter`,
`kafka-dump-log --transaction-log-decoder`):

    key   = int16 record type 0 (CoordinatorRecordType.TRANSACTION_LOG; also TransactionLogKey's only
            version), then TransactionLogKey v0: transactional id (int16-length string)
    value = int16 version, then TransactionLogValue of that version; null is a tombstone (compaction
            drops the transactional id)

TransactionLogValue v0 (non-flexible) and v1 (flexible, KIP-915: only tagged fields are added from now on):

    producer id int64, producer epoch int16, transaction timeout ms int32, status int8 (TransactionState
    id), partitions (nullable array of {topic string, partition ids int32 array}), last update ms int64,
    start ms int64; v1: compact lengths (unsigned varint length + 1, 0 = null), a tagged-field section
    after every partition entry and after the value, tags:
        0 PreviousProducerId int64 (default -1)   1 NextProducerId int64 (default -1)
        2 ClientTransactionVersion int16 (default 0)   3 NextProducerEpoch int16 (default -1)
    a tagged field is written only when it is not its default, in ascending tag order.

Kafka 4.x writes v1 once the cluster's `transaction.version` feature is 1 or more (a new 4.x cluster: 2),
v0 below; its broker sets only ClientTransactionVersion of the tagged fields, and writes the partitions as
null when the status is Empty (an empty array otherwise), which `encode_value` does too. Both versions,
and every tag, are read; unknown tags (a newer Kafka's) are skipped.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypeVar

from kio.serial import readers as r
from kio.serial import writers as w

T = TypeVar("T")


class TransactionStatus(IntEnum):
    """Kafka's `TransactionState`, with the ids the value's TransactionStatus int8 stores (the coordinator's rules
    over them: `validators.transaction_state`)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka's DescribeTransactions and ListTransactions give (`TransactionState.name`)."""
        return "".join(part.capitalize() for part in self.name.split("_"))


@dataclass(frozen=True)
class TransactionKey:
    """TransactionLogKey."""

    transactional_id: str


@dataclass(frozen=True)
class TransactionLogValue:
    """TransactionLogValue (Kafka's `TransactionMetadata` as stored)."""

    producer_id: int
    previous_producer_id: int  # -1: none (tag 0, v1 only)
    next_producer_id: int  # -1: none (tag 1, v1 only)
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int  # a TransactionStatus id
    partitions: tuple[tuple[str, tuple[int, ...]], ...]  # (topic, partition ids) per topic
    last_update_ms: int
    start_ms: int
    client_transaction_version: int  # 0: default (tag 2, v1 only)
    next_producer_epoch: int = -1  # -1: none (tag 3, v1 only); Kafka 4.x's broker leaves it unset


class TransactionRecordError(ValueError):
    """A record of the transaction state topic that is not Kafka's layout (the message says what is wrong)."""


KEY_TYPE = 0  # CoordinatorRecordType.TRANSACTION_LOG, the int16 before every key
VALUE_VERSIONS = (0, 1)
VALUE_VERSION = 1  # what Kafka 4.x writes with transaction.version >= 1
MAX_STRING_BYTES = 0x7FFF  # Kafka's readString refuses longer strings, compact ones too

TAG_PREVIOUS_PRODUCER_ID = 0
TAG_NEXT_PRODUCER_ID = 1
TAG_CLIENT_TRANSACTION_VERSION = 2
TAG_NEXT_PRODUCER_EPOCH = 3

_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_STATUS_IDS = frozenset(int(status) for status in TransactionStatus)


# --------------------------------------------------------------------------- writing


def _check(name: str, value: int, kind: str) -> None:
    bits = _INT_BITS[kind]
    if not isinstance(value, int) or not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise ValueError(f"{name} {value!r} is not an {kind}")


def _check_string(name: str, value: str) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"{name} {value!r} is not a string")
    encoded = value.encode()
    if len(encoded) > MAX_STRING_BYTES:
        raise ValueError(f"{name} is {len(encoded)} UTF-8 bytes, more than Kafka's {MAX_STRING_BYTES}")
    return encoded


def encode_key(key: TransactionKey) -> bytes:
    b = io.BytesIO()
    w.write_int16(b, KEY_TYPE)
    _check_string("transactional id", key.transactional_id)
    w.write_legacy_string(b, key.transactional_id)
    return b.getvalue()


# (tag, field, default, writer) of the value's tagged fields, in tag order
_TAGGED_FIELDS = (
    (TAG_PREVIOUS_PRODUCER_ID, "previous_producer_id", -1, w.write_int64),
    (TAG_NEXT_PRODUCER_ID, "next_producer_id", -1, w.write_int64),
    (TAG_CLIENT_TRANSACTION_VERSION, "client_transaction_version", 0, w.write_int16),
    (TAG_NEXT_PRODUCER_EPOCH, "next_producer_epoch", -1, w.write_int16),
)


def _tagged(value: TransactionLogValue) -> list[tuple[int, str, bytes]]:
    """The value's tagged fields that differ from their defaults, in ascending tag order (as Kafka writes)."""
    tagged = []
    for tag, name, default, write in _TAGGED_FIELDS:
        field = getattr(value, name)
        if field != default:
            b = io.BytesIO()
            write(b, field)
            tagged.append((tag, name, b.getvalue()))
    return tagged


def encode_value(value: TransactionLogValue, version: int = VALUE_VERSION) -> bytes:
    """TransactionLogValue of `version` (1, as Kafka 4.x writes; 0 as a cluster with transaction.version 0
    does, which has no tagged fields: a value that needs one raises ValueError, like Kafka's writer)."""
    if version not in VALUE_VERSIONS:
        raise ValueError(f"value version {version} is not one of {VALUE_VERSIONS}")
    for name, kind in (("producer_id", "int64"), ("previous_producer_id", "int64"),
                       ("next_producer_id", "int64"), ("producer_epoch", "int16"),
                       ("next_producer_epoch", "int16"), ("transaction_timeout_ms", "int32"),
                       ("last_update_ms", "int64"), ("start_ms", "int64"),
                       ("client_transaction_version", "int16")):
        _check(name, getattr(value, name), kind)
    if value.transaction_status not in _STATUS_IDS:
        raise ValueError(f"transaction status {value.transaction_status!r} is not a TransactionState id (0-7)")
    empty = value.transaction_status == TransactionStatus.EMPTY
    if empty and value.partitions:
        # TransactionLog.valueToBytes: IllegalStateException
        raise ValueError(f"an Empty transaction has no partitions, not {value.partitions!r}")
    tagged = _tagged(value)
    if version == 0 and tagged:  # Kafka's writer: UnsupportedVersionException
        raise ValueError(f"value version 0 has no {', '.join(name for _, name, _ in tagged)} (tagged fields: v1)")
    flexible = version >= 1
    b = io.BytesIO()
    w.write_int16(b, version)
    w.write_int64(b, value.producer_id)
    w.write_int16(b, value.producer_epoch)
    w.write_int32(b, value.transaction_timeout_ms)
    w.write_int8(b, value.transaction_status)
    # Kafka writes null for an Empty transaction and an array (maybe empty) otherwise
    partitions = None if empty else value.partitions
    if flexible:
        w.write_compact_array_length(b, None if partitions is None else len(partitions))
    else:
        w.write_legacy_array_length(b, -1 if partitions is None else len(partitions))
    for topic, ids in partitions or ():
        encoded = _check_string("topic", topic)
        for partition in ids:
            _check(f"partition of {topic}", partition, "int32")
        if flexible:
            w.write_unsigned_varint(b, len(encoded) + 1)
            b.write(encoded)
            w.write_compact_array_length(b, len(ids))
        else:
            w.write_int16(b, len(encoded))
            b.write(encoded)
            w.write_legacy_array_length(b, len(ids))
        for partition in ids:
            w.write_int32(b, partition)
        if flexible:
            w.write_empty_tagged_fields(b)  # PartitionsSchema has no tagged fields of its own
    w.write_int64(b, value.last_update_ms)
    w.write_int64(b, value.start_ms)
    if flexible:
        w.write_unsigned_varint(b, len(tagged))
        for tag, _name, data in tagged:
            w.write_unsigned_varint(b, tag)
            w.write_unsigned_varint(b, len(data))
            b.write(data)
    return b.getvalue()


# --------------------------------------------------------------------------- reading


def _next(read: Callable[[bytes, int], tuple[T, int]], buf: bytes, at: int) -> tuple[T, int]:
    """One field at `at` and the offset after it (kio's readers return the value and its size)."""
    value, size = read(buf, at)
    return value, at + size


def _read(what: str, data: bytes, parse: Callable[[bytes, int], tuple[T, int]]) -> T:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TransactionRecordError(f"{what} is a {type(data).__name__}, not bytes")
    data = bytes(data)
    try:
        value, used = parse(data, 0)
    except TransactionRecordError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure of the readers is a damaged record
        raise TransactionRecordError(f"unreadable {what} ({len(data)} bytes): {type(e).__name__}: {e}") from None
    if used != len(data):
        raise TransactionRecordError(f"{what}: {len(data) - used} bytes after the end")
    return value


def _compact_string(what: str, buf: bytes, at: int) -> tuple[str, int]:
    """A non-nullable compact string (unsigned varint length + 1, then UTF-8)."""
    length, at = _next(r.read_unsigned_varint, buf, at)
    if length == 0:
        raise TransactionRecordError(f"{what} is null")
    size = length - 1
    if size > MAX_STRING_BYTES:
        raise TransactionRecordError(f"{what} is {size} bytes, more than Kafka's {MAX_STRING_BYTES}")
    if size > len(buf) - at:
        raise TransactionRecordError(f"{what} of {size} bytes in the {len(buf) - at} bytes left")
    return buf[at:at + size].decode(), at + size  # invalid UTF-8: UnicodeDecodeError, a damaged record


def _array_length(what: str, flexible: bool, buf: bytes, at: int, item_bytes: int) -> tuple[int | None, int]:
    """An array's element count (None: null) after checking `buf` can hold that many `item_bytes` items."""
    if flexible:
        count, at = _next(r.read_compact_array_length, buf, at)
    else:
        count, at = _next(r.read_legacy_array_length, buf, at)
        if count < -1:
            raise TransactionRecordError(f"{what}: array length {count}")
        if count == -1:
            count = None
    if count is not None and count * item_bytes > len(buf) - at:
        raise TransactionRecordError(f"{what}: {count} entries in the {len(buf) - at} bytes left")
    return count, at


def _tagged_fields(what: str, buf: bytes, at: int, known: dict[int, int]) -> tuple[dict[int, bytes], int]:
    """A tagged-field section: the payloads of the `known` tags (tag -> its size); unknown tags are skipped."""
    count, at = _next(r.read_unsigned_varint, buf, at)
    if count * 2 > len(buf) - at:  # a tag and a size, a byte each at least
        raise TransactionRecordError(f"{what}: {count} tagged fields in the {len(buf) - at} bytes left")
    found: dict[int, bytes] = {}
    last = -1
    for _ in range(count):
        tag, at = _next(r.read_unsigned_varint, buf, at)
        size, at = _next(r.read_unsigned_varint, buf, at)
        if tag <= last:  # Kafka writes tags once each, in ascending order
            raise TransactionRecordError(f"{what}: tag {tag} after tag {last}")
        last = tag
        if size > len(buf) - at:
            raise TransactionRecordError(f"{what}: tag {tag} of {size} bytes in the {len(buf) - at} bytes left")
        if tag in known:
            if size != known[tag]:
                raise TransactionRecordError(f"{what}: tag {tag} is {size} bytes, not {known[tag]}")
            found[tag] = buf[at:at + size]
        at += size
    return found, at


_VALUE_TAGS = {TAG_PREVIOUS_PRODUCER_ID: 8, TAG_NEXT_PRODUCER_ID: 8, TAG_CLIENT_TRANSACTION_VERSION: 2,
               TAG_NEXT_PRODUCER_EPOCH: 2}


def decode_key(data: bytes) -> TransactionKey:
    def parse(buf: bytes, at: int) -> tuple[TransactionKey, int]:
        record_type, at = _next(r.read_int16, buf, at)
        if record_type != KEY_TYPE:
            raise TransactionRecordError(f"key type {record_type} is not a transaction log key ({KEY_TYPE})")
        transactional_id, at = _next(r.read_legacy_string, buf, at)
        return TransactionKey(transactional_id), at

    return _read("key", data, parse)


def decode_value(data: bytes) -> TransactionLogValue:
    def parse(buf: bytes, at: int) -> tuple[TransactionLogValue, int]:
        version, at = _next(r.read_int16, buf, at)
        if version not in VALUE_VERSIONS:
            raise TransactionRecordError(f"value version {version} is not one of {VALUE_VERSIONS}")
        flexible = version >= 1
        producer_id, at = _next(r.read_int64, buf, at)
        producer_epoch, at = _next(r.read_int16, buf, at)
        timeout_ms, at = _next(r.read_int32, buf, at)
        status, at = _next(r.read_int8, buf, at)
        if status not in _STATUS_IDS:
            raise TransactionRecordError(f"transaction status {status} is not a TransactionState id (0-7)")
        # an entry is at least a topic length, a partition count (and v1 its tagged-field count)
        count, at = _array_length("partitions", flexible, buf, at, 3 if flexible else 6)
        partitions: list[tuple[str, tuple[int, ...]]] = []
        for _ in range(count or 0):
            if flexible:
                topic, at = _compact_string("topic", buf, at)
            else:
                topic, at = _next(r.read_legacy_string, buf, at)
            n, at = _array_length(f"partitions of {topic}", flexible, buf, at, 4)
            if n is None:
                raise TransactionRecordError(f"partition ids of {topic} are null")
            ids = []
            for _ in range(n):
                partition, at = _next(r.read_int32, buf, at)
                ids.append(partition)
            if flexible:
                _, at = _tagged_fields(f"partitions of {topic}", buf, at, {})
            partitions.append((topic, tuple(ids)))
        last_update_ms, at = _next(r.read_int64, buf, at)
        start_ms, at = _next(r.read_int64, buf, at)
        tags: dict[int, bytes] = {}
        if flexible:
            tags, at = _tagged_fields("value", buf, at, _VALUE_TAGS)

        def tag(number: int, read: Any, default: int) -> int:
            return read(tags[number], 0)[0] if number in tags else default

        return TransactionLogValue(
            producer_id=producer_id,
            previous_producer_id=tag(TAG_PREVIOUS_PRODUCER_ID, r.read_int64, -1),
            next_producer_id=tag(TAG_NEXT_PRODUCER_ID, r.read_int64, -1),
            producer_epoch=producer_epoch,
            transaction_timeout_ms=timeout_ms,
            transaction_status=status,
            partitions=tuple(partitions),
            last_update_ms=last_update_ms,
            start_ms=start_ms,
            client_transaction_version=tag(TAG_CLIENT_TRANSACTION_VERSION, r.read_int16, 0),
            next_producer_epoch=tag(TAG_NEXT_PRODUCER_EPOCH, r.read_int16, -1),
        ), at

    return _read("value", data, parse)
