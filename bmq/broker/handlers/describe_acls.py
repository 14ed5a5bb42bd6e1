"""DescribeAcls: the bindings a filter matches (DESCRIBE on the cluster), by resource."""

from __future__ import annotations

from bmq.broker.handlers.acl_bindings import NO_AUTHORIZER, acl_filter
from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import AclError, Operation
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import DescribeAclsRequest, DescribeAclsResponse
from bmq.protocol.messages.describe_acls_response import AclDescription, DescribeAclsResource


async def handle_describe_acls(ctx: RequestContext, request: DescribeAclsRequest,
                               version: int) -> DescribeAclsResponse:
    authorizer = ctx.authorizer
    if authorizer is None:
        return DescribeAclsResponse(error_code=ErrorCode.SECURITY_DISABLED,
                                    error_message=NO_AUTHORIZER)
    if not ctx.authorize_cluster(Operation.DESCRIBE):
        return DescribeAclsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    error_message=None)
    try:
        found = authorizer.describe(acl_filter(request, version))
    except AclError as error:
        return DescribeAclsResponse(error_code=ErrorCode.INVALID_REQUEST,
                                    error_message=str(error))
    resources: dict[tuple[int, str, int], DescribeAclsResource] = {}
    for acl in found:
        key = (int(acl.resource_type), acl.resource_name, int(acl.pattern_type))
        resource = resources.setdefault(key, DescribeAclsResource(
            resource_type=key[0], resource_name=key[1], pattern_type=key[2]))
        resource.acls.append(AclDescription(principal=acl.principal, host=acl.host,
                                            operation=int(acl.operation),
                                            permission_type=int(acl.permission)))
    return DescribeAclsResponse(error_message=None, resources=list(resources.values()))
