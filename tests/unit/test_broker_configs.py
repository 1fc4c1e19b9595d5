"""Dynamic broker configs at the door: the connection caps changed with IncrementalAlterConfigs (what
`kafka-configs.sh --alter --entity-type brokers --entity-default` sends), stored for every door, winning over
the static block, validated with Kafka's messages, and described with Kafka's sources."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from front_door.api_keys import ApiKey
from front_door.apis import describe_configs, incremental_alter_configs
from front_door.apis.describe_configs import ConfigSource
from front_door.apis.incremental_alter_configs import NOT_PER_BROKER, OpType
from front_door.cluster.node import Node
from front_door.cluster.security_store import BROKER_KIND
from front_door.context import Context
from front_door.groups.coordinator import GroupCoordinator
from front_door.metrics import FrontDoorMetrics
from front_door.network.broker_configs import BrokerConfigs
from front_door.network.principal import KafkaPrincipal, user
from front_door.producer_id_manager import ProducerIdManager
from front_door.security.acls import AclOperation, ResourceType
from front_door.security.authorizer import AclAuthorizer
from tests.memory_group_store import MemoryGroupStore
from tests.memory_security_store import MemorySecurityStore
from tests.unit.test_acl_authorizer import acl
from tests.unit.test_connection_quotas import answered, req
from tests.unit.test_front_door import REGISTRY

ADMIN, ALICE = user("admin"), user("alice")
BROKER, TOPIC = 4, 2
HANDLERS = {int(ApiKey.INCREMENTAL_ALTER_CONFIGS): incremental_alter_configs.handle,
            int(ApiKey.DESCRIBE_CONFIGS): describe_configs.handle}


def test_the_dynamic_default_wins_over_the_static_block_and_reaches_every_door() -> None:
    store = MemorySecurityStore()
    door = BrokerConfigs({"max.connections.per.ip": "100", "max.connections": "500"}, store)
    other = BrokerConfigs({}, store)
    changes: list[str] = []
    other.subscribe(lambda: changes.append("changed"))
    asyncio.run(door.write({"max.connections.per.ip": "20"}))
    assert door.effective() == {"max.connections.per.ip": "20", "max.connections": "500"}
    assert other.dynamic == {"max.connections.per.ip": "20"} and changes == ["changed"]
    assert door.connection_settings().max_connections_per_ip == 20
    assert door.connection_settings().slots.max_connections == 500
    asyncio.run(door.write({}))  # every dynamic config deleted: the static ones again
    assert door.effective() == {"max.connections.per.ip": "100", "max.connections": "500"}
    assert store.snapshot(BROKER_KIND) == {}


def test_an_unreadable_record_is_skipped() -> None:
    store = MemorySecurityStore()
    store.records[(BROKER_KIND, "<default>")] = b"not json"
    assert BrokerConfigs({}, store).dynamic == {}


def _context(tmp_path: Path, configs: BrokerConfigs, authorizer: AclAuthorizer | None = None) -> Context:
    return Context((Node(1, "gw.example", 9093),), lambda: REGISTRY,
                   bridge=None,  # type: ignore[arg-type]  # nothing here reaches the ingress topic
                   segments_root=tmp_path, producer_ids=ProducerIdManager(tmp_path), metrics=FrontDoorMetrics(),
                   groups=GroupCoordinator(MemoryGroupStore()), authorizer=authorizer, broker_configs=configs)


def _answer(ctx: Context, api_key: int, version: int, body: Any, principal: KafkaPrincipal = ADMIN) -> Any:
    return answered(HANDLERS, ctx, api_key, version, body, principal)


def _alter(ctx: Context, configs: list[tuple[str, int, str | None]], *, name: str = "", resource_type: int = BROKER,
           validate_only: bool = False, version: int = 1, principal: KafkaPrincipal = ADMIN) -> tuple[ErrorCode, str | None]:
    m = req(44, version)
    body = m.IncrementalAlterConfigsRequest(validate_only=validate_only, resources=(m.AlterConfigsResource(
        resource_type=resource_type, resource_name=name, configs=tuple(
            m.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in configs)),))
    result = _answer(ctx, 44, version, body, principal).responses[0]
    return result.error_code, result.error_message


def _described(ctx: Context) -> dict[str, tuple[str | None, int, bool, list[tuple[str | None, int]]]]:
    m = req(32, 4)
    body = m.DescribeConfigsRequest(resources=(m.DescribeConfigsResource(
        resource_type=BROKER, resource_name="", configuration_keys=None),), include_synonyms=True,
        include_documentation=False)
    return {c.name: (c.value, c.config_source, c.read_only, [(s.value, s.source) for s in c.synonyms])
            for c in _answer(ctx, 32, 4, body).results[0].configs}


def test_a_cap_set_and_deleted_as_kafka_configs_does_and_described_with_kafkas_sources(tmp_path: Path) -> None:
    configs = BrokerConfigs({"max.connections": "500"}, MemorySecurityStore())
    ctx = _context(tmp_path, configs)
    for version in (0, 1):
        assert _alter(ctx, [("max.connections.per.ip", OpType.SET, "20")], version=version) == (ErrorCode.none, None)
    assert _alter(ctx, [("max.connections", OpType.SET, "300"), ("listener.name.plaintext.max.connections",
                                                                   OpType.SET, "7")]) == (ErrorCode.none, None)
    assert configs.connection_settings().slots.listener_max_connections == {"PLAINTEXT": 7}
    described = _described(ctx)
    dynamic = int(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    static, default = int(ConfigSource.STATIC_BROKER_CONFIG), int(ConfigSource.DEFAULT_CONFIG)
    assert described["max.connections.per.ip"] == ("20", dynamic, False, [("20", dynamic), ("2147483647", default)])
    assert described["max.connections"] == ("300", dynamic, False,
                                            [("300", dynamic), ("500", static), ("2147483647", default)])
    assert described["listener.name.plaintext.max.connections"] == (
        "7", dynamic, False, [("7", dynamic), ("300", dynamic), ("500", static), ("2147483647", default)])
    assert described["max.connections.per.ip.overrides"] == ("", default, False, [])  # Kafka lists no "" default
    assert described["max.connection.creation.rate"] == ("2147483647", default, False, [("2147483647", default)])
    assert described["socket.request.max.bytes"][2]  # the rest stays read-only
    assert _alter(ctx, [("max.connections", OpType.DELETE, None)]) == (ErrorCode.none, None)
    assert _described(ctx)["max.connections"][:2] == ("500", static)


def test_kafkas_validation_and_where_the_door_refuses(tmp_path: Path) -> None:
    store = MemorySecurityStore()
    ctx = _context(tmp_path, BrokerConfigs({}, store))
    refused = {
        "negative": _alter(ctx, [("max.connections", OpType.SET, "-1")]),
        "not a number": _alter(ctx, [("max.connection.creation.rate", OpType.SET, "fast")]),
        "zero per ip alone": _alter(ctx, [("max.connections.per.ip", OpType.SET, "0")]),
        "a listener's zero": _alter(ctx, [("listener.name.plaintext.max.connections", OpType.SET, "0")]),
        "append": _alter(ctx, [("max.connections", OpType.APPEND, "5")]),
        "twice": _alter(ctx, [("max.connections", OpType.SET, "5"), ("max.connections", OpType.SET, "6")]),
        "null": _alter(ctx, [("max.connections", OpType.SET, None)]),
        "unknown op": _alter(ctx, [("max.connections", 9, "5")]),
        "not dynamic here": _alter(ctx, [("log.retention.ms", OpType.SET, "5")]),
        "unknown listener": _alter(ctx, [("listener.name.external.max.connections", OpType.SET, "5")]),
        "a broker's own": _alter(ctx, [("max.connections", OpType.SET, "5")], name="1"),
        "topic": _alter(ctx, [("retention.ms", OpType.SET, "5")], name="events", resource_type=TOPIC),
    }
    assert refused == {
        "negative": (ErrorCode.invalid_request,
                     "Invalid value -1 for configuration max.connections: Value must be at least 0"),
        "not a number": (ErrorCode.invalid_request,
                         "Invalid value fast for configuration max.connection.creation.rate: Not a number of type INT"),
        "zero per ip alone": (ErrorCode.invalid_request, "requirement failed: max.connections.per.ip can be set to "
                                                         "zero only if max.connections.per.ip.overrides property is set."),
        "a listener's zero": (ErrorCode.invalid_request, "Invalid value org.apache.kafka.common.config.ConfigException: "
                                                         "Invalid max.connections 0 for configuration Invalid dynamic "
                                                         "configuration"),
        "append": (ErrorCode.invalid_config, "Config value append is not allowed for config key: max.connections"),
        "twice": (ErrorCode.invalid_request, "Error due to duplicate config keys"),
        "null": (ErrorCode.invalid_request, "Null value not supported for : max.connections"),
        "unknown op": (ErrorCode.invalid_request, "Unknown operations type 9"),
        "not dynamic here": (ErrorCode.invalid_request, refused["not dynamic here"][1]),
        "unknown listener": (ErrorCode.invalid_request, refused["unknown listener"][1]),
        "a broker's own": (ErrorCode.invalid_request, NOT_PER_BROKER),
        "topic": (ErrorCode.unknown_topic_or_partition, "Topic events does not exist"),
    }
    assert "log.retention.ms" in (refused["not dynamic here"][1] or "")
    assert "no listener 'external'" in (refused["unknown listener"][1] or "")
    assert _alter(ctx, [("max.connections.per.ip", OpType.SET, "0"),
                        ("max.connections.per.ip.overrides", OpType.SET, "10.0.0.1:5")], validate_only=True) == \
        (ErrorCode.none, None)
    assert store.records == {}  # nothing refused or only validated was stored
    # a name that does not resolve is taken, as Kafka takes it (and not enforced where it does not resolve)
    assert _alter(ctx, [("max.connections.per.ip.overrides", OpType.SET, "nohost.invalid:3")]) == (ErrorCode.none, None)


def test_altering_broker_configs_needs_alter_configs_on_the_cluster(tmp_path: Path) -> None:
    authorizer = AclAuthorizer(MemorySecurityStore(), super_users=frozenset({ADMIN}))
    ctx = _context(tmp_path, BrokerConfigs({}, MemorySecurityStore()), authorizer)
    assert _alter(ctx, [("max.connections", OpType.SET, "5")], principal=ALICE)[0] == \
        ErrorCode.cluster_authorization_failed
    asyncio.run(authorizer.create([acl("kafka-cluster", str(ALICE), AclOperation.ALTER_CONFIGS,
                                       resource_type=ResourceType.CLUSTER)]))
    assert _alter(ctx, [("max.connections", OpType.SET, "5")], principal=ALICE) == (ErrorCode.none, None)
    assert _alter(ctx, [("retention.ms", OpType.SET, "5")], name="events", resource_type=TOPIC,
                  principal=ALICE)[0] == ErrorCode.topic_authorization_failed
