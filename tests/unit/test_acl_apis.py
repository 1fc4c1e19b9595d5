"""CreateAcls, DescribeAcls and DeleteAcls through their handlers, with Kafka's wire format (requests
encoded and answers decoded with kio, in every version served): the answers without an authorizer and
without the cluster permission, per-binding validation, filters, two doors sharing one store, and the
requests Kafka refuses while parsing (the connection is closed)."""

from __future__ import annotations

import asyncio
import struct
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from front_door.api_keys import ApiKey
from front_door.apis import create_acls, delete_acls, describe_acls
from front_door.apis.registry import READABLE
from front_door.cluster.node import Node
from front_door.cluster.security_store import ACL_KIND
from front_door.context import Context
from front_door.groups.coordinator import GroupCoordinator
from front_door.metrics import FrontDoorMetrics
from front_door.network.principal import KafkaPrincipal, user
from front_door.network.wire import CloseConnection, encode_response, parse_request
from front_door.producer_id_manager import ProducerIdManager
from front_door.security.acls import ANY_FILTER, AclOperation, AclPermissionType, PatternType, ResourceType
from front_door.security.authorizer import AclAuthorizer
from tests.memory_group_store import MemoryGroupStore
from tests.memory_security_store import MemorySecurityStore
from tests.unit.test_acl_authorizer import acl
from tests.unit.test_front_door import REGISTRY, _frame

ACL_HANDLERS = {api.key: api.handler for api in (describe_acls.API, create_acls.API, delete_acls.API)}
ACL_VERSIONS = {api.key: api.versions for api in (describe_acls.API, create_acls.API, delete_acls.API)}
SUPPORTED = {**READABLE, **ACL_VERSIONS}
ADMIN, ALICE = user("admin"), user("alice")
Op = AclOperation
ALLOW, DENY = int(AclPermissionType.ALLOW), int(AclPermissionType.DENY)
TOPIC, GROUP, CLUSTER = int(ResourceType.TOPIC), int(ResourceType.GROUP), int(ResourceType.CLUSTER)
LITERAL, PREFIXED = int(PatternType.LITERAL), int(PatternType.PREFIXED)
VERSIONS = [1, 2, 3]


def req(api_key: int, version: int) -> ModuleType:
    return sys.modules[load_request_schema(api_key, version).__module__]


def _context(tmp_path: Path, authorizer: AclAuthorizer | None) -> Context:
    return Context((Node(1, "gw.example", 9093),), lambda: REGISTRY,
                   bridge=None,  # type: ignore[arg-type]  # nothing here reaches the ingress topic
                   segments_root=tmp_path, producer_ids=ProducerIdManager(tmp_path), metrics=FrontDoorMetrics(),
                   groups=GroupCoordinator(MemoryGroupStore()), authorizer=authorizer)


def _handled(ctx: Context, api_key: int, version: int, body: Any, principal: KafkaPrincipal) -> Any:
    request = parse_request(_frame(api_key, version, body), SUPPORTED, 1, "/10.0.0.1", principal)
    return asyncio.run(ACL_HANDLERS[api_key](ctx, request))


def _answer(ctx: Context, api_key: int, version: int, body: Any, principal: KafkaPrincipal = ADMIN) -> Any:
    """Handled, encoded as the server sends it, decoded with kio."""
    encoded = encode_response(api_key, version, 7, _handled(ctx, api_key, version, body, principal))
    schema = load_response_schema(api_key, version)
    _, used = entity_reader(schema.__header_schema__)(encoded, 4)
    decoded, size = entity_reader(schema)(encoded, 4 + used)
    assert 4 + used + size == len(encoded) and struct.unpack(">i", encoded[:4])[0] == len(encoded) - 4
    return decoded


def _creation(version: int, name: str, principal: str, operation: int, permission: int = ALLOW,
              resource_type: int = TOPIC, pattern_type: int = LITERAL, host: str = "*") -> Any:
    return req(30, version).AclCreation(resource_type=resource_type, resource_name=name,
                                        resource_pattern_type=pattern_type, principal=principal, host=host,
                                        operation=operation, permission_type=permission)


def _create(version: int, *creations: Any) -> Any:
    return req(30, version).CreateAclsRequest(creations=creations)


def _describe(version: int, resource_type: int = int(ResourceType.ANY), name: str | None = None,
              pattern_type: int = int(PatternType.ANY), principal: str | None = None, operation: int = int(Op.ANY),
              permission: int = int(AclPermissionType.ANY)) -> Any:
    return req(29, version).DescribeAclsRequest(
        resource_type_filter=resource_type, resource_name_filter=name, pattern_type_filter=pattern_type,
        principal_filter=principal, host_filter=None, operation=operation, permission_type=permission)


