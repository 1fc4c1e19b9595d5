"""The ACLs the gateway needs: one list, printed as kafka-acls.sh lines and documented in docs/security.md; the
start-up check's retries of a cluster that does not answer yet, and its refusals at once (against local sockets
that never answer or refuse every login: no broker)."""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AclOperation

from kafka_cluster.access import (
    RETRY_BACKOFF_MAX_S,
    KafkaAccessError,
    KafkaNotAnswering,
    RequiredAcl,
    check_access,
    not_answering,
)
from kafka_cluster.security import KafkaCluster, load_kafka_security
from streaming.config import REPO_ROOT, GatewayConfig


def test_kafka_acls_lines() -> None:
    topic = RequiredAcl("topic", "gateway.dlq", AclOperation.WRITE, "why")
    assert topic.command("b:9093", "User:gw") == ("kafka-acls.sh --bootstrap-server b:9093 --command-config "
                                                  "admin.properties --add --allow-principal User:gw --operation "
                                                  "Write --topic gateway.dlq   # why")
    group = RequiredAcl("group", "gateway-", AclOperation.READ, "w", prefixed=True)
    assert "--operation Read --resource-pattern-type prefixed --group gateway-" in group.command("b", "User:gw")
    cluster = RequiredAcl("cluster", "kafka-cluster", AclOperation.DESCRIBE_CONFIGS, "w")
    assert "--operation DescribeConfigs --cluster   # w" in cluster.command("b", "User:gw")


def test_the_groups_security_and_transaction_state_topics_only_with_a_front_door() -> None:
    with_door = {(a.resource, a.name) for a in GatewayConfig().required_acls()}
    without = {(a.resource, a.name) for a in GatewayConfig(front_door_address=None).required_acls()}
    assert with_door - without == {("topic", "gateway.consumer_offsets"), ("topic", "gateway.security"),
                                   ("topic", "gateway.ingress.transaction_state")}


def test_the_docs_list_every_acl_of_the_default_gateway() -> None:
    doc = (REPO_ROOT / "docs" / "security.md").read_text()
    rows = [line for line in doc.splitlines() if line.startswith("| ")]
    for acl in GatewayConfig().required_acls():
        name = "cluster" if acl.resource == "cluster" else f"`{acl.name}`"
        assert any(name in row and acl.operation.name in row for row in rows), acl


# ============================================================================== the start-up check's retries


