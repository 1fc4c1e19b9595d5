"""Which front-door node leads which partition: partition p of topic t is led by node
`1 + (h(t) + p) % N`, N = `front_door_nodes`, h(t) the topic id (`topic_ids.py`, UUIDv5 of the name)
as an integer.

Why several nodes: Kafka clients pipeline per broker connection — the Java client keeps 5 requests in
flight per connection (`max.in.flight.requests.per.connection`), librdkafka without idempotence up to
its `max.in.flight` — and each request waits about one micro-batch for the gateway's answer. A client's throughput is bytes in flight ÷ round trip, so with one broker every
partition shares one window; with N nodes a topic's partitions spread over N connections, N windows.

Why this formula: it is Kafka's placement of a partition's first replica, its preferred leader
(`AdminUtils.assignReplicasToBrokers`, rack unaware: broker `(startIndex + p) mod n`, round robin over
the brokers from a start per topic), with the start taken from the topic id instead of at random. So
it is deterministic: identical on every front door, across restarts, and for topics added by a
registry reload, with nothing to store or agree on but the live doors (`door_cluster.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from front_door.cluster.topic_ids import topic_id

# The bootstrap listener (`front_door_address`); also the "controller" Metadata names.
FIRST_NODE_ID = 1
# `front_door_nodes` unless configured (a 4-partition topic: one partition, one window, per node)
DEFAULT_NODES = 4


def node_ids(nodes: int, first: int = FIRST_NODE_ID) -> range:
    """The node ids of a front door with `nodes` nodes: first..first + N - 1 (1..N for a lone door)."""
    return range(first, first + nodes)


@lru_cache(maxsize=4096)
def _start(topic: str) -> int:
    return topic_id(topic).int


def leader(topic: str, partition: int, nodes: Sequence[int]) -> int:
    """The node id leading `topic`-`partition` among the sorted node ids `nodes` (one door's `node_ids(N)`,
    or every live door's, `door_cluster.py`)."""
    return nodes[(_start(topic) + partition) % len(nodes)]
