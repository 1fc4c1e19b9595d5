"""DeleteTopics (key 20): a topic removed from the registry (`kafka_cluster/registry_store.py`). Every door stops
serving it at once; the query decides its batches UNKNOWN_TOPIC_OR_PARTITION from the next micro-batch and
removes its partitions from the segment storage then (`storage/topic_incarnations.py`), so a topic re-created
with the name starts empty, under a new topic id.

Kafka's rules (`ControllerApis.deleteTopics`): by name (v0-v5) or by name or id (v6); DESCRIBE, then DELETE on
each topic, else TOPIC_AUTHORIZATION_FAILED (asked by id, a topic the principal may not describe is not named);
an unknown name UNKNOWN_TOPIC_OR_PARTITION, an unknown id UNKNOWN_TOPIC_ID. A door without a registry store
answers TOPIC_DELETION_DISABLED, as `delete.topic.enable=false`.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.registry import Acl, Api, register
from front_door.apis.topic_admin import in_store, refusal
from front_door.cluster.topic_ids import ZERO_TOPIC_ID
from front_door.context import Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import AclOperation, ResourceType


async def delete_topics(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.DELETE_TOPICS, request.api_version)
    if request.api_version >= 6:
        asked = [(t.name, t.topic_id if t.topic_id != ZERO_TOPIC_ID else None) for t in request.body.topics]
    else:
        asked = [(name, None) for name in request.body.topic_names]
    ids = ctx.topic_ids()
    resolved = [name if name is not None else ids.get(tid) if tid is not None else None for name, tid in asked]
    known = [n for n in resolved if n is not None]
    describable = access.authorized_names(ctx, request, AclOperation.DESCRIBE, ResourceType.TOPIC, known)
    deletable = access.authorized_names(ctx, request, AclOperation.DELETE, ResourceType.TOPIC,
                                        (n for n in known if n in describable))
    responses = []
    for (name, tid), topic in zip(asked, resolved, strict=True):
        code, message = ErrorCode.none, None
        config = ctx.registry().get(topic) if topic is not None else None
        if topic is not None and topic not in deletable:
            shown = name if name is not None else topic if topic in describable else None
            code, message, name = ErrorCode.topic_authorization_failed, access.TOPIC_AUTHORIZATION_FAILED, shown
        elif config is None:
            code = ErrorCode.unknown_topic_or_partition if tid is None else ErrorCode.unknown_topic_id
            message = ("This server does not host this topic-partition." if tid is None
                       else "This server does not host this topic ID.")
        elif ctx.topic_store is None:
            code, message = ErrorCode.topic_deletion_disabled, refusal(ctx, "remove the topic")
        else:
            store = ctx.topic_store
            done = await in_store(lambda s=store, t=topic: s.delete(t))
            if isinstance(done, tuple):
                code, message = done
        responses.append(build(module.DeletableTopicResult, name=name if name is not None else topic,
                               topic_id=tid if tid is not None else (config.id if config is not None else ZERO_TOPIC_ID),
                               error_code=code, error_message=message))
    return build(module.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=tuple(responses))


API = register(Api(ApiKey.DELETE_TOPICS, (1, 6), delete_topics, acls=(
    Acl(AclOperation.DELETE, ResourceType.TOPIC),
    Acl(AclOperation.DESCRIBE, ResourceType.TOPIC),
)))
