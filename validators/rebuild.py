"""Path C of `LogValidator` (`LogValidator.buildRecordsAndAssignOffsets`): the batch rebuilt (`buildRecordsAndAssignOffsets`) when it
cannot be stamped in place, and the size check of the rebuilt batch.
"""

from __future__ import annotations

from validators.append_result import GATEWAY_LEADER_EPOCH, PartitionState, Rejected, RejectedBatch
from validators.codec import record_batch as rb
from validators.codec import records as rec
from validators.codec.record_batch import RECORD_BATCH_OVERHEAD, TIMESTAMP_TYPE_MASK, TimestampType
from validators.errors import Errors
from validators.record_walks import _V2Header
from validators.timestamps import (
    to_long,
)
from validators.topic_config import TopicConfig


def _rebuild_v2(
    data: bytes, h: _V2Header, codec_id: int, target_id: int | None, tp: str, config: TopicConfig,
    state: PartitionState, append_time: int, lso: int, producer_id: int, producer_epoch: int, base_sequence: int,
) -> bytes:
    """MemoryRecordsBuilder over the validated records: fresh offsets from the log end offset, the
    records' own timestamps, the topic's timestamp type and target codec, producer fields copied."""
    area = data[RECORD_BATCH_OVERHEAD : h.batch_size] if codec_id == 0 else rb.records_area(data[: h.batch_size])
    decoded = rec.decode_records(area, h.count)
    batch_lat = bool(h.attributes & TIMESTAMP_TYPE_MASK)
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
        raise RejectedBatch(Rejected(Errors.UNKNOWN_SERVER_ERROR, str(e), log_start_offset=lso)) from None
    _check_rebuilt_size(rebuilt, tp, config)
    return rebuilt


def _check_rebuilt_size(rebuilt: bytes, tp: str, config: TopicConfig) -> None:
    """§1.1 step 13: a rebuilt batch is re-checked against max.message.bytes (sic: "append topartition")."""
    if len(rebuilt) > config.max_message_bytes:
        raise RejectedBatch(
            Rejected(
                Errors.MESSAGE_TOO_LARGE,
                f"Message batch size is {len(rebuilt)} bytes in append topartition {tp} which exceeds the "
                f"maximum configured size of {config.max_message_bytes}.",
            )
        )
