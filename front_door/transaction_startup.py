"""The door's transaction coordinator started: its state topic created if missing, loaded and followed, and the
coordinator given this door's ingress path for its markers. A topic the door cannot read leaves it without
transactions (FindCoordinator answers COORDINATOR_NOT_AVAILABLE), with a warning, and serves the rest. And the
door's way to add a transaction version 2 producer's partitions at whichever door coordinates its transaction
(`add_partitions_manager`)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from contract.group_records import TxnEnd
from contract.ingress import ORIGIN_COORDINATOR
from contract.transaction_version import TransactionVersion
from front_door.context import Context
from front_door.ingress_bridge import Answers, IngressBridge
from front_door.network.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from front_door.transactions.coordinator import TransactionCoordinator
from front_door.transactions.placement import transaction_coordinator
from front_door.transactions.store import KafkaTransactionStore, TransactionStoreError
from front_door.transactions.view import COMPLETE
from kafka_cluster.security import SecurityProtocol
from validators.transaction_state import TransactionMetadata, TransactionState

if TYPE_CHECKING:
    from front_door.settings import FrontDoorSettings

log = logging.getLogger("gateway.front_door.transactions")
MARKER_CLIENT_ID = "gateway-transaction-coordinator"
MARKER_PRINCIPAL = "User:gateway-transaction-coordinator"  # on a marker's dead letter, if it ever gets one


async def start_transactions(settings: FrontDoorSettings, ctx: Context,
                             bridge: IngressBridge) -> TransactionCoordinator | None:
    if settings.transaction_state_topic is None:
        return None
    store = KafkaTransactionStore(settings.cluster, settings.transaction_state_topic)
    try:
        await asyncio.to_thread(store.ensure_topic)
        await asyncio.to_thread(store.load)
    except TransactionStoreError as e:
        log.warning("front door: no transactions: %s", e)
        return None
    store.start()
    own = set(settings.node_ids())
    timeout_s = settings.publish_timeout_ms / 1000

    async def send_marker(topic: str, partition: int, batch: bytes, version: TransactionVersion) -> int:
        answers = Answers()
        request_id = bridge.send(topic, partition, batch, answers, client_id=MARKER_CLIENT_ID, acks=-1,
                                 principal=MARKER_PRINCIPAL, origin=ORIGIN_COORDINATOR, transaction_version=int(version))
        await answers.wait(timeout_s)
        if (response := answers.responses.get(request_id)) is None:
            bridge.forget(request_id)
            return int(ErrorCode.request_timed_out)
        return int(response["error_code"])

    def owns(transactional_id: str) -> bool:
        nodes = ctx.cluster.node_ids() if ctx.cluster is not None else sorted(own)
        return transaction_coordinator(transactional_id, nodes) in own

    groups = ctx.groups

    async def end_offsets(producer_id: int, txn_start_ms: int, commit: bool) -> None:
        await groups.store.write_txn_end(producer_id, TxnEnd(txn_start_ms, commit))

    def ended(meta: TransactionMetadata) -> None:
        """A Complete state seen (this door's or another's): the group coordinator ends the offsets it holds."""
        if meta.state in COMPLETE:
            groups.transaction_ended(meta.transaction_producer_id, meta.start_ms, meta.state is TransactionState.COMPLETE_COMMIT)

    store.view.listeners.append(ended)
    groups.transaction_outcome = store.view.outcome
    groups.end_completed()  # offsets loaded before the view knew their transaction's end
    coordinator = TransactionCoordinator(store, ctx.producer_ids.generate, send_marker, owns, settings.transactions,
                                         end_offsets=end_offsets)
    coordinator.start()
    log.info("front door transactions: %d transactional ids loaded from %s", len(store.snapshot()),
             settings.transaction_state_topic)
    return coordinator


def add_partitions_manager(settings: FrontDoorSettings, ctx: Context) -> AddPartitionsToTxnManager:
    """This door's coordinator for its own nodes' transactional ids; another door's node on the first PLAINTEXT
    listener of the configuration (the doors of a gateway share one), as the doors topic registers it."""
    plaintext = next((listener.name for listener in settings.listeners()
                      if listener.protocol is SecurityProtocol.PLAINTEXT), None)
    cluster = ctx.cluster

    def address(node_id: int) -> tuple[str, int] | None:
        node = None if plaintext is None or cluster is None else cluster.nodes(plaintext).get(node_id)
        return None if node is None else (node.host, node.port)

    return AddPartitionsToTxnManager(settings.node_ids(), ctx.transactions, address)
