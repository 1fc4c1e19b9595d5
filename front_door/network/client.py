"""One door's connection to another door's node, for the requests Kafka's brokers send each other (Kafka's
`NetworkClient` on the inter-broker listener): the request framed as a client frames it (`wire.py` reads it),
one request at a time, the connection kept for the next and opened again after a failure. PLAINTEXT only: the
doors call each other on a listener without authentication (`network/add_partitions_to_txn_manager.py`).
"""

from __future__ import annotations

import asyncio
import io
from typing import Any

from kio.serial import entity_reader, entity_writer

from front_door.network.wire import SIZE, request_schema, response_schema

CONNECT_TIMEOUT_S = 5.0


class DoorConnectionError(OSError):
    """The other door could not be reached, or its answer could not be read."""


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str, body: Any) -> bytes:
    """One request frame, size field included (request header v1, or v2 for a flexible version)."""
    schema = request_schema(api_key, api_version)
    header_schema = schema.__header_schema__
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    entity_writer(header_schema)(buffer, header_schema(request_api_key=api_key, request_api_version=api_version,
                                                       correlation_id=correlation_id, client_id=client_id))
    entity_writer(schema)(buffer, body)
    data = buffer.getbuffer()
    SIZE.pack_into(data, 0, len(data) - SIZE.size)
    return bytes(data)


def decode_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, body) of one response frame without its size field."""
    schema = response_schema(api_key, api_version)
    header, used = entity_reader(schema.__header_schema__)(frame, 0)
    body, _ = entity_reader(schema)(frame, used)
    return header.correlation_id, body


class DoorConnection:
    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._lock = asyncio.Lock()
        self._correlation = 0

    async def send(self, api_key: int, api_version: int, body: Any, timeout_s: float) -> Any:
        """The response body; DoorConnectionError when the node cannot be reached or answers unreadably."""
        async with self._lock:
            try:
                return await asyncio.wait_for(self._exchange(api_key, api_version, body), timeout_s)
            except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as e:
                self._close()
                raise DoorConnectionError(f"node at {self.host}:{self.port}: {type(e).__name__}: {e}") from None

    async def _exchange(self, api_key: int, api_version: int, body: Any) -> Any:
        if self._streams is None:
            self._streams = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), CONNECT_TIMEOUT_S)
        reader, writer = self._streams
        self._correlation += 1
        writer.write(encode_request(api_key, api_version, self._correlation, self.client_id, body))
        await writer.drain()
        (size,) = SIZE.unpack(await reader.readexactly(SIZE.size))
        correlation_id, response = decode_response(api_key, api_version, await reader.readexactly(size))
        if correlation_id != self._correlation:
            raise ValueError(f"correlation id {correlation_id}, expected {self._correlation}")
        return response

    def _close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None

    def close(self) -> None:
        self._close()
