"""A SASL listener's connection until it has logged in, frame by frame, as Kafka's `SaslServerAuthenticator`
reads it (the mechanisms themselves: `sasl_server.py`): ApiVersions, SaslHandshake, then SaslAuthenticate
(or, after a v0 handshake, bare tokens); anything else closes the connection. KIP-368's re-authentication
runs the same exchange on an authenticated connection, answered in order with its other requests.

The exchange writes SaslHandshake's and SaslAuthenticate's answers itself, as the authenticator builds them
(`sasl_handshake.py` and `sasl_authenticate.py` in `apis/` answer what reaches `KafkaApis` instead:
ILLEGAL_SASL_STATE). What it needs of the layer above is handed in: the ApiVersions answer, the keys read
before login, and how a closed connection is logged.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.static.primitive import i64Timedelta

from front_door.api_keys import ApiKey
from front_door.metrics import FrontDoorMetrics
from front_door.network.messages import build, error_name, response_module
from front_door.network.principal import ANONYMOUS, KafkaPrincipal
from front_door.network.wire import (
    SIZE,
    BadRequestError,
    Request,
    UnsupportedApiError,
    encode_response,
    parse_request,
)
from front_door.security.config import FrontDoorSecurity
from front_door.security.listeners import Listener
from front_door.security.sasl_server import (
    IllegalSaslState,
    SaslAuthenticationFailed,
    SaslConnection,
    SaslState,
)
from kafka_cluster.once_per_window import OncePerWindow

log = logging.getLogger("gateway.front_door")

# Kafka's sasl.server.max.receive.size: the largest frame read before a connection is authenticated
SASL_MAX_RECEIVE_BYTES = 524288
# KIP-368: a SaslHandshake on an authenticated connection begins a re-authentication, at most once a second
# (KafkaChannel.maybeBeginServerReauthentication; more often it is answered as KafkaApis answers it)
REAUTHENTICATION_START = ApiKey.SASL_HANDSHAKE.to_bytes(2, "big")
MIN_REAUTH_INTERVAL_S = 1.0


@dataclass
class Session:
    """One client connection's identity: where it came in, and who it is once authenticated (a SASL
    listener's connection is ANONYMOUS until `sasl` completes)."""

    listener: Listener
    node_id: int
    peer: Any
    client_host: str  # as Kafka shows it: "/127.0.0.1"
    principal: KafkaPrincipal
    sasl: SaslConnection | None
    # KIP-368: when the SASL session ends unless re-authenticated (monotonic s; None: it lasts), and when the
    # last re-authentication began
    session_expires: float | None = None
    reauthenticated: float = 0.0


def handshake_body(version: int, code: ErrorCode, mechanisms: Sequence[str]) -> Any:
    module = response_module(ApiKey.SASL_HANDSHAKE, version)
    return build(module.SaslHandshakeResponse, error_code=code, mechanisms=tuple(mechanisms))


def authenticate_body(version: int, code: ErrorCode, message: str | None, auth_bytes: bytes = b"",
                      session_lifetime_ms: int = 0) -> Any:
    module = response_module(ApiKey.SASL_AUTHENTICATE, version)
    return build(module.SaslAuthenticateResponse, error_code=code, error_message=message, auth_bytes=auth_bytes,
                 session_lifetime=i64Timedelta.parse(datetime.timedelta(milliseconds=session_lifetime_ms)))


# (peer, listener name, kind of reason, message): a connection closed for what its client sent
Closing = Callable[[Any, str, str, str], None]


@dataclass(frozen=True)
class ExchangeRules:
    """What the exchange reads before login, from the layer above: every readable API and version, the keys
    a SASL listener reads before login, the ApiVersions answer, and the answer to an unreadable request."""

    readable: Mapping[int, tuple[int, int]]
    before_authentication: frozenset[int]
    api_versions: Callable[[Request], Awaitable[Any]]
    unsupported: Callable[[UnsupportedApiError, Session], bytes | None]  # None: the connection closes


