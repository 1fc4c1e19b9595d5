"""The front door's listener: an asyncio server on its own thread in the gateway's driver.

Per connection, requests are read in order and each is handled as its own task, so a client's pipelined
produce requests (librdkafka and the Java client keep up to 5 in flight) all wait for the gateway at the
same time; responses are written in request order, as Kafka guarantees. A produce request hands its
batches to the ingress topic before the next request is read, so a partition's batches keep their order.

A connection that sends something unreadable (a bad size, an unknown API or version, bytes that do not
parse) is closed, as a Kafka broker closes it; nothing else is affected. A handler that fails closes only
its own connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.index import schema_name_map
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map

from front_door import api_versions, fetch, init_producer_id, list_offsets, metadata, produce, unsupported
from front_door.api_keys import ApiKey
from front_door.api_versions import ADVERTISED
from front_door.context import AppendSignal, BrokerAddress, Context
from front_door.in_flight import InFlightBytes
from front_door.ingress_bridge import IngressBridge
from front_door.metrics import FrontDoorMetrics
from front_door.producer_id_manager import ProducerIdManager
from front_door.wire import (
    DEFAULT_MAX_REQUEST_BYTES,
    SIZE,
    BadRequestError,
    CloseConnection,
    Request,
    UnsupportedApiError,
    encode_response,
    frame_size,
    parse_request,
)
from sinks.metrics.server import parse_address
from validators.topic_config import TopicRegistry

log = logging.getLogger("gateway.front_door")

Handler = Callable[[Context, Request], Awaitable[Any]]
HANDLERS: dict[int, Handler] = {
    **dict.fromkeys(unsupported.REFUSED_APIS, unsupported.handle),
    ApiKey.PRODUCE: produce.handle,
    ApiKey.FETCH: fetch.handle,
    ApiKey.LIST_OFFSETS: list_offsets.handle,
    ApiKey.METADATA: metadata.handle,
    ApiKey.API_VERSIONS: api_versions.handle,
    ApiKey.INIT_PRODUCER_ID: init_producer_id.handle,
}


def _kio_versions(name: str) -> tuple[int, int]:
    versions = sorted(schema_name_map[name])
    return versions[0], versions[-1]


# What is read: the advertised APIs, and the refused ones in every version kio knows (to answer them).
READABLE: dict[int, tuple[int, int]] = {
    **{key: _kio_versions(name) for key, name in unsupported.REFUSED_APIS.items()},
    **ADVERTISED,
}
# Requests a connection may have in flight before the front door stops reading from it; their bytes are
# bounded too, by max_request_bytes per connection (front_door/in_flight.py).
MAX_IN_FLIGHT_PER_CONNECTION = 100


def api_name(api_key: int) -> str:
    return api_key_map.get(api_key, "unknown") if api_key in READABLE else "unknown"


@dataclass(frozen=True)
class FrontDoorSettings:
    listen: str  # host:port; port 0 picks a free one
    advertised: str | None  # host:port clients connect to; None: the bound address
    bootstrap_servers: str
    ingress_topic: str
    response_topic: str
    segments_root: Path
    publish_timeout_ms: int
    ingress_max_message_bytes: int
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES


class FrontDoor:
    """`start()` binds and returns the address clients use; `stop()` closes every connection."""

    def __init__(self, settings: FrontDoorSettings, registry: Callable[[], TopicRegistry],
                 metrics: FrontDoorMetrics) -> None:
        self.settings = settings
        self._registry = registry
        self.metrics = metrics
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="front-door", daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.context: Context | None = None
        self._bridge: IngressBridge | None = None
        self.address: BrokerAddress | None = None

    def start(self) -> BrokerAddress:
        host, port = parse_address(self.settings.listen, "front_door_address")
        self._thread.start()
        try:
            return asyncio.run_coroutine_threadsafe(self._start(host, port), self._loop).result(timeout=120)
        except BaseException:
            self.stop()
            raise

    async def _start(self, host: str, port: int) -> BrokerAddress:
        s = self.settings
        appended = AppendSignal()
        self._bridge = bridge = IngressBridge(
            s.bootstrap_servers, s.ingress_topic, s.response_topic, publish_timeout_ms=s.publish_timeout_ms,
            max_message_bytes=s.ingress_max_message_bytes, on_response=appended.notify,
            on_phases=self.metrics.produce_phases)
        # Bound first (a taken port fails before anything else starts), served once the bridge is up.
        self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True, start_serving=False)
        await asyncio.to_thread(bridge.start, self._loop)
        bound_host, bound_port = self._server.sockets[0].getsockname()[:2]
        if s.advertised:
            adv_host, adv_port = parse_address(s.advertised, "front_door_advertised_address")
        else:
            adv_host = bound_host if bound_host not in ("0.0.0.0", "::") else socket.getfqdn()
            adv_port = bound_port
        self.address = BrokerAddress(adv_host, adv_port)
        self.context = Context(self.address, self._registry, bridge, s.segments_root,
                               ProducerIdManager(s.segments_root), self.metrics, appended)
        await self._server.start_serving()
        return BrokerAddress(bound_host, bound_port)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):  # each connection's reader then ends, as on a client's close
            writer.close()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._bridge is not None:
            await asyncio.to_thread(self._bridge.stop)

    # ------------------------------------------------------------------ connections

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self._writers.add(writer)
        self.metrics.connections.inc()
        self.metrics.connections_accepted.inc()
        peer = writer.get_extra_info("peername")
        responses: asyncio.Queue[asyncio.Task[bytes | CloseConnection | None] | None] = asyncio.Queue(MAX_IN_FLIGHT_PER_CONNECTION)
        sender = asyncio.create_task(self._send_in_order(responses, writer, peer))
        try:
            await self._read_requests(reader, responses, peer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away, possibly mid-frame
        except asyncio.CancelledError:
            sender.cancel()
            raise
        finally:
            try:
                responses.put_nowait(None)  # the sender finishes what was asked, then stops
            except asyncio.QueueFull:
                sender.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await sender
            writer.close()
            self.metrics.connections.dec()
            self._connections.discard(task)
            self._writers.discard(writer)

    async def _read_requests(self, reader: asyncio.StreamReader,
                             responses: asyncio.Queue[asyncio.Task[bytes | CloseConnection | None] | None], peer: Any) -> None:
        assert self.context is not None
        in_flight = InFlightBytes(self.settings.max_request_bytes)
        while True:
            prefix = await reader.readexactly(SIZE.size)
            try:
                size = frame_size(prefix, self.settings.max_request_bytes)
                await in_flight.acquire(size)
                # the frame is dropped once parsed: kio copies out what the request holds
                request = parse_request(await reader.readexactly(size), READABLE)
            except UnsupportedApiError as e:
                in_flight.release(size)
                self.metrics.request(api_name(e.api_key), "UNSUPPORTED_VERSION")
                if e.api_key == ApiKey.API_VERSIONS:  # KIP-511: answer in v0 so the client can downgrade
                    body = api_versions.api_versions_body(0, ErrorCode.unsupported_version)
                    await responses.put(_done(encode_response(ApiKey.API_VERSIONS, 0, e.correlation_id, body)))
                    continue
                log.info("closing connection from %s: %s", peer, e)
                return
            except BadRequestError as e:
                self.metrics.request("unknown", "INVALID_REQUEST")
                log.info("closing connection from %s: %s", peer, e)
                return
            # Started now: a produce hands its batches to the ingress topic before the next request is read.
            task = asyncio.create_task(self._handle(request))
            in_flight.release_when_done(task, size)
            await asyncio.sleep(0)
            await responses.put(task)

    async def _handle(self, request: Request) -> bytes | CloseConnection | None:
        assert self.context is not None
        name = api_name(request.api_key)
        body = await HANDLERS[request.api_key](self.context, request)
        if body is None or isinstance(body, CloseConnection):  # acks=0 produce: Kafka sends nothing
            self.metrics.request(name)
            return body
        code = getattr(body, "error_code", 0)
        self.metrics.request(name, _error_name(int(code)))
        return encode_response(request.api_key, request.api_version, request.correlation_id, body)

    async def _send_in_order(self, responses: asyncio.Queue[asyncio.Task[bytes | CloseConnection | None] | None],
                             writer: asyncio.StreamWriter, peer: Any) -> None:
        while (task := await responses.get()) is not None:
            try:
                data = await task
            except Exception:
                log.exception("request from %s failed; closing the connection", peer)
                data = CloseConnection("the request failed")
            if isinstance(data, CloseConnection):
                log.info("closing connection from %s: %s", peer, data.reason)
                writer.close()
                while not responses.empty():  # what was still queued is not answered on a closed connection
                    if (queued := responses.get_nowait()) is not None:
                        queued.cancel()
                return
            if data is not None:
                writer.write(data)
                await writer.drain()


def _done(data: bytes) -> asyncio.Task[bytes | CloseConnection | None]:
    async def ready() -> bytes | CloseConnection | None:
        return data

    return asyncio.ensure_future(ready())


def _error_name(code: int) -> str:
    try:
        return "NONE" if code == 0 else ErrorCode(code).name.upper()
    except ValueError:
        return "UNKNOWN_SERVER_ERROR"
