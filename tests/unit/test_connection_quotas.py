"""Per-IP connection creation rate quotas (KIP-612): Kafka's rate and throttle arithmetic, the quota table
read from and followed in the security store, and AlterClientQuotas / DescribeClientQuotas through their
handlers with Kafka's wire format (kio) and Kafka's validation messages."""

from __future__ import annotations

import asyncio
import struct
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from front_door.api_keys import ApiKey
from front_door.apis import alter_client_quotas, describe_client_quotas
from front_door.apis.registry import READABLE
from front_door.cluster.node import Node
from front_door.cluster.security_store import QUOTA_KIND
from front_door.context import Context
from front_door.groups.coordinator import GroupCoordinator
from front_door.metrics import FrontDoorMetrics
from front_door.network.connection_quotas import (
    CONNECTION_CREATION_RATE,
    MAX_THROTTLE_MS,
    ConnectionQuotas,
    QuotaEntity,
    SampledRate,
)
from front_door.network.principal import KafkaPrincipal, user
from front_door.network.wire import encode_response, parse_request
from front_door.producer_id_manager import ProducerIdManager
from front_door.security.acls import AclOperation, ResourceType
from front_door.security.authorizer import AclAuthorizer
from tests.memory_group_store import MemoryGroupStore
from tests.memory_security_store import MemorySecurityStore
from tests.unit.test_acl_authorizer import acl
from tests.unit.test_front_door import REGISTRY, _frame

ADMIN, ALICE = user("admin"), user("alice")
HANDLERS = {int(ApiKey.ALTER_CLIENT_QUOTAS): alter_client_quotas.handle,
            int(ApiKey.DESCRIBE_CLIENT_QUOTAS): describe_client_quotas.handle}
VERSIONS = [0, 1]
T0 = 1_700_000_000_000


# ---------------------------------------------------------------- Kafka's arithmetic


def test_a_burst_is_allowed_ten_windows_of_the_quota_then_throttled() -> None:
    """The window counts as at least 10 full samples: with a quota of 1/s, a burst gets exactly 10
    connections through, the 11th is throttled (and not counted), as a broker does."""
    store = MemorySecurityStore()
    store.records[(QUOTA_KIND, "ip=127.0.0.2")] = b'{"connection_creation_rate": 1.0}'
    quotas = ConnectionQuotas(store)
    throttles = [quotas.throttle_ms("127.0.0.2", T0 + i) for i in range(30)]
    assert throttles[:10] == [0] * 10
    assert all(0 < t <= MAX_THROTTLE_MS for t in throttles[10:])
    # 11 connections over a 10.010 s window (10 ms elapsed + 10 windows): (11 / 10.010 - 1) / 1 * 10_010 ms
    assert throttles[10] == 990
    assert quotas.throttle_ms("127.0.0.1", T0 + 31) == 0  # another IP, no quota of its own, no default
    # the window slides: a whole window later the rate has room again
    assert quotas.throttle_ms("127.0.0.2", T0 + 11_001) == 0


def test_rate_is_events_over_at_least_ten_full_windows() -> None:
    rate = SampledRate()
    for i in range(50):
        rate.record(1.0, T0 + i * 100)  # 10 per second for 5 s
    assert rate.window_size_ms(T0 + 4_900) == 4_900 - 4_000 + 10_000  # oldest sample's start, plus 6 windows
    assert rate.rate(T0 + 4_900) == pytest.approx(50 / 10.9)
    assert rate.rate(T0 + 60_000) == 0  # every sample expired


def test_throttle_is_the_time_to_bring_the_rate_back_under_the_quota() -> None:
    """`QuotaUtils.throttleTime`: (observed - quota) / quota * window, bounded by one window."""
    store = MemorySecurityStore()
    store.records[(QUOTA_KIND, "ip=<default>")] = b'{"connection_creation_rate": 100.0}'
    quotas = ConnectionQuotas(store)
    assert [quotas.throttle_ms("10.0.0.7", T0) for _ in range(1000)] == [0] * 1000
    assert quotas.throttle_ms("10.0.0.7", T0) == round((1001 / 10 - 100) / 100 * 10_000)  # 10 ms


