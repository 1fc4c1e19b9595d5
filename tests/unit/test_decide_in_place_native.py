"""The native in-place decision (`_record_walk.decide_in_place`, LogValidator path A in one C pass) against
its pure-Python reference (`log_validator._stored_v2` with the Python walk): `validate_and_assign` must give
the same result — accepted bytes, offsets, timestamps, producer state, or Kafka's error and text — with the
native module and without it, for clean batches and for every way a batch can stop being one the native pass
takes: record mutations, header fields (baseOffset, CRC, magic, attributes, offsets against the count,
producer id / epoch / sequence), trailing bytes, max.message.bytes and segment.bytes at the batch's size,
clocks held, idempotent retries and sequence gaps against an existing producer."""

from __future__ import annotations

import struct
from dataclasses import replace

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.test_record_walk_native import (
    HOUR,
    NOW,
    _fields,
    _mutation,
    _timestamps,
    _windows,
    encode,
    mutate,
)
from validators.append_result import Accepted, PartitionState
from validators.codec import native_walk
from validators.codec.record_batch import assign_offsets_and_timestamp, build_record_batch
from validators.log_validator import validate_and_assign
from validators.partition_lane import decide_in_lane, partition_lane
from validators.producer_state import BatchMetadata, ProducerStateEntry, ProducerTable
from validators.topic_config import TimestampType, topic_config

native = native_walk.NATIVE_WALK
HEADER = struct.Struct(">qiibIhiqqqhii")
PID = 4242


def v2_batch(area: bytes, count: int, *, base_offset: int = 0, attributes: int = 0, last_offset_delta: int | None = None,
             base_ts: int = NOW - 1000, max_ts: int = NOW - 1000, producer: tuple[int, int, int] = (-1, -1, -1),
             crc_delta: int = 0, magic: int = 2) -> bytes:
    pid, epoch, seq = producer
    lod = count - 1 if last_offset_delta is None else last_offset_delta
    header = HEADER.pack(base_offset, 49 + len(area), -1, magic, 0, attributes, lod, base_ts, max_ts, pid, epoch, seq,
                         count)
    out = bytearray(header + area)
    struct.pack_into(">I", out, 17, (crc32c(bytes(out[21:])) + crc_delta) & 0xFFFFFFFF)
    return bytes(out)


def both(data: bytes, config, state: PartitionState, now: int = NOW):
    """The decision with the native module and without it; the stage's per-partition lane
    (`partition_lane`, `decide_in_lane`) must give the native one."""
    with_native = validate_and_assign(data, "t", 0, config, state, now)
    assert decide_in_lane(partition_lane("t", 0, config), data, state, now) == with_native
    saved = native_walk.NATIVE_WALK
    try:
        native_walk.NATIVE_WALK = None
        reference = validate_and_assign(data, "t", 0, config, state, now)
    finally:
        native_walk.NATIVE_WALK = saved
    return with_native, reference


def test_the_native_module_has_the_in_place_decision() -> None:
    assert native is not None and hasattr(native, "decide_in_place")


@pytest.mark.parametrize("ts_type", ["CreateTime", "LogAppendTime"])
def test_a_clean_batch_is_decided_natively_with_the_reference_bytes(ts_type: str) -> None:
    data = build_record_batch([(NOW - 100 + i, b"k%d" % i, b"v" * 50) for i in range(20)])
    lat = ts_type == "LogAppendTime"
    got = native.decide_in_place(data, 700, 0, 1 << 20, 1 << 30, lat, NOW + 5, NOW, 1 << 62, HOUR, False, crc32c)
    assert got is not None
    stored, max_ts, future, pid, epoch, seq, lod, count, producer_max = got
    expected_max = NOW + 5 if lat else NOW - 100 + 19
    assert stored == assign_offsets_and_timestamp(
        data, 700, TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME, expected_max, 0)
    assert (max_ts, future, pid, epoch, seq, lod, count) == (expected_max, 0, -1, -1, -1, 19, 20)
    assert producer_max == HEADER.unpack_from(data)[8]