class SaslExchange:
    """Runs the SASL exchanges of every connection of a door; logs a flood of failed logins a line a minute."""

    def __init__(self, security: FrontDoorSecurity, metrics: FrontDoorMetrics, rules: ExchangeRules,
                 closing: Closing) -> None:
        self._security = security
        self.metrics = metrics
        self._rules = rules
        self._closing = closing
        self._failed_logins = OncePerWindow()  # by (client host, mechanism)

    async def authenticate(self, conn: Session, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """A SASL listener's connection until it is authenticated: True once it is, False when the connection
        closes (each answer is written before)."""

        async def write(answer: bytes) -> None:
            writer.write(answer)
            self.metrics.bytes_out.inc(len(answer))
            await writer.drain()

        return await self._exchange(conn, reader, write)

    async def reauthenticate(self, conn: Session, handshake: bytes, reader: asyncio.StreamReader,
                             deliver: Callable[[bytes], Awaitable[None]]) -> bool:
        """KIP-368: a SaslHandshake on an authenticated connection whose session expires starts a new exchange,
        each answer handed to `deliver` (in order after the requests before it); the mechanism and the
        principal must stay the same (SaslServerAuthenticator's ReauthInfo). False when the connection closes."""
        sasl = conn.sasl
        assert sasl is not None and sasl.mechanism is not None and sasl.credentials is not None
        conn.reauthenticated = time.monotonic()  # at most one re-authentication a second, as Kafka
        previous = conn.principal
        conn.sasl = SaslConnection(sasl.enabled, sasl.credentials, reauthenticating=True, previous=sasl.mechanism)
        conn.principal = ANONYMOUS  # until the exchange completes; requests in flight keep theirs
        ok = await self._exchange(conn, reader, deliver, handshake, previous)
        if not ok:
            conn.principal = previous  # the connection closes; what it answers is said as before
        return ok

    async def _exchange(self, conn: Session, reader: asyncio.StreamReader,
                        deliver: Callable[[bytes], Awaitable[None]], first: bytes | None = None,
                        previous: KafkaPrincipal | None = None) -> bool:
        """Frames of a SASL exchange until it completes (True) or the connection closes (False), each answer
        handed to `deliver`; `first`: a frame already read; `previous`: the principal a re-authentication must
        keep."""
        while conn.principal is ANONYMOUS:
            if first is not None:
                frame, first = first, None
            else:
                (size,) = SIZE.unpack(await reader.readexactly(SIZE.size))
                if not 0 <= size <= SASL_MAX_RECEIVE_BYTES:  # Kafka's sasl.server.max.receive.size
                    self._closing(conn.peer, conn.listener.name, "SASL receive size",
                                  f"SASL receive of {size} bytes (at most {SASL_MAX_RECEIVE_BYTES} before "
                                  "authentication)")
                    return False
                frame = await reader.readexactly(size)
                self.metrics.bytes_in.inc(SIZE.size + size)
            answer, keep_open = await self._frame(conn, frame, previous)
            if answer is not None:
                await deliver(answer)
            if not keep_open:
                return False
        return True

    async def _frame(self, conn: Session, frame: bytes, previous: KafkaPrincipal | None) -> tuple[bytes | None, bool]:
        """One frame of a SASL exchange: its answer (None: none) and whether the connection stays open."""
        sasl = conn.sasl
        assert sasl is not None
        if sasl.raw_tokens:  # after a v0 handshake: the bare token, answered bare
            token = await self._token(conn, frame, previous)
            return (None, False) if token is None else (SIZE.pack(len(token)) + token, True)
        try:
            request = parse_request(frame, self._rules.readable, conn.node_id, conn.client_host, ANONYMOUS,
                                    conn.listener.name)
        except UnsupportedApiError as e:
            answer = self._rules.unsupported(e, conn)
            return answer, answer is not None
        except BadRequestError as e:
            self.metrics.request("unknown", "INVALID_REQUEST")
            self._closing(conn.peer, conn.listener.name, "bad request", str(e))
            return None, False
        name = api_key_map.get(request.api_key, "unknown")
        if request.api_key not in self._rules.before_authentication or (
                request.api_key == ApiKey.SASL_AUTHENTICATE and sasl.state is not SaslState.AUTHENTICATE):
            self._closing(conn.peer, conn.listener.name, "request before login",
                          f"Unexpected Kafka request of type {name} during SASL handshake")
            self.metrics.request(name, "ILLEGAL_SASL_STATE")
            return None, False

        def answer(body: Any) -> bytes:
            code = getattr(body, "error_code", 0)
            self.metrics.request(name, error_name(int(code)))
            return encode_response(request.api_key, request.api_version, request.correlation_id, body)

        if request.api_key == ApiKey.API_VERSIONS:
            return answer(await self._rules.api_versions(request)), True
        if request.api_key == ApiKey.SASL_HANDSHAKE:
            return self._handshake(conn, sasl, request, answer)
        token = await self._token(conn, request.body.auth_bytes, previous)
        if token is None:  # answered, then closed (Kafka's failed authentication)
            return answer(authenticate_body(
                request.api_version, ErrorCode.sasl_authentication_failed, sasl.failure)), False
        lifetime_ms = self._security.connections_max_reauth_ms if conn.principal is not ANONYMOUS else 0
        return answer(authenticate_body(request.api_version, ErrorCode.none, None, token, lifetime_ms)), True

    def _handshake(self, conn: Session, sasl: SaslConnection, request: Request,
                   answer: Callable[[Any], bytes]) -> tuple[bytes | None, bool]:
        enabled = [m.value for m in sasl.enabled]
        try:
            chosen = sasl.handshake(request.body.mechanism, request.api_version)
        except IllegalSaslState as e:
            self._closing(conn.peer, conn.listener.name, "SASL state", str(e))
            return None, False
        if chosen is not None and sasl.previous is not None and chosen is not sasl.previous:
            log.info("closing connection from %s on %s: SASL mechanism '%s' requested by client is not "
                     "supported for re-authentication of mechanism '%s'", conn.peer, conn.listener.name,
                     chosen.value, sasl.previous.value)  # the handshake is answered, then the channel closed
            return answer(handshake_body(request.api_version, ErrorCode.none, enabled)), False
        if chosen is None:  # UnsupportedSaslMechanismException: answered, then closed
            self.metrics.authenticated("unsupported", ok=False)  # a label per client-chosen name would grow
            self._closing(conn.peer, conn.listener.name, "SASL mechanism",
                          f"unsupported SASL mechanism {request.body.mechanism!r} (enabled: {', '.join(enabled)})")
            return answer(handshake_body(request.api_version, ErrorCode.unsupported_sasl_mechanism, enabled)), False
        return answer(handshake_body(request.api_version, ErrorCode.none, enabled)), True

    async def _token(self, conn: Session, token: bytes, previous: KafkaPrincipal | None) -> bytes | None:
        """The server's answer to one client token; None after a failed login, once Kafka's
        connection.failed.authentication.delay.ms has passed (a flood of bad logins is slowed, not answered
        at once). `previous`: the principal a re-authentication must keep."""
        sasl = conn.sasl
        assert sasl is not None and sasl.mechanism is not None
        mechanism = sasl.mechanism.value
        try:
            answer = sasl.authenticate(token)
            if previous is not None and sasl.principal is not None and sasl.principal != previous:
                raise SaslAuthenticationFailed(  # ReauthInfo.ensurePrincipalUnchanged
                    f"Cannot change principals during re-authentication from {previous.principal_type}."
                    f"{previous.name}: {sasl.principal.principal_type}.{sasl.principal.name}")
        except (SaslAuthenticationFailed, IllegalSaslState) as e:
            sasl.failure = str(e)
            self.metrics.authenticated(mechanism, ok=False)
            suppressed = self._failed_logins.due((conn.client_host, mechanism))
            if suppressed is not None:  # a flood of bad logins from one host: a line a minute, not one each
                cause = f" ({e.__cause__})" if e.__cause__ is not None else ""
                log.info("Failed %s with %s on %s (%s): %s%s%s",
                         "re-authentication" if sasl.reauthenticating else "authentication", conn.client_host,
                         conn.listener.name, mechanism, e, cause, self._failed_logins.more(suppressed))
            await asyncio.sleep(self._security.failed_authentication_delay_ms / 1000)
            return None
        if sasl.principal is not None:
            conn.principal = sasl.principal
            reauth_ms = self._security.connections_max_reauth_ms
            conn.session_expires = time.monotonic() + reauth_ms / 1000 if reauth_ms > 0 else None
            self.metrics.authenticated(mechanism, ok=True)
            log.debug("%s %s as %s with %s", conn.peer, "re-authenticated" if sasl.reauthenticating else
                      "authenticated", conn.principal, mechanism)
        return answer
