"""What CreateAcls, DescribeAcls and DeleteAcls share: bindings and filters from their wire form.
Their authorizer is ``RequestContext.authorizer``; Kafka answers SECURITY_DISABLED without one."""

from __future__ import annotations

from typing import Any

from bmq.metadata.acls import (
    AclBinding,
    AclError,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

NO_AUTHORIZER = "No Authorizer is configured (authorizer.class.name)."


def binding(creation: Any) -> AclBinding:
    """A CreateAcls creation as a binding; AclError for values Kafka refuses."""
    try:
        acl = AclBinding(ResourceType(creation.resource_type), creation.resource_name,
                         PatternType(creation.resource_pattern_type), creation.principal,
                         creation.host, Operation(creation.operation),
                         Permission(creation.permission_type))
    except ValueError as error:
        raise AclError(str(error)) from error
    acl.check()
    return acl


def acl_filter(entry: Any, version: int) -> AclFilter:
    """A DescribeAcls request or DeleteAcls filter; v0 knows only LITERAL patterns."""
    try:
        found = AclFilter(ResourceType(entry.resource_type_filter), entry.resource_name_filter,
                          PatternType(entry.pattern_type_filter if version >= 1 else 3),
                          entry.principal_filter, entry.host_filter, Operation(entry.operation),
                          Permission(entry.permission_type))
    except ValueError as error:
        raise AclError(str(error)) from error
    found.check()
    return found
