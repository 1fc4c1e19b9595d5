"""A front-door connection from its first byte to its close, as Kafka's `SocketServer.Processor` and
`RequestChannel` carry it to `KafkaApis`: the connection's principal (an SSL client certificate's subject,
`security/ssl_principal.py`), its SASL exchange until it has logged in (`security/sasl_exchange.py`), then its
requests, each handed to the handler its API registered (`apis/registry.py`).

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
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from front_door.api_keys import ApiKey
from front_door.apis import api_versions, metadata
from front_door.apis.registry import HANDLERS, READABLE, api_name, before_authentication
from front_door.context import Context
from front_door.metrics import FrontDoorMetrics
from front_door.network.in_flight import InFlightBytes
from front_door.network.ingress_order import IngressOrder
from front_door.network.messages import error_name
from front_door.network.principal import ANONYMOUS, user
from front_door.network.wire import (
    SIZE,
    BadRequestError,
    CloseConnection,
    Request,
    UnsupportedApiError,
    encode_response,
    frame_size,
    parse_request,
)
from front_door.security.listeners import Listener
from front_door.security.sasl_exchange import (
    MIN_REAUTH_INTERVAL_S,
    REAUTHENTICATION_START,
    ExchangeRules,
    SaslExchange,
    Session,
)
from front_door.security.sasl_server import SaslConnection
from front_door.security.ssl_principal import PrincipalMappingError, distinguished_name, principal_name
from front_door.settings import FrontDoorSettings
from kafka_cluster.once_per_window import OncePerWindow
from kafka_cluster.security import SecurityProtocol

log = logging.getLogger("gateway.front_door")

# Requests a connection may have in flight before the front door stops reading from it; their bytes are
# bounded too, by max_request_bytes per connection (network/in_flight.py). A produce is answered after a
# micro-batch (~0.2-3 s), so a client pipelining small requests (librdkafka, linger 5 ms) has thousands in
# flight: capped at 100, 2 000 records/s over 4 partitions were 32-78 % delivered while sent, at 1 000 78-98 %.
# Spread over 1 000 partitions (a request per record), 1 000 held each micro-batch to ~2 000 rows and 34-36 %
# were delivered; 2 500 let micro-batches grow to 600-7 800 rows, each row cheaper: 45-57 %
# (docs/performance.md, "Scale").
MAX_IN_FLIGHT_PER_CONNECTION = 2500

Answer = asyncio.Task[bytes | CloseConnection | None]


@dataclass(kw_only=True)
class Connection(Session):
    """A connection's session and the context its requests are handled in (its listener's: Metadata gives
    that listener's addresses)."""

    context: Context


