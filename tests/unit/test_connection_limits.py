"""max.connections.per.ip and its overrides, counted as Kafka's ConnectionQuotas counts them."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from front_door.network.connection_limits import (
    ConnectionLimitError,
    ConnectionsPerIp,
    NameLookups,
    parse_overrides,
)


def test_an_ip_is_admitted_up_to_its_maximum_and_a_release_frees_a_slot() -> None:
    limits = ConnectionsPerIp(2)
    assert [limits.admit("10.0.0.1") for _ in range(3)] == [None, None, 2]
    assert limits.open("10.0.0.1") == 2  # the one closed at once is not counted
    assert limits.admit("10.0.0.2") is None  # each IP its own count
    limits.release("10.0.0.1")
    assert limits.admit("10.0.0.1") is None
    assert limits.admit("10.0.0.1") == 2


def test_overrides_take_names_and_addresses_and_zero_shuts_an_ip_out() -> None:
    limits = ConnectionsPerIp(None, parse_overrides("localhost:1, 10.0.0.9:0,[::1]:3"))
    assert limits.maximum("127.0.0.1") == 1  # localhost resolved once, as InetAddress.getByName
    assert limits.maximum("::1") == 3
    assert limits.admit("10.0.0.9") == 0
    assert limits.maximum("10.0.0.8") is None  # no default: no limit
    assert all(limits.admit("10.0.0.8") is None for _ in range(1000))


def test_without_any_maximum_every_connection_is_admitted_and_counted_for_a_maximum_set_later() -> None:
    limits = ConnectionsPerIp()
    assert [limits.admit("10.0.0.1") for _ in range(3)] == [None] * 3
    limits.reconfigure(2, None)  # a dynamic max.connections.per.ip: the three open stay open
    assert limits.open("10.0.0.1") == 3 and limits.admit("10.0.0.1") == 2
    limits.release("10.0.0.1")
    limits.release("10.0.0.1")
    assert limits.admit("10.0.0.1") is None  # back under the new maximum


@pytest.mark.parametrize("default,overrides,match", [
    (0, None, "can be set to zero only if max.connections.per.ip.overrides property is set"),
    (None, {"no-such-host.invalid": 1}, "contains invalid addresses : no-such-host.invalid"),
])
def test_kafkas_checks_of_the_settings(default: int | None, overrides: dict[str, int] | None, match: str) -> None:
    with pytest.raises(ConnectionLimitError, match=match):
        ConnectionsPerIp(default, overrides)


def test_an_override_without_a_count_is_refused() -> None:
    with pytest.raises(ConnectionLimitError, match="is not host:count"):
        parse_overrides("10.0.0.1:many")


def test_a_name_is_looked_up_off_the_loop_and_applied_when_its_lookup_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow resolver holds a worker thread, not the door's loop: the loop is answered at once, and the name's
    maximum applies when its lookup has ended."""
    released = threading.Event()

    def slow_resolver(host: str) -> str:
        released.wait(30)
        return "10.9.8.7"

    monkeypatch.setattr(socket, "gethostbyname", slow_resolver)

    async def main() -> tuple[int | None, int | None]:
        limits = ConnectionsPerIp()
        looked_up = asyncio.Event()
        names = NameLookups(on_resolved=looked_up.set)
        limits.reconfigure(None, {"batch-host.example": 1, "10.0.0.1": 2}, names)
        assert names.pending("batch-host.example") and limits.maximum("10.0.0.1") == 2
        before = limits.maximum("10.9.8.7")  # not yet known: left out
        released.set()
        await looked_up.wait()
        limits.reconfigure(None, {"batch-host.example": 1, "10.0.0.1": 2}, names)  # what on_resolved does
        return before, limits.maximum("10.9.8.7")

    assert asyncio.run(main()) == (None, 1)


def test_without_a_running_loop_a_name_is_looked_up_there_and_then() -> None:
    assert NameLookups().address("localhost") == "127.0.0.1"
    assert NameLookups().address("no-such-host.invalid") is None
