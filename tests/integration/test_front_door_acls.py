"""Kafka's ACLs at the front door, against real clients: Kafka's own `kafka-acls.sh` (AclCommand) adds and
removes them through the door, librdkafka producers and consumers meet them, and a second door and a
restarted one enforce the same ones (they live on the security topic)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
)
from confluent_kafka.admin import ResourceType as AdminResourceType

from embedded.local_kafka import java_executable
from front_door.security.config import STANDARD_AUTHORIZER
from kafka_cluster.security import SaslMechanism
from streaming.config import GatewayConfig
from streaming.users_command import Addition, add_user
from tests.integration.front_door_harness import FRONT_DOOR_TOPICS, RunningDoor, running_front_door
from tests.integration.gateway_io import create_gateway_topics
from tests.integration.secured_door import (
    ADMIN,
    ADMIN_PASSWORD,
    Certificates,
    Door,
    client_settings,
    make_certificates,
    secured_door_config,
    start_door,
)
from tests.producer_performance import tools_classpath

BOB, BOB_PASSWORD = "bob", "bob-secret"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("acl-certificates"))


@pytest.fixture
def acl_config(gateway_config: GatewayConfig, certificates: Certificates) -> GatewayConfig:
    """A door with ACLs on (nothing allowed without one), `User:admin` its super user; admin and bob exist."""
    Path(gateway_config.topics_file).write_text(json.dumps(FRONT_DOOR_TOPICS))
    config = secured_door_config(gateway_config, certificates, **{
        "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": f"User:{ADMIN}"})
    create_gateway_topics(config)
    for name, password in ((ADMIN, ADMIN_PASSWORD), (BOB, BOB_PASSWORD)):
        assert add_user(config, Addition(name, SaslMechanism.SCRAM_SHA_512, 8192, password), 30.0) == 0
    return config


def _settings(bootstrap: str, certificates: Certificates, user: str, password: str) -> dict[str, object]:
    return client_settings("SASL_SSL", certificates, bootstrap, user=user, password=password)


def _grant(bootstrap: str, certificates: Certificates, *bindings: AclBinding) -> None:
    admin = AdminClient(_settings(bootstrap, certificates, ADMIN, ADMIN_PASSWORD))
    for future in admin.create_acls(list(bindings)).values():
        future.result(timeout=30)


def _acl(resource: AdminResourceType, name: str, operation: AclOperation, principal: str = f"User:{BOB}",
         pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def _produce(settings: dict[str, object], topic: str, value: bytes) -> str | None:
    """The delivery error's name (None: stored)."""
    outcome: list[str | None] = []
    producer = Producer({**settings, "enable.idempotence": False, "linger.ms": 0, "retries": 0,
                         "message.timeout.ms": 60000})
    producer.produce(topic, value, partition=0, on_delivery=lambda err, _m: outcome.append(
        None if err is None else err.name()))
    producer.flush(60)
    return outcome[0] if outcome else "NOT_DELIVERED"


