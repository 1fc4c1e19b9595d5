"""The authorizer's decisions as Kafka's `StandardAuthorizer` makes them (literal, prefixed and wildcard
patterns, deny over allow, hosts, super users, `allow.everyone.if.no.acl.found`, implied operations,
`authorizeByResourceType`), the filters of DescribeAcls/DeleteAcls, two doors sharing one store, the
store's encoding, and the denial audit's rate limit."""

from __future__ import annotations

import asyncio
import logging

import pytest
from kio.schema.errors import ErrorCode

from front_door.cluster.security_store import ACL_KIND
from front_door.network.principal import user
from front_door.security import acl_codec
from front_door.security.acls import (
    ANY_FILTER,
    CLUSTER_NAME,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from front_door.security.audit import DenialAudit
from front_door.security.authorizer import AclAuthorizer, parse_super_users
from tests.memory_security_store import MemorySecurityStore

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALICE, BOB = user("alice"), user("bob")
HOST = "10.0.0.1"


def acl(name: str, principal: str, operation: AclOperation, permission: AclPermissionType = ALLOW,
        resource_type: ResourceType = TOPIC, pattern_type: PatternType = LITERAL, host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern_type),
                      AccessControlEntry(principal, host, operation, permission))


def authorizer(*bindings: AclBinding, store: MemorySecurityStore | None = None, **kw: object) -> AclAuthorizer:
    a = AclAuthorizer(store or MemorySecurityStore(), **kw)  # type: ignore[arg-type]
    assert asyncio.run(a.create(bindings)) == [None] * len(bindings)
    return a


def test_literal_acls_allow_only_their_principal_operation_and_resource() -> None:
    a = authorizer(acl("orders", "User:alice", Op.WRITE))
    assert a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "orders")
    assert not a.authorize(BOB, HOST, Op.WRITE, TOPIC, "orders")  # another principal
    assert not a.authorize(ALICE, HOST, Op.READ, TOPIC, "orders")  # another operation
    assert not a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "orders2")  # a literal is not a prefix
    assert not a.authorize(ALICE, HOST, Op.WRITE, GROUP, "orders")  # another resource type


def test_prefixed_and_wildcard_patterns_and_the_wildcard_principal() -> None:
    a = authorizer(acl("pay.", "User:alice", Op.READ, pattern_type=PREFIXED),
                   acl("*", "User:bob", Op.READ), acl("shared", "User:*", Op.READ))
    assert a.authorize(ALICE, HOST, Op.READ, TOPIC, "pay.eu")
    assert a.authorize(ALICE, HOST, Op.READ, TOPIC, "pay.")
    assert not a.authorize(ALICE, HOST, Op.READ, TOPIC, "pay")  # shorter than the prefix
    assert not a.authorize(ALICE, HOST, Op.READ, TOPIC, "xpay.eu")
    assert all(a.authorize(BOB, HOST, Op.READ, TOPIC, t) for t in ("pay.eu", "anything", "shared"))
    assert a.authorize(user("carol"), HOST, Op.READ, TOPIC, "shared")
    assert not a.authorize(user("carol"), HOST, Op.READ, TOPIC, "other")
    # a PREFIXED "*" is a literal prefix, not a wildcard
    b = authorizer(acl("*", "User:alice", Op.READ, pattern_type=PREFIXED))
    assert not b.authorize(ALICE, HOST, Op.READ, TOPIC, "orders")
    assert b.authorize(ALICE, HOST, Op.READ, TOPIC, "*orders")


def test_deny_wins_over_any_allow_and_deny_all_denies_every_operation() -> None:
    a = authorizer(acl("*", "User:alice", Op.ALL), acl("secret", "User:alice", Op.READ, DENY),
                   acl("vault.", "User:*", Op.ALL, DENY, pattern_type=PREFIXED))
    assert a.authorize(ALICE, HOST, Op.READ, TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.READ, TOPIC, "secret")
    assert a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "secret")  # the DENY names READ only
    # a DENY of READ does not deny DESCRIBE (implication is for ALLOW only)
    assert a.authorize(ALICE, HOST, Op.DESCRIBE, TOPIC, "secret")
    assert not any(a.authorize(ALICE, HOST, op, TOPIC, "vault.x") for op in (Op.READ, Op.DESCRIBE, Op.ALTER_CONFIGS))


def test_hosts_restrict_where_an_acl_applies() -> None:
    a = authorizer(acl("orders", "User:alice", Op.WRITE, host=HOST),
                   acl("orders", "User:alice", Op.WRITE, DENY, host="10.0.0.9"))
    assert a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "orders")
    assert not a.authorize(ALICE, "10.0.0.2", Op.WRITE, TOPIC, "orders")
    assert not a.authorize(ALICE, "10.0.0.9", Op.WRITE, TOPIC, "orders")