def test_what_the_native_pass_does_not_judge_is_left_to_the_reference() -> None:
    area = encode(0, (0, None, b"k", b"v", [], 0, 0))
    args = (0, 0, 1 << 20, 1 << 30, False, NOW, NOW, 1 << 62, HOUR, False, crc32c)
    for data in (
        v2_batch(area, 1, base_offset=5), v2_batch(area, 1, crc_delta=1), v2_batch(area, 1, attributes=0x10),
        v2_batch(area, 1, attributes=0x20), v2_batch(area, 1, attributes=0x08), v2_batch(area, 1, attributes=1),
        v2_batch(area, 1, last_offset_delta=3), v2_batch(area, 1, producer=(PID, 0, -1)),
        v2_batch(area, 1) + b"\x00", v2_batch(area, 1, magic=1), v2_batch(area[:-1], 1),
    ):
        assert native.decide_in_place(data, *args) is None
    data = v2_batch(area, 1)
    assert native.decide_in_place(data, 0, 0, len(data) - 1, 1 << 30, *args[4:]) is None  # max.message.bytes
    assert native.decide_in_place(data, 0, 0, 1 << 20, len(data) - 1, *args[4:]) is None  # segment.bytes


def test_the_crc_combine_equals_the_crc32c_package_at_every_split() -> None:
    data = bytes(range(256)) * 5 + b"\xff" * 37
    for split in range(len(data) + 1):
        a, b = data[:split], data[split:]
        assert native.crc32c_combine(crc32c(a), crc32c(b), len(b)) == crc32c(data), split


@pytest.mark.parametrize("value_size", [1, 100_000])  # under and over the size where the CRC is split
@pytest.mark.parametrize("where", [21, 30, 35, 42, 43, 60, -1])
def test_a_byte_changed_under_the_crc_anywhere_is_left_to_the_reference(where: int, value_size: int) -> None:
    """A large batch's CRC is summed in two parts (the header fields the append rewrites, and the rest) and
    combined; a small one's in one pass. Either way a changed byte is caught, and the stored CRC is Kafka's."""
    data = bytearray(v2_batch(encode(0, (0, None, b"k", b"v" * value_size, [], 0, 0)), 1))
    for lat in (False, True):
        got = native.decide_in_place(bytes(data), 7, 0, 1 << 20, 1 << 30, lat, NOW, NOW, 1 << 62, HOUR, False, crc32c)
        assert got is not None
        assert struct.unpack_from(">I", got[0], 17)[0] == crc32c(got[0][21:])
    data[where] ^= 0x01
    assert native.decide_in_place(bytes(data), 0, 0, 1 << 20, 1 << 30, False, NOW, NOW, 1 << 62, HOUR, False,
                                  crc32c) is None


_producer_states = st.sampled_from(["none", "same-batch", "next", "gap", "old-epoch"])


