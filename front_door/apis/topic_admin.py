"""What the topic admin APIs share (`create_topics.py`, `delete_topics.py`, `create_partitions.py`, the TOPIC
resources of `incremental_alter_configs.py` and `alter_configs.py`): the registry store's writes run off the
event loop, and a door without a store (a registry that is read-only here) refuses them with POLICY_VIOLATION,
as a broker's `create.topic.policy` would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from front_door.context import Context
from kafka_cluster.registry_store import RegistryError, TopicExists
from validators.topic_config import ConfigError, TopicConfig, topic_config, topic_name_error

NO_REPLICATION_FACTOR = -1
AUTHORIZATION_FAILED = "Authorization failed."  # CreateTopics' own message (ControllerApis.createTopics)
T = TypeVar("T")
Problem = tuple[ErrorCode, str]


def refusal(ctx: Context, what: str) -> str:
    return f"This door serves the topic registry ({ctx.registry_file}) read-only: it does not {what}."


async def in_store(call: Callable[[], T]) -> T | Problem:
    """A registry write off the event loop; its failure as Kafka's error (TOPIC_ALREADY_EXISTS for a creation
    another came first to, else KAFKA_STORAGE_ERROR: the registry topic did not take the write)."""
    try:
        return await asyncio.to_thread(call)
    except TopicExists as e:
        return ErrorCode.topic_already_exists, str(e)
    except RegistryError as e:
        return ErrorCode.kafka_storage_error, str(e)


def validated(ctx: Context, name: str, partitions: int, configs: Mapping[str, Any]) -> TopicConfig | Problem:
    """The topic as it would be (`topic_config` over the registry's defaults), or Kafka's error: INVALID_TOPIC_EXCEPTION
    for a name `Topic.validate` refuses, INVALID_CONFIG for a config `LogConfig.validate` would."""
    if (bad_name := topic_name_error(name)) is not None:
        return ErrorCode.invalid_topic_exception, bad_name
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        return ErrorCode.invalid_config, f"Null value not supported for topic configs: {', '.join(nulls)}"
    try:
        return topic_config(name, partitions, configs, ctx.registry().defaults)
    except ConfigError as e:
        return ErrorCode.invalid_config, str(e)


def partitions_problem(count: int) -> Problem | None:
    if count < 1:
        return ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value."
    return None


def replication_problem(ctx: Context, factor: int) -> Problem | None:
    """Kafka's answer to a replication factor (`ReplicationControlManager.createTopic`): at least 1, at most the
    cluster's nodes. Every factor the door takes is served by one copy in the segment storage, whose durability
    is the storage's (docs/kafka-compatibility.md: topics)."""
    if factor == 0 or factor < NO_REPLICATION_FACTOR:
        return ErrorCode.invalid_replication_factor, \
            "Replication factor must be larger than 0, or -1 to use the default value."
    nodes = len(ctx.node_ids())
    if factor > nodes:
        return ErrorCode.invalid_replication_factor, (
            f"Unable to replicate the partition {factor} time(s): The target replication factor of {factor} cannot "
            f"be reached because only {nodes} broker(s) are registered.")
    return None