def test_implied_operations_as_kafka_implies_them() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        a = authorizer(acl("t", "User:alice", op))
        assert a.authorize(ALICE, HOST, Op.DESCRIBE, TOPIC, "t"), op
        assert not a.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, TOPIC, "t"), op
    assert not authorizer(acl("t", "User:alice", Op.CREATE)).authorize(ALICE, HOST, Op.DESCRIBE, TOPIC, "t")
    configs = authorizer(acl("t", "User:alice", Op.ALTER_CONFIGS))
    assert configs.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, TOPIC, "t")
    assert not configs.authorize(ALICE, HOST, Op.DESCRIBE, TOPIC, "t")
    everything = authorizer(acl("t", "User:alice", Op.ALL))
    assert all(everything.authorize(ALICE, HOST, op, TOPIC, "t") for op in Op if op > Op.ALL)
    # DESCRIBE implies nothing
    assert not authorizer(acl("t", "User:alice", Op.DESCRIBE)).authorize(ALICE, HOST, Op.READ, TOPIC, "t")


def test_super_users_are_allowed_everything_even_against_a_deny() -> None:
    a = authorizer(acl("*", "User:admin", Op.ALL, DENY), super_users=frozenset({user("admin")}))
    assert a.authorize(user("admin"), HOST, Op.ALTER, CLUSTER, CLUSTER_NAME)
    assert a.authorize(user("admin"), HOST, Op.WRITE, TOPIC, "anything")
    assert not a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "anything")


def test_super_users_are_read_as_kafkas_semicolon_separated_list() -> None:
    assert parse_super_users("User:admin; User:CN=ops,O=acme ;;") == frozenset({user("admin"), user("CN=ops,O=acme")})
    assert parse_super_users(None) == parse_super_users("") == frozenset()
    with pytest.raises(ValueError, match="User:<name>"):
        parse_super_users("admin")


@pytest.mark.parametrize("allow_everyone", [False, True])
def test_allow_everyone_if_no_acl_found_only_where_no_acl_applies(allow_everyone: bool) -> None:
    a = authorizer(acl("orders", "User:bob", Op.WRITE), acl("pay.", "User:bob", Op.READ, pattern_type=PREFIXED),
                   allow_everyone_if_no_acl_found=allow_everyone)
    assert a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "clicks") is allow_everyone  # no ACL on clicks at all
    assert a.authorize(ALICE, HOST, Op.WRITE, GROUP, "orders") is allow_everyone
    # ACLs on the resource (whoever they name): the default no longer applies
    assert not a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.READ, TOPIC, "pay.eu")
    assert a.authorize(BOB, HOST, Op.WRITE, TOPIC, "orders")


def test_authorized_operations_is_kafkas_bit_field_of_supported_operations() -> None:
    a = authorizer(acl("t", "User:alice", Op.READ), acl("t", "User:alice", Op.ALTER_CONFIGS),
                   acl("g", "User:alice", Op.ALL, resource_type=GROUP))
    assert a.authorized_operations(ALICE, HOST, TOPIC, "t") == (
        1 << Op.READ | 1 << Op.DESCRIBE | 1 << Op.ALTER_CONFIGS | 1 << Op.DESCRIBE_CONFIGS)
    assert a.authorized_operations(ALICE, HOST, GROUP, "g") == 1 << Op.READ | 1 << Op.DESCRIBE | 1 << Op.DELETE
    assert a.authorized_operations(BOB, HOST, TOPIC, "t") == 0


