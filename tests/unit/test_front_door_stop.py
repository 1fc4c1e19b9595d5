"""The front door's stop is bounded step by step (`front_door/stopping.py`): a connection whose requests wait for
answers that never come, a Kafka client whose close hangs or fails, a doors-topic leave that never ends, even an
event loop held up by something else: `stop()` returns and does not raise, with a warning naming each step it
cancelled or abandoned. No Kafka: the door's loop runs alone, the hanging parts are injected, and what they wait
for is released by the test once the stop has returned."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from front_door.metrics import FrontDoorMetrics
from front_door.network.principal import ANONYMOUS
from front_door.network.wire import Request
from front_door.processor import Connection, Processor, _cancel_queued
from front_door.security.listeners import parse_listeners
from front_door.server import FrontDoor
from front_door.settings import FrontDoorSettings
from front_door.stopping import StopBounds
from kafka_cluster.security import KafkaCluster
from tests.kafka_wire import encode_produce_request
from validators.topic_config import TopicRegistry

REGISTRY = TopicRegistry.from_json({"topics": {"orders": {"partitions": 3, "configs": {}}}})
# Short bounds: each hanging step is given up on quickly (how long they are is the product's, not the test's).
BOUNDS = StopBounds(connections_s=0.2, kafka_s=0.2, loop_s=5.0, margin_s=1.0)


class HangingClient:
    """A Kafka client whose close does not return until released (a flush the cluster never acknowledges)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()

    def close(self) -> None:
        self.entered.set()
        self.released.wait()

    stop = close  # the ingress bridge's name for it


class FailingClient:
    def close(self) -> None:
        raise RuntimeError("flush failed")


class ClosingClient:
    def __init__(self) -> None:
        self.closed = threading.Event()

    def close(self) -> None:
        self.closed.set()


