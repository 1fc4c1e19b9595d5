"""Fetch (key 1, v4-v17) from segment storage, for consumers that `assign()` partitions (Kafka's `UnifiedLog`, `LogSegment`):
each partition's bytes are a slice of its `.log` found through the offset index (`LogSegment.read`), so
a consumer gets the stored batches as Kafka serves them — a LogAppendTime batch carries the gateway's
stamp in its header and every record reports it (KIP-32). High watermark = log end offset (one replica); the
last stable offset is the first open transaction's first offset, where a READ_COMMITTED fetch stops, and such a
fetch names the aborted transactions of its range from the `.txnindex` files (`PartitionReader.read_committed`).
`max_bytes` and `partition_max_bytes` are honoured, except that
the first partition with data returns at least one whole batch (KIP-74).

No fetch sessions (KIP-227): the answer's session id is 0, so clients send full fetches. A fetch that
finds fewer than `min_bytes` waits up to `max_wait_ms` for the gateway to append.

A `current_leader_epoch` (v9+) other than the gateway's gets FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH
(`leader_epoch.py`). A registry partition another node of this door leads (`leadership.py`) gets
NOT_LEADER_OR_FOLLOWER, as a broker answers a consumer (`replica_id` -1) that fetches from a non-leader, with the
leader where the version has room for it (KIP-951, `leader_hints.py`); one another door leads is read here, from
the same segments root (`Context.sibling_leader`). A topic the principal may not READ gets
TOPIC_AUTHORIZATION_FAILED (an unknown topic id stays UNKNOWN_TOPIC_ID).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.leader_hints import current_leader, node_endpoints
from front_door.apis.registry import Acl, Api, register
from front_door.cluster.leader_epoch import NO_EPOCH, epoch_error
from front_door.context import Context
from front_door.network.messages import (
    NO_THROTTLE,
    READ_COMMITTED,
    build,
    error_code,
    millis,
    response_module,
)
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType
from storage.errors import KafkaStorageError
from storage.log_reader import OffsetOutOfRangeError, PartitionReader
from storage.transaction_index import AbortedTxn

# a long poll re-reads storage at least this often (appends answered with acks=0 publish no response)
RECHECK_S = 0.2


@dataclass(frozen=True)
class PartitionData:
    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    leader: int | None = None  # NOT_LEADER_OR_FOLLOWER: the node that leads the partition
    last_stable_offset: int | None = None  # None: the high watermark (no transaction open)
    aborted: tuple[AbortedTxn, ...] = ()  # READ_COMMITTED: the aborted transactions in the fetched range


def read_partition(root: Path, topic: str, partition: int, offset: int, max_bytes: int, min_one: bool,
                   committed: bool = False) -> PartitionData:
    """One partition's slice, with its offsets; runs on a worker thread (file I/O). `committed`: a
    READ_COMMITTED fetch, which stops at the last stable offset and names the aborted transactions."""
    try:
        reader = PartitionReader(root, topic, partition, append_times=False)
    except FileNotFoundError:  # nothing appended yet: an empty log
        return PartitionData(ErrorCode.none, 0, 0) if offset == 0 else PartitionData(ErrorCode.offset_out_of_range, 0, 0)
    with reader:
        hw, start, stable = reader.log_end_offset, reader.log_start_offset, reader.last_stable_offset
        try:
            if committed:
                data, aborted = reader.read_committed(offset, max_bytes, min_one)
                return PartitionData(ErrorCode.none, hw, start, data, last_stable_offset=stable, aborted=aborted)
            return PartitionData(ErrorCode.none, hw, start, reader.read_log(offset, max_bytes, min_one),
                                 last_stable_offset=stable)
        except OffsetOutOfRangeError:
            return PartitionData(ErrorCode.offset_out_of_range, hw, start)
        except FileNotFoundError:  # retention deleted the segment after the commit record was read
            return PartitionData(ErrorCode.offset_out_of_range, hw, start)
        except (KafkaStorageError, OSError):
            return PartitionData(ErrorCode.kafka_storage_error, hw, start)


Topics = list[tuple[Any, list[tuple[int, PartitionData]]]]


def _names(ctx: Context, body: Any, version: int) -> list[str | None]:
    """Each requested topic's name (None: an unknown topic id)."""
    topic_ids = ctx.topic_ids() if version >= 13 else {}
    return [topic_ids.get(ft.topic_id) if version >= 13 else ft.topic for ft in body.topics]


