"""The ACLs and filters of CreateAcls, DescribeAcls and DeleteAcls requests, read as Kafka's request classes
read them: `CreateAclsRequest.aclBinding`, `DescribeAclsRequest.filter`, `DeleteAclsRequest.aclBindingFilter`
(codes Kafka does not know become UNKNOWN, `fromCode`), with the checks Kafka makes while it parses the
request (`validate`, `normalizeAndValidate`) or builds the binding (the `ResourcePattern` and
`AccessControlEntry` constructors).
"""

from __future__ import annotations

from typing import Any

from front_door.security.acls import (
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


class UnreadableAclRequestError(ValueError):
    """What Kafka refuses while parsing the request: the connection is closed (`InvalidRequestException`)."""


class IllegalBindingError(ValueError):
    """A binding Kafka's `ResourcePattern`/`AccessControlEntry` constructors refuse (`IllegalArgumentException`):
    the handler fails, and `KafkaApis.handleError` answers every creation with UNKNOWN_SERVER_ERROR."""


def creations(body: Any) -> list[AclBinding]:
    """The bindings of a CreateAclsRequest (`CreateAclsRequest.validate`, then `aclBinding`)."""
    for c in body.creations:
        if 0 in (c.resource_type, c.resource_pattern_type, c.operation, c.permission_type):
            raise UnreadableAclRequestError("CreatableAcls contain unknown elements")
    bindings = []
    for c in body.creations:
        resource_type = ResourceType.from_code(c.resource_type)
        pattern_type = PatternType.from_code(c.resource_pattern_type)
        operation = AclOperation.from_code(c.operation)
        permission = AclPermissionType.from_code(c.permission_type)
        if resource_type == ResourceType.ANY:
            raise IllegalBindingError("resourceType must not be ANY")
        if pattern_type in (PatternType.MATCH, PatternType.ANY):
            raise IllegalBindingError(f"patternType must not be {pattern_type.name}")
        if operation == AclOperation.ANY:
            raise IllegalBindingError("operation must not be ANY")
        if permission == AclPermissionType.ANY:
            raise IllegalBindingError("permissionType must not be ANY")
        bindings.append(AclBinding(ResourcePattern(resource_type, c.resource_name, pattern_type),
                                   AccessControlEntry(c.principal, c.host, operation, permission)))
    return bindings


def binding_filter(f: Any, resource_type: int, name: str | None, pattern_type: int) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(ResourceType.from_code(resource_type), name, PatternType.from_code(pattern_type)),
        AccessControlEntryFilter(f.principal_filter, f.host_filter, AclOperation.from_code(f.operation),
                                 AclPermissionType.from_code(f.permission_type)))


def describe_filter(body: Any) -> AclBindingFilter:
    """The filter of a DescribeAclsRequest; `normalizeAndValidate` refuses one with an UNKNOWN element."""
    f = binding_filter(body, body.resource_type_filter, body.resource_name_filter, body.pattern_type_filter)
    if f.is_unknown():
        raise UnreadableAclRequestError("DescribeAclsRequest contains UNKNOWN elements")
    return f


def delete_filters(body: Any) -> list[AclBindingFilter]:
    """The filters of a DeleteAclsRequest; `normalizeAndValidate` refuses an UNKNOWN (0) code in any."""
    for f in body.filters:
        if 0 in (f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type):
            raise UnreadableAclRequestError("Filters contain UNKNOWN elements")
    return [binding_filter(f, f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter)
            for f in body.filters]
