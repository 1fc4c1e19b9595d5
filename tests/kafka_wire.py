"""A minimal Kafka protocol client that produces ONE pre-built RecordBatch (test tooling only).

Why: confluent-kafka (librdkafka) builds its own batches, so it cannot send the exact bytes a test
wants the broker to judge. This module puts caller-supplied RecordBatch bytes (v2, or a legacy
v0/v1 message set) into a ProduceRequest on a plain TCP socket and decodes the broker's
ProduceResponse, so a test can compare the gateway's decision with Apache Kafka's own decision for
the same bytes.

Protocol: Produce **v8** (API key 0) with request header v1 and response header v0. v8 is the
oldest version with per-record errors and an error message (KIP-467) and the newest that is not
"flexible" (v9+ use compact strings and tagged fields), so it is plain big-endian fields. Kafka 4.x
accepts Produce v3-v13, so v8 is in range. No ApiVersions handshake is needed for PLAINTEXT.

Limits, on purpose:
- one topic-partition and one batch per request; `acks` is -1 or 1 (acks=0 has no response, and
  the broker answers a failure under acks=0 by closing the connection);
- no Metadata request: send to the partition's leader yourself (with the single-node test broker
  that is the bootstrap address); another broker answers NOT_LEADER_OR_FOLLOWER (6);
- no retries, no SASL/TLS, no transactions beyond passing a transactional id through.

    with ProduceConnection("127.0.0.1:9092") as conn:
        response = conn.produce("orders", 0, batch_bytes)
    assert response.error_code == 0, response
    # or, one-shot: produce_batch("127.0.0.1:9092", "orders", 0, batch_bytes)
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import Any

PRODUCE_API_KEY = 0
PRODUCE_VERSION = 8
DEFAULT_CLIENT_ID = "kafka-wire"


class KafkaWireError(RuntimeError):
    """The conversation with the broker broke (closed connection, wrong correlation id, bad frame)."""


@dataclass(frozen=True)
class RecordError:
    """One entry of ProduceResponse RecordErrors: a record's 0-based index in the batch and why."""

    batch_index: int
    message: str | None


@dataclass(frozen=True)
class ProduceResult:
    """A ProduceResponse v8 partition response, plus the response's throttle time."""

    topic: str
    partition: int
    error_code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    record_errors: tuple[RecordError, ...]
    error_message: str | None
    throttle_time_ms: int


# --------------------------------------------------------------------------- encoding


def _string(value: str) -> bytes:
    raw = value.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


def _nullable_string(value: str | None) -> bytes:
    return struct.pack(">h", -1) if value is None else _string(value)


def encode_produce_request(
    correlation_id: int,
    topic: str,
    partition: int,
    records: bytes,
    *,
    acks: int = -1,
    timeout_ms: int = 30_000,
    client_id: str | None = DEFAULT_CLIENT_ID,
    transactional_id: str | None = None,
) -> bytes:
    """The size-prefixed frame of a Produce v8 request carrying `records` for one partition."""
    if acks not in (-1, 1):
        raise ValueError(f"acks must be -1 or 1 (acks=0 gets no response), not {acks}")
    header = struct.pack(">hhi", PRODUCE_API_KEY, PRODUCE_VERSION, correlation_id) + _nullable_string(
        client_id
    )
    body = b"".join(
        [
            _nullable_string(transactional_id),
            struct.pack(">hi", acks, timeout_ms),
            struct.pack(">i", 1),  # topic_data: one topic
            _string(topic),
            struct.pack(">i", 1),  # partition_data: one partition
            struct.pack(">i", partition),
            struct.pack(">i", len(records)),  # records: NULLABLE_BYTES
            bytes(records),
        ]
    )
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


# --------------------------------------------------------------------------- decoding


