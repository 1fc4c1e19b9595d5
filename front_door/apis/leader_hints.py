"""Where a partition's leader is, in a NOT_LEADER_OR_FOLLOWER answer (KIP-951, Kafka 3.7+): a
partition's `current_leader` (Produce v10+, Fetch v12+) and the response's `node_endpoints` naming
those leaders (Produce v10+, Fetch v16+), so a client can move to the leader without a Metadata round
trip. Older versions lack the fields; their clients refresh Metadata on the error, as they always did.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import ModuleType
from typing import Any

from front_door.context import Context
from front_door.network.messages import build
from validators.append_result import GATEWAY_LEADER_EPOCH


def current_leader(module: ModuleType, leader_id: int | None) -> dict[str, Any]:
    """`current_leader=` for a partition answer's `build`, or nothing: where the version lacks the
    field, and for a partition this node answers itself (`leader_id` None; Kafka leaves it unset)."""
    if leader_id is None or not hasattr(module, "LeaderIdAndEpoch"):
        return {}
    return {"current_leader": build(module.LeaderIdAndEpoch, leader_id=leader_id, leader_epoch=GATEWAY_LEADER_EPOCH)}


def node_endpoints(module: ModuleType, ctx: Context, leader_ids: Iterable[int]) -> dict[str, Any]:
    """`node_endpoints=` for the response's `build` (each leader named once), or nothing where the
    version lacks it."""
    if not hasattr(module, "NodeEndpoint"):
        return {}
    return {"node_endpoints": tuple(build(module.NodeEndpoint, node_id=n.node_id, host=n.host, port=n.port, rack=None)
                                    for n in map(ctx.node, sorted(set(leader_ids))) if n is not None)}
