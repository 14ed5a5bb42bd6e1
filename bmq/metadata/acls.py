"""ACLs as cluster metadata: Kafka's model (bindings: a resource pattern and an access entry;
the filters DescribeAcls and DeleteAcls match them with) and where they are kept (``acls.json``
with the cluster's metadata, bmq/metadata/documents.py). The decision is
bmq.security.authorizer's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from bmq.metadata.documents import DocumentStore

# The operations of an ACL are Kafka's AclOperation codes, which the protocol layer defines.
from bmq.protocol.acl_operations import AclOperation as Operation

__all__ = ["CLUSTER_NAME", "WILDCARD", "WILDCARD_PRINCIPAL", "AclBinding", "AclError", "AclFilter",
           "AclStore", "Operation", "PatternType", "Permission", "ResourceType"]


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class AclError(ValueError):
    """A binding or filter Kafka refuses (INVALID_REQUEST with this message)."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def check(self) -> None:
        """Raise AclError unless this binding may be created."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise AclError("a binding needs a resource type")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise AclError("a binding's pattern type is LITERAL or PREFIXED")
        if self.operation in (Operation.UNKNOWN, Operation.ANY):
            raise AclError("a binding needs an operation")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise AclError("a binding's permission is ALLOW or DENY")
        if not self.resource_name:
            raise AclError("a binding needs a resource name")
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise AclError(f"the cluster resource is named {CLUSTER_NAME}")
        if ":" not in self.principal:
            raise AclError(f"principal {self.principal!r} is not TYPE:NAME")

    def covers(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this binding's pattern applies to the resource."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD)
        return name.startswith(self.resource_name)

    def to_json(self) -> list[object]:
        return [int(self.resource_type), self.resource_name, int(self.pattern_type),
                self.principal, self.host, int(self.operation), int(self.permission)]

    @classmethod
    def from_json(cls, item: list[object]) -> AclBinding:
        rtype, name, pattern, principal, host, operation, permission = item
        return cls(ResourceType(int(str(rtype))), str(name), PatternType(int(str(pattern))),
                   str(principal), str(host), Operation(int(str(operation))),
                   Permission(int(str(permission))))


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls' and DeleteAcls' filter: ANY / None match everything of that field; MATCH
    matches the bindings that would apply to the named resource (LITERAL name or ``*``, and
    PREFIXED prefixes of it)."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    def check(self) -> None:
        for value in (self.resource_type, self.pattern_type, self.operation, self.permission):
            if int(value) == 0:
                raise AclError("a filter field is UNKNOWN")

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if self.operation != Operation.ANY and acl.operation != self.operation:
            return False
        if self.permission != Permission.ANY and acl.permission != self.permission:
            return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        name = self.resource_name
        if self.pattern_type == PatternType.MATCH:
            return name is None or acl.covers(acl.resource_type, name)
        if self.pattern_type != PatternType.ANY and acl.pattern_type != self.pattern_type:
            return False
        return name is None or acl.resource_name == name


class AclStore(DocumentStore[list[AclBinding]]):
    """Every binding of the cluster, held in memory; a change is saved before it is seen."""

    PATH = "acls.json"

    @property
    def bindings(self) -> list[AclBinding]:
        return self.value

    def change(self, change: Callable[[list[AclBinding]], list[AclBinding]]) -> None:
        """Replace the bindings by ``change(current bindings)`` (blocking: a worker thread's);
        ``change`` may run more than once, each time on newer bindings."""
        self._change(change)

    def _parse(self, data: bytes | None) -> list[AclBinding]:
        if data is None:
            return []
        return [AclBinding.from_json(item) for item in json.loads(data).get("acls", [])]

    def _serialize(self, value: list[AclBinding]) -> bytes:
        return json.dumps({"acls": [b.to_json() for b in value]}, indent=1).encode()
