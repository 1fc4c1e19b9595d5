"""The secured broker (tests/secured_kafka.py) is what it claims: TLS from the test's CA, SASL SCRAM and
PLAIN, client certificates as principals, and ACLs enforced. Every client here is librdkafka's
(confluent-kafka), as a user's own would be."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AclOperation, AdminClient, ResourceType

from tests.secured_kafka import GATEWAY, MTLS_PRINCIPAL, SecuredKafka

pytestmark = pytest.mark.integration

TIMEOUT_S = 60.0
# librdkafka's own log lines (connection and TLS failures, expected here) into pytest's captured logging
CLIENT_LOG = logging.getLogger("tests.secured_kafka.librdkafka")
MECHANISMS = ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def first_error(config: Mapping[str, str], code: int, timeout_s: float = TIMEOUT_S) -> KafkaError:
    """The first client-level error with `code` that a producer with `config` reports through `error_cb`.

    librdkafka connects to the bootstrap broker as soon as the client exists; `poll` serves the callbacks."""
    seen: list[KafkaError] = []
    matched = threading.Event()

    def on_error(error: KafkaError) -> None:
        seen.append(error)
        if error.code() == code:
            matched.set()

    producer = Producer({**config, "error_cb": on_error, "logger": CLIENT_LOG})
    deadline = time.monotonic() + timeout_s
    while not matched.is_set() and time.monotonic() < deadline:
        producer.poll(0.5)  # returns as soon as a callback was served
    assert matched.is_set(), f"no {KafkaError(code).name()} within {timeout_s}s; errors seen: {seen}"
    return next(error for error in seen if error.code() == code)


def read_one(config: Mapping[str, str], topic: str, group: str) -> tuple[KafkaError | None, bytes | None]:
    """(error, value) of the first event a consumer of `group` with `config` gets from `topic`.

    Subscribed, not assigned: librdkafka reports a subscribed topic's metadata error (such as
    TOPIC_AUTHORIZATION_FAILED) to the consumer, an assigned one's it only logs. The group needs READ."""
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "logger": CLIENT_LOG})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None:
                return message.error(), message.value()
        raise AssertionError(f"nothing from {topic} within {TIMEOUT_S}s")
    finally:
        consumer.close()


def produce_one(config: Mapping[str, str], topic: str, value: bytes) -> KafkaError | None:
    """The delivery report's error (None: written)."""
    reports: list[KafkaError | None] = []
    producer = Producer({**config, "logger": CLIENT_LOG})
    producer.produce(topic, value, partition=0, on_delivery=lambda error, _message: reports.append(error))
    assert producer.flush(TIMEOUT_S) == 0
    [error] = reports
    return error


@pytest.fixture(scope="module")
def gateway_topics(secured_kafka: SecuredKafka) -> tuple[str, str]:
    """Two topics: `User:gateway` may describe the first, not the second."""
    visible, hidden = unique("visible"), unique("hidden")
    secured_kafka.create_topics([(visible, 1, {}), (hidden, 1, {})])
    secured_kafka.grant(f"User:{GATEWAY}", [(ResourceType.TOPIC, visible, AclOperation.DESCRIBE)])
    return visible, hidden


def test_admin_lists_topics_over_sasl_ssl_scram_sha_512(secured_kafka: SecuredKafka) -> None:
    topic = unique("admin")
    secured_kafka.create_topics([(topic, 2, {})])

    metadata = secured_kafka.admin_client().list_topics(timeout=TIMEOUT_S)

    assert len(metadata.topics[topic].partitions) == 2
    assert [f"{b.host}:{b.port}" for b in metadata.brokers.values()] == [secured_kafka.bootstrap_servers]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_gateway_authenticates_with_each_mechanism_as_user_gateway(
    secured_kafka: SecuredKafka, gateway_topics: tuple[str, str], mechanism: str
) -> None:
    visible, hidden = gateway_topics

    topics = AdminClient(secured_kafka.sasl_client(GATEWAY, mechanism)).list_topics(timeout=TIMEOUT_S).topics

    # the ACL for User:gateway applies (so that is the principal), and nothing else is shown to it
    assert visible in topics
    assert hidden not in topics


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_wrong_password_is_an_authentication_error(secured_kafka: SecuredKafka, mechanism: str) -> None:
    config = secured_kafka.sasl_client(GATEWAY, mechanism, password="not-" + secured_kafka.passwords[GATEWAY])

    error = first_error(config, KafkaError._AUTHENTICATION)

    assert "Authentication failed" in error.str(), error.str()


@pytest.mark.parametrize("listener", ["SASL_SSL", "SSL"])
def test_a_client_trusting_another_ca_fails_the_tls_handshake(secured_kafka: SecuredKafka, listener: str) -> None:
    config = secured_kafka.sasl_client(GATEWAY) if listener == "SASL_SSL" else secured_kafka.mtls_client()

    error = first_error({**config, "ssl.ca.location": str(secured_kafka.other_ca_pem)}, KafkaError._SSL)

    assert "certificate verify failed" in error.str(), error.str()


def test_the_ssl_listener_refuses_a_client_without_a_certificate(secured_kafka: SecuredKafka) -> None:
    config = secured_kafka.mtls_client()
    del config["ssl.certificate.location"], config["ssl.key.location"]

    # TLS 1.3: the client's handshake ends before the broker checks its (missing) certificate, so the
    # broker's refusal arrives as an alert on the first read (bad_certificate, RFC 8446 §6.2)
    error = first_error(config, KafkaError._TRANSPORT)

    assert "bad certificate" in error.str(), error.str()


def test_the_client_certificate_is_the_principal_user_cn_gateway(secured_kafka: SecuredKafka) -> None:
    topic = unique("mtls")
    secured_kafka.create_topics([(topic, 1, {})])
    assert produce_one(secured_kafka.sasl_client("admin"), topic, b"for CN=gateway") is None
    group = unique("mtls-group")
    secured_kafka.grant(MTLS_PRINCIPAL, [(ResourceType.GROUP, group, AclOperation.READ)])
    read = [(ResourceType.TOPIC, topic, AclOperation.READ)]  # READ implies DESCRIBE

    error, _ = read_one(secured_kafka.mtls_client(), topic, group)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error

    secured_kafka.grant(MTLS_PRINCIPAL, read)
    assert read_one(secured_kafka.mtls_client(), topic, group) == (None, b"for CN=gateway")

    secured_kafka.revoke(MTLS_PRINCIPAL, read)
    error, _ = read_one(secured_kafka.mtls_client(), topic, group)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error


def test_an_authenticated_user_without_acls_may_not_produce(secured_kafka: SecuredKafka) -> None:
    topic = unique("nobody")
    secured_kafka.create_topics([(topic, 1, {})])

    error = produce_one(secured_kafka.sasl_client("nobody"), topic, b"denied")

    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
