"""`gateway users` against the session's Kafka broker: the first user of a door whose only listener is
SASL_PLAINTEXT is made on the security topic before any door runs (as `kafka-storage.sh format --add-scram`
before any broker), logs in with librdkafka, is listed, and after `delete --yes` no new door lets it in."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka.admin import AclOperation, AdminClient, ConfigResource, ResourcePatternType, ResourceType

from contract.topics import SECURITY_TOPIC_PARTITIONS
from embedded.local_kafka import free_port
from front_door.metrics import FrontDoorMetrics
from front_door.server import FrontDoor
from kafka_cluster.access import KafkaAccessError, check_access
from kafka_cluster.admin import create_topics
from kafka_cluster.security import KafkaCluster, load_kafka_security
from sinks.registry_watcher import RegistryWatcher
from streaming.config import REPO_ROOT, GatewayConfig
from streaming.query import security_topic_spec, topic_specs
from tests.integration.front_door_harness import FRONT_DOOR_TOPICS
from tests.secured_kafka import GATEWAY, SecuredKafka

pytestmark = pytest.mark.integration

LISTENER = "SASL_PLAINTEXT"
ADMIN, PASSWORD = "door-admin", "door-admin-secret"


@pytest.fixture
def door_config(gateway_config: GatewayConfig) -> GatewayConfig:
    """A door with one SASL_PLAINTEXT listener and a security topic that does not exist yet (the gateway's
    other topics do)."""
    Path(gateway_config.topics_file).write_text(json.dumps(FRONT_DOOR_TOPICS))
    config = gateway_config.with_overrides(
        front_door_security={"listeners": f"{LISTENER}://127.0.0.1:0",
                             "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN"},
        security_topic=f"security-{uuid.uuid4().hex[:8]}")
    create_topics(config.cluster, [spec for spec in topic_specs(config) if spec[0] != config.security_topic])
    return config


@pytest.fixture
def config_file(door_config: GatewayConfig, tmp_path: Path) -> Path:
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps(dataclasses.asdict(door_config)))
    return path


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "admin-password"
    path.write_text(PASSWORD + "\n")
    return path


def gateway_users(config_file: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The installed command's code path, in a process of its own: exit status, stdout and stderr."""
    return subprocess.run([sys.executable, "-m", "streaming", "users", *argv, "--config", str(config_file)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})


@contextmanager
def running_door(config: GatewayConfig) -> Iterator[str]:
    """A front door (no query: logging in needs none); the bootstrap address of its SASL_PLAINTEXT listener."""
    door = FrontDoor(config.front_door_settings(), RegistryWatcher(config.path(config.topics_file)).current,
                     FrontDoorMetrics())
    door.start()
    try:
        bound = door.listener_addresses[LISTENER][0]
        yield f"{bound.host}:{bound.port}"
    finally:
        door.stop()


