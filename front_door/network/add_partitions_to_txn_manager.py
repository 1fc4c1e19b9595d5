"""Kafka's `AddPartitionsToTxnManager` with KIP-890 part 2's `ADD_PARTITION` operation: before a transaction
version 2 producer's transactional batch is appended (Produce v12+), and before its offsets are held for a group
(TxnOffsetCommit v5), the partition is added to the producer's transaction at the transaction's coordinator, on
the producer's behalf (the client sends no AddPartitionsToTxn, nor AddOffsetsToTxn).

The coordinator is asked where it is: this door's own coordinator when one of its nodes coordinates the
transactional id, else the coordinating node, with AddPartitionsToTxn v5 (VerifyOnly false), as a Kafka broker
asks another on its inter-broker listener. Doors call each other on their first PLAINTEXT listener
(`network/client.py`); with ACLs on, that listener's principal needs ClusterAction on the cluster, as a broker's
does. A door without a PLAINTEXT listener cannot reach another door's coordinator: COORDINATOR_NOT_AVAILABLE.

The answers, as Kafka's leader turns them into the produce's: CONCURRENT_TRANSACTIONS (the transaction before is
still being completed) is asked again every `add.partitions.to.txn.retry.backoff.ms` for up to
`add.partitions.to.txn.retry.backoff.max.ms`, then answered; PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH;
a coordinator that cannot be reached, is loading or is not the coordinator becomes NOT_ENOUGH_REPLICAS (retriable
without a metadata refresh) naming the underlying error; INVALID_TXN_STATE says the partition was not added
(`ReplicaManager.handleProduceAppend`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, NamedTuple

from kio.schema.add_partitions_to_txn.v5.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)

from contract.transaction_version import TransactionVersion
from front_door.api_keys import ApiKey
from front_door.network.client import DoorConnection, DoorConnectionError
from validators.errors import Errors
from validators.transaction_state import TopicPartition

if TYPE_CHECKING:
    from front_door.transactions.coordinator import TransactionCoordinator

log = logging.getLogger("gateway.front_door.transactions")
ADD_PARTITIONS_RETRY_BACKOFF_MS = 20  # add.partitions.to.txn.retry.backoff.ms
ADD_PARTITIONS_RETRY_BACKOFF_MAX_MS = 100  # add.partitions.to.txn.retry.backoff.max.ms
REQUEST_TIMEOUT_S = 30.0  # the inter-broker request.timeout.ms
BROKER_VERSION = 5  # AddPartitionsToTxn's version between brokers (v4+: TV_2, `transactionVersionForAddPartitionsToTxn`)
CLIENT_ID = "gateway-add-partitions-to-txn"
CONNECTIONS_PER_NODE = 4  # requests in flight to one other door's node (each connection takes one at a time)
UNVERIFIED = frozenset({Errors.NETWORK_EXCEPTION, Errors.COORDINATOR_LOAD_IN_PROGRESS,
                        Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR})

Address = Callable[[int], "tuple[str, int] | None"]  # node id -> its PLAINTEXT listener's address


class Added(NamedTuple):
    """The answer for the partitions: NONE, or the error the produce (or offset commit) gets, with its text."""

    error: Errors
    message: str | None = None


def leader_answer(error: Errors) -> Added:
    """The coordinator's answer as the leader's (`AddPartitionsToTxnManager`, `ReplicaManager.handleProduceAppend`
    for a client that supports the epoch bump)."""
    if error is Errors.PRODUCER_FENCED:
        return Added(Errors.INVALID_PRODUCER_EPOCH)
    if error is Errors.INVALID_TXN_STATE:
        return Added(error, "Partition was not added to the transaction")
    if error in UNVERIFIED:
        return Added(Errors.NOT_ENOUGH_REPLICAS, "Unable to verify the partition has been added to the transaction. "
                                                 f"Underlying error: {error.name}")
    return Added(error)


class AddPartitionsToTxnManager:
    def __init__(self, own_node_ids: Collection[int], coordinator: TransactionCoordinator | None,
                 address: Address) -> None:
        self._own, self._coordinator, self._address = frozenset(own_node_ids), coordinator, address
        self._connections: dict[tuple[str, int], asyncio.Queue[DoorConnection]] = {}

    async def add(self, node_id: int, transactional_id: str, producer_id: int, epoch: int,
                  partitions: Sequence[TopicPartition]) -> Added:
        """The partitions added to the producer's transaction at node `node_id`, its coordinator."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ADD_PARTITIONS_RETRY_BACKOFF_MAX_MS / 1000
        while True:
            error = await self._ask(node_id, transactional_id, producer_id, epoch, partitions)
            if error is not Errors.CONCURRENT_TRANSACTIONS or loop.time() >= deadline:
                return leader_answer(error)
            await asyncio.sleep(ADD_PARTITIONS_RETRY_BACKOFF_MS / 1000)

    async def _ask(self, node_id: int, transactional_id: str, producer_id: int, epoch: int,
                   partitions: Sequence[TopicPartition]) -> Errors:
        if node_id in self._own:
            if self._coordinator is None:
                return Errors.COORDINATOR_NOT_AVAILABLE
            return await self._coordinator.add_partitions(transactional_id, producer_id, epoch, partitions,
                                                          TransactionVersion.TV_2)
        address = self._address(node_id)
        if address is None:
            log.warning("transactional id %s: node %d coordinates it and has no PLAINTEXT listener this door "
                        "can add partitions on", transactional_id, node_id)
            return Errors.COORDINATOR_NOT_AVAILABLE
        idle = self._connections.get(address)
        if idle is None:
            idle = self._connections[address] = asyncio.Queue()
            for _ in range(CONNECTIONS_PER_NODE):  # each opens when first used
                idle.put_nowait(DoorConnection(*address, CLIENT_ID))
        connection = await idle.get()
        try:
            response = await connection.send(ApiKey.ADD_PARTITIONS_TO_TXN, BROKER_VERSION,
                                             _request(transactional_id, producer_id, epoch, partitions),
                                             REQUEST_TIMEOUT_S)
        except DoorConnectionError as e:
            log.warning("transactional id %s: adding partitions at its coordinator: %s", transactional_id, e)
            return Errors.NETWORK_EXCEPTION
        finally:
            idle.put_nowait(connection)
        if response.error_code != 0:
            return _known(int(response.error_code))
        codes = [int(p.partition_error_code) for t in response.results_by_transaction for r in t.topic_results
                 for p in r.results_by_partition]
        return _known(next((c for c in codes if c != 0), 0))

    def close(self) -> None:
        for idle in self._connections.values():
            while not idle.empty():
                idle.get_nowait().close()
        self._connections.clear()


def _known(code: int) -> Errors:
    try:
        return Errors.for_code(code)
    except KeyError:
        return Errors.UNKNOWN_SERVER_ERROR


def _request(transactional_id: str, producer_id: int, epoch: int,
             partitions: Sequence[TopicPartition]) -> AddPartitionsToTxnRequest:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return AddPartitionsToTxnRequest(transactions=(AddPartitionsToTxnTransaction(
        transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch, verify_only=False,
        topics=tuple(AddPartitionsToTxnTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items())),))
