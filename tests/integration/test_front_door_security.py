"""The front door's TLS, SASL and users against real clients (librdkafka, Kafka's Java tools, kcat) and
Kafka's wire spoken directly where a test needs bytes no client sends."""

from __future__ import annotations

import json
import logging
import socket
import ssl
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ScramMechanism, UserScramCredentialDeletion
from kio.schema.errors import ErrorCode

from contract.ingress import HEADER_PRINCIPAL
from embedded.local_kafka import java_executable, kafka_classpath, tools_log4j_config
from streaming.config import GatewayConfig
from tests.integration.front_door_harness import FRONT_DOOR_TOPICS, RunningDoor, running_front_door
from tests.integration.gateway_io import create_gateway_topics
from tests.integration.group_members import compile_java_client
from tests.integration.secured_door import (
    ADMIN,
    ADMIN_PASSWORD,
    Certificates,
    Door,
    WireConnection,
    add_user,
    client_settings,
    make_certificates,
    request_body,
    secured_door_config,
    start_door,
)
from tests.integration.steady_producers import JAVA_SOURCE as STEADY_PRODUCER_SOURCE
from tests.integration.steady_producers import java_producer
from tests.producer_performance import tools_classpath

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS, METADATA = 17, 36, 18, 3


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"), clients=("writer", "stranger"))


@pytest.fixture
def door_config(gateway_config: GatewayConfig, certificates: Certificates) -> GatewayConfig:
    Path(gateway_config.topics_file).write_text(json.dumps(FRONT_DOOR_TOPICS))
    config = secured_door_config(gateway_config, certificates, **{"connection.failed.authentication.delay.ms": "1000"})
    create_gateway_topics(config)
    return config


@pytest.fixture
def door(door_config: GatewayConfig) -> Iterator[Door]:
    running = start_door(door_config)
    try:
        add_user({"bootstrap.servers": running.bootstrap("PLAINTEXT")}, ADMIN, ADMIN_PASSWORD)
        yield running
    finally:
        running.door.stop()


def _metadata(settings: dict[str, object]) -> list[str]:
    """Topic names a client sees after logging in; KafkaException when it cannot."""
    errors: list[str] = []
    admin = AdminClient({**settings, "error_cb": lambda e: errors.append(str(e))})
    try:
        return sorted(admin.list_topics(timeout=10).topics)
    except KafkaException as e:
        raise KafkaException(f"{e}; errors: {errors}") from None