def _read(settings: dict[str, object], topic: str) -> list[bytes]:
    """Everything partition 0 of `topic` holds now."""
    consumer = Consumer({**settings, "group.id": f"check-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return values
                raise AssertionError(msg.error())
            values.append(msg.value())
    finally:
        consumer.close()
    raise AssertionError(f"{topic}-0 not read to its end")


@pytest.fixture
def running(spark, acl_config: GatewayConfig) -> Iterator[RunningDoor]:  # noqa: ANN001
    with running_front_door(spark, acl_config) as running:
        yield running


def _bootstrap(running: RunningDoor) -> str:
    bound = running.door.listener_addresses["SASL_SSL"][0]
    return f"{bound.host}:{bound.port}"


def test_without_write_nothing_is_stored_and_a_prefix_allows_its_topics_only(
        running: RunningDoor, certificates: Certificates) -> None:
    bootstrap = _bootstrap(running)
    bob, admin = (_settings(bootstrap, certificates, BOB, BOB_PASSWORD),
                  _settings(bootstrap, certificates, ADMIN, ADMIN_PASSWORD))
    _grant(bootstrap, certificates, _acl(AdminResourceType.TOPIC, "ct", AclOperation.DESCRIBE))
    assert _produce(bob, "ct", b"refused") == "TOPIC_AUTHORIZATION_FAILED"
    _grant(bootstrap, certificates, _acl(AdminResourceType.TOPIC, "sp", AclOperation.WRITE,
                                         pattern=ResourcePatternType.PREFIXED))
    assert _produce(bob, "spread", b"allowed") is None  # "spread" starts with the prefix "sp"
    assert _produce(bob, "ct", b"still refused") == "TOPIC_AUTHORIZATION_FAILED"
    assert _produce(admin, "ct", b"admin") is None  # a super user
    assert _read(admin, "ct") == [b"admin"]  # the refused batches never reached the gateway
    assert _read(admin, "spread") == [b"allowed"]
    assert running.door.metrics.authorization_denials.labels("produce")._value.get() >= 2


def test_a_consumer_without_the_group_acl_gets_group_authorization_failed(
        running: RunningDoor, certificates: Certificates) -> None:
    bootstrap = _bootstrap(running)
    _grant(bootstrap, certificates, _acl(AdminResourceType.TOPIC, "ct", AclOperation.READ))
    consumer = Consumer({**_settings(bootstrap, certificates, BOB, BOB_PASSWORD), "group.id": "bobs-group",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["ct"])
    errors = []
    deadline = time.monotonic() + 60
    try:
        while not errors and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is not None:
                errors.append(msg.error().code())
    finally:
        consumer.close()
    assert errors == [KafkaError.GROUP_AUTHORIZATION_FAILED]


def _admin_properties(path: Path, certificates: Certificates) -> Path:
    path.write_text("\n".join([
        "security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512",
        f'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="{ADMIN}" '
        f'password="{ADMIN_PASSWORD}";', "ssl.truststore.type=PEM", f"ssl.truststore.location={certificates.ca}", ""]))
    return path


def test_kafkas_acl_command_adds_lists_and_removes_through_the_door(running: RunningDoor, certificates: Certificates,
                                                                   tmp_path: Path) -> None:
    bootstrap = _bootstrap(running)
    admin = ["--bootstrap-server", bootstrap, "--command-config", str(_admin_properties(tmp_path / "a.properties",
                                                                                        certificates))]

    def acls(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([java_executable(), "-cp", tools_classpath(), "org.apache.kafka.tools.AclCommand", *admin,
                               *args], capture_output=True, text=True, timeout=180)

    added = acls("--add", "--allow-principal", f"User:{BOB}", "--operation", "Write", "--topic", "ct")
    assert added.returncode == 0, added.stdout + added.stderr
    listed = acls("--list", "--topic", "ct")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert f"(principal=User:{BOB}, host=*, operation=WRITE, permissionType=ALLOW)" in listed.stdout
    bob = _settings(bootstrap, certificates, BOB, BOB_PASSWORD)
    assert _produce(bob, "ct", b"by acl") is None
    removed = acls("--remove", "--force", "--allow-principal", f"User:{BOB}", "--operation", "Write", "--topic", "ct")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert _produce(bob, "ct", b"after removal") == "TOPIC_AUTHORIZATION_FAILED"


def _sees(door: Door, certificates: Certificates, topic: str) -> bool:
    admin = AdminClient(_settings(door.bootstrap("SASL_SSL"), certificates, BOB, BOB_PASSWORD))
    return topic in admin.list_topics(timeout=10).topics


def test_acls_are_seen_by_a_second_door_and_outlive_a_restart(acl_config: GatewayConfig,
                                                              certificates: Certificates) -> None:
    first = start_door(acl_config)
    second = None
    try:
        assert not _sees(first, certificates, "ct")  # listing all topics leaves out what bob may not DESCRIBE
        second = start_door(acl_config)
        _grant(first.bootstrap("SASL_SSL"), certificates, _acl(AdminResourceType.TOPIC, "ct", AclOperation.DESCRIBE))
        assert _sees(first, certificates, "ct")
        deadline = time.monotonic() + 30
        while not _sees(second, certificates, "ct"):  # the second door follows the security topic
            assert time.monotonic() < deadline, "the second door never saw the ACL"
        second.door.stop()
        second = start_door(acl_config)  # a restart loads it from the topic
        assert _sees(second, certificates, "ct") and not _sees(second, certificates, "lat")
    finally:
        first.door.stop()
        if second is not None:
            second.door.stop()
