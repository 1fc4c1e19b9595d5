"""Which front-door node coordinates a group, as Kafka places it: the group's partition of the offsets
topic is `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions` (`GroupCoordinatorShard`
`partitionFor`), and that partition's leader is the coordinator. Here the partition is led by the node
`leadership.py` assigns to partition p of `__consumer_offsets`, so every node (and every restart) names the
same coordinator for a group without storing or agreeing on anything.
"""

from __future__ import annotations

from collections.abc import Sequence

from front_door.cluster.leadership import leader

# Kafka's internal topic and its default partition count (`offsets.topic.num.partitions`)
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_PARTITIONS = 50


def java_string_hash(s: str) -> int:
    """Java's `String.hashCode`: over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_abs(n: int) -> int:
    """Kafka's `Utils.abs`: `n & 0x7fffffff` (so Integer.MIN_VALUE maps to 0, not to itself)."""
    return n & 0x7FFFFFFF


def partition_for(group_id: str, partitions: int = OFFSETS_TOPIC_PARTITIONS) -> int:
    return java_abs(java_string_hash(group_id)) % partitions


def coordinator(group_id: str, nodes: Sequence[int]) -> int:
    """The node id coordinating `group_id` among the sorted node ids `nodes`."""
    return leader(OFFSETS_TOPIC, partition_for(group_id), nodes)