class Processor:
    """Serves each accepted connection (`serve`) until it or the door closes; the door closes what is
    in `connections` and `writers` when it stops."""

    def __init__(self, settings: FrontDoorSettings, metrics: FrontDoorMetrics, contexts: Mapping[str, Context],
                 connections: set[asyncio.Task[None]], writers: set[asyncio.StreamWriter]) -> None:
        self.settings = settings
        self.metrics = metrics
        self._contexts = contexts  # by listener name, filled when the door starts
        self._connections = connections
        self._writers = writers
        self._closes = OncePerWindow()  # connections closed for what they sent, by (client host, listener, why)
        self.sasl = SaslExchange(settings.security, metrics, ExchangeRules(
            READABLE, before_authentication(), self._api_versions, self._unsupported), self._closing)

    async def serve(self, listener: Listener, node_id: int, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self._writers.add(writer)
        connections = self.metrics.connected(node_id)
        try:
            connection = self._connection(listener, node_id, peer, writer)
            # Before authentication one request is answered at a time, written as it is answered: a failed
            # login costs no response queue and no sender task (a flood of them is many short connections).
            if connection is not None and (connection.sasl is None or await self.sasl.authenticate(
                    connection, reader, writer)):
                await self._serve_authenticated(connection, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass  # the client went away, possibly mid-frame
        finally:
            writer.close()
            connections.dec()
            self._connections.discard(task)
            self._writers.discard(writer)

    async def _serve_authenticated(self, connection: Connection, reader: asyncio.StreamReader,
                                   writer: asyncio.StreamWriter) -> None:
        """Requests read and started in order, several in flight; answered in order by a sender of their own."""
        responses: asyncio.Queue[Answer | None] = asyncio.Queue(MAX_IN_FLIGHT_PER_CONNECTION)
        sender = asyncio.create_task(self._send_in_order(responses, writer, connection.peer))
        try:
            await self._read_requests(connection, reader, responses)
        except asyncio.CancelledError:
            sender.cancel()  # and the request it awaits
            raise
        finally:
            try:
                responses.put_nowait(None)  # the sender finishes what was asked, then stops
            except asyncio.QueueFull:
                sender.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await sender
            _cancel_queued(responses)  # what a cancelled sender left: nobody would answer it

    def _connection(self, listener: Listener, node_id: int, peer: Any, writer: asyncio.StreamWriter) -> Connection | None:
        """What a new connection knows of itself; None when it must close (a certificate no mapping rule takes)."""
        context = self._contexts[listener.name]
        principal = ANONYMOUS
        if listener.protocol is SecurityProtocol.SSL:  # SASL_SSL: the principal is SASL's, as in Kafka
            tls = writer.get_extra_info("ssl_object")
            der = tls.getpeercert(binary_form=True) if tls is not None else None
            if der:
                try:
                    principal = user(principal_name(distinguished_name(der), self.settings.security.principal_rules))
                except (PrincipalMappingError, ValueError) as e:
                    self.metrics.authenticated("SSL", ok=False)
                    self._closing(peer, listener.name, "certificate", str(e))
                    return None
                self.metrics.authenticated("SSL", ok=True)
        sasl = None
        if listener.protocol.sasl:
            assert context.credentials is not None, "a SASL listener starts only with its users"
            sasl = SaslConnection(self.settings.security.sasl_mechanisms, context.credentials)
        client_host = f"/{peer[0]}" if isinstance(peer, tuple) and peer else ""
        return Connection(listener, node_id, peer, client_host, principal, sasl, context=context)

    async def _read_requests(self, conn: Connection, reader: asyncio.StreamReader,
                             responses: asyncio.Queue[Answer | None]) -> None:
        in_flight = InFlightBytes(self.settings.max_request_bytes)
        ingress_order = IngressOrder()
        peer = conn.peer

        async def queue(answer: bytes) -> None:  # a re-authentication's answers, in order with the requests'
            await responses.put(_done(answer))

        while True:
            prefix = await reader.readexactly(SIZE.size)
            try:
                size = frame_size(prefix, self.settings.max_request_bytes)
                await in_flight.acquire(size)
                frame = await reader.readexactly(size)
                if conn.session_expires is not None:  # KIP-368 (SocketServer's Processor, KafkaChannel)
                    now = time.monotonic()
                    if now > conn.session_expires:
                        log.info("closing connection from %s on %s: its SASL session (%s) expired %.1f s ago "
                                 "without re-authentication", peer, conn.listener.name, conn.principal,
                                 now - conn.session_expires)
                        return
                    if frame[:2] == REAUTHENTICATION_START and now - conn.reauthenticated >= MIN_REAUTH_INTERVAL_S:
                        in_flight.release(size)
                        self.metrics.bytes_in.inc(SIZE.size + size)
                        if not await self.sasl.reauthenticate(conn, frame, reader, queue):
                            return
                        continue
                # the frame is dropped once parsed: kio copies out what the request holds
                request = parse_request(frame, READABLE, conn.node_id, conn.client_host, conn.principal,
                                        conn.listener.name, ingress_order)
                del frame
                self.metrics.bytes_in.inc(SIZE.size + size)
            except UnsupportedApiError as e:
                in_flight.release(size)
                if (answer := self._unsupported(e, conn)) is None:
                    return
                await responses.put(_done(answer))
                continue
            except BadRequestError as e:
                self.metrics.request("unknown", "INVALID_REQUEST")
                self._closing(peer, conn.listener.name, "bad request", str(e))
                return
            # Started now: a produce hands its batches to the ingress topic before the next request is read, or,
            # when it waits first, before any produce read after it (network/ingress_order.py).
            task = asyncio.create_task(self._handle(conn.context, request))
            in_flight.release_when_done(task, size)
            try:
                await asyncio.sleep(0)
                await responses.put(task)  # waits while the connection has its most requests in flight
            except BaseException:  # the connection closed or cancelled first: nobody would answer it
                task.cancel()
                raise

    async def _api_versions(self, request: Request) -> Any:  # noqa: RUF029 - the exchange awaits a handler's shape
        """ApiVersions before login: the same answer as after."""
        return api_versions.api_versions_body(request.api_version)

    def _unsupported(self, e: UnsupportedApiError, conn: Session) -> bytes | None:
        """An API or version the door does not read: ApiVersions is answered in v0 (KIP-511, the answer
        returned), anything else closes the connection (None)."""
        self.metrics.request(api_name(e.api_key), "UNSUPPORTED_VERSION")
        if e.api_key == ApiKey.API_VERSIONS:
            body = api_versions.api_versions_body(0, ErrorCode.unsupported_version)
            return encode_response(ApiKey.API_VERSIONS, 0, e.correlation_id, body)
        self._closing(conn.peer, conn.listener.name, "unsupported request", str(e))
        return None

    def _closing(self, peer: Any, listener: str, why: str, message: str) -> None:
        """A connection closed for what its client sent (before login, or a request the door cannot read):
        a line a minute per client host, listener and kind of reason (`why`), with how many were left out, as
        failed logins and denials are logged (security/audit.py); a flood of hostile connections costs no line
        each."""
        host = peer[0] if isinstance(peer, tuple) and peer else str(peer)
        if (suppressed := self._closes.due((host, listener, why))) is not None:
            log.info("closing connection from %s on %s: %s%s", peer, listener, message, self._closes.more(suppressed))

    async def _handle(self, context: Context, request: Request) -> bytes | CloseConnection | None:
        name = api_name(request.api_key)
        body = await HANDLERS[request.api_key](context, request)
        if body is None or isinstance(body, CloseConnection):  # acks=0 produce: Kafka sends nothing
            self.metrics.request(name)
            return body
        code = getattr(body, "error_code", 0)
        self.metrics.request(name, error_name(int(code)))
        if request.api_key == ApiKey.METADATA and metadata.partitions_in(body) > metadata.OFF_LOOP_PARTITIONS:
            # ~5 µs a partition to encode: off the loop, like the answer's building
            return await asyncio.to_thread(encode_response, request.api_key, request.api_version,
                                           request.correlation_id, body)
        return encode_response(request.api_key, request.api_version, request.correlation_id, body)

    async def _send_in_order(self, responses: asyncio.Queue[Answer | None], writer: asyncio.StreamWriter,
                             peer: Any) -> None:
        while (task := await responses.get()) is not None:
            try:
                data = await task
            except Exception:
                log.exception("request from %s failed; closing the connection", peer)
                data = CloseConnection("the request failed")
            if isinstance(data, CloseConnection):
                log.info("closing connection from %s: %s", peer, data.reason)
                writer.close()
                _cancel_queued(responses)  # what was still queued is not answered on a closed connection
                return
            if data is not None:
                writer.write(data)
                self.metrics.bytes_out.inc(len(data))
                await writer.drain()


def _cancel_queued(responses: asyncio.Queue[Answer | None]) -> None:
    while not responses.empty():
        if (queued := responses.get_nowait()) is not None:
            queued.cancel()


def _done(data: bytes | CloseConnection) -> Answer:
    async def ready() -> bytes | CloseConnection | None:  # noqa: RUF029 - a finished task, for the queue
        return data

    return asyncio.ensure_future(ready())
