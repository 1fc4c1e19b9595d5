"""The decision row: what the stateful stage decides for each ingress batch, emitted as a row of the
decisions DataFrame (`sinks.decisions` gives its Spark types), and what the foreachBatch sink's tasks read
back: the append, the produce response, the dead letter and the metric deltas take it typed. Nulls are None."""

from __future__ import annotations

from typing import NamedTuple


class DecisionRow(NamedTuple):
    ingress_partition: int
    ingress_offset: int
    ingress_timestamp_ms: int
    request_id: str
    client_id: str | None
    acks: int
    topic: str | None  # gw.topic (None: header missing)
    partition: int | None  # gw.partition parsed (None: missing or not a number)
    partition_header: str | None  # gw.partition as sent
    replay_of: str | None  # gw.replay.of: copied to the dead letter (no replay loops)
    error_code: int
    error_name: str | None
    error_message: str | None
    record_errors: str  # JSON list of {batch_index, message}: the first ones, bounded (contract.record_errors)
    record_error_count: int  # how many record errors the batch had (more than the list holds when it is cut)
    base_offset: int
    last_offset: int
    log_append_time_ms: int
    append_time_ms: int
    max_timestamp: int
    producer_max_timestamp: int  # header maxTimestamp as the producer sent it
    log_start_offset: int
    record_count: int
    clock_held: bool
    duplicate: bool  # idempotent retry: acknowledged, not stored again
    future_timestamps: int  # accepted records > 1 h ahead (KIP-937)
    window: str | None  # INVALID_TIMESTAMP: the accepted [now-before, now+after]
    batch_time_ms: int  # the micro-batch clock (`now`)
    batch: bytes  # stored bytes if accepted (b"" for an idempotent duplicate), original bytes if rejected
    principal: str | None = None  # gw.principal: who produced it through the front door
    # transactions (docs/design.md): the partition's first open transaction's offset after this decision (-1:
    # none), which caps what read_committed consumers read; and for an abort marker that ended a transaction
    # with records here, that transaction's first offset and the last stable offset its `.txnindex` entry records
    first_unstable_offset: int = -1
    aborted_txn_first_offset: int = -1
    aborted_txn_last_stable_offset: int = -1
