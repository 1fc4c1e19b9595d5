"""ListOffsets (key 2, v1-v10) from segment storage: earliest (-2), latest (-1), max timestamp (-3,
KIP-734) and the first offset whose timestamp is >= t (`UnifiedLog.fetchOffsetByTimestamp`). Not found is
timestamp -1 / offset -1, as Kafka answers. A registry partition another node of this door
leads (`leadership.py`) gets NOT_LEADER_OR_FOLLOWER, as a broker answers a consumer's ListOffsets
(`replica_id` -1) for a partition it does not lead; the response has no field to name the leader. One another
door leads is answered here (`Context.sibling_leader`). A
`current_leader_epoch` (v4+) other than the gateway's is checked as Kafka does (`leader_epoch.py`). A topic
the principal may not DESCRIBE gets TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.cluster.leader_epoch import NO_EPOCH, epoch_error
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, READ_COMMITTED, build, error_code, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType
from storage.errors import KafkaStorageError
from storage.log_reader import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, PartitionReader
from validators.append_result import GATEWAY_LEADER_EPOCH


@dataclass(frozen=True)
class Found:
    error: ErrorCode
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


def _empty(target: int) -> Found:
    """An empty log's answer: earliest = latest = 0, no offset for a time."""
    empty = target in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP)
    return Found(ErrorCode.none, -1, 0 if empty else -1, GATEWAY_LEADER_EPOCH if empty else -1)


def look_up(root: Path, topic: str, partition: int, target: int, committed: bool = False) -> Found:
    """Runs on a worker thread (file I/O). `committed` (READ_COMMITTED): the latest offset is the last stable
    offset, and a lookup by time finds nothing at or past it (`Partition.fetchOffsetForTimestamp`'s
    lastFetchableOffset); the earliest offset is the log start offset whatever the isolation, as Kafka answers."""
    try:
        reader = PartitionReader(root, topic, partition, append_times=False)
    except FileNotFoundError:  # nothing appended yet
        return _empty(target)
    with reader:
        try:
            found = reader.offsets_for_times(target)
        except ValueError:  # a target this storage does not know (e.g. -4 earliest-local, -5 tiered)
            return Found(ErrorCode.unsupported_version)
        except (KafkaStorageError, OSError):
            return Found(ErrorCode.kafka_storage_error)
        epoch = found.leader_epoch if found.leader_epoch is not None else -1
        if committed and target == LATEST_TIMESTAMP:
            return Found(ErrorCode.none, found.timestamp, reader.last_stable_offset, epoch)
        if committed and target != EARLIEST_TIMESTAMP and found.offset >= reader.last_stable_offset:
            return Found(ErrorCode.none)
        return Found(ErrorCode.none, found.timestamp, found.offset, epoch)


def look_up_all(root: Path, lookups: Sequence[tuple[str, int, int]], committed: bool) -> list[Found]:
    """`look_up` of each (topic, partition, target) in turn on one worker thread: a consumer starting on a
    thousand partitions costs one hand-over to a thread, not one per partition."""
    return [look_up(root, topic, partition, target, committed) for topic, partition, target in lookups]


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.LIST_OFFSETS, request.api_version)
    registry = ctx.registry()
    # KafkaApis.handleListOffsetRequest: DESCRIBE on each topic
    describable = access.authorized_names(ctx, request, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                          (lt.name for lt in request.body.topics))
    committed = getattr(request.body, "isolation_level", 0) == READ_COMMITTED
    answers: list[tuple[str, list[tuple[int, Found | None]]]] = []
    lookups: list[tuple[str, int, int]] = []  # the partitions to look up in storage, in the request's order
    for lt in request.body.topics:
        config = registry.get(lt.name)
        stored = config is not None and ctx.stored(config)
        partitions: list[tuple[int, Found | None]] = []
        for lp in lt.partitions:
            found: Found | None
            if lt.name not in describable:
                found = Found(ErrorCode.topic_authorization_failed)
            elif config is None or not 0 <= lp.partition_index < config.partitions:
                found = Found(ErrorCode.unknown_topic_or_partition)
            elif ctx.sibling_leader(lt.name, lp.partition_index, request.node_id) is not None:
                found = Found(ErrorCode.not_leader_or_follower)
            elif (fenced := epoch_error(getattr(lp, "current_leader_epoch", NO_EPOCH))) is not None:
                found = Found(fenced)
            elif not stored:  # a re-created topic whose old partitions are not removed yet
                found = _empty(lp.timestamp)
            else:
                found = None
                lookups.append((lt.name, lp.partition_index, lp.timestamp))
            partitions.append((lp.partition_index, found))
        answers.append((lt.name, partitions))
    looked_up = iter(await asyncio.to_thread(look_up_all, ctx.segments_root, lookups, committed) if lookups else ())
    topics = []
    for name, partitions in answers:
        built = []
        for index, known in partitions:
            answer = known if known is not None else next(looked_up)
            built.append(build(module.ListOffsetsPartitionResponse, partition_index=index,
                               error_code=error_code(answer.error), timestamp=answer.timestamp,
                               offset=answer.offset, leader_epoch=answer.leader_epoch))
        topics.append(build(module.ListOffsetsTopicResponse, name=name, partitions=tuple(built)))
    return build(module.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


API = register(Api(ApiKey.LIST_OFFSETS, (1, 10), handle, acls=(Acl(AclOperation.DESCRIBE, ResourceType.TOPIC),)))
