"""An ACL binding as a record of the security store (`store.py`, kind `acl`): its value is JSON with the
enums' names (Kafka's, readable with any tool that reads the topic), its name a hash of that canonical
form — so one binding is one record whichever door writes it, a second CreateAcls of the same binding is
a no-op (as `AclControlManager.createAcls` skips an existing ACL), and a tombstone of the name deletes it.
"""

from __future__ import annotations

import hashlib
import json

from front_door.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

FORMAT_VERSION = 1


def encode(binding: AclBinding) -> bytes:
    p, e = binding.pattern, binding.entry
    return json.dumps({"v": FORMAT_VERSION, "resource_type": p.resource_type.name, "name": p.name,
                       "pattern_type": p.pattern_type.name, "principal": e.principal, "host": e.host,
                       "operation": e.operation.name, "permission": e.permission.name},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def decode(value: bytes) -> AclBinding:
    """ValueError for bytes that are not a binding of this format."""
    try:
        d = json.loads(value)
        if d.get("v") != FORMAT_VERSION:
            raise ValueError(f"ACL record format {d.get('v')!r}, expected {FORMAT_VERSION}")
        return AclBinding(
            ResourcePattern(ResourceType[d["resource_type"]], str(d["name"]), PatternType[d["pattern_type"]]),
            AccessControlEntry(str(d["principal"]), str(d["host"]), AclOperation[d["operation"]],
                               AclPermissionType[d["permission"]]))
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as e:
        raise ValueError(f"not an ACL record: {e!r}") from None


def record_name(binding: AclBinding) -> str:
    """The binding's stable name in the store: the same binding has the same name on every door."""
    return hashlib.sha256(encode(binding)).hexdigest()[:32]
