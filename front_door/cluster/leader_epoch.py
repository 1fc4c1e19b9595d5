"""The leader-epoch check of a partition request (`Partition.checkCurrentLeaderEpoch`, KIP-320): a client
that names the epoch it believes current (`current_leader_epoch` of Fetch v9+, ListOffsets v4+ and
OffsetForLeaderEpoch v2+) is told when it is behind (FENCED_LEADER_EPOCH: refresh Metadata) or ahead
(UNKNOWN_LEADER_EPOCH: this broker has not seen that epoch). The gateway leads every partition in one
epoch forever (`GATEWAY_LEADER_EPOCH`), the one Metadata advertises.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from validators.append_result import GATEWAY_LEADER_EPOCH

NO_EPOCH = -1  # the client names none: no check


def epoch_error(current_leader_epoch: int) -> ErrorCode | None:
    if current_leader_epoch == NO_EPOCH or current_leader_epoch == GATEWAY_LEADER_EPOCH:
        return None
    if current_leader_epoch < GATEWAY_LEADER_EPOCH:
        return ErrorCode.fenced_leader_epoch
    return ErrorCode.unknown_leader_epoch