def _delete_filter(version: int, resource_type: int = int(ResourceType.ANY), name: str | None = None,
                   pattern_type: int = int(PatternType.ANY), principal: str | None = None,
                   operation: int = int(Op.ANY), permission: int = int(AclPermissionType.ANY)) -> Any:
    return req(31, version).DeleteAclsFilter(
        resource_type_filter=resource_type, resource_name_filter=name, pattern_type_filter=pattern_type,
        principal_filter=principal, host_filter=None, operation=operation, permission_type=permission)


def _authorizer(store: MemorySecurityStore | None = None) -> AclAuthorizer:
    return AclAuthorizer(store or MemorySecurityStore(), super_users=frozenset({ADMIN}))  # type: ignore[arg-type]


def test_the_acl_apis_are_exposed_with_kafka_4s_versions() -> None:
    assert ACL_VERSIONS == {ApiKey.DESCRIBE_ACLS: (1, 3), ApiKey.CREATE_ACLS: (1, 3), ApiKey.DELETE_ACLS: (1, 3)}
    assert ACL_HANDLERS == {29: describe_acls.handle, 30: create_acls.handle, 31: delete_acls.handle}


def test_the_acl_apis_are_served_and_advertised() -> None:
    from front_door.apis.api_versions import ADVERTISED
    from front_door.apis.registry import HANDLERS

    assert set(ACL_HANDLERS) == set(ACL_VERSIONS)
    assert all(HANDLERS[key] is handler for key, handler in ACL_HANDLERS.items())
    assert all(ADVERTISED[key] == versions == READABLE[key] for key, versions in ACL_VERSIONS.items())


@pytest.mark.parametrize("version", VERSIONS)
def test_without_an_authorizer_every_acl_api_is_security_disabled(tmp_path: Path, version: int) -> None:
    ctx = _context(tmp_path, None)
    created = _answer(ctx, 30, version, _create(version, _creation(version, "t", "User:alice", Op.READ),
                                                _creation(version, "u", "User:alice", Op.READ)))
    assert [(r.error_code, r.error_message) for r in created.results] == [
        (ErrorCode.security_disabled, "No Authorizer is configured.")] * 2
    described = _answer(ctx, 29, version, _describe(version))
    assert (described.error_code, described.error_message, described.resources) == (
        ErrorCode.security_disabled, "No Authorizer is configured on the broker", ())
    deleted = _answer(ctx, 31, version, req(31, version).DeleteAclsRequest(filters=(_delete_filter(version),)))
    assert [(r.error_code, r.error_message, r.matching_acls) for r in deleted.filter_results] == [
        (ErrorCode.security_disabled, "No Authorizer is configured.", ())]


@pytest.mark.parametrize("version", VERSIONS)
def test_create_describe_delete_round_trip(tmp_path: Path, version: int) -> None:
    store = MemorySecurityStore()
    ctx = _context(tmp_path, _authorizer(store))
    created = _answer(ctx, 30, version, _create(
        version, _creation(version, "orders", "User:alice", Op.WRITE),
        _creation(version, "orders", "User:bob", Op.READ, DENY, host="10.0.0.9"),
        _creation(version, "pay.", "User:alice", Op.READ, pattern_type=PREFIXED),
        _creation(version, "app", "User:alice", Op.READ, resource_type=GROUP)))
    assert [(r.error_code, r.error_message) for r in created.results] == [(ErrorCode.none, None)] * 4
    assert len(store.snapshot(ACL_KIND)) == 4
    assert ctx.authorizer is not None and ctx.authorizer.authorize(ALICE, "1.2.3.4", Op.WRITE, ResourceType.TOPIC, "orders")

    every = _answer(ctx, 29, version, _describe(version))
    assert every.error_code == ErrorCode.none
    assert sorted((r.resource_type, r.resource_name, r.pattern_type, sorted(
        (a.principal, a.host, a.operation, a.permission_type) for a in r.acls)) for r in every.resources) == [
        (TOPIC, "orders", LITERAL, [("User:alice", "*", Op.WRITE, ALLOW), ("User:bob", "10.0.0.9", Op.READ, DENY)]),
        (TOPIC, "pay.", PREFIXED, [("User:alice", "*", Op.READ, ALLOW)]),
        (GROUP, "app", LITERAL, [("User:alice", "*", Op.READ, ALLOW)])]
    # MATCH: the ACLs that apply to topic pay.eu
    matching = _answer(ctx, 29, version, _describe(version, TOPIC, "pay.eu", int(PatternType.MATCH)))
    assert [(r.resource_name, r.pattern_type) for r in matching.resources] == [("pay.", PREFIXED)]
    by_principal = _answer(ctx, 29, version, _describe(version, principal="User:bob"))
    assert [(r.resource_name, [a.principal for a in r.acls]) for r in by_principal.resources] == [("orders", ["User:bob"])]

    deleted = _answer(ctx, 31, version, req(31, version).DeleteAclsRequest(filters=(
        _delete_filter(version, TOPIC, "orders", LITERAL), _delete_filter(version, name="nothing"))))
    first, second = deleted.filter_results
    assert first.error_code == ErrorCode.none and second.error_code == ErrorCode.none
    assert sorted((m.resource_name, m.principal, m.operation, m.permission_type, m.error_code)
                  for m in first.matching_acls) == [("orders", "User:alice", Op.WRITE, ALLOW, ErrorCode.none),
                                                    ("orders", "User:bob", Op.READ, DENY, ErrorCode.none)]
    assert second.matching_acls == ()
    assert len(store.snapshot(ACL_KIND)) == 2
    assert not ctx.authorizer.authorize(ALICE, "1.2.3.4", Op.WRITE, ResourceType.TOPIC, "orders")


