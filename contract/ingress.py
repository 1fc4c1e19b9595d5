"""An ingress message (docs/design.md: ingress topic): one raw Kafka record batch as the value, the target in headers.

- `gw.topic`, `gw.partition` (required): the target topic-partition, UTF-8 text;
- `gw.request.id` (optional, default `<ingress partition>:<ingress offset>`): the key of the response;
- `gw.client.id`, `gw.acks` (optional, acks default -1; 0 means no response);
- `gw.replay.of` (set by `gateway dlq replay`): the dead letter it re-submits, `<dlq>:<p>:<o>`;
- `gw.principal` (set by the front door): who produced it, Kafka's `User:<name>` (`User:ANONYMOUS` on a
  listener without authentication); kept on the batch's dead letter.
- `gw.transactional.id` (set by the front door): the produce's transactional id, once the door has
  authorized it; only then may the batch be transactional.
- `gw.origin` (set by the front door's transaction coordinator): `coordinator` for a transaction marker, an
  end-transaction control batch (Kafka's `AppendOrigin.COORDINATOR`); absent for a client's batch.
- `gw.transaction.version` (set by the coordinator on a marker): the transaction's `transaction.version` level
  (`contract.transaction_version`, Kafka's WriteTxnMarkers `TransactionVersion`), decimal text; absent: 0.

The message key is `<topic>/<partition>`, so one target partition's batches stay in order within one
ingress partition.
"""

from __future__ import annotations

HEADER_TOPIC = "gw.topic"
HEADER_PARTITION = "gw.partition"
HEADER_REQUEST_ID = "gw.request.id"
HEADER_CLIENT_ID = "gw.client.id"
HEADER_ACKS = "gw.acks"
HEADER_REPLAY_OF = "gw.replay.of"
HEADER_PRINCIPAL = "gw.principal"
HEADER_TRANSACTIONAL_ID = "gw.transactional.id"
HEADER_ORIGIN = "gw.origin"
ORIGIN_COORDINATOR = "coordinator"
HEADER_TRANSACTION_VERSION = "gw.transaction.version"


def ingress_key(topic: str, partition: int | None) -> bytes:
    return f"{topic}/{partition}".encode()


def ingress_headers(
    topic: str, partition: int | None, request_id: str, *, client_id: str | None = None, acks: int | None = None,
    replay_of: str | None = None, principal: str | None = None, transactional_id: str | None = None,
    origin: str | None = None, transaction_version: int | None = None,
) -> list[tuple[str, bytes]]:
    """The headers of one ingress message, in the order producers write them."""
    headers = [
        (HEADER_TOPIC, topic.encode()),
        (HEADER_PARTITION, str(partition).encode()),
        (HEADER_REQUEST_ID, request_id.encode()),
    ]
    if client_id is not None:
        headers.append((HEADER_CLIENT_ID, client_id.encode()))
    if acks is not None:
        headers.append((HEADER_ACKS, str(acks).encode()))
    if replay_of is not None:
        headers.append((HEADER_REPLAY_OF, replay_of.encode()))
    if principal is not None:
        headers.append((HEADER_PRINCIPAL, principal.encode()))
    if transactional_id is not None:
        headers.append((HEADER_TRANSACTIONAL_ID, transactional_id.encode()))
    if origin is not None:
        headers.append((HEADER_ORIGIN, origin.encode()))
    if transaction_version is not None:
        headers.append((HEADER_TRANSACTION_VERSION, str(transaction_version).encode()))
    return headers