def _logs_in(door: Door, certificates: Certificates, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> bool:
    """True when the user sees the topics; False once librdkafka reports an authentication failure (its
    error callback), without waiting out a metadata timeout; an AssertionError when neither comes."""
    settings = client_settings("SASL_SSL", certificates, door.bootstrap("SASL_SSL"), user=user, password=password,
                               mechanism=mechanism)
    refused: list[KafkaError] = []
    admin = AdminClient({**settings, "error_cb": lambda e: refused.append(e) if e.code() == KafkaError._AUTHENTICATION
                         else None})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            return "ct" in admin.list_topics(timeout=0.5).topics
        except KafkaException:
            admin.poll(0.1)  # serves the error callback
            if refused:
                return False
    raise AssertionError(f"{user} neither logged in nor was refused within 20 s")


def _until(condition, what: str, timeout_s: float = 30.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.2)  # polling a condition another door's follower thread makes true


# ============================================================================== logins


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_a_user_logs_in_with_each_mechanism_over_tls(door: Door, certificates: Certificates, mechanism: str) -> None:
    plain = {"bootstrap.servers": door.bootstrap("PLAINTEXT")}
    add_user(plain, "alice", "alice-secret", ScramMechanism.SCRAM_SHA_256)
    add_user(plain, "alice", "alice-secret", ScramMechanism.SCRAM_SHA_512)
    assert _logs_in(door, certificates, "alice", "alice-secret", mechanism)
    assert not _logs_in(door, certificates, "alice", "wrong", mechanism)
    assert not _logs_in(door, certificates, "nobody", "alice-secret", mechanism)


def test_a_client_certificate_is_the_principal_and_no_certificate_is_anonymous(door: Door,
                                                                               certificates: Certificates) -> None:
    with_certificate = client_settings("SSL", certificates, door.bootstrap("SSL"), certificate="writer")
    assert "ct" in _metadata(with_certificate)
    assert "ct" in _metadata(client_settings("SSL", certificates, door.bootstrap("SSL")))  # requested, not required
    counted = door.door.metrics.authentications.labels("SSL", "success")._value.get()
    assert counted >= 1


def _answers_over_tls(address: tuple[str, int], certificates: Certificates, certificate: str | None = None) -> bool:
    """Whether the door answers an ApiVersions v0 over TLS (read before any login) from a client with or without
    a client certificate; False when it ends the TLS session (no certificate where one is required)."""
    context = ssl.create_default_context(cafile=certificates.ca)
    if certificate is not None:
        context.load_cert_chain(*certificates.client(certificate))
    request = struct.pack(">hhih", API_VERSIONS, 0, 1, -1)  # header v1, no client id; v0 has no body
    try:
        with socket.create_connection(address, timeout=30) as raw, \
                context.wrap_socket(raw, server_hostname=address[0]) as tls:
            tls.sendall(struct.pack(">i", len(request)) + request)
            return len(tls.recv(4)) == 4
    except (ssl.SSLError, ConnectionError):
        return False


def test_ssl_client_auth_per_listener_as_kip_684(door_config: GatewayConfig, certificates: Certificates) -> None:
    """mTLS required on the SSL listener, passwords alone on SASL_SSL: `ssl.client.auth` reaches SSL listeners
    only (its listener-prefixed form, for one listener, is the unit tests' and docs/security.md's walk-through's)."""
    block = {**door_config.front_door_security, "ssl.client.auth": "required"}
    door = start_door(door_config.with_overrides(front_door_security=block))
    try:
        assert _answers_over_tls(door.address("SASL_SSL"), certificates)
        assert not _answers_over_tls(door.address("SSL"), certificates)
        assert _answers_over_tls(door.address("SSL"), certificates, certificate="writer")
    finally:
        door.door.stop()


def test_a_bad_password_waits_kafkas_delay_then_gets_kafkas_message_and_the_connection_closes(door: Door) -> None:
    with WireConnection(door.address("SASL_PLAINTEXT")) as conn:
        conn.send(SASL_HANDSHAKE, 1, request_body(SASL_HANDSHAKE, 1, mechanism="PLAIN"))
        handshake = conn.receive(SASL_HANDSHAKE, 1)
        assert handshake.error_code == ErrorCode.none and "PLAIN" in handshake.mechanisms
        conn.send(SASL_AUTHENTICATE, 2, request_body(SASL_AUTHENTICATE, 2, auth_bytes=b"\0admin\0wrong"))
        sent = time.monotonic()
        answer = conn.receive(SASL_AUTHENTICATE, 2)
        waited = time.monotonic() - sent
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == "Authentication failed: Invalid username or password"
        assert waited >= 1.0  # connection.failed.authentication.delay.ms of this door
        assert conn.receive_frame() is None


def test_nothing_but_api_versions_and_sasl_is_read_before_authentication(door: Door) -> None:
    with WireConnection(door.address("SASL_PLAINTEXT")) as conn:
        conn.send(API_VERSIONS, 3, request_body(API_VERSIONS, 3, client_software_name="wire",
                                                client_software_version="1"))
        versions = conn.receive(API_VERSIONS, 3)
        served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert served[SASL_HANDSHAKE] == (0, 1) and served[SASL_AUTHENTICATE] == (0, 2)
        conn.send(METADATA, 12, request_body(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False))
        assert conn.receive_frame() is None  # closed, unanswered, as Kafka's SaslServerAuthenticator does
    with WireConnection(door.address("SASL_PLAINTEXT")) as conn:  # a token before any handshake
        conn.send(SASL_AUTHENTICATE, 2, request_body(SASL_AUTHENTICATE, 2, auth_bytes=b"\0admin\0admin-secret"))
        assert conn.receive_frame() is None


def test_connections_closed_before_login_are_logged_a_line_a_minute_per_host(door: Door,
                                                                              caplog: pytest.LogCaptureFixture) -> None:
    """A host that opens connections in a loop and sends a request before logging in gets each one closed, and
    one log line for all of them (within the minute), as denials and failed logins are logged."""
    with caplog.at_level(logging.INFO, logger="gateway.front_door"):
        for _ in range(5):
            with WireConnection(door.address("SASL_PLAINTEXT")) as conn:
                conn.send(METADATA, 12, request_body(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                                                     include_topic_authorized_operations=False))
                assert conn.receive_frame() is None
    lines = [r.getMessage() for r in caplog.records if "during SASL handshake" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].endswith("on SASL_PLAINTEXT: Unexpected Kafka request of type metadata during SASL handshake")


def test_an_unknown_mechanism_is_told_the_enabled_ones_and_closed(door: Door) -> None:
    with WireConnection(door.address("SASL_PLAINTEXT")) as conn:
        conn.send(SASL_HANDSHAKE, 1, request_body(SASL_HANDSHAKE, 1, mechanism="GSSAPI"))
        answer = conn.receive(SASL_HANDSHAKE, 1)
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert set(answer.mechanisms) == {"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"}
        assert conn.receive_frame() is None


def test_a_v0_handshake_is_followed_by_bare_tokens(door: Door) -> None:
    with WireConnection(door.address("SASL_PLAINTEXT")) as conn:
        conn.send(SASL_HANDSHAKE, 0, request_body(SASL_HANDSHAKE, 0, mechanism="PLAIN"))
        assert conn.receive(SASL_HANDSHAKE, 0).error_code == ErrorCode.none
        conn.send_raw(b"\0admin\0admin-secret")
        assert conn.receive_frame() == b""  # PLAIN's empty server token: authenticated
        conn.send(METADATA, 12, request_body(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False))
        assert any(t.name == "ct" for t in conn.receive(METADATA, 12).topics)


def test_hostile_bytes_close_only_their_own_connection(door: Door, certificates: Certificates) -> None:
    with WireConnection(door.address("SASL_PLAINTEXT")) as conn:  # a SASL frame far beyond 512 KiB
        conn.sock.sendall((64 * 1024 * 1024).to_bytes(4, "big") + b"x" * 1024)
        assert conn.receive_frame() is None
    with WireConnection(door.address("SSL")) as conn:  # garbage instead of a TLS handshake
        conn.sock.sendall(b"GET / HTTP/1.1\r\nHost: gateway\r\n\r\n")
        assert conn.closes()  # perhaps after a TLS alert
    with WireConnection(door.address("SASL_PLAINTEXT")) as conn:  # an exchange cut off halfway
        conn.send(SASL_HANDSHAKE, 1, request_body(SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-512"))
        conn.receive(SASL_HANDSHAKE, 1)
        conn.sock.sendall(b"\x00\x00\x01\x00partial")
    assert _logs_in(door, certificates, ADMIN, ADMIN_PASSWORD)


# ============================================================================== re-authentication (KIP-368)

REAUTH_MS = 3000
# The Java producer's sessions: it renews one at 85-95 % of its lifetime, so a longer one leaves it time to be
# on time on two cores the whole suite keeps busy (a late renewal is closed, as Kafka closes it).
JAVA_REAUTH_MS = 6000


def _reauthentications(caplog: pytest.LogCaptureFixture) -> int:
    """The door's re-authentications so far (its debug line for each)."""
    return sum("re-authenticated as" in r.getMessage() for r in caplog.records)


@pytest.fixture
def reauth_door(gateway_config: GatewayConfig, certificates: Certificates) -> Iterator[Door]:
    Path(gateway_config.topics_file).write_text(json.dumps(FRONT_DOOR_TOPICS))
    config = secured_door_config(gateway_config, certificates, **{"connections.max.reauth.ms": str(REAUTH_MS)})
    create_gateway_topics(config)
    running = start_door(config)
    try:
        add_user({"bootstrap.servers": running.bootstrap("PLAINTEXT")}, ADMIN, ADMIN_PASSWORD)
        add_user({"bootstrap.servers": running.bootstrap("PLAINTEXT")}, "dave", "dave-secret")
        yield running
    finally:
        running.door.stop()


def _plain_login(conn: WireConnection, user: str, password: str) -> Any:
    conn.send(SASL_HANDSHAKE, 1, request_body(SASL_HANDSHAKE, 1, mechanism="PLAIN"))
    assert conn.receive(SASL_HANDSHAKE, 1).error_code == ErrorCode.none
    conn.send(SASL_AUTHENTICATE, 2, request_body(SASL_AUTHENTICATE, 2, auth_bytes=f"\0{user}\0{password}".encode()))
    return conn.receive(SASL_AUTHENTICATE, 2)


def _metadata_answered(conn: WireConnection) -> bool:
    try:
        conn.send(METADATA, 12, request_body(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False))
        return conn.receive(METADATA, 12) is not None
    except OSError:
        return False


def test_a_session_is_renewed_by_re_authentication_and_closed_when_it_expires_without(reauth_door: Door) -> None:
    address = reauth_door.address("SASL_PLAINTEXT")
    with WireConnection(address) as conn:
        answer = _plain_login(conn, ADMIN, ADMIN_PASSWORD)
        assert answer.error_code == ErrorCode.none and answer.session_lifetime.total_seconds() * 1000 == REAUTH_MS
        assert _metadata_answered(conn)
        renewed = _plain_login(conn, ADMIN, ADMIN_PASSWORD)  # a SaslHandshake on the authenticated connection
        assert renewed.error_code == ErrorCode.none and renewed.session_lifetime.total_seconds() * 1000 == REAUTH_MS
        assert _metadata_answered(conn)
    with WireConnection(address) as conn:
        assert _plain_login(conn, ADMIN, ADMIN_PASSWORD).error_code == ErrorCode.none
        logged_in = time.monotonic()
        _until(lambda: not _metadata_answered(conn), "the expired session's connection to close", 30)
        assert time.monotonic() - logged_in >= REAUTH_MS / 1000  # answered until its session expired


def test_re_authentication_keeps_the_principal_and_the_mechanism(reauth_door: Door) -> None:
    address = reauth_door.address("SASL_PLAINTEXT")
    with WireConnection(address) as conn:
        assert _plain_login(conn, ADMIN, ADMIN_PASSWORD).error_code == ErrorCode.none
        changed = _plain_login(conn, "dave", "dave-secret")
        assert changed.error_code == ErrorCode.sasl_authentication_failed
        assert changed.error_message == "Cannot change principals during re-authentication from User.admin: User.dave"
        assert conn.closes()
    with WireConnection(address) as conn:
        assert _plain_login(conn, ADMIN, ADMIN_PASSWORD).error_code == ErrorCode.none
        conn.send(SASL_HANDSHAKE, 1, request_body(SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-512"))
        assert conn.receive(SASL_HANDSHAKE, 1).error_code == ErrorCode.none  # answered, then the channel closed
        assert conn.closes()


def test_librdkafka_re_authenticates_its_connections_until_its_user_is_deleted(
        reauth_door: Door, certificates: Certificates, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="gateway.front_door")
    settings = client_settings("SASL_SSL", certificates, reauth_door.bootstrap("SASL_SSL"), user="dave",
                               password="dave-secret")
    refused: list[KafkaError] = []
    admin = AdminClient({**settings, "error_cb": lambda e: refused.append(e)
                         if e.code() == KafkaError._AUTHENTICATION else None})
    assert "ct" in admin.list_topics(timeout=10).topics
    # librdkafka re-authenticates each connection it holds before its session ends, and is answered throughout
    _until(lambda: "ct" in admin.list_topics(timeout=10).topics and _reauthentications(caplog) >= 2,
           "two re-authentications", 30)
    assert not refused
    operator = AdminClient({"bootstrap.servers": reauth_door.bootstrap("PLAINTEXT")})  # kept until its answer
    for future in operator.alter_user_scram_credentials(
            [UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512)]).values():
        future.result(timeout=30)

    def refused_yet() -> bool:
        admin.poll(0.5)  # serves the error callback
        return bool(refused)

    # a deleted user keeps no connection past its session: the next re-authentication is refused
    _until(refused_yet, "dave's re-authentication refused", 30)
    assert "Authentication failed during re-authentication" in str(refused[0])


@pytest.fixture
def running_reauth(spark, gateway_config: GatewayConfig,  # noqa: ANN001
                   certificates: Certificates) -> Iterator[RunningDoor]:
    config = secured_door_config(gateway_config, certificates, **{"connections.max.reauth.ms": str(JAVA_REAUTH_MS)})
    with running_front_door(spark, config) as running:
        add_user({"bootstrap.servers": _listener_bootstrap(running, "PLAINTEXT")}, ADMIN, ADMIN_PASSWORD)
        yield running


def test_the_java_client_re_authenticates_while_it_produces(running_reauth: RunningDoor, certificates: Certificates,
                                                            tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's own client renews its sessions on the connections it produces on (answered in order behind the
    requests before), and loses no record."""
    caplog.set_level(logging.DEBUG, logger="gateway.front_door")
    classes = compile_java_client(tmp_path / "java", STEADY_PRODUCER_SOURCE)
    producer = java_producer(
        classes, _listener_bootstrap(running_reauth, "SASL_SSL"), "ct", "java", 2, idle=False,
        **{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
           "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                               f'username="{ADMIN}" password="{ADMIN_PASSWORD}";',
           "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certificates.ca)})
    try:
        _until(lambda: len(producer.acked) > 0, "the Java producer's first acknowledgement", 120)
        _until(lambda: _reauthentications(caplog) >= 3, "three re-authentications while producing", 120)
        unacknowledged = producer.stop(60)
    finally:
        producer.kill()
    assert not unacknowledged and not producer.errors, (unacknowledged[:5], producer.errors[:5])
    assert not [r for r in caplog.records if "Failed re-authentication" in r.getMessage()]


# ============================================================================== users


def test_users_are_shared_by_every_door_and_outlive_a_restart(door: Door, certificates: Certificates) -> None:
    other = start_door(door.config)  # a second door on the same cluster and security topic
    try:
        assert _logs_in(other, certificates, ADMIN, ADMIN_PASSWORD)  # added through the first before it started
        add_user({"bootstrap.servers": other.bootstrap("PLAINTEXT")}, "carol", "carol-secret")
        _until(lambda: _logs_in(door, certificates, "carol", "carol-secret"), "the first door sees carol")
        admin = AdminClient({"bootstrap.servers": door.bootstrap("PLAINTEXT")})
        described = {u: d.result() for u, d in admin.describe_user_scram_credentials(["carol", ADMIN]).items()}
        assert [(i.mechanism, i.iterations) for i in described["carol"].scram_credential_infos] == [
            (ScramMechanism.SCRAM_SHA_512, 8192)]
        for future in admin.alter_user_scram_credentials(
                [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)]).values():
            future.result(timeout=30)
        _until(lambda: not _logs_in(other, certificates, "carol", "carol-secret"), "the second door forgets carol")
    finally:
        other.door.stop()
    door.door.stop()
    restarted = start_door(door.config)
    door.door = restarted.door  # the fixture stops it
    assert _logs_in(restarted, certificates, ADMIN, ADMIN_PASSWORD)
    assert not _logs_in(restarted, certificates, "carol", "carol-secret")


def test_describing_a_user_without_credentials_is_kafkas_error(door: Door) -> None:
    admin = AdminClient({"bootstrap.servers": door.bootstrap("PLAINTEXT")})
    with pytest.raises(KafkaException, match="does not exist: nobody"):
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result()


# ============================================================================== real clients, end to end


@pytest.fixture
def running(spark, door_config: GatewayConfig) -> Iterator[RunningDoor]:  # noqa: ANN001
    with running_front_door(spark, door_config) as running:
        bootstrap = {"bootstrap.servers": _listener_bootstrap(running, "PLAINTEXT")}
        add_user(bootstrap, ADMIN, ADMIN_PASSWORD)
        yield running


def _listener_bootstrap(running: RunningDoor, listener: str) -> str:
    bound = running.door.listener_addresses[listener][0]
    return f"{bound.host}:{bound.port}"


def _produce(settings: dict[str, object], topic: str, values: list[bytes]) -> list[str]:
    errors: list[str] = []
    producer = Producer({**settings, "enable.idempotence": True, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value, partition=0,
                         on_delivery=lambda err, _m: errors.append(str(err)) if err is not None else None)
    assert producer.flush(60) == 0
    return errors


def _consume(settings: dict[str, object], topic: str, count: int) -> list[bytes]:
    consumer = Consumer({**settings, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def test_librdkafka_produces_with_scram_over_tls_and_consumes_with_a_client_certificate(
        running: RunningDoor, certificates: Certificates) -> None:
    scram = client_settings("SASL_SSL", certificates, _listener_bootstrap(running, "SASL_SSL"), user=ADMIN,
                            password=ADMIN_PASSWORD)
    values = [f"secured-{i}".encode() for i in range(5)]
    assert _produce(scram, "ct", values) == []
    mtls = client_settings("SSL", certificates, _listener_bootstrap(running, "SSL"), certificate="writer")
    assert _consume(mtls, "ct", 5) == values
    assert _produce(mtls, "ct", [b"by-certificate"]) == []
    principals = _ingress_principals(running.config)
    # who produced each batch travels with it (gw.principal): SCRAM's user, then the certificate's subject
    assert set(principals[:-1]) == {b"User:admin"}
    assert principals[-1].startswith(b"User:CN=writer,")  # RFC 2253, most specific attribute first


def _ingress_principals(config: GatewayConfig) -> list[bytes]:
    """The gw.principal header of every message of the ingress topic, in produce order, up to the first one
    produced with a client certificate."""
    consumer = Consumer({"bootstrap.servers": config.bootstrap_servers, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(config.ingress_topic, p, 0) for p in range(config.ingress_partitions)])
    found: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 60
    try:
        while not any(p.startswith(b"User:CN=") for _, p in found) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                found.append((msg.timestamp()[1], dict(msg.headers() or [])[HEADER_PRINCIPAL]))
    finally:
        consumer.close()
    return [principal for _, principal in sorted(found, key=lambda f: f[0])]


def _java_properties(path: Path, certificates: Certificates, user: str, password: str) -> Path:
    path.write_text("\n".join([
        "security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512",
        f'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" '
        f'password="{password}";',
        "ssl.truststore.type=PEM", f"ssl.truststore.location={certificates.ca}", ""]))
    return path


def _java(classpath: str, main: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    # the tools' log lines on stderr (WARN and up), so stdout holds only what the tool prints
    return subprocess.run([java_executable(), f"-Dlog4j2.configurationFile={tools_log4j_config()}", "-cp", classpath,
                           main, *args], input=stdin, capture_output=True, text=True, timeout=180)


def test_kafkas_java_tools_add_a_user_then_produce_and_consume_as_it(running: RunningDoor, certificates: Certificates,
                                                                      tmp_path: Path) -> None:
    bootstrap = _listener_bootstrap(running, "SASL_SSL")
    admin = _java_properties(tmp_path / "admin.properties", certificates, ADMIN, ADMIN_PASSWORD)
    added = _java(kafka_classpath(), "kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, "--command-config",
                  str(admin), "--alter", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=bob-secret]",
                  "--entity-type", "users", "--entity-name", "bob")
    assert added.returncode == 0, added.stdout + added.stderr
    described = _java(kafka_classpath(), "kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap,
                      "--command-config", str(admin), "--describe", "--entity-type", "users")
    assert described.returncode == 0, described.stdout + described.stderr
    assert "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=8192" in described.stdout
    bob = _java_properties(tmp_path / "bob.properties", certificates, "bob", "bob-secret")
    produced = _java(tools_classpath(), "org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", bootstrap,
                     "--topic", "ct", "--command-config", str(bob), stdin="java-one\njava-two\n")
    assert produced.returncode == 0, produced.stdout + produced.stderr
    consumed = _java(tools_classpath(), "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server",
                     bootstrap, "--topic", "ct", "--group", f"bobs-{uuid.uuid4().hex[:6]}", "--from-beginning",
                     "--max-messages", "2", "--command-config", str(bob), "--timeout-ms", "60000")
    assert consumed.returncode == 0, consumed.stdout + consumed.stderr
    # the producer's partitioner picks the partitions: read in a group, compared without order
    assert sorted(consumed.stdout.split()) == ["java-one", "java-two"], consumed.stderr


def test_kcat_produces_and_consumes_with_scram_over_tls(running: RunningDoor, certificates: Certificates) -> None:
    bootstrap = _listener_bootstrap(running, "SASL_SSL")
    login = ["-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512", "-X",
             f"sasl.username={ADMIN}", "-X", f"sasl.password={ADMIN_PASSWORD}", "-X", f"ssl.ca.location={certificates.ca}"]
    produced = subprocess.run(["kcat", "-b", bootstrap, *login, "-P", "-t", "ct", "-p", "0"], input="kcat-one\n",
                              capture_output=True, text=True, timeout=120)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(["kcat", "-b", bootstrap, *login, "-C", "-t", "ct", "-p", "0", "-o", "beginning", "-c",
                               "1", "-e"], capture_output=True, text=True, timeout=120)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["kcat-one"]
