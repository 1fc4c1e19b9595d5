"""One listener port's acceptor, as Kafka's `Acceptor` (SocketServer.scala): it accepts connections and
applies the connection quotas before anything else runs on one — before a TLS handshake, before a byte is
read. A connection over its IP's KIP-612 quota (`connection_quotas.py`) is kept unread for the throttle time
and then closed (Kafka's `DelayedCloseSocket`), so a flooding host costs the door an accept and a close per
connection: no transport, no TLS handshake, no task. One that would exceed its IP's `max.connections.per.ip`
(`connection_limits.py`) is closed at once, as Kafka's `TooManyConnectionsException` closes it. Before either, a
connection that finds the door or its listener at `max.connections`, or over `max.connection.creation.rate`
(`connection_slots.py`), is held while the acceptor stops accepting, until its throttle time is over and a
slot is free (Kafka's `waitForConnectionSlot` blocks its acceptor thread the same way). Every other connection
becomes an asyncio stream (TLS negotiated first on an SSL listener) served by `serve` in the task that
accepted it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import time
from collections.abc import Callable, Coroutine
from typing import Any

from front_door.network.connection_limits import ConnectionsPerIp
from front_door.network.connection_slots import ConnectionSlots

log = logging.getLogger("gateway.front_door")

# Kafka's socket.listen.backlog.size is 50; asyncio's start_server default is 100, kept for bursts of clients
BACKLOG = 100
ACCEPTS_PER_WAKE = BACKLOG  # as asyncio's accept loop: at most a backlog's worth before other work runs
ACCEPT_PAUSE_S = 1.0  # out of file descriptors: accepting resumes after this, as asyncio's server does
STREAM_LIMIT = 2**16  # asyncio's default StreamReader buffer limit

Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Coroutine[Any, Any, None]]


def bind(host: str, port: int) -> socket.socket:
    """A listening, non-blocking socket on `host`:`port` (the first address `host` resolves to; port 0 takes a
    free one). SO_REUSEADDR as a broker sets it, so a restarted door binds a port its predecessor left in
    TIME_WAIT."""
    family, kind, proto, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                         flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class Acceptor:
    """Accepts on `sock` once started; `throttle_ms(ip)` records each connection in its IP's quota and says how
    long to keep it before closing it (0: serve it); `on_throttled()` counts those kept; `per_ip` counts the
    connections served by IP (shared by the door's listeners), `on_rejected(ip, maximum)` is told of each
    closed for going over its IP's maximum; `slots` counts them by `listener` and in all, and
    `on_blocked(seconds)` is told how long accepting waited for one."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, serve: Serve,
                 tls: ssl.SSLContext | None, throttle_ms: Callable[[str], int],
                 on_throttled: Callable[[], None], per_ip: ConnectionsPerIp | None = None,
                 on_rejected: Callable[[str, int], None] | None = None, listener: str = "PLAINTEXT",
                 slots: ConnectionSlots | None = None, on_blocked: Callable[[float], None] | None = None) -> None:
        self._loop, self._sock, self._serve, self._tls = loop, sock, serve, tls
        self._throttle_ms, self._on_throttled = throttle_ms, on_throttled
        self._per_ip = per_ip or ConnectionsPerIp()
        self._on_rejected = on_rejected or (lambda ip, maximum: None)
        self._listener, self._slots = listener, slots or ConnectionSlots()
        self._on_blocked = on_blocked or (lambda seconds: None)
        # the connection accepting waits with (Kafka's blocked acceptor), until when, since when
        self._waiting: tuple[socket.socket, Any, float, float] | None = None
        self._held: set[socket.socket] = set()  # throttled, closed when their time is up
        self._handshakes: set[asyncio.Task[None]] = set()
        self._serving = False

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._sock.getsockname()[:2]
        return host, port

    @property
    def waiting_for_slot(self) -> bool:
        """Whether accepting has stopped, a connection in hand, until a slot is free."""
        return self._waiting is not None

    def start(self) -> None:
        if not self._serving and self._waiting is None and self._sock.fileno() >= 0:
            self._serving = True
            self._loop.add_reader(self._sock.fileno(), self._accept)

    def close(self) -> None:
        """Stops accepting and closes the listening socket and every throttled connection; connections being
        served end as their clients' would."""
        if self._serving:
            self._loop.remove_reader(self._sock.fileno())
            self._serving = False
        self._sock.close()
        if self._waiting is not None:
            self._waiting[0].close()
            self._waiting = None
        for held in self._held:
            held.close()
        self._held.clear()
        for task in self._handshakes:
            task.cancel()

    def _accept(self) -> None:
        for _ in range(ACCEPTS_PER_WAKE):
            try:
                conn, peer = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # EMFILE, ENFILE, ENOBUFS: pause rather than spin on a readable socket
                log.warning("front door: accepting on %s failed (%s); resuming in %.0f s", self.address, e,
                            ACCEPT_PAUSE_S)
                self._loop.remove_reader(self._sock.fileno())
                self._serving = False
                self._loop.call_later(ACCEPT_PAUSE_S, self.start)
                return
            if self._slots.limited:  # ConnectionQuotas.inc: waitForConnectionSlot comes first
                wait_ms = self._slots.throttle_ms(self._listener, int(time.time() * 1000))
                if wait_ms or not self._slots.available(self._listener):
                    self._wait_for_slot(conn, peer, wait_ms)
                    return
            self._admit(conn, peer)

    def _wait_for_slot(self, conn: socket.socket, peer: Any, wait_ms: int) -> None:
        """Stop accepting, holding `conn` until `wait_ms` is over and a slot is free."""
        self._loop.remove_reader(self._sock.fileno())
        self._serving = False
        now = self._loop.time()
        self._waiting = (conn, peer, now + wait_ms / 1000, now)
        if wait_ms:
            self._loop.call_later(wait_ms / 1000, self._slot_wait_over)
        else:
            self._slots.when_released(self._slot_wait_over)

    def _slot_wait_over(self) -> None:
        if self._waiting is None:  # closed meanwhile
            return
        conn, peer, until, since = self._waiting
        if self._loop.time() < until:  # a release came before the throttle time was over
            self._loop.call_at(until, self._slot_wait_over)
            return
        if not self._slots.available(self._listener):
            self._slots.when_released(self._slot_wait_over)
            return
        self._waiting = None
        self._on_blocked(self._loop.time() - since)
        self._admit(conn, peer)
        self.start()

    def _admit(self, conn: socket.socket, peer: Any) -> None:
        """The IP's quota, then its maximum (ConnectionQuotas.inc); served when both let it in."""
        address = peer[0] if isinstance(peer, tuple) else None
        throttle_ms = self._throttle_ms(address) if address is not None else 0
        if throttle_ms:
            self._held.add(conn)
            self._loop.call_later(throttle_ms / 1000, self._close_held, conn)
            self._on_throttled()
            return
        if address is not None and (maximum := self._per_ip.admit(address)) is not None:
            conn.close()
            self._on_rejected(address, maximum)
            return
        self._slots.take(self._listener)
        conn.setblocking(False)
        task = self._loop.create_task(self._connect(conn, address))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    def _close_held(self, conn: socket.socket) -> None:
        if conn in self._held:
            self._held.discard(conn)
            conn.close()

    async def _connect(self, conn: socket.socket, address: str | None) -> None:
        """The accepted socket as a stream (after the TLS handshake on an SSL listener), served; a client that
        fails the handshake or goes away first closes only its own connection. Its IP's count is released
        when it ends."""
        try:
            reader = asyncio.StreamReader(limit=STREAM_LIMIT, loop=self._loop)
            protocol = asyncio.StreamReaderProtocol(reader, loop=self._loop)
            try:
                transport, _ = await self._loop.connect_accepted_socket(lambda: protocol, conn, ssl=self._tls)
            except (OSError, EOFError) as e:  # ssl.SSLError and TimeoutError are OSErrors
                log.debug("front door: connection not established: %s", e)
                with contextlib.suppress(OSError):
                    conn.close()
                return
            # Served in this task (no second task per connection, as a flood of short connections costs one
            # each); from here on the connection ends with the door's stop, not with the acceptor's close.
            task = asyncio.current_task()
            if task is not None:
                self._handshakes.discard(task)
            await self._serve(reader, asyncio.StreamWriter(transport, protocol, reader, self._loop))
        finally:
            if address is not None:
                self._per_ip.release(address)
            self._slots.release(self._listener)