async def _read(ctx: Context, body: Any, version: int, node_id: int, readable: set[str]) -> tuple[Topics, int]:
    registry = ctx.registry()
    committed = getattr(body, "isolation_level", 0) == READ_COMMITTED
    remaining = body.max_bytes
    total = 0
    out = []
    for ft, name in zip(body.topics, _names(ctx, body, version), strict=True):
        key = ft.topic_id if version >= 13 else ft.topic
        config = registry.get(name)
        parts = []
        for fp in ft.partitions:
            if name is not None and name not in readable:
                parts.append((fp.partition, PartitionData(ErrorCode.topic_authorization_failed)))
                continue
            if config is None or not 0 <= fp.partition < config.partitions:
                missing = ErrorCode.unknown_topic_id if version >= 13 and name is None else ErrorCode.unknown_topic_or_partition
                parts.append((fp.partition, PartitionData(missing)))
                continue
            if (leader := ctx.sibling_leader(name, fp.partition, node_id)) is not None:
                parts.append((fp.partition, PartitionData(ErrorCode.not_leader_or_follower, leader=leader)))
                continue
            if (fenced := epoch_error(getattr(fp, "current_leader_epoch", NO_EPOCH))) is not None:
                parts.append((fp.partition, PartitionData(fenced)))
                continue
            if not ctx.stored(config):  # a re-created topic whose old partitions are not removed yet: empty
                parts.append((fp.partition, PartitionData(ErrorCode.none, 0, 0) if fp.fetch_offset == 0
                              else PartitionData(ErrorCode.offset_out_of_range, 0, 0)))
                continue
            data = await asyncio.to_thread(read_partition, ctx.segments_root, name, fp.partition, fp.fetch_offset,
                                           max(0, min(fp.partition_max_bytes, remaining)), total == 0, committed)
            remaining -= len(data.records)
            total += len(data.records)
            parts.append((fp.partition, data))
        out.append((key, parts))
    return out, total


def _response(ctx: Context, version: int, body: Any, topics: Topics) -> Any:
    module = response_module(ApiKey.FETCH, version)
    committed = getattr(body, "isolation_level", 0) == READ_COMMITTED
    responses = tuple(
        build(module.FetchableTopicResponse, topic=key if version < 13 else None,
              topic_id=key if version >= 13 else uuid.UUID(int=0), partitions=tuple(
                  build(module.PartitionData, partition_index=p, error_code=error_code(d.error),
                        high_watermark=d.high_watermark,
                        last_stable_offset=d.high_watermark if d.last_stable_offset is None else d.last_stable_offset,
                        log_start_offset=d.log_start_offset,
                        aborted_transactions=tuple(
                            build(module.AbortedTransaction, producer_id=t.producer_id, first_offset=t.first_offset)
                            for t in d.aborted) if committed else None,
                        preferred_read_replica=-1, records=d.records,
                        **current_leader(module, d.leader))
                  for p, d in parts))
        for key, parts in topics
    )
    leaders = [d.leader for _, parts in topics for _, d in parts if d.leader is not None]
    return build(module.FetchResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, session_id=0,
                 responses=responses, **node_endpoints(module, ctx, leaders))


async def handle(ctx: Context, request: Request) -> Any:
    body, version = request.body, request.api_version
    deadline = time.monotonic() + millis(body.max_wait) / 1000
    # KafkaApis.handleFetchRequest: a consumer needs READ on each topic it fetches
    readable = access.authorized_names(ctx, request, AclOperation.READ, ResourceType.TOPIC,
                                       (n for n in _names(ctx, body, version) if n is not None))
    while True:
        topics, total = await _read(ctx, body, version, request.node_id, readable)
        left = deadline - time.monotonic()
        errors = any(d.error != ErrorCode.none for _, parts in topics for _, d in parts)
        if total >= body.min_bytes or left <= 0 or errors:
            return _response(ctx, version, body, topics)
        await ctx.appended.wait(min(left, RECHECK_S))


API = register(Api(ApiKey.FETCH, (4, 17), handle, acls=(Acl(AclOperation.READ, ResourceType.TOPIC),)))
