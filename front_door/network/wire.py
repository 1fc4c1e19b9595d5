"""Kafka's wire framing (the protocol guide's "Protocol Framework"): a request is a 4-byte big-endian
size, then a request header (v1, or v2 for flexible versions) and the request body; a response is a size,
a response header (v0, or v1 for flexible versions; ApiVersions always v0) and the body.

What is refused here, as a Kafka broker's `SocketServer` does: a size that is negative or above
`socket.request.max.bytes` (the connection is closed before the body is read), an unknown API key or an
unsupported version (`InvalidRequestException`: the connection is closed), and bytes that do not parse.
ApiVersions is the one exception: an unsupported version of it gets an UNSUPPORTED_VERSION answer in v0
so that the client can pick a version it shares (KIP-511).
"""

from __future__ import annotations

import functools
import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError

from contract.limits import KAFKA_SOCKET_REQUEST_MAX_BYTES
from front_door.network.ingress_order import IngressOrder
from front_door.network.principal import ANONYMOUS, KafkaPrincipal

SIZE = struct.Struct(">i")
API_KEY_AND_VERSION = struct.Struct(">hh")
# Kafka's socket.request.max.bytes default (the front door's front_door_max_request_bytes)
DEFAULT_MAX_REQUEST_BYTES = KAFKA_SOCKET_REQUEST_MAX_BYTES
# kio resolves a schema by importing its module by name on each call; a door asks for the same few each request
request_schema = functools.cache(load_request_schema)
response_schema = functools.cache(load_response_schema)


class BadRequestError(ValueError):
    """A request the front door cannot read: the connection is closed, as Kafka does."""


class UnsupportedApiError(BadRequestError):
    """An API key or version outside what the front door supports (`api_versions.SUPPORTED`)."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int, message: str) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


@dataclass(frozen=True)
class CloseConnection:
    """A handler's answer when Kafka sends nothing and closes the connection: an acks=0 produce that
    failed (Kafka's `ProduceRequest.json`: "Closing connection due to error during produce request ... with ack=0")."""

    reason: str


@dataclass(frozen=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # a kio request entity of (api_key, api_version)
    size: int  # bytes on the wire, without the size field
    node_id: int  # the front-door node whose listener read it (leadership.py: who leads what)
    client_host: str = ""  # the client's address as Kafka shows it (`InetAddress.toString`: "/127.0.0.1")
    principal: KafkaPrincipal = ANONYMOUS  # who the connection authenticated as (network/principal.py)
    listener: str = "PLAINTEXT"  # the name of the listener the connection came in on (security/listeners.py)
    # the connection's order of produce requests (network/ingress_order.py); None: a request outside one
    ingress_order: IngressOrder | None = None

    @property
    def host(self) -> str:
        """The client's address as ACLs name hosts ("127.0.0.1", no slash)."""
        return self.client_host.removeprefix("/")


def frame_size(prefix: bytes, max_request_bytes: int) -> int:
    """The size field of a request; BadRequestError when Kafka would close the connection."""
    (size,) = SIZE.unpack(prefix)
    if size < API_KEY_AND_VERSION.size + 4:
        raise BadRequestError(f"Invalid receive (size = {size})")
    if size > max_request_bytes:
        raise BadRequestError(f"Invalid receive (size = {size} larger than {max_request_bytes})")
    return size


def parse_request(frame: bytes, supported: dict[int, tuple[int, int]], node_id: int, client_host: str = "",
                  principal: KafkaPrincipal = ANONYMOUS, listener: str = "PLAINTEXT",
                  ingress_order: IngressOrder | None = None) -> Request:
    """Header and body of one request frame (without its size field), read by node `node_id` from a client
    at `client_host`."""
    api_key, api_version = API_KEY_AND_VERSION.unpack_from(frame)
    correlation_id = SIZE.unpack_from(frame, 4)[0] if len(frame) >= 8 else -1
    versions = supported.get(api_key)
    if versions is None or not versions[0] <= api_version <= versions[1]:
        raise UnsupportedApiError(api_key, api_version, correlation_id,
                                  f"Unsupported API key {api_key} version {api_version}")
    try:
        schema = request_schema(api_key, api_version)
        header, used = entity_reader(schema.__header_schema__)(frame, 0)
        body, body_size = entity_reader(schema)(frame, used)
    except (UnknownAPIKey, UnknownEntity) as e:
        raise UnsupportedApiError(api_key, api_version, correlation_id, str(e)) from None
    except (SerialError, ValueError, TypeError, OverflowError, IndexError) as e:
        raise BadRequestError(f"Error reading API key {api_key} version {api_version}: {type(e).__name__}: {e}") from None
    # Bytes after the body are ignored, as Kafka's generated readers ignore them (librdkafka pads some).
    return Request(api_key, api_version, header.correlation_id, header.client_id, body, len(frame), node_id,
                   client_host, principal, listener, ingress_order)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """One response frame, size field included."""
    schema = response_schema(api_key, api_version)
    header_schema = schema.__header_schema__
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    entity_writer(header_schema)(buffer, header_schema(correlation_id=correlation_id))
    entity_writer(schema)(buffer, body)
    data = buffer.getbuffer()
    SIZE.pack_into(data, 0, len(data) - SIZE.size)
    return bytes(data)