@contextlib.contextmanager
def _silent_cluster() -> Iterator[str]:
    """A port that accepts connections and reads what comes, never answering: a cluster too busy to answer."""
    server = socket.create_server(("127.0.0.1", 0))
    stopped = threading.Event()
    accepted: list[socket.socket] = []

    def read(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while conn.recv(65536):
                pass

    def accept() -> None:
        with contextlib.suppress(OSError):
            while not stopped.is_set():
                conn, _ = server.accept()
                accepted.append(conn)
                threading.Thread(target=read, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stopped.set()
        server.close()
        for conn in accepted:
            conn.close()


@contextlib.contextmanager
def _closed_port() -> Iterator[str]:
    """A port nothing listens on (bound, so nothing else takes it meanwhile): every connection is refused."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{held.getsockname()[1]}"


@contextlib.contextmanager
def _refusing_cluster() -> Iterator[str]:
    """A broker that offers SASL PLAIN and refuses every login, as Kafka does (SaslAuthenticate with
    SASL_AUTHENTICATION_FAILED), answered with the front door's own encoders."""
    from kio.schema.errors import ErrorCode

    from front_door.api_keys import ApiKey
    from front_door.apis import api_versions
    from front_door.apis.registry import READABLE
    from front_door.network.wire import encode_response, parse_request
    from front_door.security.sasl_exchange import authenticate_body, handshake_body

    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def read_exactly(conn: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def serve(conn: socket.socket) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while True:
                (size,) = struct.unpack(">i", read_exactly(conn, 4))
                request = parse_request(read_exactly(conn, size), READABLE, 1)
                if request.api_key == ApiKey.API_VERSIONS:
                    body = api_versions.api_versions_body(request.api_version)
                elif request.api_key == ApiKey.SASL_HANDSHAKE:
                    body = handshake_body(request.api_version, ErrorCode.none, ["PLAIN"])
                elif request.api_key == ApiKey.SASL_AUTHENTICATE:
                    body = authenticate_body(request.api_version, ErrorCode.sasl_authentication_failed,
                                             "Authentication failed: Invalid username or password")
                else:
                    return
                conn.sendall(encode_response(request.api_key, request.api_version, request.correlation_id, body))

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                accepted.append(conn)
                threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()
        for conn in accepted:
            conn.close()


def _retries(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "gateway.kafka_access" and "not answering yet" in r.getMessage()]


@pytest.mark.parametrize("cluster", [_silent_cluster, _closed_port], ids=["silent", "closed"])
def test_a_cluster_that_does_not_answer_is_asked_again_until_the_timeout(
        cluster: Callable[[], contextlib.AbstractContextManager[str]], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="gateway.kafka_access")
    pauses: list[float] = []
    with cluster() as address:
        started = time.monotonic()
        with pytest.raises(KafkaAccessError) as gave_up:
            check_access(KafkaCluster(address), [], timeout_s=3.0, attempt_timeout_s=0.5, sleep=pauses.append)
        took = time.monotonic() - started
    message = str(gave_up.value)
    assert "\n" not in message and message.startswith(f"no answer from the Kafka cluster at {address} (PLAINTEXT) "
                                                      "within 3 s (")
    assert "check bootstrap_servers" in message
    # asked again, a line per retry saying how long until the next attempt and how long is left
    retries = _retries(caplog)
    assert len(retries) >= 2 and len(retries) == len(pauses)
    assert all(re.search(r"retrying in \d+\.\d s \(\d+ s left\)$", line) for line in retries), retries
    assert all(0 < p <= RETRY_BACKOFF_MAX_S for p in pauses)
    assert f"({len(retries) + 1} attempt(s)" in message
    assert took < 3.0 + 10  # the bound, not librdkafka's own timeouts (loose: a busy machine)


def test_a_refused_login_fails_at_once_and_is_not_asked_again(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="gateway.kafka_access")
    security = load_kafka_security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                    "sasl.username": "gateway", "sasl.password": "${env:PASSWORD}"},
                                   environ={"PASSWORD": "wrong"})
    pauses: list[float] = []
    with _refusing_cluster() as address, pytest.raises(KafkaAccessError) as refused:
        check_access(KafkaCluster(address, security), [], timeout_s=60.0, sleep=pauses.append)
    assert not isinstance(refused.value, KafkaNotAnswering)
    assert "refused the gateway's login (SASL_PLAINTEXT, PLAIN as gateway)" in str(refused.value)
    assert "Invalid username or password" in str(refused.value)
    assert pauses == [] and _retries(caplog) == []


@pytest.mark.parametrize(("code", "retried"), [
    (KafkaError._TIMED_OUT, True), (KafkaError._TRANSPORT, True), (KafkaError._ALL_BROKERS_DOWN, True),
    (KafkaError.REQUEST_TIMED_OUT, True), (KafkaError.LEADER_NOT_AVAILABLE, True), (KafkaError.NOT_CONTROLLER, True),
    (KafkaError.COORDINATOR_LOAD_IN_PROGRESS, True),
    (KafkaError._AUTHENTICATION, False), (KafkaError._SSL, False), (KafkaError.SASL_AUTHENTICATION_FAILED, False),
    (KafkaError.TOPIC_AUTHORIZATION_FAILED, False), (KafkaError.GROUP_AUTHORIZATION_FAILED, False),
    (KafkaError.CLUSTER_AUTHORIZATION_FAILED, False), (KafkaError.INVALID_CONFIG, False),
])
def test_no_answer_and_not_yet_are_retried_definite_answers_are_not(code: int, retried: bool) -> None:
    assert not_answering(KafkaError(code)) is retried


@pytest.mark.parametrize("code", [KafkaError._AUTHENTICATION, KafkaError._SSL, KafkaError.SASL_AUTHENTICATION_FAILED,
                                  KafkaError.TOPIC_AUTHORIZATION_FAILED])
def test_a_refusal_is_not_retried_even_when_librdkafka_calls_it_retriable(code: int) -> None:
    assert not not_answering(KafkaError(code, retriable=True))
