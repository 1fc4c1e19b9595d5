"""The gateway against a secured Kafka cluster (docs/security.md): Apache Kafka with a SASL_SSL listener (SCRAM
users made at format time), an SSL listener that requires client certificates, StandardAuthorizer with
`allow.everyone.if.no.acl.found=false`, and the gateway's principal holding exactly the ACLs the docs list.
The same accounting as the plaintext tests: every batch answered, stored once, rejects dead-lettered; the
commands reach the cluster through the same `kafka` block; what is wrong gets a line naming it."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AclOperation, ResourceType
from pyspark.sql import SparkSession

from embedded.local_kafka import java_executable
from kafka_cluster.access import KafkaAccessError, check_access
from sinks.dlq.cli import main as dlq_main
from storage.log_reader import read
from streaming.config import REPO_ROOT, GatewayConfig
from streaming.query import start_gateway
from streaming.status import recent_errors
from tests.integration.conftest import TEST_TOPICS
from tests.integration.fault_harness import ResponseWatch, account, mixed_traffic
from tests.integration.front_door_harness import running_front_door
from tests.integration.gateway_io import create_gateway_topics, produce_batches, read_all
from tests.integration.secured_gateway import as_acls, grant_listed, principal_of, secured_config
from tests.producer_performance import tools_classpath
from tests.secured_kafka import MTLS_PRINCIPAL, SecuredKafka

pytestmark = pytest.mark.integration

DOOR_TOPIC = "door"  # the front-door producer's own topic: the ingress batches' offsets stay theirs
WITH_DOOR_TOPIC = {**TEST_TOPICS, "topics": {**TEST_TOPICS["topics"], DOOR_TOPIC: {"partitions": 2, "configs": {}}}}


def _write_config(config: GatewayConfig, path: Path) -> Path:
    path.write_text(json.dumps(dataclasses.asdict(config)))
    return path


def _door_produce(bootstrap: str, n: int) -> list[Message]:
    """`n` records through the front door with an idempotent librdkafka producer; their delivery reports."""
    delivered: list[Message] = []
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        (errors.append(err) if err is not None else delivered.append(msg))

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        p.produce(DOOR_TOPIC, value=f"door-{i}".encode(), partition=i % 2, on_delivery=report)
    assert p.flush(120) == 0
    assert not errors, errors
    return delivered


def test_pipeline_front_door_and_commands_over_sasl_ssl_with_exactly_the_listed_acls(
        spark: SparkSession, secured_kafka: SecuredKafka, tmp_path: Path) -> None:
    config = secured_config(secured_kafka, tmp_path)
    grant_listed(secured_kafka, config)
    check_access(config.cluster, config.required_acls())  # the start's check passes with exactly these
    with running_front_door(spark, config, topics=WITH_DOOR_TOPIC) as door:  # creates the topics as `gateway`
        watch = ResponseWatch(door.config)
        try:
            sent = produce_batches(door.config, mixed_traffic(60, 0))
            delivered = _door_produce(door.bootstrap, 40)  # the door's bridge produces and reads over SASL_SSL
            watch.wait_all(sent, 300)
        finally:
            watch.stop()
    result = account(config, sent)
    assert result.appended > 0 and result.rejected > 0 and result.duplicate_responses == 0
    root = config.path(config.segments_root)
    stored = [r.value for p in (0, 1) for r in read(root, DOOR_TOPIC, p, 0, 1000)]
    assert sorted(stored) == sorted(m.value() for m in delivered)

    # the commands, given the gateway's config file, reach the cluster as the gateway does
    path = _write_config(config, tmp_path / "gateway.json")
    out, err = io.StringIO(), io.StringIO()
    assert dlq_main(["list", "--config", str(path), "--topic", config.dlq_topic, "--format", "jsonl"], out, err) == 0, \
        err.getvalue()
    letters = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(letters) == result.rejected
    out = io.StringIO()
    assert dlq_main(["show", letters[0]["position"], "--config", str(path), "--topic", config.dlq_topic], out, err) == 0
    assert letters[0]["request_id"] in out.getvalue()
    before = len(read_all(config, config.ingress_topic))
    assert dlq_main(["replay", "--position", letters[0]["position"], "--yes", "--config", str(path),
                     "--topic", config.dlq_topic, "--format", "jsonl"], io.StringIO(), err) == 0, err.getvalue()
    assert len(read_all(config, config.ingress_topic)) == before + 1
    errors = recent_errors(config.cluster, config.response_topic, limit=100)  # `gateway status`'s Kafka part
    assert errors and all(e["error_code"] != 0 for e in errors)


def test_pipeline_over_mtls_as_the_certificates_principal(spark: SparkSession, secured_kafka: SecuredKafka,
                                                          tmp_path: Path) -> None:
    config = secured_config(secured_kafka, tmp_path, mtls=True)
    assert principal_of(config) == MTLS_PRINCIPAL
    grant_listed(secured_kafka, config, MTLS_PRINCIPAL)
    check_access(config.cluster, config.required_acls())
    create_gateway_topics(config)
    sent = produce_batches(config, mixed_traffic(40, 100))
    query, _ = start_gateway(spark, config, available_now=True)
    query.awaitTermination()
    assert query.exception() is None
    result = account(config, sent)
    assert result.appended > 0 and result.rejected > 0 and result.responses == len(sent)


def test_a_wrong_password_an_untrusted_ca_and_a_missing_acl_each_name_what_to_fix(
        secured_kafka: SecuredKafka, tmp_path: Path) -> None:
    config = secured_config(secured_kafka, tmp_path)
    grant_listed(secured_kafka, config)
    create_gateway_topics(config)
    acls = config.required_acls()

    wrong = config.with_overrides(kafka={**config.kafka, "sasl.password": "not-the-password"})
    with pytest.raises(KafkaAccessError, match=r"refused the gateway's login \(SASL_SSL, SCRAM-SHA-512 as gateway\)"):
        check_access(wrong.cluster, acls, timeout_s=60)

    untrusted = config.with_overrides(kafka={**config.kafka, "ssl.ca.location": str(secured_kafka.other_ca_pem)})
    with pytest.raises(KafkaAccessError, match=r"certificate .* is not trusted: kafka.ssl.ca.location"):
        check_access(untrusted.cluster, acls, timeout_s=60)

    dlq_write = [a for a in acls if a.name == config.dlq_topic and a.operation.name == "WRITE"]
    secured_kafka.revoke(principal_of(config), as_acls(dlq_write))
    with pytest.raises(KafkaAccessError) as missing:
        check_access(config.cluster, acls)
    assert f"lacks 1 ACL(s) on {config.bootstrap_servers}: WRITE on topic {config.dlq_topic}" in str(missing.value)
    assert f"--allow-principal User:gateway --operation Write --topic {config.dlq_topic}" in str(missing.value)

    # The driver stops at start with that line (exit 2), not in a retry loop that looks like a healthy start.
    path = _write_config(wrong.with_overrides(kafka={**config.kafka, "sasl.password": "${env:GW_TEST_PASSWORD}"}),
                         tmp_path / "wrong.json")
    run = subprocess.run([sys.executable, "-m", "streaming", "run", "--config", str(path)], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "GW_TEST_PASSWORD": "not-the-password"})
    assert run.returncode == 2, run.stdout[-3000:] + run.stderr[-3000:]
    assert "refused the gateway's login" in run.stdout + run.stderr
    assert "query_started" not in run.stdout + run.stderr



@pytest.mark.parametrize("login", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN", "mTLS"])
def test_kafkas_own_java_tools_connect_with_the_gateways_client_properties(
        secured_kafka: SecuredKafka, tmp_path: Path, login: str) -> None:
    """`gateway client-properties` gives Kafka's Java client (here kafka-topics) what the Spark source gets: the
    JAAS line built from the username and password, the PEM content inline (KIP-651)."""
    config = secured_config(secured_kafka, tmp_path, mtls=login == "mTLS")
    if login != "mTLS":
        config = config.with_overrides(kafka={**config.kafka, "sasl.mechanism": login})
    topic = f"java-{login.lower()}-{uuid.uuid4().hex[:6]}"
    secured_kafka.create_topics([(topic, 1, {})])
    secured_kafka.grant(principal_of(config), [(ResourceType.TOPIC, topic, AclOperation.DESCRIBE)])
    properties = tmp_path / "gateway.properties"
    written = subprocess.run([sys.executable, "-m", "streaming", "client-properties", "--config",
                              str(_write_config(config, tmp_path / "gateway.json")), "--output", str(properties)],
                             cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert written.returncode == 0, written.stderr
    assert properties.stat().st_mode & 0o077 == 0  # it holds the password: the owner's alone
    listed = subprocess.run(
        [java_executable(), "-cp", tools_classpath(), "org.apache.kafka.tools.TopicCommand", "--bootstrap-server",
         config.bootstrap_servers, "--command-config", str(properties), "--list"],
        capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert topic in listed.stdout.split()  # listed only to the principal granted DESCRIBE on it
