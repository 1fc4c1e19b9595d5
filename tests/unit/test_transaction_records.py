"""The transaction state topic's records in Kafka's `__transaction_state` layout: keys and both value versions
round-trip, the bytes are Kafka's (pinned by hand against TransactionLogKey v0 and TransactionLogValue v0/v1:
fixed fields, null partitions for Empty, compact lengths and tagged fields in v1), and damaged or hostile bytes
raise `TransactionRecordError` naming what is wrong, never anything else."""

from __future__ import annotations

import struct
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contract.transaction_records import (
    TransactionKey,
    TransactionLogValue,
    TransactionRecordError,
    TransactionStatus,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

ONGOING = TransactionLogValue(1000, -1, -1, 5, 60_000, TransactionStatus.ONGOING, (("a", (0, 1)), ("bb", ())),
                              10, 9, 2)
EMPTY = TransactionLogValue(1000, -1, -1, 0, 60_000, TransactionStatus.EMPTY, (), 10, 10, 0)
# the fixed fields of a value up to its status: version, producer id, epoch, timeout, status
HEAD = ">hqhib"


def head(version: int, value: TransactionLogValue) -> bytes:
    return struct.pack(HEAD, version, value.producer_id, value.producer_epoch, value.transaction_timeout_ms,
                       value.transaction_status)


def times(value: TransactionLogValue) -> bytes:
    return struct.pack(">qq", value.last_update_ms, value.start_ms)


def test_keys_and_values_of_every_state_and_both_versions_round_trip() -> None:
    for transactional_id in ("tx", "", "é€😀", "x" * 32767):
        assert decode_key(encode_key(TransactionKey(transactional_id))) == TransactionKey(transactional_id)
    for status in TransactionStatus:
        partitions = () if status == TransactionStatus.EMPTY else (("orders", (0, 2)), ("audit.log", (7,)))
        value = replace(ONGOING, transaction_status=int(status), partitions=partitions)
        assert decode_value(encode_value(value)) == value
        v0 = replace(value, client_transaction_version=0)
        assert decode_value(encode_value(v0, 0)) == v0
    every_tag = replace(ONGOING, previous_producer_id=7, next_producer_id=8, next_producer_epoch=3)
    assert decode_value(encode_value(every_tag)) == every_tag


def test_the_key_is_kafkas_layout() -> None:
    # record type 0 (TRANSACTION_LOG), then TransactionLogKey v0's int16-length string
    assert encode_key(TransactionKey("tx")) == bytes.fromhex("0000" "0002" "7478")
    assert encode_key(TransactionKey("é")) == struct.pack(">hh", 0, 2) + "é".encode()


def test_a_v1_value_is_kafkas_layout() -> None:
    expected = (
        head(1, ONGOING)
        + bytes([3])  # two partition entries, compact (+1)
        + bytes([2]) + b"a" + bytes([3]) + struct.pack(">ii", 0, 1) + bytes([0])  # topic, ids, no tags
        + bytes([3]) + b"bb" + bytes([1]) + bytes([0])  # an empty id array is not null
        + times(ONGOING)
        + bytes([1, 2, 2]) + struct.pack(">h", 2)  # one tag: 2 ClientTransactionVersion, 2 bytes
    )
    assert encode_value(ONGOING) == expected
    assert expected.hex() == ("0001" "00000000000003e8" "0005" "0000ea60" "01" "03" "0261" "03" "00000000" "00000001"
                              "00" "036262" "01" "00" "000000000000000a" "0000000000000009" "010202" "0002")


def test_tagged_fields_are_written_in_tag_order_and_only_when_not_their_default() -> None:
    value = replace(ONGOING, previous_producer_id=7, next_producer_id=8, next_producer_epoch=3, partitions=())
    assert encode_value(value) == (
        head(1, value) + bytes([1]) + times(value) + bytes([4])
        + bytes([0, 8]) + struct.pack(">q", 7)  # 0 PreviousProducerId
        + bytes([1, 8]) + struct.pack(">q", 8)  # 1 NextProducerId
        + bytes([2, 2]) + struct.pack(">h", 2)  # 2 ClientTransactionVersion
        + bytes([3, 2]) + struct.pack(">h", 3)  # 3 NextProducerEpoch
    )
    defaults = replace(value, client_transaction_version=0, previous_producer_id=-1, next_producer_id=-1,
                       next_producer_epoch=-1)
    assert encode_value(defaults) == head(1, defaults) + bytes([1]) + times(defaults) + bytes([0])


def test_a_v0_value_is_kafkas_layout() -> None:
    value = replace(ONGOING, client_transaction_version=0)
    assert encode_value(value, 0) == (
        head(0, value) + struct.pack(">i", 2)
        + struct.pack(">h1si", 1, b"a", 2) + struct.pack(">ii", 0, 1)
        + struct.pack(">h2si", 2, b"bb", 0)
        + times(value)
    )


def test_an_empty_transaction_has_null_partitions_and_a_complete_one_an_empty_array() -> None:
    # TransactionLog.valueToBytes: null for Empty, an array (here empty) for every other state
    assert encode_value(EMPTY) == head(1, EMPTY) + bytes([0]) + times(EMPTY) + bytes([0])
    assert encode_value(EMPTY, 0) == head(0, EMPTY) + struct.pack(">i", -1) + times(EMPTY)
    complete = replace(EMPTY, transaction_status=TransactionStatus.COMPLETE_COMMIT)
    assert encode_value(complete) == head(1, complete) + bytes([1]) + times(complete) + bytes([0])
    assert encode_value(complete, 0) == head(0, complete) + struct.pack(">i", 0) + times(complete)
    for data in (encode_value(EMPTY), encode_value(EMPTY, 0), encode_value(complete), encode_value(complete, 0)):
        assert decode_value(data).partitions == ()


def test_unknown_tags_of_a_newer_kafka_are_skipped() -> None:
    data = head(1, EMPTY) + bytes([0]) + times(EMPTY) + bytes([2, 2, 2]) + struct.pack(">h", 1) + bytes([9, 3]) + b"xyz"
    assert decode_value(data) == replace(EMPTY, client_transaction_version=1)
    entry_tag = (head(1, ONGOING) + bytes([2, 2]) + b"a" + bytes([1]) + bytes([1, 5, 1]) + b"?" + times(ONGOING)
                 + bytes([0]))
    assert decode_value(entry_tag).partitions == (("a", ()),)


@pytest.mark.parametrize("value, version, what", [
    (replace(EMPTY, partitions=(("t", (0,)),)), 1, "an Empty transaction has no partitions"),
    (replace(EMPTY, client_transaction_version=2), 0, "version 0 has no client_transaction_version"),
    (replace(EMPTY, previous_producer_id=3, next_producer_epoch=1), 0,
     "version 0 has no previous_producer_id, next_producer_epoch"),
    (EMPTY, 2, "value version 2"),
    (replace(EMPTY, transaction_status=8), 1, "transaction status 8"),
    (replace(EMPTY, producer_epoch=1 << 15), 1, "producer_epoch 32768 is not an int16"),
    (replace(EMPTY, producer_id=1 << 63), 1, "producer_id .* is not an int64"),
    (replace(EMPTY, transaction_timeout_ms=-(1 << 31) - 1), 1, "transaction_timeout_ms .* is not an int32"),
    (replace(ONGOING, partitions=(("t", (1 << 31,)),)), 1, "partition of t"),
    (replace(ONGOING, partitions=(("x" * 32768, (0,)),)), 1, "topic is 32768 UTF-8 bytes"),
])
def test_values_kafka_would_not_write_are_refused(value: TransactionLogValue, version: int, what: str) -> None:
    with pytest.raises(ValueError, match=what):
        encode_value(value, version)


def test_a_transactional_id_too_long_for_kafka_is_refused() -> None:
    with pytest.raises(ValueError, match="32769 UTF-8 bytes, more than Kafka's 32767"):
        encode_key(TransactionKey("€" * 10923))


def _v1(partitions: bytes, tags: bytes = bytes([0])) -> bytes:
    return head(1, ONGOING) + partitions + times(ONGOING) + tags


@pytest.mark.parametrize("data, what", [
    (b"", "unreadable key"), (b"\x00", "unreadable key"), (bytes.fromhex("0001" "0002" "7478"), "key type 1"),
    (bytes.fromhex("ffff" "0000"), "key type -1"),
    (encode_key(TransactionKey("tx")) + b"!", "1 bytes after the end"),
    (bytes.fromhex("0000" "ffff"), "UnexpectedNull"), (bytes.fromhex("0000" "0005" "7478"), "BufferUnderflow"),
    (bytes.fromhex("0000" "0001" "ff"), "InvalidUnicode"),
])
def test_damaged_keys_are_named(data: bytes, what: str) -> None:
    with pytest.raises(TransactionRecordError, match=what):
        decode_key(data)


@pytest.mark.parametrize("data, what", [
    (b"", "unreadable value"),
    (struct.pack(">h", 2) + encode_value(EMPTY)[2:], "value version 2 is not one of"),
    (struct.pack(">h", -1) + encode_value(EMPTY)[2:], "value version -1"),
    (encode_value(EMPTY)[:16] + bytes([8]) + encode_value(EMPTY)[17:], "transaction status 8 is not"),
    (encode_value(EMPTY)[:16] + bytes([0xFF]) + encode_value(EMPTY)[17:], "transaction status -1"),
    (head(0, ONGOING) + struct.pack(">i", 1 << 30) + times(ONGOING), r"partitions: 1073741824 entries"),
    (head(0, ONGOING) + struct.pack(">i", -2) + times(ONGOING), "partitions: array length -2"),
    (_v1(bytes.fromhex("ffffffff0f")), "partitions: 4294967294 entries"),
    (_v1(bytes([2, 0, 1, 0])), "topic is null"),
    (_v1(bytes([2]) + bytes.fromhex("828002") + b"x" * 40), "topic is 32769 bytes, more than Kafka's 32767"),
    (_v1(bytes([2, 60]) + b"x" * 40), "topic of 59 bytes in the"),
    (_v1(bytes([2, 2, 0xFF, 1, 0])), "UnicodeDecodeError"),
    (_v1(bytes([2, 2]) + b"a" + bytes([0, 0])), "partition ids of a are null"),
    (head(0, ONGOING) + struct.pack(">ih1si", 1, 1, b"a", -1) + times(ONGOING), "partition ids of a are null"),
    (head(0, ONGOING) + struct.pack(">ih1si", 1, 1, b"a", 5) + times(ONGOING), "partitions of a: 5 entries in the 16 bytes left"),
    (head(0, ONGOING) + struct.pack(">ih", 1, -1) + times(ONGOING), "UnexpectedNull"),
    (_v1(bytes([1]), bytes([40, 0, 8])), "40 tagged fields"),
    (_v1(bytes([1]), bytes([2, 1, 8]) + bytes(8) + bytes([0, 8]) + bytes(8)), "tag 0 after tag 1"),
    (_v1(bytes([1]), bytes([2, 2, 2, 0, 1, 2, 2, 0, 1])), "tag 2 after tag 2"),
    (_v1(bytes([1]), bytes([1, 2, 1, 1])), "tag 2 is 1 bytes, not 2"),
    (_v1(bytes([1]), bytes([1, 0, 4]) + bytes(4)), "tag 0 is 4 bytes, not 8"),
    (_v1(bytes([1]), bytes([1, 9, 50, 0])), "tag 9 of 50 bytes in the 1 bytes left"),
    (_v1(bytes([2, 2]) + b"a" + bytes([1, 1, 9, 5]) + b"??"), "unreadable value"),
    (_v1(bytes([1]), bytes.fromhex("ffffffffff01")), "ValueError: Varint is too long"),
    (encode_value(ONGOING) + b"\x00", "value: 1 bytes after the end"),
    (encode_value(ONGOING, 1)[:-1], "tag 2 of 2 bytes in the 1 bytes left"),
    (encode_value(ONGOING, 1)[:-4], "1 tagged fields in the 0 bytes left"),
    (encode_value(ONGOING, 1)[:-5], "unreadable value"),
])
def test_damaged_values_are_named(data: bytes, what: str) -> None:
    with pytest.raises(TransactionRecordError, match=what):
        decode_value(data)


def test_every_truncation_of_a_record_is_named() -> None:
    every_tag = replace(ONGOING, previous_producer_id=7, next_producer_id=8, next_producer_epoch=3)
    for whole, decode in ((encode_value(every_tag), decode_value), (encode_value(replace(ONGOING,
                          client_transaction_version=0), 0), decode_value),
                          (encode_key(TransactionKey("transactional")), decode_key)):
        for cut in range(len(whole)):
            with pytest.raises(TransactionRecordError):
                decode(whole[:cut])


def test_what_is_not_bytes_is_named() -> None:
    for decode in (decode_key, decode_value):
        with pytest.raises(TransactionRecordError, match="is a str, not bytes"):
            decode("0000")  # type: ignore[arg-type]
    assert decode_key(bytearray(encode_key(TransactionKey("tx")))) == TransactionKey("tx")
    assert decode_value(memoryview(encode_value(ONGOING))) == ONGOING


def _int(bits: int) -> st.SearchStrategy[int]:
    return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


@st.composite
def values(draw: st.DrawFn, flexible: bool) -> TransactionLogValue:
    status = draw(st.sampled_from(list(TransactionStatus)))
    partitions = () if status == TransactionStatus.EMPTY else tuple(draw(st.lists(
        st.tuples(st.text(max_size=20), st.lists(_int(32), max_size=5).map(tuple)), max_size=4)))
    tag = (lambda bits, default: _int(bits)) if flexible else (lambda bits, default: st.just(default))
    return TransactionLogValue(
        producer_id=draw(_int(64)), previous_producer_id=draw(tag(64, -1)), next_producer_id=draw(tag(64, -1)),
        producer_epoch=draw(_int(16)), transaction_timeout_ms=draw(_int(32)), transaction_status=int(status),
        partitions=partitions, last_update_ms=draw(_int(64)), start_ms=draw(_int(64)),
        client_transaction_version=draw(tag(16, 0)), next_producer_epoch=draw(tag(16, -1)))


@given(values(flexible=True))
def test_any_v1_value_round_trips(value: TransactionLogValue) -> None:
    assert decode_value(encode_value(value)) == value


@given(values(flexible=False))
def test_any_v0_value_round_trips(value: TransactionLogValue) -> None:
    assert decode_value(encode_value(value, 0)) == value


@given(st.text(max_size=100))
def test_any_key_round_trips(transactional_id: str) -> None:
    assert decode_key(encode_key(TransactionKey(transactional_id))) == TransactionKey(transactional_id)


@given(st.binary(max_size=300))
def test_hostile_bytes_raise_only_transaction_record_errors(data: bytes) -> None:
    for decode in (decode_key, decode_value):
        try:
            decode(data)
        except TransactionRecordError:
            pass


@given(values(flexible=True), st.integers(0, 10_000), st.integers(0, 255), st.booleans())
def test_damaged_encodings_raise_only_transaction_record_errors(value: TransactionLogValue, at: int, byte: int,
                                                                 v0: bool) -> None:
    if v0:
        value = replace(value, previous_producer_id=-1, next_producer_id=-1, client_transaction_version=0,
                        next_producer_epoch=-1)
    data = bytearray(encode_value(value, 0 if v0 else 1))
    data[at % len(data)] = byte
    try:
        decoded = decode_value(bytes(data))
    except TransactionRecordError:
        return
    assert isinstance(decoded, TransactionLogValue)
