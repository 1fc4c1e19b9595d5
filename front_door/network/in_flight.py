"""The bytes a connection's requests hold while they are in flight, bounded.

A produce request keeps its batches (kio's copy out of the frame) until its answer is built — about one
micro-batch — and librdkafka holds a second copy until the ingress broker has it. With several requests
in flight per connection (idempotent producers pipeline up to 5, librdkafka's others up to a million; the front
door reads ahead up to
`processor.MAX_IN_FLIGHT_PER_CONNECTION`), requests of up to `front_door_max_request_bytes` each could hold
gigabytes. So a connection reads its next request only once that request's size fits beside those in
flight within `front_door_max_request_bytes`, or when nothing is in flight: one largest request at a
time, and any number of small ones up to the count bound. (A Kafka broker reads one request per
connection at a time; its `queued.max.request.bytes` bounds them across connections.) The size is known
from the 4-byte size field, so a frame that does not fit is not read off the socket yet.
"""

from __future__ import annotations

import asyncio
from typing import Any


class InFlightBytes:
    """Per connection, on the front door's loop: `acquire` before reading a frame, release when its
    handler is done."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._released = asyncio.Event()

    async def acquire(self, size: int) -> None:
        """Wait until `size` more bytes fit (always when nothing is held: a request as large as the limit
        gets through alone)."""
        while self.held and self.held + size > self.limit:
            self._released.clear()
            await self._released.wait()
        self.held += size

    def release(self, size: int) -> None:
        self.held -= size
        self._released.set()

    def release_when_done(self, task: asyncio.Task[Any], size: int) -> None:
        task.add_done_callback(lambda _task: self.release(size))