def test_authorize_by_resource_type_as_kip_679() -> None:
    by_type = AclAuthorizer.authorize_by_resource_type
    assert not by_type(authorizer(), ALICE, HOST, Op.WRITE, TOPIC)  # no ACL, default deny
    assert by_type(authorizer(allow_everyone_if_no_acl_found=True), ALICE, HOST, Op.WRITE, TOPIC)
    assert by_type(authorizer(acl("orders", "User:alice", Op.WRITE)), ALICE, HOST, Op.WRITE, TOPIC)
    assert by_type(authorizer(acl("pay.", "User:*", Op.ALL, pattern_type=PREFIXED)), ALICE, HOST, Op.WRITE, TOPIC)
    assert not by_type(authorizer(acl("orders", "User:alice", Op.READ)), ALICE, HOST, Op.WRITE, TOPIC)
    assert not by_type(authorizer(acl("orders", "User:bob", Op.WRITE)), ALICE, HOST, Op.WRITE, TOPIC)
    assert not by_type(authorizer(acl("orders", "User:alice", Op.WRITE, host="10.9.9.9")), ALICE, HOST, Op.WRITE, TOPIC)
    # an allow dominated by a deny of the same literal or of a prefix of it does not count
    assert not by_type(authorizer(acl("orders", "User:alice", Op.WRITE), acl("orders", "User:alice", Op.WRITE, DENY)),
                       ALICE, HOST, Op.WRITE, TOPIC)
    assert not by_type(authorizer(acl("pay.eu", "User:alice", Op.WRITE),
                                  acl("pay.", "User:alice", Op.ALL, DENY, pattern_type=PREFIXED)),
                       ALICE, HOST, Op.WRITE, TOPIC)
    assert by_type(authorizer(acl("pay.eu", "User:alice", Op.WRITE), acl("orders", "User:alice", Op.WRITE),
                              acl("pay.", "User:alice", Op.ALL, DENY, pattern_type=PREFIXED)),
                   ALICE, HOST, Op.WRITE, TOPIC)
    # a wildcard deny denies whatever else allows; a wildcard allow allows
    assert not by_type(authorizer(acl("orders", "User:alice", Op.WRITE), acl("*", "User:alice", Op.WRITE, DENY)),
                       ALICE, HOST, Op.WRITE, TOPIC)
    assert by_type(authorizer(acl("*", "User:alice", Op.WRITE)), ALICE, HOST, Op.WRITE, TOPIC)
    assert by_type(authorizer(super_users=frozenset({ALICE})), ALICE, HOST, Op.WRITE, TOPIC)


def test_two_doors_sharing_the_store_see_each_others_acls() -> None:
    store = MemorySecurityStore()
    first, second = AclAuthorizer(store), AclAuthorizer(store)  # type: ignore[arg-type]
    binding = acl("orders", "User:alice", Op.WRITE)
    assert asyncio.run(first.create([binding])) == [None]
    assert second.authorize(ALICE, HOST, Op.WRITE, TOPIC, "orders")
    assert second.describe(ANY_FILTER) == [binding]
    # a third door started later reads it from the store's snapshot
    third = AclAuthorizer(store)  # type: ignore[arg-type]
    assert third.authorize(ALICE, HOST, Op.WRITE, TOPIC, "orders")
    deleted = asyncio.run(second.delete([ANY_FILTER]))
    assert deleted[0].error is None and deleted[0].deleted == (binding,)
    assert not first.authorize(ALICE, HOST, Op.WRITE, TOPIC, "orders")
    assert not third.authorize(ALICE, HOST, Op.WRITE, TOPIC, "orders")
    assert store.snapshot(ACL_KIND) == {}


def test_creating_a_binding_twice_stores_it_once_and_validation_is_the_controllers() -> None:
    store = MemorySecurityStore()
    a = AclAuthorizer(store)  # type: ignore[arg-type]
    binding = acl("orders", "User:alice", Op.WRITE)
    assert asyncio.run(a.create([binding, binding])) == [None, None]
    assert len(store.snapshot(ACL_KIND)) == 1
    bad = asyncio.run(a.create([acl("", "User:alice", Op.READ), acl("t", "alice", Op.READ),
                                acl("t", "User:alice", Op.ANY), acl("t", "User:alice", Op.READ, AclPermissionType.ANY),
                                acl("t", "User:alice", Op.READ, resource_type=ResourceType.UNKNOWN),
                                acl("t", "User:alice", Op.READ, pattern_type=PatternType.MATCH)]))
    assert [(e.code, e.message) for e in bad if e is not None] == [
        (ErrorCode.invalid_request, "Resource name should not be empty"),
        (ErrorCode.invalid_request, "Could not parse principal from `alice` (no colon is present separating the "
                                    "principal type from the principal name)"),
        (ErrorCode.invalid_request, "Invalid operation ANY"),
        (ErrorCode.invalid_request, "Invalid permissionType ANY"),
        (ErrorCode.invalid_request, "Invalid resourceType UNKNOWN"),
        (ErrorCode.invalid_request, "Invalid patternType MATCH")]
    assert len(store.snapshot(ACL_KIND)) == 1


def test_an_unreachable_store_fails_the_creation_and_changes_nothing() -> None:
    store = MemorySecurityStore()
    a = AclAuthorizer(store)  # type: ignore[arg-type]
    store.fail = True
    (error,) = asyncio.run(a.create([acl("orders", "User:alice", Op.WRITE)]))
    assert error is not None and error.code == ErrorCode.unknown_server_error and "unreachable" in (error.message or "")
    assert not a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "orders")


