"""The features the front doors support and finalize, as a Kafka 4.x cluster reports them in ApiVersions v3+
(KIP-584: `SupportedFeatures`, `FinalizedFeaturesEpoch`, `FinalizedFeatures`).

`transaction.version` is finalized at 2 (KIP-890's transactions, what a new Kafka 4.x cluster finalizes): Kafka's
Java client then runs its transactions on transaction version 2 (`TransactionManager.isTransactionV2Enabled`),
librdkafka stays on the classic protocol, and the coordinator aborts with TV_2's rules the transactions it
fences or times out. The doors have no feature-level changes of their own (no UpdateFeatures), so the finalized
set never changes and its epoch is fixed; a client takes a feature's level from the highest epoch it has seen.
"""

from __future__ import annotations

from contract.transaction_version import FEATURE_NAME as TRANSACTION_VERSION_FEATURE
from contract.transaction_version import TransactionVersion

FINALIZED_TRANSACTION_VERSION = TransactionVersion.TV_2
# feature name -> (min, max) supported level (a Kafka 4.x broker supports transaction.version 0..2)
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {
    TRANSACTION_VERSION_FEATURE: (int(TransactionVersion.TV_0), int(max(TransactionVersion))),
}
# feature name -> finalized level (the cluster-wide min and max level are the same)
FINALIZED_FEATURES: dict[str, int] = {TRANSACTION_VERSION_FEATURE: int(FINALIZED_TRANSACTION_VERSION)}
FINALIZED_FEATURES_EPOCH = 1  # >= 0: the finalized features are known