def test_acls_created_through_one_door_are_described_and_enforced_by_another(tmp_path: Path) -> None:
    store = MemorySecurityStore()
    first, second = _context(tmp_path, _authorizer(store)), _context(tmp_path, _authorizer(store))
    _answer(first, 30, 3, _create(3, _creation(3, "orders", "User:alice", Op.READ)))
    described = _answer(second, 29, 3, _describe(3, TOPIC, "orders", LITERAL))
    assert [(r.resource_name, [a.principal for a in r.acls]) for r in described.resources] == [("orders", ["User:alice"])]
    assert second.authorizer is not None and second.authorizer.authorize(ALICE, "h", Op.READ, ResourceType.TOPIC, "orders")
    _answer(second, 31, 3, req(31, 3).DeleteAclsRequest(filters=(_delete_filter(3, principal="User:alice"),)))
    assert first.authorizer is not None and first.authorizer.describe(ANY_FILTER) == []


@pytest.mark.parametrize("version", VERSIONS)
def test_the_acl_apis_need_the_cluster_permission(tmp_path: Path, version: int) -> None:
    denials: list[str] = []
    authorizer = AclAuthorizer(MemorySecurityStore(), super_users=frozenset({ADMIN}),  # type: ignore[arg-type]
                               on_denied=denials.append)
    ctx = _context(tmp_path, authorizer)
    created = _answer(ctx, 30, version, _create(version, _creation(version, "t", "User:alice", Op.READ)), ALICE)
    (result,) = created.results
    assert result.error_code == ErrorCode.cluster_authorization_failed
    assert result.error_message == ("Request(session=Session(User:alice,/10.0.0.1), listenerName=ListenerName("
                                    "PLAINTEXT)) is not authorized.")
    assert authorizer.describe(ANY_FILTER) == []
    described = _answer(ctx, 29, version, _describe(version), ALICE)
    assert (described.error_code, described.resources) == (ErrorCode.cluster_authorization_failed, ())
    deleted = _answer(ctx, 31, version, req(31, version).DeleteAclsRequest(filters=(_delete_filter(version),) * 2), ALICE)
    assert [r.error_code for r in deleted.filter_results] == [ErrorCode.cluster_authorization_failed] * 2
    assert denials == ["create_acls", "describe_acls", "delete_acls"]
    # ALTER on the cluster creates and deletes; DESCRIBE (implied by ALTER) describes
    asyncio.run(authorizer.create([acl("kafka-cluster", "User:alice", Op.ALTER, resource_type=ResourceType.CLUSTER)]))
    created = _answer(ctx, 30, version, _create(version, _creation(version, "t", "User:bob", Op.READ)), ALICE)
    assert created.results[0].error_code == ErrorCode.none
    described = _answer(ctx, 29, version, _describe(version, TOPIC), ALICE)
    assert [r.resource_name for r in described.resources] == ["t"]


