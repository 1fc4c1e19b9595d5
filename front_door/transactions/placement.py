"""Which front-door node coordinates a transactional id, as Kafka places it: the id's partition of the
transaction state topic is `Utils.abs(transactionalId.hashCode()) % transaction.state.log.num.partitions`
(`TransactionStateManager.partitionFor`), and that partition's leader coordinates it. As for groups
(`groups/placement.py`), the partition is led by the node `leadership.py` assigns, so every node names the same
coordinator without storing or agreeing on anything.
"""

from __future__ import annotations

from collections.abc import Sequence

from front_door.cluster.leadership import leader
from front_door.groups.placement import partition_for

# Kafka's internal topic and its default partition count (`transaction.state.log.num.partitions`)
TRANSACTION_STATE_TOPIC = "__transaction_state"
TRANSACTION_STATE_TOPIC_PARTITIONS = 50


def transaction_coordinator(transactional_id: str, nodes: Sequence[int]) -> int:
    """The node id coordinating `transactional_id` among the sorted node ids `nodes`."""
    return leader(TRANSACTION_STATE_TOPIC, partition_for(transactional_id, TRANSACTION_STATE_TOPIC_PARTITIONS), nodes)
