"""The stage's entry to the append decision for one target partition: `partition_lane` settles once what depends
only on the partition, and `decide_in_lane` decides each batch with it — the result `validate_and_assign` gives,
with a client's clean uncompressed v2 batch decided by the native path A in one call."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from crc32c import crc32c

from contract.transaction_version import TransactionVersion
from validators.append_result import GATEWAY_LEADER_EPOCH, AppendResult, PartitionState
from validators.codec import native_walk
from validators.codec.record_batch import TimestampType
from validators.log_validator import (
    AppendOrigin,
    StoredV2,
    native_applies,
    producer_step,
    validate_and_assign,
)
from validators.topic_config import INTERNAL_TOPICS, TopicConfig, topic_name_error


class PartitionLane(NamedTuple):
    """What `partition_lane` settles once for a target partition, for `decide_in_lane` to use per batch.
    `decide_in_place` None (no native path for this partition): every batch goes through `validate_and_assign`."""

    topic: str
    partition: int | None
    config: TopicConfig | None
    decide_in_place: Callable[..., tuple | None] | None
    tp: str = ""
    lat_topic: bool = False
    max_message_bytes: int = 0
    segment_bytes: int = 0
    compacted: bool = False
    before_max_ms: int = 0
    after_max_ms: int = 0


def partition_lane(topic: str, partition: int | None, config: TopicConfig | None) -> PartitionLane:
    """The lane of one target partition for `decide_in_lane`: what depends only on the partition — the topic
    name (`Topic.validate`), internal topics (step 8), the registry and the partition's range (step 4), whether the
    native path applies — settled once."""
    native = native_walk.NATIVE_WALK
    if (native is None or config is None or partition is None or not 0 <= partition < config.partitions
            or topic_name_error(topic) is not None or topic in INTERNAL_TOPICS or not native_applies(config)):
        return PartitionLane(topic, partition, config, None)
    return PartitionLane(
        topic, partition, config, native.decide_in_place, f"{topic}-{partition}",
        config.message_timestamp_type == TimestampType.LOG_APPEND_TIME, config.max_message_bytes,
        config.segment_bytes, config.compacted, config.message_timestamp_before_max_ms,
        config.message_timestamp_after_max_ms,
    )


def decide_in_lane(
    lane: PartitionLane, data: bytes, state: PartitionState, now_ms: int, origin: AppendOrigin = AppendOrigin.CLIENT,
    transaction_version: TransactionVersion = TransactionVersion.TV_0,
) -> AppendResult:
    """`validate_and_assign` for the lane's partition, the same result. A client's clean uncompressed v2
    batch goes straight to `decide_in_place` (it declines everything steps 1, 5 and 11-15 would answer
    differently, framing included: one complete batch of exactly its size, magic 2)."""
    (topic, partition, config, decide_in_place, tp, lat_topic, max_message_bytes, segment_bytes, compacted,
     before_max_ms, after_max_ms) = lane
    if decide_in_place is None or origin is not AppendOrigin.CLIENT:
        return validate_and_assign(data, topic, partition, config, state, now_ms, origin, transaction_version)
    if type(data) is not bytes:
        data = bytes(data)
    last = state.last_append_time_ms
    append_time = now_ms if now_ms >= last else last  # the append clock never goes backwards (log_validator)
    fast = decide_in_place(
        data, state.log_end_offset, GATEWAY_LEADER_EPOCH, max_message_bytes, segment_bytes, lat_topic,
        append_time, now_ms, before_max_ms, after_max_ms, compacted, crc32c,
    )
    if fast is None:
        return validate_and_assign(data, topic, partition, config, state, now_ms)
    return producer_step(StoredV2(*fast), tp, config, state, now_ms, lat_topic, append_time)