class NeverLeaving:
    """A doors-topic membership whose leave never ends (a delete the cluster never acknowledges)."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()

    async def leave(self) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


@pytest.fixture
def door(tmp_path: Path) -> Iterator[FrontDoor]:
    settings = FrontDoorSettings(listen="127.0.0.1:0", advertised=None, cluster=KafkaCluster("127.0.0.1:1"),
                                 ingress_topic="i", response_topic="r", segments_root=tmp_path,
                                 publish_timeout_ms=1000, ingress_max_message_bytes=1 << 20)
    door = FrontDoor(settings, lambda: REGISTRY, FrontDoorMetrics())
    door.stop_bounds = BOUNDS
    door._thread.start()  # the loop alone: nothing `start()` connects to is needed to stop it
    yield door
    if door._thread.is_alive():  # a test that failed before its stop
        door._loop.call_soon_threadsafe(door._loop.stop)
        door._thread.join(5)


def _waiting_task(door: FrontDoor, cancelled: threading.Event, *, connection: bool) -> None:
    """A task on the door's loop waiting for the gateway's answer to a produce, which never comes: a
    connection's (`connection`), or a handler's whose connection has gone."""

    async def waiting() -> None:
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def start() -> None:
        task = asyncio.create_task(waiting())
        if connection:
            door._connections.add(task)

    asyncio.run_coroutine_threadsafe(start(), door._loop).result(5)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "gateway.front_door" and r.levelno == logging.WARNING]


def test_every_step_that_hangs_or_fails_is_given_up_on_with_a_warning_and_the_stop_goes_on(
        door: FrontDoor, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="gateway.front_door")
    cancelled = threading.Event()
    _waiting_task(door, cancelled, connection=True)
    bridge, security, membership = HangingClient(), ClosingClient(), NeverLeaving()
    door._bridge = bridge  # type: ignore[assignment]
    door._group_store = FailingClient()  # type: ignore[assignment]
    door._security_store = security  # type: ignore[assignment]
    door._membership = membership  # type: ignore[assignment]
    try:
        door.stop()  # returns, and does not raise
        assert not door._thread.is_alive() and door._loop.is_closed()
        assert cancelled.is_set() and membership.cancelled.is_set()
        assert bridge.entered.is_set() and security.closed.is_set()  # each client was closed, whatever the others did
        said = _warnings(caplog)
        assert "front door: 1 closed connection(s) still had requests waiting for answers after 0.2 s; cancelled" in said
        assert "front door: leaving the doors topic did not finish within 0.2 s; cancelled" in said
        assert ("front door: closing the ingress bridge (ingress producer, response reader) did not finish within "
                "0.2 s; abandoned (it ends with the process)") in said
        assert "front door: closing the groups topic's clients failed: RuntimeError: flush failed" in said
        assert len(said) == 4  # one line each
    finally:
        bridge.released.set()


def test_a_door_whose_loop_is_held_up_stops_without_raising(door: FrontDoor, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="gateway.front_door")
    door.stop_bounds = StopBounds(connections_s=0.1, kafka_s=0.1, loop_s=0.1, margin_s=0.1)
    held, released = threading.Event(), threading.Event()

    def hold() -> None:  # a callback that does not give the loop back
        held.set()
        released.wait()

    door._loop.call_soon_threadsafe(hold)
    assert held.wait(5)
    try:
        door.stop()  # returns, and does not raise
        said = _warnings(caplog)
        assert "front door: stopping did not finish within 0.4 s (its event loop is held up); stopping the loop all " \
               "the same" in said
        assert "front door: its event loop did not stop within 0.1 s; left to end with the process" in said
    finally:
        released.set()
    door._thread.join(5)  # the stop asked the loop to stop: once free, it does
    assert not door._thread.is_alive()
    door._loop.close()


def test_a_door_never_started_stops_at_once(tmp_path: Path) -> None:
    settings = FrontDoorSettings(listen="127.0.0.1:0", advertised=None, cluster=KafkaCluster("127.0.0.1:1"),
                                 ingress_topic="i", response_topic="r", segments_root=tmp_path,
                                 publish_timeout_ms=1000, ingress_max_message_bytes=1 << 20)
    FrontDoor(settings, lambda: REGISTRY, FrontDoorMetrics()).stop()


def test_a_request_started_while_its_connection_waits_for_room_is_cancelled_with_the_connection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection at its most requests in flight has started the next request's handler and waits to queue
    it; closing the connection then (the door's stop) cancels that handler too, so no task of the door is left
    pending when its loop closes (asyncio: "Task was destroyed but it is pending!")."""
    started: list[int] = []
    cancelled: list[int] = []

    async def unanswered(_self: Processor, _context: object, request: Request) -> None:
        started.append(request.correlation_id)
        try:
            await asyncio.get_running_loop().create_future()  # the gateway's answer, which does not come
        except asyncio.CancelledError:
            cancelled.append(request.correlation_id)
            raise

    monkeypatch.setattr(Processor, "_handle", unanswered)
    settings = FrontDoorSettings(listen="127.0.0.1:0", advertised=None, cluster=KafkaCluster("127.0.0.1:1"),
                                 ingress_topic="i", response_topic="r", segments_root=tmp_path,
                                 publish_timeout_ms=1000, ingress_max_message_bytes=1 << 20)
    processor = Processor(settings, FrontDoorMetrics(), {}, set(), set())
    connection = Connection(parse_listeners("PLAINTEXT://127.0.0.1:0")[0], 1, ("127.0.0.1", 1), "/127.0.0.1",
                            ANONYMOUS, None, context=None)  # type: ignore[arg-type]  # unused by the handler above

    async def serve() -> tuple[list[int], list[asyncio.Task[object]]]:
        reader = asyncio.StreamReader()
        for correlation_id in range(3):
            reader.feed_data(encode_produce_request(correlation_id, "orders", 0, b""))
        in_flight: asyncio.Queue[Any] = asyncio.Queue(2)  # room for two requests in flight
        reading = asyncio.create_task(processor._read_requests(connection, reader, in_flight))
        while len(started) < 3:  # the third started; its reader waits for room in the queue
            await asyncio.sleep(0)
        assert in_flight.full() and not reading.done()
        reading.cancel()  # the door closes the connection
        with contextlib.suppress(asyncio.CancelledError):
            await reading
        _cancel_queued(in_flight)  # what the connection's sender does with the queued ones
        await asyncio.sleep(0)
        return sorted(cancelled), [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    ended, left = asyncio.run(serve())  # (asyncio.run cancels what is left when it returns: seen before that)
    assert started == [0, 1, 2]
    assert ended == [0, 1, 2]  # the one the reader had not queued yet as well
    assert left == []


def test_whatever_still_runs_on_the_loop_when_the_steps_are_done_is_cancelled(door: FrontDoor) -> None:
    cancelled = threading.Event()
    _waiting_task(door, cancelled, connection=False)
    door.stop()
    assert cancelled.is_set() and door._loop.is_closed()