def test_an_ip_of_its_own_overrides_the_default_and_changes_reach_the_table() -> None:
    store = MemorySecurityStore()
    quotas = ConnectionQuotas(store)
    asyncio.run(quotas.write(QuotaEntity(None), {CONNECTION_CREATION_RATE: 1.0}))
    asyncio.run(quotas.write(QuotaEntity("10.0.0.9"), {CONNECTION_CREATION_RATE: 500.0}))
    assert quotas.quota_for("10.0.0.8") == 1.0 and quotas.quota_for("10.0.0.9") == 500.0
    other_door = ConnectionQuotas(store)  # a second door on the same store sees both
    assert other_door.described() == {QuotaEntity(None): {CONNECTION_CREATION_RATE: 1.0},
                                      QuotaEntity("10.0.0.9"): {CONNECTION_CREATION_RATE: 500.0}}
    asyncio.run(quotas.write(QuotaEntity(None), {}))
    assert other_door.quota_for("10.0.0.8") is None and other_door.throttle_ms("10.0.0.8", T0) == 0


def test_an_unreadable_quota_record_is_skipped() -> None:
    store = MemorySecurityStore()
    store.records[(QUOTA_KIND, "ip=10.0.0.1")] = b"not json"
    store.records[(QUOTA_KIND, "user=alice")] = b'{"producer_byte_rate": 1}'
    store.records[(QUOTA_KIND, "ip=10.0.0.2")] = b'{"connection_creation_rate": 3}'
    assert ConnectionQuotas(store).described() == {QuotaEntity("10.0.0.2"): {CONNECTION_CREATION_RATE: 3.0}}


# ---------------------------------------------------------------- the APIs


def req(api_key: int, version: int) -> ModuleType:
    return sys.modules[load_request_schema(api_key, version).__module__]


def _context(tmp_path: Path, store: MemorySecurityStore | None, authorizer: AclAuthorizer | None = None) -> Context:
    return Context((Node(1, "gw.example", 9093),), lambda: REGISTRY,
                   bridge=None,  # type: ignore[arg-type]  # nothing here reaches the ingress topic
                   segments_root=tmp_path, producer_ids=ProducerIdManager(tmp_path), metrics=FrontDoorMetrics(),
                   groups=GroupCoordinator(MemoryGroupStore()), authorizer=authorizer,
                   quotas=ConnectionQuotas(store) if store is not None else None)


def _answer(ctx: Context, api_key: int, version: int, body: Any, principal: KafkaPrincipal = ADMIN) -> Any:
    return answered(HANDLERS, ctx, api_key, version, body, principal)


def answered(handlers: Mapping[int, Any], ctx: Context, api_key: int, version: int, body: Any,
             principal: KafkaPrincipal = ADMIN) -> Any:
    """Handled by `handlers[api_key]`, encoded as the server sends it, decoded with kio."""
    request = parse_request(_frame(api_key, version, body), READABLE, 1, "/10.0.0.1", principal)
    response = asyncio.run(handlers[api_key](ctx, request))
    encoded = encode_response(api_key, version, 7, response)
    schema = load_response_schema(api_key, version)
    _, used = entity_reader(schema.__header_schema__)(encoded, 4)
    decoded, size = entity_reader(schema)(encoded, 4 + used)
    assert 4 + used + size == len(encoded) and struct.unpack(">i", encoded[:4])[0] == len(encoded) - 4
    return decoded