def _state(kind: str, log_end: int, last_append: int) -> PartitionState:
    if kind == "none":
        return PartitionState(0, log_end, last_append)
    entry = ProducerStateEntry(PID, 3, (BatchMetadata(0, 4, log_end - 5, log_end - 1, NOW - 10),), NOW - 10)
    return PartitionState(0, log_end, last_append, ProducerTable((entry,)))


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(_fields, min_size=1, max_size=5),
    clean=st.booleans(),
    mutation=_mutation,
    base=_timestamps,
    max_ts=_timestamps,
    header=st.sampled_from([{}, {}, {}, {"base_offset": 1}, {"crc_delta": 1}, {"attributes": 0x10},
                            {"attributes": 0x20}, {"attributes": 0x08}, {"attributes": 0x40}, {"attributes": 0x100},
                            {"last_offset_delta": 7}, {"magic": 1}]),
    producer=st.sampled_from([(-1, -1, -1), (PID, 3, 0), (PID, 3, 5), (PID, 3, 9), (PID, 2, 5), (PID, 3, -1),
                              (7, 0, 0)]),
    producer_state=_producer_states,
    trailing=st.sampled_from([b"", b"", b"\x00", b"\x00" * 12]),
    limit=st.sampled_from(["none", "none", "message-exact", "message-under", "segment-under"]),
    log_end=st.sampled_from([5, 100, (1 << 31) + 5]),
    clock_held=st.booleans(),
    configs=st.fixed_dictionaries({
        "message.timestamp.type": st.sampled_from(["CreateTime", "LogAppendTime"]),
        "cleanup.policy": st.sampled_from(["delete", "delete", "compact"]),
        "message.timestamp.before.max.ms": _windows,
        "message.timestamp.after.max.ms": _windows,
        "compression.type": st.sampled_from(["producer", "producer", "uncompressed", "gzip"]),
        "gateway.record.validation": st.sampled_from(["full", "full", "fast"]),
    }),
)
def test_decisions_equal_the_reference(records, clean, mutation, base, max_ts, header, producer, producer_state,
                                       trailing, limit, log_end, clock_held, configs) -> None:
    area = b"".join(encode(i, r) for i, r in enumerate(records))
    if clean:  # well-formed records with timestamps near the clock: the batches the native pass takes
        area = b"".join(encode(i, (i, None, b"k%d" % i, b"v" * i, [], 0, 0)) for i in range(len(records)))
        base, max_ts = NOW - 500, NOW - 500 + len(records) - 1
    else:
        area = mutate(area, mutation)
    data = v2_batch(area, len(records), base_ts=base, max_ts=max_ts, producer=producer, **header) + trailing
    size = len(data) - len(trailing)
    limits = {"message-exact": {"max_message_bytes": size}, "message-under": {"max_message_bytes": size - 1},
              "segment-under": {"segment_bytes": size - 1}}.get(limit, {})  # below segment.bytes' minimum: set directly
    config = replace(topic_config("t", 1, configs, {}), **limits)
    state = _state(producer_state, log_end, NOW + 50 if clock_held else NOW - 50)
    with_native, reference = both(data, config, state)
    assert with_native == reference


def test_the_native_pass_takes_the_common_batches() -> None:
    # a clean batch is decided by decide_in_place (not by the Python path after it said None)
    config = topic_config("t", 1, {"message.timestamp.type": "LogAppendTime"}, {})
    data = build_record_batch([(NOW - 100 + i, b"k", b"v") for i in range(10)])
    calls = []
    real = native.decide_in_place

    class Spy:
        def __getattr__(self, name):
            return getattr(native, name)

        def decide_in_place(self, *args):
            calls.append(real(*args))
            return calls[-1]

    saved = native_walk.NATIVE_WALK
    try:
        native_walk.NATIVE_WALK = Spy()
        result = validate_and_assign(data, "t", 0, config, PartitionState(0, 10, -1), NOW)
    finally:
        native_walk.NATIVE_WALK = saved
    assert isinstance(result, Accepted) and result.base_offset == 10
    assert len(calls) == 1 and calls[0] is not None and calls[0][0] == result.records


@pytest.mark.parametrize(("topic", "partition", "configured"), [
    ("t", 0, True), ("t", 1, True), ("t", -1, True), ("t", None, True), ("t", 0, False),
    ("bad topic", 0, True), ("__consumer_offsets", 0, True), ("x" * 250, 0, True),
])
@pytest.mark.parametrize("kind", ["clean", "crc", "transactional", "two batches", "legacy"])
def test_the_partition_lane_decides_what_validate_and_assign_decides(topic, partition, configured, kind) -> None:
    """What `partition_lane` settles once per partition (topic name, internal topic, registry, range)
    answers as the per-batch checks do, in Kafka's order against the batch's own faults."""
    clean = build_record_batch([(NOW - 100 + i, b"k", b"v") for i in range(3)])
    data = {"clean": clean, "crc": v2_batch(b"\x00" * 8, 1, crc_delta=1),
            "transactional": v2_batch(b"", 1, attributes=0x10), "two batches": clean + clean,
            "legacy": v2_batch(b"", 1, magic=1)}[kind]
    config = topic_config("t", 1, {"message.timestamp.type": "LogAppendTime"}, {}) if configured else None
    state = PartitionState(0, 7, NOW - 5)
    assert decide_in_lane(partition_lane(topic, partition, config), data, state, NOW) == validate_and_assign(
        data, topic, partition, config, state, NOW)
