"""The ACLs the gateway needs: one list, printed as kafka-acls.sh lines and documented in docs/security.md."""

from __future__ import annotations

from confluent_kafka.admin import AclOperation

from sinks.kafka_access import RequiredAcl
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


def test_the_groups_and_security_topics_only_with_a_front_door() -> None:
    with_door = {(a.resource, a.name) for a in GatewayConfig().required_acls()}
    without = {(a.resource, a.name) for a in GatewayConfig(front_door_address=None).required_acls()}
    assert with_door - without == {("topic", "gateway.consumer_offsets"), ("topic", "gateway.security")}


def test_the_docs_list_every_acl_of_the_default_gateway() -> None:
    doc = (REPO_ROOT / "docs" / "security.md").read_text()
    rows = [line for line in doc.splitlines() if line.startswith("| ")]
    for acl in GatewayConfig().required_acls():
        name = "cluster" if acl.resource == "cluster" else f"`{acl.name}`"
        assert any(name in row and acl.operation.name in row for row in rows), acl