def _alter(ctx: Context, version: int, entries: list[tuple[list[tuple[str, str | None]], list[tuple[str, float, bool]]]],
           validate_only: bool = False, principal: KafkaPrincipal = ADMIN) -> list[tuple[ErrorCode, str | None]]:
    m = req(49, version)
    body = m.AlterClientQuotasRequest(validate_only=validate_only, entries=tuple(
        m.EntryData(entity=tuple(m.EntityData(entity_type=t, entity_name=n) for t, n in entity),
                    ops=tuple(m.OpData(key=k, value=v, remove=r) for k, v, r in ops)) for entity, ops in entries))
    answer = _answer(ctx, 49, version, body, principal)
    return [(e.error_code, e.error_message) for e in answer.entries]


def _describe(ctx: Context, version: int, components: list[tuple[str, int, str | None]], strict: bool = False,
              principal: KafkaPrincipal = ADMIN) -> Any:
    m = req(48, version)
    body = m.DescribeClientQuotasRequest(strict=strict, components=tuple(
        m.ComponentData(entity_type=t, match_type=mt, match=match) for t, mt, match in components))
    return _answer(ctx, 48, version, body, principal)


def _described(answer: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    assert answer.error_code == ErrorCode.none, answer.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in answer.entries}


RATE = CONNECTION_CREATION_RATE
OK = (ErrorCode.none, None)


@pytest.mark.parametrize("version", VERSIONS)
def test_kafka_configs_alter_and_describe_ips(tmp_path: Path, version: int) -> None:
    store = MemorySecurityStore()
    ctx = _context(tmp_path, store)
    assert _alter(ctx, version, [([("ip", "10.1.2.3")], [(RATE, 10, False)]),
                                 ([("ip", None)], [(RATE, 2, False)])]) == [OK, OK]
    assert _alter(ctx, version, [([("ip", "10.9.9.9")], [(RATE, 5, False)])], validate_only=True) == [OK]
    everything = _described(_describe(ctx, version, [("ip", 2, None)]))
    assert everything == {(("ip", "10.1.2.3"),): {RATE: 10.0}, (("ip", None),): {RATE: 2.0}}
    assert _described(_describe(ctx, version, [("ip", 0, "10.1.2.3")])) == {(("ip", "10.1.2.3"),): {RATE: 10.0}}
    assert _described(_describe(ctx, version, [("ip", 1, None)])) == {(("ip", None),): {RATE: 2.0}}
    assert _described(_describe(ctx, version, [], strict=False)) == everything
    assert _described(_describe(ctx, version, [("user", 2, None)])) == {}  # `--entity-type users`: no quotas
    assert ctx.quotas is not None and ctx.quotas.quota_for("10.1.2.3") == 10.0  # enforced at once
    # removing the only key forgets the entity
    assert _alter(ctx, version, [([("ip", "10.1.2.3")], [(RATE, 0, True)])]) == [OK]
    assert _described(_describe(ctx, version, [("ip", 2, None)])) == {(("ip", None),): {RATE: 2.0}}
    assert ctx.quotas.quota_for("10.1.2.3") == 2.0


