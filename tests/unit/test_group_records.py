"""The groups topic's records in Kafka's `__consumer_offsets` layout: every kind round-trips, the bytes
are Kafka's (pinned against the layout of OffsetCommitKey v1 / OffsetCommitValue v3), and damaged or
hostile bytes raise `GroupRecordError` naming what is wrong, never anything else."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contract.group_records import (
    GroupKey,
    GroupRecordError,
    OffsetAndMetadata,
    OffsetKey,
    PendingOffsetKey,
    StoredGroup,
    StoredMember,
    TxnEnd,
    TxnEndKey,
    decode_group,
    decode_key,
    decode_offset,
    decode_pending_offset,
    decode_txn_end,
    encode_group,
    encode_key,
    encode_offset,
    encode_pending_offset,
    encode_txn_end,
)

GROUP = StoredGroup("consumer", 7, "range", "m-1", 1_700_000_000_000, (
    StoredMember("m-1", None, "client", "/127.0.0.1", 300_000, 45_000, b"\x00\x01sub", b"\x00\x01asg"),
    StoredMember("m-2", "static-2", "client", "/10.0.0.2", 300_000, 45_000, b"", b""),
))


def test_every_record_kind_round_trips() -> None:
    for key in (OffsetKey("g", "orders", 3), GroupKey("g"), GroupKey("é€😀"), PendingOffsetKey(7, "g", "orders", 3),
                TxnEndKey(7)):
        assert decode_key(encode_key(key)) == key
    offset = OffsetAndMetadata(42, 0, "meta", 1_700_000_000_000)
    assert decode_offset(encode_offset(offset)) == offset
    assert decode_group(encode_group(GROUP)) == GROUP
    empty = StoredGroup("consumer", 3, None, None, 5, ())
    assert decode_group(encode_group(empty)) == empty


def test_the_bytes_are_kafkas_layout() -> None:
    assert encode_key(OffsetKey("g", "t", 3)) == struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", 3)
    assert encode_key(GroupKey("g")) == struct.pack(">hh1s", 2, 1, b"g")
    # the gateway's own pending transactional offset key: its version, the producer id, then OffsetCommitKey's fields
    assert encode_key(PendingOffsetKey(7, "g", "t", 3)) == struct.pack(">hqh1sh1si", 32001, 7, 1, b"g", 1, b"t", 3)
    assert encode_key(TxnEndKey(7)) == struct.pack(">hq", 32002, 7)
    assert encode_pending_offset(11, OffsetAndMetadata(5, -1, "", 9)) == struct.pack(">hqqihq", 0, 11, 5, -1, 0, 9)
    assert decode_pending_offset(struct.pack(">hqqihq", 0, 11, 5, -1, 0, 9)) == (11, OffsetAndMetadata(5, -1, "", 9))
    assert encode_txn_end(TxnEnd(11, True)) == struct.pack(">hqb", 0, 11, 1)
    assert decode_txn_end(struct.pack(">hqb", 0, 11, 0)) == TxnEnd(11, False)
    assert encode_offset(OffsetAndMetadata(5, -1, "", 9)) == struct.pack(">hqihq", 3, 5, -1, 0, 9)
    # OffsetCommitValue v1 (older Kafka: with an expire timestamp) is read too
    assert decode_offset(struct.pack(">hqh2sqq", 1, 5, 2, b"md", 9, 99)) == OffsetAndMetadata(5, -1, "md", 9)


def test_damaged_gateway_values_are_named() -> None:
    with pytest.raises(GroupRecordError, match="transaction end value: result 2"):
        decode_txn_end(struct.pack(">hqb", 0, 11, 2))
    with pytest.raises(GroupRecordError, match="pending offset value version 3 is not 0"):
        decode_pending_offset(struct.pack(">hqqihq", 3, 11, 5, -1, 0, 9))


@pytest.mark.parametrize("data, what", [
    (b"", "unreadable"), (b"\x00", "unreadable"), (struct.pack(">hh1s", 9, 1, b"g"), "key version 9"),
    (encode_key(GroupKey("g")) + b"x", "bytes after the end"),
])
def test_damaged_keys_are_named(data: bytes, what: str) -> None:
    with pytest.raises(GroupRecordError, match=what):
        decode_key(data)


@given(st.binary(max_size=200))
def test_hostile_bytes_raise_only_group_record_errors(data: bytes) -> None:
    for decode in (decode_key, decode_offset, decode_group):
        try:
            decode(data)
        except GroupRecordError:
            pass


def test_a_truncated_group_value_and_a_lying_member_count_are_named() -> None:
    whole = encode_group(GROUP)
    for cut in range(1, len(whole)):
        with pytest.raises(GroupRecordError):
            decode_group(whole[:cut])
    with pytest.raises(GroupRecordError, match="members"):
        decode_group(encode_group(StoredGroup("c", 1, None, None, 0, ()))[:-4] + struct.pack(">i", 2**30))
