"""Per-IP connection creation rate quotas (KIP-612), as Kafka's `ConnectionQuotas` enforces them.

An operator sets them with Kafka's own tool, through any door:
`kafka-configs.sh --alter --entity-type ips --entity-name 10.1.2.3 --add-config connection_creation_rate=10`
(or `--entity-default` for every IP without one of its own); AlterClientQuotas stores them in the security
store (kind `quota`), so every door and every restart enforces the same. Without any, there is no limit
(Kafka's default `Int.MaxValue`).

Each new connection is recorded in its IP's rate (Kafka's `Rate` over a `SampledStat`: 11 samples of 1 s,
`quota.window.num` and `quota.window.size.seconds`, the window counted as at least 10 full samples). When
the rate goes over the quota, the connection is un-recorded and throttled: it is closed, unread, after
`(rate - quota) / quota * window`, at most one window (1 s) — `ConnectionQuotas.recordIpConnectionMaybeThrottle`
and `QuotaUtils.boundedThrottleTime`. A flood of logins from one host then costs the door an accept and a
close per connection, not a TLS handshake and a SASL exchange.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
from dataclasses import dataclass

from front_door.cluster.security_store import QUOTA_KIND, SecurityStore
from front_door.network.connection_limits import NameLookups

log = logging.getLogger("gateway.front_door.quotas")

IP_ENTITY = "ip"
DEFAULT_ENTITY_NAME = "<default>"  # Kafka's ConfigEntityName.DEFAULT: the name the store keeps a default under
CONNECTION_CREATION_RATE = "connection_creation_rate"
# Kafka's quota.window.num and quota.window.size.seconds (defaults; a broker's static configs)
QUOTA_SAMPLES = 11
QUOTA_WINDOW_MS = 1000
MAX_THROTTLE_MS = QUOTA_WINDOW_MS  # ConnectionQuotas.maxThrottleTimeMs: one quota window
QUOTAS_UNAVAILABLE = "the front door's quotas are unavailable: its security topic cannot be read"
MAX_TRACKED_ADDRESSES = 10_000  # rates kept before those idle for a whole quota window are dropped


class SampledRate:
    """Kafka's `Rate` over `SampledStat` (org.apache.kafka.common.metrics.stats): events per second over
    `samples` windows of `window_ms`, the window counted as at least `samples - 1` full windows."""

    def __init__(self, window_ms: int = QUOTA_WINDOW_MS, samples: int = QUOTA_SAMPLES) -> None:
        self.window_ms = window_ms
        self.samples = samples
        self._starts: list[int] = []  # each sample's lastWindowMs
        self._counts: list[float] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self._starts:
            self._starts.append(now_ms)
            self._counts.append(0.0)
        elif now_ms - self._starts[self._current] >= self.window_ms:  # Sample.isComplete: advance
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._starts):
                self._starts.append(now_ms)
                self._counts.append(0.0)
            else:
                self._starts[self._current], self._counts[self._current] = now_ms, 0.0
        self._counts[self._current] += value

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for i, start in enumerate(self._starts):
            if now_ms - start >= expire:
                self._starts[i], self._counts[i] = now_ms, 0.0

    def window_size_ms(self, now_ms: int) -> int:
        """`Rate.windowSize`."""
        self._purge(now_ms)
        elapsed = now_ms - min(self._starts, default=now_ms)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def rate(self, now_ms: int) -> float:
        window = self.window_size_ms(now_ms)  # purges first, as `SampledStat.measure` does
        return sum(self._counts) / (window / 1000)


@dataclass(frozen=True)
class QuotaEntity:
    """An IP quota's entity: an address, or None for the default of every IP without one of its own."""

    ip: str | None

    @property
    def store_name(self) -> str:
        return f"{IP_ENTITY}={self.ip if self.ip is not None else DEFAULT_ENTITY_NAME}"

    @staticmethod
    def from_store_name(name: str) -> QuotaEntity:
        kind, sep, value = name.partition("=")
        if kind != IP_ENTITY or not sep or not value:
            raise ValueError(f"quota entity {name!r} is not ip=<address>")
        return QuotaEntity(None if value == DEFAULT_ENTITY_NAME else value)


