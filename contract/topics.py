"""The gateway's own topics (docs/design.md): default names, each configurable, and the groups topic's shape."""

from __future__ import annotations

DEFAULT_INGRESS_TOPIC = "gateway.ingress"
DEFAULT_RESPONSE_TOPIC = "gateway.responses"
DEFAULT_DLQ_TOPIC = "gateway.dlq"
DEFAULT_GROUPS_TOPIC = "gateway.consumer_offsets"  # the front door's groups and offsets
DEFAULT_SECURITY_TOPIC = "gateway.security"  # the front door's users (SCRAM credentials) and ACLs
# A standby's scratch ingress: one batch to rehearse the query's plan on while the ingress topic is empty
# (streaming/standby.py). One partition; an hour's retention keeps it to the last few standby starts.
REHEARSAL_TOPIC_SUFFIX = ".rehearsal"
REHEARSAL_TOPIC_CONFIGS = {"retention.ms": str(3_600_000)}


def rehearsal_topic(ingress_topic: str) -> str:
    return f"{ingress_topic}{REHEARSAL_TOPIC_SUFFIX}"

# Kafka's `__consumer_offsets` settings that matter for a compacted store (`offsets.topic.segment.bytes`)
GROUPS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}
# One partition: a gateway's groups are few next to a Kafka cluster's, and one partition loads in one read.
# Kafka uses 50 (`offsets.topic.num.partitions`); a topic made with more partitions is used as it is.
GROUPS_TOPIC_PARTITIONS = 1
# One partition: one order of user and ACL changes for every door (the security store reads it whole).
SECURITY_TOPIC_PARTITIONS = 1
# The front doors' registrations (`front_door/cluster/door_cluster.py`): a record per door, rewritten every heartbeat,
# so small segments (rolled every ten minutes) that compaction keeps to about a record per door.
DOORS_TOPIC_PARTITIONS = 1
DOORS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.ms": str(600_000), "segment.bytes": str(1024 * 1024),
                       "min.cleanable.dirty.ratio": "0.1", "delete.retention.ms": str(600_000)}

# The topic registry (`kafka_cluster/registry_store.py`): the target topics, their configs and ids, as compacted records
# of one partition (one order of changes for every door and the query). Named after the ingress topic by
# default: a registry belongs to one gateway's ingress, as its rehearsal topic does.
REGISTRY_TOPIC_SUFFIX = ".topics"
REGISTRY_TOPIC_PARTITIONS = 1
REGISTRY_TOPIC_CONFIGS = {"cleanup.policy": "compact"}


def registry_topic(ingress_topic: str) -> str:
    return f"{ingress_topic}{REGISTRY_TOPIC_SUFFIX}"


# The front doors' transaction coordinator state (`front_door/transactions/store.py`), as Kafka keeps
# `__transaction_state`: compacted, Kafka's `transaction.state.log.segment.bytes`; one partition, one order of
# changes that every door follows. Named after the ingress topic by default, as the registry is.
TRANSACTION_STATE_TOPIC_SUFFIX = ".transaction_state"
TRANSACTION_STATE_TOPIC_PARTITIONS = 1
TRANSACTION_STATE_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}


def transaction_state_topic(ingress_topic: str) -> str:
    return f"{ingress_topic}{TRANSACTION_STATE_TOPIC_SUFFIX}"
