"""Where the front door's users (SCRAM credentials) and ACLs last: records of a compacted topic on the
gateway's Kafka cluster (`security_topic`), as Kafka keeps both in its metadata log. Every front door and
every restart reads the same records and follows them, so a user or an ACL added through one door is seen
by every door.

A record's key is `<kind>/<name>` (kinds: `scram` for credentials, `acl` for ACL bindings, `quota` for
client quotas, `broker` for dynamic broker configs), its value the kind's own bytes; a tombstone (no value) forgets the key. One partition, so one order for every door.
`SecurityStore` is what the users and the ACLs read and write; `KafkaSecurityStore` is the real one
(`kafka_security_store.py`), and the unit tests use an in-memory one with the same shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

SCRAM_KIND = "scram"
ACL_KIND = "acl"
QUOTA_KIND = "quota"  # client quotas: per-IP connection creation rates (connection_quotas.py)
BROKER_KIND = "broker"  # dynamic broker configs for every door (broker_configs.py)

# (kind, name, value or None for a deletion), called on the front door's event loop, in the topic's order
ChangeListener = Callable[[str, str, bytes | None], None]


class SecurityStoreError(RuntimeError):
    """A write the cluster did not acknowledge, or a topic that cannot be read."""


class SecurityStore(Protocol):
    def snapshot(self, kind: str) -> dict[str, bytes]:
        """Every live record of `kind` now: name -> value."""
        ...

    async def write(self, kind: str, name: str, value: bytes | None) -> None:
        """Store (or with None delete) one record; returns once the cluster has it and `snapshot` shows it,
        raises SecurityStoreError when the cluster does not acknowledge it."""
        ...

    def subscribe(self, listener: ChangeListener) -> None:
        """Call `listener` for every change from now on, this door's writes and other doors' alike."""
        ...


def record_key(kind: str, name: str) -> str:
    return f"{kind}/{name}"


def split_key(key: str) -> tuple[str, str]:
    kind, sep, name = key.partition("/")
    if not sep:
        raise ValueError(f"security record key {key!r} is not <kind>/<name>")
    return kind, name
