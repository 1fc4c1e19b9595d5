"""Kafka's ACL model (`org.apache.kafka.common.acl` and `org.apache.kafka.common.resource`), with the
protocol's codes: an `AclBinding` is a `ResourcePattern` (what) and an `AccessControlEntry` (who, from
where, which operation, allowed or denied). `AclBindingFilter` is what DescribeAcls and DeleteAcls send,
matched as `AclBindingFilter.matches` does (ANY and MATCH included).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

CLUSTER_NAME = "kafka-cluster"  # `Resource.CLUSTER_NAME`: the one CLUSTER resource
WILDCARD_RESOURCE = "*"  # `ResourcePattern.WILDCARD_RESOURCE`: a LITERAL name matching every resource
WILDCARD_PRINCIPAL = "User:*"  # `AclEntry.WILDCARD_PRINCIPAL_STRING`
WILDCARD_HOST = "*"  # `AclEntry.WILDCARD_HOST`

_E = TypeVar("_E", bound=IntEnum)


class ResourceType(IntEnum):
    """`org.apache.kafka.common.resource.ResourceType`"""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7

    @classmethod
    def from_code(cls, code: int) -> ResourceType:
        """`ResourceType.fromCode`: a code Kafka does not know is UNKNOWN."""
        return _from_code(cls, code)

    @property
    def title(self) -> str:
        """`SecurityUtils.resourceTypeName`: "Topic", "TransactionalId", ... (as Kafka's audit log writes it)."""
        return "".join(part.capitalize() for part in self.name.split("_"))


class PatternType(IntEnum):
    """`org.apache.kafka.common.resource.PatternType`: ANY and MATCH are for filters only."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4

    @classmethod
    def from_code(cls, code: int) -> PatternType:
        return _from_code(cls, code)


class AclOperation(IntEnum):
    """`org.apache.kafka.common.acl.AclOperation`"""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14

    @classmethod
    def from_code(cls, code: int) -> AclOperation:
        return _from_code(cls, code)


class AclPermissionType(IntEnum):
    """`org.apache.kafka.common.acl.AclPermissionType`"""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3

    @classmethod
    def from_code(cls, code: int) -> AclPermissionType:
        return _from_code(cls, code)


def _from_code(enum: type[_E], code: int) -> _E:
    try:
        return enum(code)
    except ValueError:
        return enum(0)  # every one of these enums has UNKNOWN = 0


# `AclEntry.supportedOperations`: what `authorizedOperations` reports on each resource type (ALL is not one)
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


@dataclass(frozen=True, order=True)
class ResourcePattern:
    """`ResourcePattern`: a LITERAL name (or "*", every resource of the type) or a PREFIXED one."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        """As Kafka's audit log names a resource: `Topic:LITERAL:orders`."""
        return f"{self.resource_type.title}:{self.pattern_type.name}:{self.name}"


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    """`AccessControlEntry`: the principal as Kafka keeps it, a string (`User:alice`, `User:*`)."""

    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True)
class ResourcePatternFilter:
    """`ResourcePatternFilter`: None matches any name; pattern type ANY matches any pattern with exactly
    that name, MATCH every pattern that would apply to a resource of that name."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        """`ResourcePatternFilter.matches`."""
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:  # MATCH
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        return self.name.startswith(pattern.name)  # MATCH, PREFIXED

    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN


@dataclass(frozen=True)
class AccessControlEntryFilter:
    """`AccessControlEntryFilter`: None principal or host matches any; ANY operation or permission too.
    The principal and host compare as strings, exactly."""

    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        """`AccessControlEntryFilter.matches`."""
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != entry.operation:
            return False
        return self.permission == AclPermissionType.ANY or self.permission == entry.permission

    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission == AclPermissionType.UNKNOWN


@dataclass(frozen=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter
    entry: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        """`AclBindingFilter.matches`."""
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def is_unknown(self) -> bool:
        """`AclBindingFilter.isUnknown`: some element is UNKNOWN (requests with one are refused)."""
        return self.pattern.is_unknown() or self.entry.is_unknown()


ANY_FILTER = AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
                              AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY))
