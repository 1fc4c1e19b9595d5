"""CreateTopics (key 19), DeleteTopics (key 20) and CreatePartitions (key 37): answered, and refused per
topic — the gateway's topics are its registry file, not something a client changes. CreateTopics and
CreatePartitions get POLICY_VIOLATION (a Java AdminClient's `PolicyViolationException`, as from a broker's
`create.topic.policy`), DeleteTopics TOPIC_DELETION_DISABLED (as `delete.topic.enable=false`); each with a
message naming the registry file to edit. `validate_only` gets the same answer.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door.api_keys import ApiKey
from front_door.context import Context
from front_door.messages import NO_THROTTLE, build, response_module
from front_door.wire import Request

NO_REPLICATION_FACTOR = -1


def refusal(ctx: Context, what: str) -> str:
    return (f"The gateway's topics are its registry ({ctx.registry_file}): {what} there; the gateway reloads it "
            f"(DESIGN §4.2).")


async def create_topics(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.CREATE_TOPICS, request.api_version)
    message = refusal(ctx, "add the topic")
    topics = tuple(build(module.CreatableTopicResult, name=t.name, topic_id=None, error_code=ErrorCode.policy_violation,
                         error_message=message, topic_config_error_code=0, num_partitions=-1,
                         replication_factor=NO_REPLICATION_FACTOR, configs=None)
                   for t in request.body.topics)
    return build(module.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=topics)


async def delete_topics(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.DELETE_TOPICS, request.api_version)
    message = refusal(ctx, "remove the topic")
    if request.api_version >= 6:
        asked = [(t.name, t.topic_id) for t in request.body.topics]
    else:
        asked = [(name, None) for name in request.body.topic_names]
    responses = tuple(build(module.DeletableTopicResult, name=name, topic_id=tid,
                            error_code=ErrorCode.topic_deletion_disabled, error_message=message)
                      for name, tid in asked)
    return build(module.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=responses)


async def create_partitions(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.CREATE_PARTITIONS, request.api_version)
    message = refusal(ctx, "change the topic's partitions")
    results = tuple(build(module.CreatePartitionsTopicResult, name=t.name, error_code=ErrorCode.policy_violation,
                          error_message=message) for t in request.body.topics)
    return build(module.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=results)
