"""A connection's produce requests hand their batches to the ingress topic in the order they were read.

A Kafka broker reads one request of a connection at a time (`SocketServer` mutes the channel until the response
is sent), so an idempotent producer's pipelined requests reach the log in the order it sent them. The front door
reads ahead; a produce hands its batches on before the next request is read, unless it waits first — a
transaction version 2 producer's partitions are added to its transaction at the coordinator (KIP-890) — and a
request read meanwhile must not overtake it: its batches would reach the stage before the ones they follow
(OUT_OF_ORDER_SEQUENCE_NUMBER). Each produce takes a turn when it starts, in the order requests are read, and
waits for the turn before it only when that one has not handed its batches on yet.
"""

from __future__ import annotations

import asyncio


class Turn:
    """One produce's place in its connection's order."""

    def __init__(self, previous: asyncio.Future[None] | None, mine: asyncio.Future[None]) -> None:
        self._previous, self._mine = previous, mine

    async def wait(self) -> None:
        """Until the produce before this one has handed its batches on (at once when it has)."""
        if self._previous is not None and not self._previous.done():
            # shielded: a cancelled wait (the connection closing) must not mark the turn before as done
            await asyncio.shield(self._previous)

    def done(self) -> None:
        """This produce's batches are handed on (or it ended without any): the next one may go once every
        produce before it has too (one cancelled while it waited lets nobody overtake the ones before it)."""
        if self._previous is None or self._previous.done():
            self._release()
        else:
            self._previous.add_done_callback(lambda _: self._release())

    def _release(self) -> None:
        if not self._mine.done():
            self._mine.set_result(None)


class IngressOrder:
    """A connection's order of produce requests; `take` on the door's loop as each request's handler starts."""

    def __init__(self) -> None:
        self._last: asyncio.Future[None] | None = None

    def take(self) -> Turn:
        mine = asyncio.get_running_loop().create_future()
        turn, self._last = Turn(self._last, mine), mine
        return turn
