"""CreateTopics (key 19), DeleteTopics (key 20) and CreatePartitions (key 37): answered, and refused per
topic — the gateway's topics are its registry file, not something a client changes. CreateTopics and
CreatePartitions get POLICY_VIOLATION (a Java AdminClient's `PolicyViolationException`, as from a broker's
`create.topic.policy`), DeleteTopics TOPIC_DELETION_DISABLED (as `delete.topic.enable=false`); each with a
message naming the registry file to edit. `validate_only` gets the same answer. Authorization comes first,
as in Kafka: without CREATE (on the cluster or the topic), DELETE or ALTER on a topic, that topic gets
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.context import Context
from front_door.messages import NO_THROTTLE, build, response_module
from front_door.security.acls import AclOperation, ResourceType
from front_door.wire import Request

NO_REPLICATION_FACTOR = -1


def refusal(ctx: Context, what: str) -> str:
    return (f"The gateway's topics are its registry ({ctx.registry_file}): {what} there; the gateway reloads it "
            f"(docs/design.md: what the stage decides).")


AUTHORIZATION_FAILED = "Authorization failed."  # CreateTopics' own message (ControllerApis.createTopics)


async def create_topics(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.CREATE_TOPICS, request.api_version)
    message = refusal(ctx, "add the topic")
    names = [t.name for t in request.body.topics]
    # ControllerApis.createTopics: CREATE on the cluster (not logged when denied) or on each topic; a topic
    # the principal may not DESCRIBE_CONFIGS gets TOPIC_AUTHORIZATION_FAILED as its config error
    creatable = set(names) if access.authorize_cluster(ctx, request, AclOperation.CREATE, log_if_denied=False) \
        else access.authorized_names(ctx, request, AclOperation.CREATE, ResourceType.TOPIC, names)
    configs_visible = access.authorized_names(ctx, request, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names)
    topics = []
    for name in names:
        code, text = (ErrorCode.policy_violation, message) if name in creatable else \
            (ErrorCode.topic_authorization_failed, AUTHORIZATION_FAILED)
        config_code = ErrorCode.topic_authorization_failed \
            if name not in configs_visible and code != ErrorCode.topic_authorization_failed else 0
        topics.append(build(module.CreatableTopicResult, name=name, topic_id=None, error_code=code, error_message=text,
                            topic_config_error_code=config_code, num_partitions=-1,
                            replication_factor=NO_REPLICATION_FACTOR, configs=None))
    return build(module.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


async def delete_topics(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.DELETE_TOPICS, request.api_version)
    message = refusal(ctx, "remove the topic")
    if request.api_version >= 6:
        asked = [(t.name, t.topic_id) for t in request.body.topics]
    else:
        asked = [(name, None) for name in request.body.topic_names]
    ids = ctx.topic_ids() if any(name is None for name, _ in asked) else {}
    resolved = [name if name is not None else ids.get(tid) if tid is not None else None for name, tid in asked]
    # ControllerApis.deleteTopics: DESCRIBE, then DELETE on each topic; asked by id, a topic the principal
    # may not describe is not named
    known = [n for n in resolved if n is not None]
    describable = access.authorized_names(ctx, request, AclOperation.DESCRIBE, ResourceType.TOPIC, known)
    deletable = access.authorized_names(ctx, request, AclOperation.DELETE, ResourceType.TOPIC,
                                        (n for n in known if n in describable))
    responses = []
    for (name, tid), topic in zip(asked, resolved, strict=True):
        if topic is not None and topic not in deletable:
            shown = name if name is not None else topic if topic in describable else None
            responses.append(build(module.DeletableTopicResult, name=shown,
                                   topic_id=tid, error_code=ErrorCode.topic_authorization_failed,
                                   error_message=access.TOPIC_AUTHORIZATION_FAILED))
            continue
        responses.append(build(module.DeletableTopicResult, name=name, topic_id=tid,
                               error_code=ErrorCode.topic_deletion_disabled, error_message=message))
    return build(module.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=tuple(responses))


async def create_partitions(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.CREATE_PARTITIONS, request.api_version)
    message = refusal(ctx, "change the topic's partitions")
    # ControllerApis.createPartitions: ALTER on each topic
    alterable = access.authorized_names(ctx, request, AclOperation.ALTER, ResourceType.TOPIC,
                                        (t.name for t in request.body.topics))
    results = tuple(
        build(module.CreatePartitionsTopicResult, name=t.name, error_code=ErrorCode.policy_violation,
              error_message=message) if t.name in alterable else
        build(module.CreatePartitionsTopicResult, name=t.name, error_code=ErrorCode.topic_authorization_failed,
              error_message=access.TOPIC_AUTHORIZATION_FAILED)
        for t in request.body.topics)
    return build(module.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=results)
