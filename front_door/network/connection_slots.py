"""The door's connection slots, as Kafka's `ConnectionQuotas` keeps them for the whole broker and for each
listener: `max.connections` and `max.connection.creation.rate` (KIP-402, KIP-612), and their per-listener
forms `listener.name.<listener>.max.connections` and `listener.name.<listener>.max.connection.creation.rate`.

These never refuse a connection. When the door or a listener holds its maximum, or a new connection takes the
door's or the listener's creation rate over its quota, Kafka's acceptor waits with the accepted connection in
hand (`waitForConnectionSlot`) until the throttle time is over and a slot is free; the connections behind it
wait in the listen backlog. The rates are Kafka's `Rate` over 11 samples of 1 s (`SampledRate`); unlike an
IP's quota, a connection over them stays recorded, and its throttle time is bounded by one quota window
(`recordConnectionAndGetThrottleTimeMs`, `QuotaUtils.boundedThrottleTime`). Without any setting there is no
limit (Kafka's default `Int.MaxValue`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from front_door.network.connection_quotas import MAX_THROTTLE_MS, SampledRate

MAX_CONNECTIONS = "max.connections"
MAX_CONNECTION_CREATION_RATE = "max.connection.creation.rate"
SLOT_SETTINGS = (MAX_CONNECTIONS, MAX_CONNECTION_CREATION_RATE)
# Kafka's listener-prefixed form: the listener's name in lower case (ListenerName.configPrefix)
LISTENER_SETTING = re.compile(r"listener\.name\.([^.]+)\.(max\.connections|max\.connection\.creation\.rate)")


@dataclass(frozen=True)
class SlotLimits:
    """The maxima, None where there is none; per listener by the listener's name as configured."""

    max_connections: int | None = None
    max_connection_creation_rate: int | None = None
    listener_max_connections: Mapping[str, int] = field(default_factory=dict)
    listener_max_connection_creation_rate: Mapping[str, int] = field(default_factory=dict)

    @property
    def limited(self) -> bool:
        return (self.max_connections is not None or self.max_connection_creation_rate is not None
                or bool(self.listener_max_connections) or bool(self.listener_max_connection_creation_rate))


def _throttle_ms(rate: SampledRate, quota: int, now_ms: int) -> int:
    """`recordAndGetThrottleTimeMs`: the connection recorded; how long it waits when that takes the rate over
    the quota."""
    rate.record(1.0, now_ms)
    observed = rate.rate(now_ms)
    if observed <= quota:
        return 0
    if quota == 0:
        return MAX_THROTTLE_MS
    return min(round((observed - quota) / quota * rate.window_size_ms(now_ms)), MAX_THROTTLE_MS)


class ConnectionSlots:
    """Open connections by listener and in all, and the creation rates, shared by every acceptor of the door
    (on its loop). An acceptor asks `throttle_ms` once per accepted connection, waits while `available` is
    false (`when_released` calls it back), then `take`s a slot that `release` returns."""

    def __init__(self, limits: SlotLimits | None = None) -> None:
        self.limits = limits or SlotLimits()
        self._total = 0
        self._by_listener: dict[str, int] = {}
        self._broker_rate = SampledRate()
        self._listener_rates: dict[str, SampledRate] = {}
        self._waiting: list[Callable[[], None]] = []

    @property
    def limited(self) -> bool:
        return self.limits.limited

    def reconfigure(self, limits: SlotLimits) -> None:
        """New maxima (a dynamic broker config changed): the open connections stay, and an acceptor waiting
        for a slot looks again (a raised maximum may have one for it)."""
        self.limits = limits
        self._wake()

    def throttle_ms(self, listener: str, now_ms: int) -> int:
        """Record a new connection on `listener` in the door's and the listener's rates; the longer of their
        throttle times (0: none)."""
        wait = 0
        if (quota := self.limits.max_connection_creation_rate) is not None:
            wait = _throttle_ms(self._broker_rate, quota, now_ms)
        if (quota := self.limits.listener_max_connection_creation_rate.get(listener)) is not None:
            rate = self._listener_rates.setdefault(listener, SampledRate())
            wait = max(wait, _throttle_ms(rate, quota, now_ms))
        return wait

    def available(self, listener: str) -> bool:
        """`connectionSlotAvailable`: the listener and the door both below their maxima."""
        maximum = self.limits.listener_max_connections.get(listener)
        if maximum is not None and self._by_listener.get(listener, 0) >= maximum:
            return False
        return self.limits.max_connections is None or self._total < self.limits.max_connections

    def take(self, listener: str) -> None:
        self._total += 1
        self._by_listener[listener] = self._by_listener.get(listener, 0) + 1

    def release(self, listener: str) -> None:
        self._total -= 1
        self._by_listener[listener] -= 1
        self._wake()

    def _wake(self) -> None:
        waiting, self._waiting = self._waiting, []
        for wake in waiting:
            wake()

    def when_released(self, wake: Callable[[], None]) -> None:
        """Call `wake` once, at the next release."""
        self._waiting.append(wake)

    def open(self, listener: str | None = None) -> int:
        return self._total if listener is None else self._by_listener.get(listener, 0)
