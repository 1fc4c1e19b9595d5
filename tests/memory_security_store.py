"""A `SecurityStore` in memory, for unit tests of the users and the ACLs (the Kafka-backed one is
`front_door/cluster/kafka_security_store.py`, tested against the real broker). Two doors sharing one
`MemorySecurityStore` see each other's writes, as two doors sharing the topic do."""

from __future__ import annotations

import asyncio

from front_door.cluster.security_store import ChangeListener, SecurityStoreError


class MemorySecurityStore:
    def __init__(self) -> None:
        self.records: dict[tuple[str, str], bytes] = {}
        self.listeners: list[ChangeListener] = []
        self.fail = False  # the next writes raise, as when the cluster is unreachable

    def snapshot(self, kind: str) -> dict[str, bytes]:
        return {name: value for (k, name), value in self.records.items() if k == kind}

    async def write(self, kind: str, name: str, value: bytes | None) -> None:
        await asyncio.sleep(0)  # an acknowledgement comes later than the write starts
        if self.fail:
            raise SecurityStoreError("the security topic is unreachable")
        if value is None:
            self.records.pop((kind, name), None)
        else:
            self.records[(kind, name)] = value
        for listener in self.listeners:
            listener(kind, name, value)

    def subscribe(self, listener: ChangeListener) -> None:
        self.listeners.append(listener)