def door_client(bootstrap: str, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> KafkaCluster:
    security = load_kafka_security({"security.protocol": LISTENER, "sasl.mechanism": mechanism,
                                    "sasl.username": user, "sasl.password": password})
    return KafkaCluster(bootstrap, security)


def logs_in(bootstrap: str, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> bool:
    """librdkafka logs in (a refused login ends the wait at once) and then sees the registry's topics."""
    cluster = door_client(bootstrap, user, password, mechanism)
    try:
        check_access(cluster, [], timeout_s=30)
    except KafkaAccessError as e:
        assert "refused the gateway's login" in str(e), e  # refused, not unreachable
        return False
    return "ct" in AdminClient(cluster.client()).list_topics(timeout=30).topics


def until(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.2)  # polling a condition the door's follower thread makes true


def test_the_first_user_is_bootstrapped_listed_and_deleted(door_config: GatewayConfig, config_file: Path,
                                                           password_file: Path) -> None:
    admin = AdminClient(door_config.cluster.client())
    assert door_config.security_topic not in admin.list_topics(timeout=30).topics

    added = gateway_users(config_file, "add", ADMIN, "--mechanism", "SCRAM-SHA-512", "--password-file",
                          str(password_file))
    assert added.returncode == 0, added.stderr
    assert added.stdout.strip() == (f"user {ADMIN}: added its SCRAM-SHA-512 credential (8192 iterations) on "
                                    f"{door_config.security_topic}")
    assert PASSWORD not in added.stdout + added.stderr
    # the topic the doors need, as `gateway run` would have made it: compacted, one partition
    topic = admin.list_topics(door_config.security_topic, timeout=30).topics[door_config.security_topic]
    assert len(topic.partitions) == SECURITY_TOPIC_PARTITIONS
    resource = ConfigResource(ResourceType.TOPIC, door_config.security_topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    assert configs["cleanup.policy"].value == "compact"

    with running_door(door_config) as bootstrap:
        assert logs_in(bootstrap, ADMIN, PASSWORD)
        assert logs_in(bootstrap, ADMIN, PASSWORD, "PLAIN")  # PLAIN is checked against the SCRAM credential
        assert not logs_in(bootstrap, ADMIN, "wrong")
        assert not logs_in(bootstrap, ADMIN, PASSWORD, "SCRAM-SHA-256")  # no credential for that mechanism

        listed = gateway_users(config_file, "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert [json.loads(line) for line in listed.stdout.splitlines()] == [
            {"user": ADMIN, "mechanism": "SCRAM-SHA-512", "iterations": 8192}]
        table = gateway_users(config_file, "list")
        assert table.stdout.splitlines()[1].split() == [ADMIN, "SCRAM-SHA-512", "8192"]

        # a running door follows the topic: a user added now logs in without a restart
        added = gateway_users(config_file, "add", "alice", "--mechanism", "SCRAM-SHA-256", "--iterations", "4096",
                              "--password-file", str(password_file))
        assert added.returncode == 0, added.stderr
        until(lambda: logs_in(bootstrap, "alice", PASSWORD, "SCRAM-SHA-256"), "alice logs in at the running door")

    refused = gateway_users(config_file, "delete", ADMIN, "--mechanism", "SCRAM-SHA-512")
    assert refused.returncode == 2 and "add --yes" in refused.stderr
    deleted = gateway_users(config_file, "delete", ADMIN, "--mechanism", "SCRAM-SHA-512", "--yes")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == f"user {ADMIN}: deleted its SCRAM-SHA-512 credential on {door_config.security_topic}"
    again = gateway_users(config_file, "delete", ADMIN, "--mechanism", "SCRAM-SHA-512", "--yes")
    assert again.returncode == 1
    assert again.stderr.strip() == (f"error: user {ADMIN} has no SCRAM-SHA-512 credential on "
                                    f"{door_config.security_topic}")

    with running_door(door_config) as bootstrap:  # a new door loads the topic: the admin is gone, alice stays
        assert not logs_in(bootstrap, ADMIN, PASSWORD)
        assert logs_in(bootstrap, "alice", PASSWORD, "SCRAM-SHA-256")


def test_an_unreachable_cluster_is_one_error_line_from_the_real_command(tmp_path: Path) -> None:
    """librdkafka's own logging stays out of the command's stderr: the one line is all an operator sees."""
    path = tmp_path / "elsewhere.json"
    path.write_text(json.dumps({"bootstrap_servers": f"127.0.0.1:{free_port()}"}))
    done = gateway_users(path, "list", "--timeout", "2")
    assert done.returncode == 2
    assert done.stderr.startswith("error: no answer from the Kafka cluster at 127.0.0.1:")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_on_a_secured_cluster_it_logs_in_as_the_gateway_and_names_the_acls_it_lacks(
        secured_kafka: SecuredKafka, tmp_path: Path, password_file: Path) -> None:
    """The command is a client of the gateway's cluster like `gateway run`: the config's `kafka` block (SASL_SSL,
    SCRAM-SHA-512 as `gateway`), and the ACLs it needs named when they are missing. Here an administrator
    made the topic: the gateway's principal has no CREATE."""
    run = uuid.uuid4().hex[:8]
    topic, prefix = f"security-{run}", f"users-{run}-"
    secured_kafka.create_topics([security_topic_spec(GatewayConfig(security_topic=topic))])
    kafka = {k: v for k, v in secured_kafka.sasl_client(GATEWAY).items() if k != "bootstrap.servers"}
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps({"bootstrap_servers": secured_kafka.bootstrap_servers, "security_topic": topic,
                                "consumer_group_prefix": prefix,
                                "kafka": {**kafka, "sasl.password": "${env:GW_USERS_TEST_PASSWORD}"}}))
    env = {"GW_USERS_TEST_PASSWORD": secured_kafka.passwords[GATEWAY]}

    refused = gateway_users(path, "list", env=env)
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"error: the gateway's principal User:{GATEWAY} lacks 3 ACL(s)")
    assert f"READ on topic {topic}, WRITE on topic {topic}, READ on group {prefix}*" in refused.stderr

    secured_kafka.grant(f"User:{GATEWAY}", [(ResourceType.TOPIC, topic, AclOperation.READ),
                                            (ResourceType.TOPIC, topic, AclOperation.WRITE)])
    secured_kafka.grant(f"User:{GATEWAY}", [(ResourceType.GROUP, prefix, AclOperation.READ)],
                        pattern_type=ResourcePatternType.PREFIXED)
    added = gateway_users(path, "add", "alice", "--mechanism", "SCRAM-SHA-512", "--password-file",
                          str(password_file), env=env)
    assert added.returncode == 0, added.stderr
    listed = gateway_users(path, "list", "--json", env=env)
    assert [json.loads(line) for line in listed.stdout.splitlines()] == [
        {"user": "alice", "mechanism": "SCRAM-SHA-512", "iterations": 8192}]
    assert secured_kafka.passwords[GATEWAY] not in added.stdout + added.stderr + listed.stdout + listed.stderr
