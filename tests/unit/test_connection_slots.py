"""max.connections and max.connection.creation.rate, for the door and per listener, counted as Kafka's
ConnectionQuotas counts them; and the acceptor that waits for a slot instead of refusing a connection."""

from __future__ import annotations

import asyncio
import socket
import struct

from front_door.network.acceptor import Acceptor, bind
from front_door.network.connection_slots import ConnectionSlots, SlotLimits


def test_a_listener_and_the_door_each_hold_up_to_their_maximum_and_a_release_frees_a_slot() -> None:
    slots = ConnectionSlots(SlotLimits(max_connections=3, listener_max_connections={"INTERNAL": 1}))
    assert slots.available("INTERNAL")
    slots.take("INTERNAL")
    assert not slots.available("INTERNAL") and slots.available("PLAINTEXT")
    slots.take("PLAINTEXT")
    slots.take("PLAINTEXT")
    assert not slots.available("PLAINTEXT")  # the door's 3 in all
    woken: list[str] = []
    slots.when_released(lambda: woken.append("first"))
    slots.when_released(lambda: woken.append("second"))
    slots.release("INTERNAL")
    assert woken == ["first", "second"] and slots.open() == 2 and slots.open("INTERNAL") == 0
    assert slots.available("INTERNAL") and slots.available("PLAINTEXT")
    slots.release("PLAINTEXT")
    assert woken == ["first", "second"]  # each is called back once


def test_the_creation_rate_counts_a_window_of_ten_seconds_and_bounds_the_wait_by_one_window() -> None:
    """Kafka's Rate over 11 samples of 1 s: a burst counts over 10 s, so a rate of 2 lets 20 through at once;
    the 21st is 0.1 over, (2.1 - 2) / 2 * 10 s = 500 ms; the next ones wait one window (1 s) at most; and a
    connection over the rate stays recorded (unlike an IP's quota)."""
    slots = ConnectionSlots(SlotLimits(max_connection_creation_rate=2))
    now = 1_000_000
    assert [slots.throttle_ms("PLAINTEXT", now) for _ in range(20)] == [0] * 20
    assert slots.throttle_ms("PLAINTEXT", now) == 500
    assert slots.throttle_ms("PLAINTEXT", now) == 1000
    assert slots.throttle_ms("PLAINTEXT", now + 12_000) == 0  # the burst's samples expired


def test_the_longer_of_the_doors_and_the_listeners_throttle_times() -> None:
    slots = ConnectionSlots(SlotLimits(max_connection_creation_rate=100,
                                       listener_max_connection_creation_rate={"PLAINTEXT": 1}))
    now = 5_000
    assert [slots.throttle_ms("PLAINTEXT", now) for _ in range(10)] == [0] * 10
    assert slots.throttle_ms("PLAINTEXT", now) == 1000  # (1.1 - 1) / 1 * 10 s, bounded by one window
    assert slots.throttle_ms("SSL", now) == 0  # another listener: only the door's rate
    assert ConnectionSlots(SlotLimits(max_connection_creation_rate=0)).throttle_ms("PLAINTEXT", now) == 1000


def test_without_any_setting_nothing_is_limited() -> None:
    slots = ConnectionSlots()
    assert not slots.limited and slots.available("PLAINTEXT")
    assert slots.throttle_ms("PLAINTEXT", 0) == 0


API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 1) + b"t"


def test_the_acceptor_holds_a_connection_over_the_maximum_until_one_closes_and_refuses_none() -> None:
    """One slot: the second connection is accepted by the kernel but not served (its request is not read)
    until the first closes; then it is served, and the acceptor accepts again."""
    loop = asyncio.new_event_loop()
    served: list[int] = []
    blocked: list[float] = []
    release_first = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served.append(len(served) + 1)
        await reader.readexactly(4)
        writer.write(b"ok%02d" % len(served))
        await writer.drain()
        if len(served) == 1:
            await release_first.wait()
        writer.close()

    async def main() -> list[bytes]:
        slots = ConnectionSlots(SlotLimits(listener_max_connections={"PLAINTEXT": 1}))
        acceptor = Acceptor(loop, bind("127.0.0.1", 0), serve, None, lambda ip: 0, lambda: None,
                            listener="PLAINTEXT", slots=slots, on_blocked=blocked.append)
        acceptor.start()
        answers = []
        first = await asyncio.open_connection(*acceptor.address)
        first[1].write(API_VERSIONS_V0[:4])
        answers.append(await first[0].readexactly(4))
        second = await asyncio.open_connection(*acceptor.address)  # the kernel's backlog accepts it
        second[1].write(API_VERSIONS_V0[:4])
        acceptor._accept()  # connected: in the listen backlog, taken now if the loop has not yet
        assert acceptor.waiting_for_slot and served == [1] and slots.open() == 1 and not blocked
        release_first.set()  # the first connection ends: its slot goes to the second
        answers.append(await second[0].readexactly(4))
        assert served == [1, 2] and len(blocked) == 1
        for _, w in (first, second):
            w.close()
        acceptor.close()
        return answers

    try:
        assert loop.run_until_complete(main()) == [b"ok01", b"ok02"]
    finally:
        loop.close()


def test_a_closed_acceptor_closes_the_connection_it_waits_with() -> None:
    loop = asyncio.new_event_loop()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise AssertionError("nothing is served: the only slot is taken")

    async def main() -> bytes:
        slots = ConnectionSlots(SlotLimits(max_connections=0))
        acceptor = Acceptor(loop, bind("127.0.0.1", 0), serve, None, lambda ip: 0, lambda: None, slots=slots)
        acceptor.start()
        client = socket.create_connection(acceptor.address)
        client.setblocking(False)
        acceptor._accept()  # connected: in the listen backlog
        assert acceptor.waiting_for_slot
        acceptor.close()
        return await loop.sock_recv(client, 1)

    try:
        assert loop.run_until_complete(main()) == b""  # closed, nothing written
    finally:
        loop.close()


def test_a_raised_maximum_wakes_an_acceptor_waiting_for_a_slot() -> None:
    """A dynamic broker config changed: the acceptor waiting looks again."""
    slots = ConnectionSlots(SlotLimits(max_connections=0))
    woken: list[int] = []
    slots.when_released(lambda: woken.append(1))
    assert not slots.available("PLAINTEXT")
    slots.reconfigure(SlotLimits(max_connections=1))
    assert woken == [1] and slots.available("PLAINTEXT")
