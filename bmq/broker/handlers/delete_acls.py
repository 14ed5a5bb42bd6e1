"""DeleteAcls: remove the bindings each filter matches (ALTER on the cluster)."""

from __future__ import annotations

import asyncio

from bmq.broker.handlers.acl_bindings import NO_AUTHORIZER, acl_filter
from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import AclError, AclFilter, Operation
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import DeleteAclsRequest, DeleteAclsResponse
from bmq.protocol.messages.delete_acls_response import DeleteAclsFilterResult, DeleteAclsMatchingAcl


async def handle_delete_acls(ctx: RequestContext, request: DeleteAclsRequest,
                             version: int) -> DeleteAclsResponse:
    authorizer = ctx.authorizer
    refused = ErrorCode.NONE
    if authorizer is None:
        refused = ErrorCode.SECURITY_DISABLED
    elif not ctx.authorize_cluster(Operation.ALTER):
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if authorizer is None or refused != ErrorCode.NONE:
        return DeleteAclsResponse(filter_results=[
            DeleteAclsFilterResult(error_code=refused, error_message=NO_AUTHORIZER
                                   if refused == ErrorCode.SECURITY_DISABLED else None)
            for _ in request.filters])
    results: list[DeleteAclsFilterResult | None] = []
    filters: list[AclFilter] = []
    for entry in request.filters:
        try:
            filters.append(acl_filter(entry, version))
            results.append(None)
        except AclError as error:
            results.append(DeleteAclsFilterResult(error_code=ErrorCode.INVALID_REQUEST,
                                                  error_message=str(error)))
    removed = await asyncio.get_running_loop().run_in_executor(None, authorizer.delete, filters)
    answers = iter(removed)
    out = []
    for result in results:
        if result is not None:
            out.append(result)
            continue
        out.append(DeleteAclsFilterResult(error_message=None, matching_acls=[
            DeleteAclsMatchingAcl(error_message=None, resource_type=int(acl.resource_type),
                                  resource_name=acl.resource_name,
                                  pattern_type=int(acl.pattern_type), principal=acl.principal,
                                  host=acl.host, operation=int(acl.operation),
                                  permission_type=int(acl.permission))
            for acl in next(answers)]))
    return DeleteAclsResponse(filter_results=out)