@pytest.mark.parametrize(("entity", "ops", "message"), [
    ([], [(RATE, 1, False)], "Invalid empty client quota entity"),
    ([("ip", "")], [(RATE, 1, False)], "Empty ip not supported"),
    ([("broker", "1")], [(RATE, 1, False)], "Unhandled client quota entity type: broker"),
    ([("ip", "10.0.0.1"), ("user", "alice")], [(RATE, 1, False)],
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ([("ip", "no-such-host.invalid")], [(RATE, 1, False)], "no-such-host.invalid is not a valid IP or resolvable host."),
    ([("ip", "10.0.0.1")], [("producer_byte_rate", 1, False)], "Invalid configuration key producer_byte_rate"),
    ([("ip", "10.0.0.1")], [(RATE, 0, False)], "Quota connection_creation_rate must be greater than 0"),
    ([("ip", "10.0.0.1")], [(RATE, 2.5, False)], "connection_creation_rate cannot be a fractional value."),
    ([("ip", "10.0.0.1")], [(RATE, 2**31, False)], "Proposed value for connection_creation_rate is too large for an INT."),
    ([("ip", "10.0.0.1")], [(RATE, 1, False), (RATE, 2, False)],
     "Duplicate quota key connection_creation_rate not updating quota for this entity {'ip': '10.0.0.1'}"),
    ([("user", "alice")], [("producer_byte_rate", 1024, False)], alter_client_quotas.NOT_SERVED),
])
def test_alterations_kafka_refuses_are_refused_with_its_message(tmp_path: Path, entity: list[tuple[str, str | None]],
                                                               ops: list[tuple[str, float, bool]], message: str) -> None:
    store = MemorySecurityStore()
    ctx = _context(tmp_path, store)
    assert _alter(ctx, 1, [(entity, ops)]) == [(ErrorCode.invalid_request, message)]
    assert store.snapshot(QUOTA_KIND) == {}


def test_a_repeated_entity_is_ignored_and_one_problem_does_not_stop_the_others(tmp_path: Path) -> None:
    store = MemorySecurityStore()
    ctx = _context(tmp_path, store)
    results = _alter(ctx, 1, [([("ip", "10.0.0.1")], [(RATE, 1, False)]), ([("ip", "10.0.0.1")], [(RATE, 2, False)]),
                              ([("ip", "10.0.0.2")], [(RATE, -1, False)]), ([("ip", "10.0.0.3")], [(RATE, 3, False)])])
    assert results[0] == OK and results[3] == OK
    assert results[1] == (ErrorCode.invalid_request, "Ignoring duplicate entity {'ip': '10.0.0.1'}")
    assert results[2][0] == ErrorCode.invalid_request
    assert set(store.snapshot(QUOTA_KIND)) == {"ip=10.0.0.1", "ip=10.0.0.3"}


def test_describe_filters_kafka_refuses(tmp_path: Path) -> None:
    ctx = _context(tmp_path, MemorySecurityStore())
    for components, code, message in [
        ([("", 2, None)], ErrorCode.invalid_request, "Invalid empty entity type."),
        ([("ip", 2, None), ("ip", 1, None)], ErrorCode.invalid_request,
         "Entity type ip cannot appear more than once in the filter."),
        ([("ip", 2, None), ("user", 2, None)], ErrorCode.invalid_request,
         "Invalid entity filter component combination. IP filter component should not be used with user or "
         "clientId filter component."),
        ([("broker", 2, None)], ErrorCode.unsupported_version, "Unsupported entity type broker"),
    ]:
        answer = _describe(ctx, 1, components)
        assert (answer.error_code, answer.error_message, answer.entries) == (code, message, None)


def test_quotas_need_the_cluster_permissions_kafka_checks(tmp_path: Path) -> None:
    store = MemorySecurityStore()
    authorizer = AclAuthorizer(store, super_users=frozenset({ADMIN}))
    ctx = _context(tmp_path, store, authorizer)
    denied = (ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    assert _alter(ctx, 1, [([("ip", "10.0.0.1")], [(RATE, 1, False)])], principal=ALICE) == [denied]
    answer = _describe(ctx, 1, [("ip", 2, None)], principal=ALICE)
    assert (answer.error_code, answer.entries) == (ErrorCode.cluster_authorization_failed, None)
    asyncio.run(authorizer.create([acl("kafka-cluster", str(ALICE), op, resource_type=ResourceType.CLUSTER)
                                   for op in (AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS)]))
    assert _alter(ctx, 1, [([("ip", "10.0.0.1")], [(RATE, 1, False)])], principal=ALICE) == [OK]
    assert _described(_describe(ctx, 1, [("ip", 2, None)], principal=ALICE)) == {(("ip", "10.0.0.1"),): {RATE: 1.0}}


def test_a_door_without_its_security_topic_says_so(tmp_path: Path) -> None:
    ctx = _context(tmp_path, None)
    [(code, message)] = _alter(ctx, 1, [([("ip", "10.0.0.1")], [(RATE, 1, False)])])
    assert code == ErrorCode.kafka_storage_error and "security topic" in (message or "")
    assert _described(_describe(ctx, 1, [("ip", 2, None)])) == {}