def _filter(resource_type: ResourceType = ResourceType.ANY, name: str | None = None,
            pattern_type: PatternType = PatternType.ANY, principal: str | None = None,
            operation: AclOperation = Op.ANY, permission: AclPermissionType = AclPermissionType.ANY) -> AclBindingFilter:
    return AclBindingFilter(ResourcePatternFilter(resource_type, name, pattern_type),
                            AccessControlEntryFilter(principal, None, operation, permission))


def test_filters_match_as_acl_binding_filter_matches() -> None:
    literal, wildcard = acl("pay.eu", "User:alice", Op.READ), acl("*", "User:bob", Op.WRITE)
    prefixed, other = acl("pay.", "User:alice", Op.READ, DENY, pattern_type=PREFIXED), acl("pay.us", "User:alice", Op.READ)
    group = acl("pay.eu", "User:alice", Op.READ, resource_type=GROUP)
    a = authorizer(literal, wildcard, prefixed, other, group)
    assert a.describe(ANY_FILTER) == sorted([literal, wildcard, prefixed, other, group])
    # ANY: exactly that name, whatever the pattern type
    assert a.describe(_filter(TOPIC, "pay.eu")) == [literal]
    assert a.describe(_filter(TOPIC, "pay.", PatternType.ANY)) == [prefixed]
    # MATCH: every pattern that applies to a resource of that name
    assert a.describe(_filter(TOPIC, "pay.eu", PatternType.MATCH)) == sorted([literal, wildcard, prefixed])
    # LITERAL / PREFIXED: that pattern type and exactly that name
    assert a.describe(_filter(TOPIC, "pay.eu", LITERAL)) == [literal]
    assert a.describe(_filter(TOPIC, "pay.eu", PREFIXED)) == []
    assert a.describe(_filter(TOPIC, None, PREFIXED)) == [prefixed]
    # the entry's side: principal exactly, operation and permission or ANY
    assert a.describe(_filter(principal="User:bob")) == [wildcard]
    assert a.describe(_filter(permission=DENY)) == [prefixed]
    assert a.describe(_filter(ResourceType.GROUP, operation=Op.READ)) == [group]


def test_the_store_record_is_stable_and_round_trips() -> None:
    binding = acl("pay.", "User:CN=a,O=b:c", Op.IDEMPOTENT_WRITE, DENY, pattern_type=PREFIXED, host="::1")
    assert acl_codec.decode(acl_codec.encode(binding)) == binding
    assert acl_codec.record_name(binding) == acl_codec.record_name(
        acl("pay.", "User:CN=a,O=b:c", Op.IDEMPOTENT_WRITE, DENY, pattern_type=PREFIXED, host="::1"))
    assert acl_codec.record_name(binding) != acl_codec.record_name(acl("pay.", "User:CN=a,O=b:c", Op.IDEMPOTENT_WRITE))
    for junk in (b"{}", b"not json", b'{"v": 2}', b'{"v":1,"resource_type":"NOPE"}'):
        with pytest.raises(ValueError):
            acl_codec.decode(junk)
    # a record the authorizer cannot read is skipped, not fatal
    store = MemorySecurityStore()
    store.records[(ACL_KIND, "junk")] = b"not json"
    assert AclAuthorizer(store).describe(ANY_FILTER) == []  # type: ignore[arg-type]


def test_the_audit_logs_a_denial_once_a_minute_per_principal_api_and_resource(caplog: pytest.LogCaptureFixture) -> None:
    now = [1000.0]
    seen: list[str] = []
    audit = DenialAudit(on_denied=seen.append, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="gateway.front_door.authorizer"):
        for _ in range(5):
            audit.denied(ALICE, HOST, "produce", Op.WRITE, TOPIC, "orders")
        audit.denied(BOB, HOST, "produce", Op.WRITE, TOPIC, "orders")  # another principal: its own line
        audit.denied(ALICE, HOST, "fetch", Op.READ, TOPIC, "orders")  # another API: its own line
        now[0] += 61
        audit.denied(ALICE, HOST, "produce", Op.WRITE, TOPIC, "orders")
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == ("Principal = User:alice is Denied operation = WRITE from host = 10.0.0.1 on resource = "
                        "Topic:LITERAL:orders for request = produce")
    assert len(lines) == 4
    assert lines[3].endswith("(4 more like it not logged in the last 60s)")
    assert seen == ["produce"] * 6 + ["fetch"] + ["produce"]  # every denial is counted
    assert audit.counts == {"produce": 7, "fetch": 1} and audit.total == 8
