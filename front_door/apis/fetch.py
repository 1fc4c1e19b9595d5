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
import os
import time
import uuid
from collections.abc import Sequence
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
from storage.commit_record import RecordVersion, record_version
from storage.errors import KafkaStorageError
from storage.file_names import partition_dir_name
from storage.group_commit import local_filesystem
from storage.log_reader import OffsetOutOfRangeError, PartitionReader
from storage.transaction_index import AbortedTxn

# a long poll looks at storage at least this often (appends answered with acks=0 publish no response)
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


def _empty_log(offset: int) -> PartitionData:
    """A partition nothing was appended to: empty at offset 0, any other offset out of range."""
    return PartitionData(ErrorCode.none, 0, 0) if offset == 0 else PartitionData(ErrorCode.offset_out_of_range, 0, 0)


def read_partition(root: Path, topic: str, partition: int, offset: int, max_bytes: int, min_one: bool,
                   committed: bool = False) -> PartitionData:
    """One partition's slice, with its offsets; runs on a worker thread (file I/O). `committed`: a
    READ_COMMITTED fetch, which stops at the last stable offset and names the aborted transactions."""
    try:
        reader = PartitionReader(root, topic, partition, append_times=False)
    except FileNotFoundError:  # nothing appended yet: an empty log
        return _empty_log(offset)
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


Read = tuple[str, int, int, int]  # topic, partition, fetch offset, partition_max_bytes
# Partitions a worker thread reads per hand-over: few hand-overs, and the door's event loop (the produces) never
# waits for a whole 1 000-partition read holding the GIL (docs/performance.md, "Scale").
READ_CHUNK = 64

# (segments root, topic, partition) -> the partition's commit record version and its answer at the log end: what
# a consumer at the tail is answered while the record stays the same, with no read (`read_partitions`)
_TAILS: dict[tuple[str, str, int], tuple[RecordVersion, PartitionData]] = {}
MAX_TAILS = 100_000  # entries (~530 bytes each); past it the table starts again (docs/deployment.md, sizing)


def read_partitions(root: Path, reads: Sequence[Read], max_bytes: int, committed: bool,
                    nothing_read: bool = True) -> list[PartitionData]:
    """`read_partition` of each (topic, partition, offset, partition_max_bytes) in turn, within `max_bytes` (what
    the request has left), the first non-empty partition's first batch whole (KIP-74) while `nothing_read` (no
    earlier part of the request read any), on one worker thread: a consumer of a thousand partitions costs a
    hand-over to a thread per `READ_CHUNK` partitions, not one per partition. A partition
    fetched at its log end whose commit record is the one seen there before (`record_version`, taken before
    reading) is answered as then, without a read: a consumer at the tail of a thousand partitions, and each
    recheck of its long poll, costs a `stat` a partition. Only on a local filesystem: over NFS a `stat` may
    answer from attributes cached for seconds, where opening the record sees the latest (close-to-open)."""
    remaining, total, out = max_bytes, 0, []
    tails, where = local_filesystem(root), str(root)
    for topic, partition, offset, partition_max in reads:
        key = (where, topic, partition)
        directory = os.path.join(root, partition_dir_name(topic, partition))
        version = record_version(directory) if tails else None
        tail = _TAILS.get(key)
        if tail is not None and version is not None and tail[0] == version and tail[1].high_watermark == offset:
            out.append(tail[1])
            continue
        if version is None and tails and not os.path.isdir(directory):  # nothing appended yet: an empty log
            out.append(_empty_log(offset))
            continue
        data = read_partition(root, topic, partition, offset, max(0, min(partition_max, remaining)),
                              nothing_read and total == 0, committed)
        if version is not None and data.error == ErrorCode.none and offset == data.high_watermark and not data.records:
            if len(_TAILS) >= MAX_TAILS:
                _TAILS.clear()
            _TAILS[key] = (version, data)
        remaining -= len(data.records)
        total += len(data.records)
        out.append(data)
    return out


Topics = list[tuple[Any, list[tuple[int, PartitionData]]]]


def _names(ctx: Context, body: Any, version: int) -> list[str | None]:
    """Each requested topic's name (None: an unknown topic id)."""
    topic_ids = ctx.topic_ids() if version >= 13 else {}
    return [topic_ids.get(ft.topic_id) if version >= 13 else ft.topic for ft in body.topics]


async def _read(ctx: Context, body: Any, version: int, node_id: int, readable: set[str]) -> tuple[Topics, int]:
    registry = ctx.registry()
    committed = getattr(body, "isolation_level", 0) == READ_COMMITTED
    out: list[tuple[Any, list[tuple[int, PartitionData | None]]]] = []
    reads: list[Read] = []  # the partitions to read, in the request's order
    for ft, name in zip(body.topics, _names(ctx, body, version), strict=True):
        key = ft.topic_id if version >= 13 else ft.topic
        config = registry.get(name)
        stored = config is not None and ctx.stored(config)
        parts: list[tuple[int, PartitionData | None]] = []
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
            if not stored:  # a re-created topic whose old partitions are not removed yet: empty
                parts.append((fp.partition, _empty_log(fp.fetch_offset)))
                continue
            parts.append((fp.partition, None))
            reads.append((name, fp.partition, fp.fetch_offset, fp.partition_max_bytes))
        out.append((key, parts))
    data: list[PartitionData] = []
    taken = 0
    for i in range(0, len(reads), READ_CHUNK):
        chunk = await asyncio.to_thread(read_partitions, ctx.segments_root, reads[i:i + READ_CHUNK],
                                        body.max_bytes - taken, committed, taken == 0)
        taken += sum(len(d.records) for d in chunk)
        data += chunk
    read = iter(data)
    topics = [(key, [(p, d if d is not None else next(read)) for p, d in parts]) for key, parts in out]
    return topics, taken


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
