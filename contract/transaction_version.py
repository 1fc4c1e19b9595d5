"""Kafka's `TransactionVersion`: the levels of the `transaction.version` feature (KIP-890, KIP-1022).

TV_0 and TV_1 are the classic protocol: a producer keeps its epoch across transactions and adds each partition
with AddPartitionsToTxn. TV_2 (KIP-890 part 2) bumps the producer epoch at every transaction's end (EndTxn v5
answers the new id and epoch), a partition joins the transaction when the producer writes to it (the leader asks
the coordinator), and a marker's epoch is the bumped one. The version a request speaks follows its API version
alone (`transactionVersionForEndTxn`, `transactionVersionForAddPartitionsToTxn`); the coordinator keeps it with
the transaction (the transaction log's `ClientTransactionVersion`), and a marker carries it to the partition
(WriteTxnMarkers' `TransactionVersion`; here the ingress header `gw.transaction.version`).
"""

from __future__ import annotations

from enum import IntEnum

FEATURE_NAME = "transaction.version"  # TransactionVersion.FEATURE_NAME


class TransactionVersion(IntEnum):
    TV_0 = 0
    TV_1 = 1
    TV_2 = 2

    @property
    def supports_epoch_bump(self) -> bool:
        """`supportsEpochBump`: the epoch is bumped at every transaction's end."""
        return self >= TransactionVersion.TV_2

    @classmethod
    def of_level(cls, level: int) -> TransactionVersion:
        """A level as stored or carried; one this gateway does not know reads as the newest it does."""
        return cls(min(max(level, 0), max(cls)))

    @classmethod
    def for_end_txn(cls, api_version: int) -> TransactionVersion:
        """`transactionVersionForEndTxn`: EndTxn v5 and later come from TV_2 clients."""
        return cls.TV_2 if api_version > 4 else cls.TV_0

    @classmethod
    def for_add_partitions_to_txn(cls, api_version: int) -> TransactionVersion:
        """`transactionVersionForAddPartitionsToTxn`: v4 and later come from brokers adding a TV_2 client's
        partitions."""
        return cls.TV_2 if api_version > 3 else cls.TV_0
