"""Bounded steps of a front door's stop (`FrontDoor.stop`, `DoorMembership.leave`): each step gets its own
time; a step still running then is cancelled (a coroutine) or abandoned (a blocking call), with one warning
naming it, and the stop goes on. A step that fails is logged the same way and the stop goes on too.

A blocking step (a Kafka client's flush and close) runs on a daemon thread of its own, not in the loop's
default executor: the interpreter joins the default executor's threads at exit, so a close abandoned there
would still hold the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

log = logging.getLogger("gateway.front_door")


@dataclass(frozen=True)
class StopBounds:
    """How long each step of a door's stop may take (seconds)."""

    # Closed connections' requests still waiting for the gateway's answer (which could no longer be written)
    # end within this; then they are cancelled and given as long again.
    connections_s: float = 2.0
    # The door's Kafka clients (ingress bridge, groups and security stores, its doors-topic registration),
    # flushed and closed side by side.
    kafka_s: float = 10.0
    # The event loop's thread, once the steps are done.
    loop_s: float = 5.0
    # What `stop()` allows the steps beyond their own bounds (the loop's scheduling) before it stops waiting.
    margin_s: float = 1.0

    @property
    def steps_s(self) -> float:
        return 2 * self.connections_s + self.kafka_s

    @property
    def total_s(self) -> float:
        """The longest `FrontDoor.stop` takes."""
        return self.steps_s + self.margin_s + self.loop_s


async def blocking_step(what: str, step: Callable[[], object], timeout_s: float) -> bool:
    """Run the blocking `step` on a daemon thread and wait up to `timeout_s` for it: True when it finished,
    False when it failed or was abandoned (one warning either way). Call on the loop's thread."""
    loop = asyncio.get_running_loop()
    finished: asyncio.Future[BaseException | None] = loop.create_future()

    def run() -> None:
        outcome: BaseException | None = None
        try:
            step()
        except BaseException as e:  # noqa: BLE001 - reported on the loop, whatever it is
            outcome = e
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits for it any more
            loop.call_soon_threadsafe(_settle, finished, outcome)

    threading.Thread(target=run, name=f"front-door-stop: {what}", daemon=True).start()
    # asyncio.wait leaves the future alone at the timeout: the thread cannot be cancelled, only abandoned
    await asyncio.wait({finished}, timeout=timeout_s)
    if not finished.done():
        log.warning("front door: %s did not finish within %.1f s; abandoned (it ends with the process)", what,
                    timeout_s)
        return False
    if (error := finished.result()) is not None:
        log.warning("front door: %s failed: %s: %s", what, type(error).__name__, error)
        return False
    return True


async def async_step(what: str, step: Awaitable[object], timeout_s: float) -> bool:
    """Await `step` up to `timeout_s`, cancelling it then: True when it finished, False when it failed or was
    cancelled (one warning either way). Not `asyncio.wait_for`, which waits on after the timeout for a step
    that swallows its cancellation."""
    task = asyncio.ensure_future(step)
    try:
        await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not task.done():
        task.cancel()
        log.warning("front door: %s did not finish within %.1f s; cancelled", what, timeout_s)
        return False
    if task.cancelled():
        log.warning("front door: %s was cancelled", what)
        return False
    if (error := task.exception()) is not None:
        log.warning("front door: %s failed: %s: %s", what, type(error).__name__, error)
        return False
    return True


def _settle(finished: asyncio.Future[BaseException | None], outcome: BaseException | None) -> None:
    if not finished.done():
        finished.set_result(outcome)
