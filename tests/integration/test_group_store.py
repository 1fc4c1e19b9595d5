"""The groups topic on the real broker (`front_door/groups/store.py`): what is written is what a new
store (a restarted front door) loads, the last record of a key winning; a deleted group's tombstones make
it and its offsets disappear, an expired offset's tombstone it alone; a damaged record on the topic is skipped with a log line naming its offset
while the rest loads; a write the cluster does not take raises GroupStoreError."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest
from confluent_kafka import Producer

from contract.group_records import (
    EndedOffsets,
    OffsetAndMetadata,
    OffsetKey,
    PendingOffsets,
    StoredGroup,
    StoredMember,
    TxnEnd,
    encode_key,
)
from contract.topics import GROUPS_TOPIC_CONFIGS
from front_door.groups.store import GroupStoreError, KafkaGroupStore

pytestmark = pytest.mark.integration

GROUP = StoredGroup("consumer", 3, "range", "m", 1, (StoredMember("m", None, "c", "/h", 10, 6000, b"s", b"a"),))


def topic(kafka) -> str:
    name = f"groups-{uuid.uuid4().hex[:8]}"
    kafka.create_topics([(name, 1, GROUPS_TOPIC_CONFIGS)])
    return name


def written(kafka, name: str, writes) -> None:
    async def run() -> None:
        store = KafkaGroupStore(kafka.cluster, name, timeout_ms=30_000)
        store.load()
        store.start(asyncio.get_running_loop())
        try:
            await writes(store)
        finally:
            await asyncio.to_thread(store.close)

    asyncio.run(run())


def test_a_new_store_loads_what_was_written_last_and_forgets_deleted_groups(kafka) -> None:
    name = topic(kafka)

    async def writes(store: KafkaGroupStore) -> None:
        await store.write_group("g", GROUP)
        await store.write_offsets("g", {("t", 0): OffsetAndMetadata(5, 0, "x", 1)})
        await store.write_offsets("g", {("t", 0): OffsetAndMetadata(9, 0, "y", 2), ("t", 1): OffsetAndMetadata(1, -1, "", 2)})
        await store.write_group("gone", GROUP)
        await store.write_offsets("gone", {("t", 0): OffsetAndMetadata(3, -1, "", 1)})
        await store.delete_group("gone", [("t", 0)])
        await store.write_offsets("g", {("t", 2): OffsetAndMetadata(7, -1, "", 2)})
        await store.delete_offsets("g", [("t", 2)])  # expired: a tombstone for the offset alone

    written(kafka, name, writes)
    loaded = KafkaGroupStore(kafka.cluster, name).load()
    assert loaded.groups == {"g": GROUP}
    assert loaded.offsets == {"g": {("t", 0): OffsetAndMetadata(9, 0, "y", 2), ("t", 1): OffsetAndMetadata(1, -1, "", 2)}}


def test_pending_transactional_offsets_load_until_their_transaction_ends(kafka) -> None:
    """A transaction's pending offsets load as pending until its end is on the topic: read after them, the end
    makes them the group's (a commit) or drops them (an abort), and only for the transaction it names; the
    group coordinator's end of them tombstones the records, so the next load holds nothing of them."""
    name = topic(kafka)
    first, second = OffsetAndMetadata(5, -1, "", 1), OffsetAndMetadata(8, -1, "", 2)

    async def open_two(store: KafkaGroupStore) -> None:
        await store.write_pending_offsets("g", 7, PendingOffsets(100, {("t", 0): first}))
        await store.write_pending_offsets("g", 9, PendingOffsets(100, {("t", 1): second}))
        await store.write_txn_end(9, TxnEnd(99, True))  # an earlier transaction of producer 9's

    written(kafka, name, open_two)
    loaded = KafkaGroupStore(kafka.cluster, name).load()
    assert loaded.pending == {7: {"g": PendingOffsets(100, {("t", 0): first})},
                              9: {"g": PendingOffsets(100, {("t", 1): second})}}
    assert loaded.ended == ()

    async def end_them(store: KafkaGroupStore) -> None:
        await store.write_txn_end(7, TxnEnd(100, True))
        await store.write_txn_end(9, TxnEnd(100, False))

    written(kafka, name, end_them)
    loaded = KafkaGroupStore(kafka.cluster, name).load()
    assert loaded.pending == {}
    assert loaded.offsets == {"g": {("t", 0): first}}
    assert loaded.ended == (EndedOffsets("g", 7, PendingOffsets(100, {("t", 0): first}), True),
                            EndedOffsets("g", 9, PendingOffsets(100, {("t", 1): second}), False))

    async def tombstone(store: KafkaGroupStore) -> None:
        for ended in loaded.ended:
            await store.end_pending_offsets("g", ended.producer_id, ended.pending.offsets,
                                            ended.pending.offsets if ended.commit else {})

    written(kafka, name, tombstone)
    again = KafkaGroupStore(kafka.cluster, name).load()
    assert (again.pending, again.ended, again.offsets) == ({}, (), {"g": {("t", 0): first}})


def test_damaged_records_are_skipped_with_their_offset_named(kafka, caplog: pytest.LogCaptureFixture) -> None:
    name = topic(kafka)
    p = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    errors: list[object] = []
    for key, value in ((b"\x00\x09garbage", b"x"), (encode_key(OffsetKey("g", "t", 0)), b"\x00\x03short")):
        p.produce(name, key=key, value=value, on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert p.flush(30) == 0 and not errors

    async def writes(store: KafkaGroupStore) -> None:
        await store.write_offsets("g", {("t", 1): OffsetAndMetadata(4, -1, "", 1)})

    written(kafka, name, writes)
    with caplog.at_level(logging.WARNING, logger="gateway.front_door.groups"):
        loaded = KafkaGroupStore(kafka.cluster, name).load()
    assert loaded.offsets == {"g": {("t", 1): OffsetAndMetadata(4, -1, "", 1)}}
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"{name}-0@0" in m and "key version 9" in m for m in messages), messages
    assert any(f"{name}-0@1" in m and "offset value" in m for m in messages), messages


def test_a_missing_topic_fails_the_load_and_a_refused_write_raises(kafka) -> None:
    with pytest.raises(GroupStoreError, match="does not exist"):
        KafkaGroupStore(kafka.cluster, f"missing-{uuid.uuid4().hex[:8]}", timeout_ms=10_000).load()
    name = f"groups-small-{uuid.uuid4().hex[:8]}"
    kafka.create_topics([(name, 1, {**GROUPS_TOPIC_CONFIGS, "max.message.bytes": "200"})])

    async def too_large(store: KafkaGroupStore) -> None:
        big = StoredGroup("consumer", 1, "range", "m", 1, (StoredMember("m", None, "c", "/h", 1, 1, b"s" * 400, b""),))
        with pytest.raises(GroupStoreError, match="did not take"):  # the broker refuses the record: too large
            await store.write_group("g", big)

    written(kafka, name, too_large)