def test_create_validates_each_binding_as_kafka(tmp_path: Path) -> None:
    ctx = _context(tmp_path, _authorizer())
    created = _answer(ctx, 30, 3, _create(
        3, _creation(3, "orders", "User:alice", Op.READ),
        _creation(3, "other", "User:alice", Op.ALTER, resource_type=CLUSTER),
        _creation(3, "", "User:alice", Op.READ),
        _creation(3, "orders", "alice", Op.READ),
        _creation(3, "orders", "User:alice", 99),
        _creation(3, "orders", "User:alice", Op.READ, resource_type=42),
        _creation(3, "kafka-cluster", "User:alice", Op.IDEMPOTENT_WRITE, resource_type=CLUSTER)))
    assert [(r.error_code, r.error_message) for r in created.results] == [
        (ErrorCode.none, None),
        (ErrorCode.invalid_request, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (ErrorCode.invalid_request, "Invalid empty resource name"),
        (ErrorCode.invalid_request, "Could not parse principal from `alice` (no colon is present separating the "
                                    "principal type from the principal name)"),
        (ErrorCode.invalid_request, "Invalid operation UNKNOWN"),
        (ErrorCode.invalid_request, "Invalid resourceType UNKNOWN"),
        (ErrorCode.none, None)]


@pytest.mark.parametrize(("field", "value"), [("resource_type", int(ResourceType.ANY)),
                                              ("pattern_type", int(PatternType.MATCH)),
                                              ("pattern_type", int(PatternType.ANY)),
                                              ("operation", int(Op.ANY)),
                                              ("permission", int(AclPermissionType.ANY))])
def test_a_creation_kafka_cannot_build_fails_the_whole_request(tmp_path: Path, field: str, value: int) -> None:
    """Kafka's `ResourcePattern`/`AccessControlEntry` constructors throw: `KafkaApis.handleError` answers every
    creation UNKNOWN_SERVER_ERROR, and nothing is created."""
    ctx = _context(tmp_path, _authorizer())
    kw: dict[str, Any] = {"resource_type": TOPIC, "pattern_type": LITERAL, "operation": int(Op.READ), "permission": ALLOW}
    kw[field] = value
    created = _answer(ctx, 30, 3, _create(3, _creation(3, "fine", "User:alice", Op.READ),
                                          _creation(3, "t", "User:alice", **kw)))
    assert [(r.error_code, r.error_message) for r in created.results] == [(ErrorCode.unknown_server_error, None)] * 2
    assert ctx.authorizer is not None and ctx.authorizer.describe(ANY_FILTER) == []


def test_unknown_elements_close_the_connection_as_kafkas_request_parsing_does(tmp_path: Path) -> None:
    ctx = _context(tmp_path, _authorizer())
    for api_key, body in (
            (30, _create(3, _creation(3, "t", "User:alice", Op.READ, permission=0))),
            (29, _describe(3, operation=0)),
            (29, _describe(3, pattern_type=77)),  # DescribeAcls: a code Kafka does not know is UNKNOWN too
            (31, req(31, 3).DeleteAclsRequest(filters=(_delete_filter(3, resource_type=0),)))):
        assert isinstance(_handled(ctx, api_key, 3, body, ADMIN), CloseConnection), (api_key, body)
    # DeleteAcls: an unknown code other than 0 parses, and the filter is INVALID_REQUEST
    deleted = _answer(ctx, 31, 3, req(31, 3).DeleteAclsRequest(filters=(_delete_filter(3, pattern_type=77),
                                                                        _delete_filter(3, operation=77))))
    assert [(r.error_code, r.error_message) for r in deleted.filter_results] == [
        (ErrorCode.invalid_request, "Unknown patternFilter."), (ErrorCode.invalid_request, "Unknown entryFilter.")]


def test_a_store_that_does_not_acknowledge_fails_the_creation(tmp_path: Path) -> None:
    store = MemorySecurityStore()
    ctx = _context(tmp_path, _authorizer(store))
    store.fail = True
    created = _answer(ctx, 30, 3, _create(3, _creation(3, "t", "User:alice", Op.READ)))
    assert created.results[0].error_code == ErrorCode.unknown_server_error
    assert store.snapshot(ACL_KIND) == {}


def test_request_frames_of_the_acl_apis_parse_in_every_served_version() -> None:
    for api_key, (low, high) in ACL_VERSIONS.items():
        for version in range(low, high + 1):
            body = {29: lambda v: _describe(v), 30: lambda v: _create(v, _creation(v, "t", "User:a", Op.READ)),
                    31: lambda v: req(31, v).DeleteAclsRequest(filters=(_delete_filter(v),))}[api_key](version)
            assert parse_request(_frame(api_key, version, body), SUPPORTED, 1).body == body
