"""The front door's authorizer: Kafka's `StandardAuthorizer` over the ACL bindings of the security store.

The bindings live on the security topic (`store.py`, kind `acl`), read at start (`snapshot`) and followed
(`subscribe`): an ACL created or deleted through any door applies on every door, as every broker follows
the metadata log. The decision is `StandardAuthorizerData.authorize`'s:

- a super user (`super.users`) may do everything;
- the ACLs that apply to a resource are the LITERAL ones of its name, the LITERAL "*" ones of its type and
  the PREFIXED ones whose name begins it; of those, the ones of the principal (or `User:*`) and the
  client's host (or "*");
- a DENY of the operation (or of ALL) denies, whatever allows it;
- else an ALLOW of the operation allows; ALL implies every operation, READ, WRITE, DELETE and ALTER imply
  DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS (for ALLOW only: a DENY of READ does not deny DESCRIBE);
- else, when no ACL at all applies to the resource (whoever it names), `allow.everyone.if.no.acl.found`
  decides (false by default); otherwise denied.

Creation and deletion validate as `AclControlManager` (`validateNewAcl`, `validateFilter`) does.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from front_door.cluster.security_store import ACL_KIND, SecurityStore, SecurityStoreError
from front_door.network.principal import KafkaPrincipal, parse_principal
from front_door.security import acl_codec
from front_door.security.acls import (
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from front_door.security.audit import DenialAudit

log = logging.getLogger("gateway.front_door.authorizer")

_IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                               AclOperation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


@dataclass(frozen=True)
class AclError:
    """A per-binding or per-filter failure, as Kafka's `ApiError`: an error code and its message."""

    code: ErrorCode
    message: str | None


@dataclass(frozen=True)
class DeleteResult:
    """One DeleteAcls filter's outcome (`AclDeleteResult`): an error, or the bindings it deleted."""

    error: AclError | None
    deleted: tuple[AclBinding, ...] = ()


def parse_super_users(value: str | None) -> frozenset[KafkaPrincipal]:
    """Kafka's `super.users`: principals separated by semicolons (`User:admin;User:CN=ops,O=acme`), as
    `StandardAuthorizer.getConfiguredSuperUsers` reads it; ValueError for one that does not parse."""
    return frozenset(parse_principal(v.strip()) for v in (value or "").split(";") if v.strip())


def validate_new_acl(binding: AclBinding) -> AclError | None:
    """`AclControlManager.validateNewAcl`: the controller's checks of a binding to create."""
    p, e = binding.pattern, binding.entry
    if p.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return AclError(ErrorCode.invalid_request, f"Invalid resourceType {p.resource_type.name}")
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return AclError(ErrorCode.invalid_request, f"Invalid patternType {p.pattern_type.name}")
    if e.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return AclError(ErrorCode.invalid_request, f"Invalid operation {e.operation.name}")
    if e.permission not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return AclError(ErrorCode.invalid_request, f"Invalid permissionType {e.permission.name}")
    if not p.name:
        return AclError(ErrorCode.invalid_request, "Resource name should not be empty")
    if ":" not in e.principal:
        return AclError(ErrorCode.invalid_request,
                        f"Could not parse principal from `{e.principal}` (no colon is present separating the "
                        "principal type from the principal name)")
    return None


def validate_filter(binding_filter: AclBindingFilter) -> AclError | None:
    """`AclControlManager.validateFilter`."""
    if binding_filter.pattern.is_unknown():
        return AclError(ErrorCode.invalid_request, "Unknown patternFilter.")
    if binding_filter.entry.is_unknown():
        return AclError(ErrorCode.invalid_request, "Unknown entryFilter.")
    return None


def _result(entry: AccessControlEntry, principal: str, host: str, operation: AclOperation) -> AclPermissionType | None:
    """`StandardAuthorizerData.findResult`: what one ACL says of the action, or None when it does not apply."""
    if entry.principal != principal and entry.principal != WILDCARD_PRINCIPAL:
        return None
    if entry.host != WILDCARD_HOST and entry.host != host:
        return None
    if entry.operation != AclOperation.ALL:
        if entry.permission == AclPermissionType.ALLOW:
            if operation == AclOperation.DESCRIBE:
                if entry.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif operation == AclOperation.DESCRIBE_CONFIGS:
                if entry.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif entry.operation != operation:
                return None
        elif entry.operation != operation:
            return None
    return entry.permission