def resolves(ip: str) -> bool:
    """Kafka's `isValidIpEntity` (`InetAddress.getByName`): an address, or a host name that resolves."""
    try:
        ipaddress.ip_address(ip)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(ip, None)
        return True
    except (OSError, UnicodeError):
        return False


class ConnectionQuotas:
    """The door's IP quotas: `throttle_ms` is asked once per accepted connection, on the door's loop."""

    def __init__(self, store: SecurityStore | None = None) -> None:
        self._store = store
        self._quotas: dict[QuotaEntity, dict[str, float]] = {}
        self._default: float | None = None
        self._by_address: dict[str, float] = {}
        self._rates: dict[str, SampledRate] = {}  # by address; a changed quota keeps the history, as in Kafka
        # an entity's host name, looked up off the door's loop (its quota applies once the lookup has ended)
        self._names = NameLookups(on_resolved=self._index)
        if store is not None:
            for name, value in store.snapshot(QUOTA_KIND).items():
                self._apply(name, value)
            store.subscribe(lambda kind, name, value: kind == QUOTA_KIND and self._apply(name, value))

    def _apply(self, name: str, value: bytes | None) -> None:
        try:
            entity = QuotaEntity.from_store_name(name)
            quotas = {str(k): float(v) for k, v in json.loads(value).items()} if value is not None else {}
        except (ValueError, TypeError, AttributeError) as e:
            log.warning("security store: quota record %r unreadable (%s); skipped", name, e)
            return
        if quotas:
            self._quotas[entity] = quotas
        else:
            self._quotas.pop(entity, None)
        self._index()

    def _index(self) -> None:
        """The quotas by the address connections arrive with (a name's once it is looked up)."""
        self._default = None
        self._by_address = {}
        for e, values in self._quotas.items():
            rate = values.get(CONNECTION_CREATION_RATE)
            if rate is None:
                continue
            if e.ip is None:
                self._default = rate
            elif (address := self._names.address(e.ip)) is not None:
                self._by_address[address] = rate

    @property
    def stored(self) -> bool:
        """Whether quotas can be written (a door without a readable security topic enforces none)."""
        return self._store is not None

    def described(self) -> dict[QuotaEntity, dict[str, float]]:
        """Every entity's quotas, as DescribeClientQuotas lists them."""
        return {e: dict(v) for e, v in self._quotas.items()}

    async def write(self, entity: QuotaEntity, quotas: dict[str, float]) -> None:
        """Store an entity's quotas (none: forget it); every door applies them. SecurityStoreError when the
        cluster does not take it."""
        assert self._store is not None, "quotas are stored in the security store"
        value = json.dumps(quotas, sort_keys=True).encode() if quotas else None
        await self._store.write(QUOTA_KIND, entity.store_name, value)

    def quota_for(self, address: str) -> float | None:
        return self._by_address.get(address, self._default)

    def throttle_ms(self, host: str, now_ms: int) -> int:
        """Record a new connection from `host`; the milliseconds to hold it unread before closing it when
        its IP is over its quota (the connection is then not counted), else 0."""
        if not self._by_address and self._default is None:
            return 0
        try:
            address = str(ipaddress.ip_address(host))
        except ValueError:
            return 0
        quota = self.quota_for(address)
        if quota is None:
            return 0
        rate = self._rates.get(address)
        if rate is None:
            if len(self._rates) >= MAX_TRACKED_ADDRESSES:  # Kafka expires an IP's sensor after an idle hour
                self._rates = {a: r for a, r in self._rates.items() if r.rate(now_ms) > 0}
            rate = self._rates[address] = SampledRate()
        rate.record(1.0, now_ms)
        observed = rate.rate(now_ms)
        if observed <= quota:
            return 0
        rate.record(-1.0, now_ms)  # "unrecord the connection since we won't accept the connection"
        throttle = round((observed - quota) / quota * rate.window_size_ms(now_ms))
        return min(throttle, MAX_THROTTLE_MS)