class _Reader:
    """Big-endian cursor over a response payload."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def _take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self._pos + size > len(self._data):
            raise KafkaWireError(f"response truncated at byte {self._pos} (need {size} more)")
        (value,) = struct.unpack_from(fmt, self._data, self._pos)
        self._pos += size
        return int(value)

    def int16(self) -> int:
        return self._take(">h")

    def int32(self) -> int:
        return self._take(">i")

    def int64(self) -> int:
        return self._take(">q")

    def nullable_string(self) -> str | None:
        length = self.int16()
        if length < 0:
            return None
        raw = self._data[self._pos : self._pos + length]
        if len(raw) != length:
            raise KafkaWireError(f"response truncated inside a string at byte {self._pos}")
        self._pos += length
        return raw.decode("utf-8")

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise KafkaWireError("null where the protocol requires a string")
        return value

    def expect_end(self) -> None:
        if self._pos != len(self._data):
            raise KafkaWireError(f"{len(self._data) - self._pos} unexpected trailing bytes in the response")


def _decode_partition(reader: _Reader, topic: str) -> Callable[[int], ProduceResult]:
    """One partition response; completed by the throttle time, which the protocol puts last."""
    # keyword arguments are evaluated left to right, i.e. in wire order
    return partial(
        _with_throttle,
        topic=topic,
        partition=reader.int32(),
        error_code=reader.int16(),
        base_offset=reader.int64(),
        log_append_time_ms=reader.int64(),
        log_start_offset=reader.int64(),
        record_errors=tuple(
            RecordError(reader.int32(), reader.nullable_string()) for _ in range(reader.int32())
        ),
        error_message=reader.nullable_string(),
    )


def _with_throttle(throttle_time_ms: int, **fields: Any) -> ProduceResult:
    return ProduceResult(**fields, throttle_time_ms=throttle_time_ms)


def decode_produce_response(payload: bytes, correlation_id: int) -> list[ProduceResult]:
    """Decode a Produce v8 response payload (after the size prefix) into one result per partition."""
    reader = _Reader(payload)
    got = reader.int32()
    if got != correlation_id:
        raise KafkaWireError(f"correlation id {got} in the response, expected {correlation_id}")
    pending: list[Callable[[int], ProduceResult]] = []
    for _ in range(reader.int32()):
        topic = reader.string()
        pending.extend(_decode_partition(reader, topic) for _ in range(reader.int32()))
    throttle_time_ms = reader.int32()
    reader.expect_end()
    return [complete(throttle_time_ms) for complete in pending]


# --------------------------------------------------------------------------- the connection


def _parse_address(bootstrap: str) -> tuple[str, int]:
    """`host:port` (the first of a comma-separated list)."""
    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected host:port, got {bootstrap!r}")
    return host.strip("[]"), int(port)


class ProduceConnection:
    """One TCP connection to a broker, for single-batch ProduceRequests: in sequence (`produce`) or
    several in flight (`send` ... `receive`, answered in order as Kafka guarantees per connection)."""

    def __init__(
        self, address: str, *, client_id: str | None = DEFAULT_CLIENT_ID, timeout: float = 60.0
    ) -> None:
        self._sock = socket.create_connection(_parse_address(address), timeout=timeout)
        self._client_id = client_id
        self._next_correlation_id = 1

    def produce(
        self,
        topic: str,
        partition: int,
        records: bytes,
        *,
        acks: int = -1,
        timeout_ms: int = 30_000,
        transactional_id: str | None = None,
    ) -> ProduceResult:
        """Send `records` (one batch, as is) to topic-partition and return the broker's answer."""
        correlation_id = self.send(
            topic, partition, records, acks=acks, timeout_ms=timeout_ms, transactional_id=transactional_id
        )
        return self.receive(correlation_id)

    def send(
        self,
        topic: str,
        partition: int,
        records: bytes,
        *,
        acks: int = -1,
        timeout_ms: int = 30_000,
        transactional_id: str | None = None,
    ) -> int:
        """Send one ProduceRequest without waiting for its answer (pipelining: Kafka answers the
        requests of one connection in order); returns its correlation id for `receive`."""
        correlation_id = self._next_correlation_id
        self._next_correlation_id += 1
        frame = encode_produce_request(
            correlation_id,
            topic,
            partition,
            records,
            acks=acks,
            timeout_ms=timeout_ms,
            client_id=self._client_id,
            transactional_id=transactional_id,
        )
        self._sock.sendall(frame)
        return correlation_id

    def receive(self, correlation_id: int) -> ProduceResult:
        """The answer to the oldest request still in flight, which must be `correlation_id`."""
        (size,) = struct.unpack(">i", self._recv_exactly(4))
        results = decode_produce_response(self._recv_exactly(size), correlation_id)
        if len(results) != 1:
            raise KafkaWireError(f"expected one partition response, got {results}")
        return results[0]

    def _recv_exactly(self, size: int) -> bytes:
        chunks: list[bytes] = []
        remaining = size
        while remaining:
            chunk = self._sock.recv(remaining)
            if not chunk:
                raise KafkaWireError("the broker closed the connection (unsupported request or fatal error?)")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> ProduceConnection:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def produce_batch(
    bootstrap: str,
    topic: str,
    partition: int,
    records: bytes,
    *,
    acks: int = -1,
    timeout_ms: int = 30_000,
    client_id: str | None = DEFAULT_CLIENT_ID,
    transactional_id: str | None = None,
) -> ProduceResult:
    """Open a connection to `bootstrap` (host:port), produce one batch, close."""
    with ProduceConnection(bootstrap, client_id=client_id, timeout=timeout_ms / 1000 + 30) as conn:
        return conn.produce(
            topic, partition, records, acks=acks, timeout_ms=timeout_ms, transactional_id=transactional_id
        )