class AclAuthorizer:
    """Decisions (`authorize`, `authorized_operations`, `authorize_by_resource_type`) read an index kept in
    memory; `create` and `delete` write the store and return once it has the change. Used on the front
    door's event loop only (the store calls its listeners there)."""

    def __init__(self, store: SecurityStore, super_users: frozenset[KafkaPrincipal] = frozenset(),
                 allow_everyone_if_no_acl_found: bool = False, *,
                 on_denied: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.audit = DenialAudit(on_denied)
        self._bindings: dict[str, AclBinding] = {}  # store record name -> binding
        # the index: type -> name -> entries, literal and prefixed apart; the prefix lengths in use per type
        self._literal: dict[ResourceType, dict[str, set[AccessControlEntry]]] = {}
        self._prefixed: dict[ResourceType, dict[str, set[AccessControlEntry]]] = {}
        self._prefix_lengths: dict[ResourceType, Counter[int]] = {}
        for name, value in store.snapshot(ACL_KIND).items():
            self._apply(name, value)
        store.subscribe(self._changed)

    # ------------------------------------------------------------------ the index

    def _changed(self, kind: str, name: str, value: bytes | None) -> None:
        if kind == ACL_KIND:
            self._apply(name, value)

    def _apply(self, name: str, value: bytes | None) -> None:
        old = self._bindings.pop(name, None)
        if old is not None:
            self._unindex(old)
        if value is None:
            return
        try:
            binding = acl_codec.decode(value)
        except ValueError as e:
            log.warning("security store: ACL record %s skipped: %s", name, e)
            return
        self._bindings[name] = binding
        self._index(binding)

    def _table(self, pattern_type: PatternType) -> dict[ResourceType, dict[str, set[AccessControlEntry]]]:
        return self._prefixed if pattern_type == PatternType.PREFIXED else self._literal

    def _index(self, binding: AclBinding) -> None:
        p = binding.pattern
        entries = self._table(p.pattern_type).setdefault(p.resource_type, {}).setdefault(p.name, set())
        if not entries and p.pattern_type == PatternType.PREFIXED:
            self._prefix_lengths.setdefault(p.resource_type, Counter())[len(p.name)] += 1
        entries.add(binding.entry)

    def _unindex(self, binding: AclBinding) -> None:
        p = binding.pattern
        names = self._table(p.pattern_type).get(p.resource_type, {})
        entries = names.get(p.name)
        if entries is None:
            return
        entries.discard(binding.entry)
        if not entries:
            del names[p.name]
            if p.pattern_type == PatternType.PREFIXED:
                lengths = self._prefix_lengths[p.resource_type]
                lengths[len(p.name)] -= 1
                if lengths[len(p.name)] <= 0:
                    del lengths[len(p.name)]

    def _applicable(self, resource_type: ResourceType, name: str) -> Iterable[set[AccessControlEntry]]:
        """The entries of every pattern that applies to the resource: its literal name, "*", its prefixes."""
        literal = self._literal.get(resource_type)
        if literal:
            if (exact := literal.get(name)) is not None:
                yield exact
            if name != WILDCARD_RESOURCE and (wildcard := literal.get(WILDCARD_RESOURCE)) is not None:
                yield wildcard
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            for length in self._prefix_lengths.get(resource_type, ()):
                if length <= len(name) and (entries := prefixed.get(name[:length])) is not None:
                    yield entries

    # ------------------------------------------------------------------ decisions

    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        """`StandardAuthorizer.authorize` of one action on a LITERAL resource (the rules in the module's
        docstring). `host` is the client's address without the slash ("127.0.0.1")."""
        if principal in self.super_users:
            return True
        who = str(principal)
        found = allowed = False
        for entries in self._applicable(resource_type, name):
            found = found or bool(entries)
            for entry in entries:
                result = _result(entry, who, host, operation)
                if result == AclPermissionType.DENY:
                    return False
                if result == AclPermissionType.ALLOW:
                    allowed = True
        if allowed:
            return True
        return not found and self.allow_everyone_if_no_acl_found

    def authorized_operations(self, principal: KafkaPrincipal, host: str, resource_type: ResourceType,
                              name: str) -> int:
        """`AuthHelper.authorizedOperations`: the operations of `AclEntry.supportedOperations` the principal
        may do on the resource, as `Utils.to32BitField` of their codes."""
        field = 0
        for operation in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, operation, resource_type, name):
                field |= 1 << operation
        return field

    def authorize_by_resource_type(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """`Authorizer.authorizeByResourceType` (KIP-679), Kafka's default implementation, which
        `StandardAuthorizer` uses: may the principal do `operation` on at least one resource of the type?

        Allowed when the principal is allowed on a resource named "hardcode" (so super users, and everyone
        where no ACL applies and `allow.everyone.if.no.acl.found`); denied by a DENY of the operation (or
        ALL) on the LITERAL "*" or the PREFIXED "" pattern; allowed by an ALLOW on "*"; otherwise allowed
        when some LITERAL or PREFIXED ALLOW is not dominated by a DENY of the same literal name or of a
        prefix of it. Only the principal's (or `User:*`) ACLs from its host (or "*") count, and, as in
        Kafka, the operation must be the ACL's own or ALL (no implied operations here)."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        who = str(principal)
        deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        wildcard_allow = False
        for pattern_type, table in ((PatternType.LITERAL, self._literal), (PatternType.PREFIXED, self._prefixed)):
            wildcard_name = WILDCARD_RESOURCE if pattern_type == PatternType.LITERAL else ""
            for name, entries in table.get(resource_type, {}).items():
                for e in entries:
                    if e.host not in (host, WILDCARD_HOST) or e.principal not in (who, WILDCARD_PRINCIPAL):
                        continue
                    if e.operation not in (operation, AclOperation.ALL):
                        continue
                    if e.permission == AclPermissionType.DENY:
                        if name == wildcard_name:
                            return False
                        deny[pattern_type].add(name)
                    elif e.permission == AclPermissionType.ALLOW:
                        if name == wildcard_name:
                            wildcard_allow = True
                        else:
                            allow[pattern_type].add(name)
        if wildcard_allow:
            return True
        for pattern_type, names in allow.items():
            for name in names:
                if pattern_type == PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                    continue
                if not any(name[:i] in deny[PatternType.PREFIXED] for i in range(1, len(name) + 1)):
                    return True
        return False

    # ------------------------------------------------------------------ the ACLs themselves

    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """`Authorizer.acls(filter)`: every binding the filter matches, in a stable order."""
        return sorted(b for b in self._bindings.values() if binding_filter.matches(b))

    async def create(self, bindings: Sequence[AclBinding]) -> list[AclError | None]:
        """`Authorizer.createAcls`: each binding validated and written; None where it was created (or
        already existed, as Kafka counts an existing ACL created)."""
        results: list[AclError | None] = []
        for binding in bindings:
            error = validate_new_acl(binding)
            if error is None:
                name = acl_codec.record_name(binding)
                if name not in self._bindings:
                    error = await self._write(name, acl_codec.encode(binding))
            results.append(error)
        return results

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[DeleteResult]:
        """`Authorizer.deleteAcls`: per filter, every binding it matches is deleted and reported (a binding
        two filters match is reported by both, as `AclControlManager.deleteAclsForFilter` reports it)."""
        matched: list[tuple[AclError | None, list[tuple[str, AclBinding]]]] = []
        for f in filters:
            error = validate_filter(f)
            matched.append((error, [] if error is not None else
                            sorted(((n, b) for n, b in self._bindings.items() if f.matches(b)), key=lambda nb: nb[1])))
        failed: dict[str, AclError] = {}
        for name in dict.fromkeys(n for _, found in matched for n, _ in found):
            if (error := await self._write(name, None)) is not None:
                failed[name] = error
        results = []
        for error, found in matched:
            store_error = next((failed[n] for n, _ in found if n in failed), None)
            if error is not None or store_error is not None:
                results.append(DeleteResult(error or store_error))
            else:
                results.append(DeleteResult(None, tuple(b for _, b in found)))
        return results

    async def _write(self, name: str, value: bytes | None) -> AclError | None:
        try:
            await self.store.write(ACL_KIND, name, value)
        except SecurityStoreError as e:
            log.warning("security store: ACL %s not %s: %s", name, "deleted" if value is None else "written", e)
            return AclError(ErrorCode.unknown_server_error, f"The ACL could not be stored: {e}")
        self._apply(name, value)  # the store's listener has it too; applying twice is harmless
        return None
