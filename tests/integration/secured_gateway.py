"""A gateway whose Kafka cluster is the secured broker (tests/secured_kafka.py): its config with the `kafka`
block as an operator writes it (the password in a file, `${file:…}`), and its principal holding exactly the
ACLs `GatewayConfig.required_acls` lists (docs/security.md)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from confluent_kafka.admin import ResourcePatternType, ResourceType

from kafka_cluster.access import RequiredAcl
from streaming.config import GatewayConfig
from tests.integration.conftest import TEST_TOPICS
from tests.secured_kafka import GATEWAY, MTLS_PRINCIPAL, Acl, SecuredKafka

SASL_PRINCIPAL = f"User:{GATEWAY}"


def secured_config(kafka: SecuredKafka, work_dir: Path, *, mtls: bool = False, **overrides: object) -> GatewayConfig:
    """A gateway of its own (fresh topics, storage, checkpoint) on the SASL_SSL listener as `gateway` with
    SCRAM-SHA-512, or (`mtls`) on the SSL listener with the client certificate CN=gateway."""
    run = uuid.uuid4().hex[:8]
    work_dir.mkdir(parents=True, exist_ok=True)
    topics_file = work_dir / "topics.json"
    topics_file.write_text(json.dumps(TEST_TOPICS))
    if mtls:
        bootstrap = kafka.ssl_bootstrap_servers
        block = {"security.protocol": "SSL", "ssl.ca.location": str(kafka.ca_pem),
                 "ssl.certificate.location": str(kafka.client_cert_pem), "ssl.key.location": str(kafka.client_key_pem)}
    else:
        password_file = work_dir / "gateway.password"
        password_file.write_text(kafka.passwords[GATEWAY] + "\n")
        password_file.chmod(0o600)
        bootstrap = kafka.bootstrap_servers
        block = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": GATEWAY,
                 "sasl.password": f"${{file:{password_file}}}", "ssl.ca.location": str(kafka.ca_pem)}
    settings: dict[str, object] = dict(
        bootstrap_servers=bootstrap, kafka=block, ingress_topic=f"s-ingress-{run}", ingress_partitions=2,
        response_topic=f"s-responses-{run}", dlq_topic=f"s-dlq-{run}", groups_topic=f"s-groups-{run}",
        topics_file=str(topics_file), segments_root=str(work_dir / "segments"),
        checkpoint_root=str(work_dir / "checkpoints"), query_name=f"gateway_{run}", spark_master="local[2]",
        shuffle_partitions=2, ui_enabled=False, metrics_address="127.0.0.1:0")
    settings.update(overrides)
    return GatewayConfig(**settings)  # type: ignore[arg-type]


def as_acls(required: list[RequiredAcl]) -> list[Acl]:
    """The listed ACLs in the broker helper's terms (Kafka's cluster resource is "kafka-cluster")."""
    kinds = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP, "cluster": ResourceType.BROKER}
    return [(kinds[a.resource], a.name, a.operation) for a in required]


def grant_listed(kafka: SecuredKafka, config: GatewayConfig, principal: str = SASL_PRINCIPAL) -> None:
    """Exactly the ACLs the docs list for `config`, literal and prefixed as listed."""
    acls = config.required_acls()
    kafka.grant(principal, as_acls([a for a in acls if not a.prefixed]))
    kafka.grant(principal, as_acls([a for a in acls if a.prefixed]), pattern_type=ResourcePatternType.PREFIXED)


def principal_of(config: GatewayConfig) -> str:
    return SASL_PRINCIPAL if config.kafka.get("sasl.username") else MTLS_PRINCIPAL
