"""The topic registry's records folded into a registry (`validators.registry_log`): a topic per creation record,
altered by its later records, gone with its tombstone; of two creations of one name the first is the topic on
every reader, before and after compaction; defaults apply to every topic; a stored spec that no longer
validates leaves that topic out, not the others."""

from __future__ import annotations

import json

from validators.registry_log import DEFAULTS_KEY, SEED_KEY, RegistryLog, TopicSpec


def _fold(*records: tuple[str, bytes | None]) -> RegistryLog:
    log = RegistryLog()
    for offset, (key, value) in enumerate(records):
        log.apply(key, value, offset)
    return log


def test_created_altered_and_deleted() -> None:
    orders = TopicSpec("orders", "11111111-1111-1111-1111-111111111111", 3, {"retention.ms": "1000"})
    log = _fold((orders.key, orders.value()))
    created = log.registry().topics["orders"]
    assert (created.partitions, created.retention_ms, created.topic_id) == (3, 1000, orders.topic_id)
    grown = TopicSpec("orders", orders.topic_id, 5, {"retention.ms": "2000"}, created=0)
    log.apply(grown.key, grown.value(), 1)
    assert (log.registry().topics["orders"].partitions, log.registry().topics["orders"].retention_ms) == (5, 2000)
    log.apply(orders.key, None, 2)
    assert "orders" not in log.registry()


def test_a_record_applied_twice_changes_nothing() -> None:
    orders = TopicSpec("orders", "11111111-1111-1111-1111-111111111111", 3)
    log = _fold((orders.key, orders.value()))
    log.apply(orders.key, None, 0)  # an older offset: already applied
    assert "orders" in log.registry() and log.position == 1


def test_the_first_of_two_creations_is_the_topic_before_and_after_compaction() -> None:
    first = TopicSpec("raced", "aaaaaaaa-0000-0000-0000-000000000000", 1)
    second = TopicSpec("raced", "bbbbbbbb-0000-0000-0000-000000000000", 4)
    log = _fold((first.key, first.value()), (second.key, second.value()))
    assert log.registry().topics["raced"].topic_id == first.topic_id
    # the first one altered later: its record now lies after the second's, and carries its creation offset
    altered = TopicSpec("raced", first.topic_id, 2, created=0)
    log.apply(altered.key, altered.value(), 2)
    assert log.registry().topics["raced"].topic_id == first.topic_id
    compacted = RegistryLog()  # what a reader sees once compaction kept only each key's last record
    compacted.apply(second.key, second.value(), 1)
    compacted.apply(altered.key, altered.value(), 2)
    assert compacted.registry().topics["raced"].topic_id == first.topic_id
    assert compacted.registry().topics["raced"].partitions == 2


def test_defaults_apply_and_a_spec_that_no_longer_validates_is_left_out() -> None:
    good = TopicSpec("good", "11111111-1111-1111-1111-111111111111", 1)
    bad = TopicSpec("bad", "22222222-2222-2222-2222-222222222222", 1, {"retention.ms": "soon"})
    log = _fold((DEFAULTS_KEY, json.dumps({"log.retention.ms": "5000"}).encode()),
                (good.key, good.value()), (bad.key, bad.value()), (SEED_KEY, b"{}"))
    assert sorted(log.registry().topics) == ["good"]
    assert log.registry().topics["good"].retention_ms == 5000
    assert log.seed == "{}"
    assert log.file_document()["topics"]["good"] == {"partitions": 1, "configs": {}, "id": good.topic_id}


def test_hostile_records_are_skipped() -> None:
    log = _fold(("topic/noid", b"{}"), ("topic/x/11111111-1111-1111-1111-111111111111", b"not json"),
                ("what", b"1"), (DEFAULTS_KEY, b"[not json"))
    assert len(log.registry()) == 0 and log.position == 4
