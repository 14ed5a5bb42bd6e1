"""CreateAcls: add ACL bindings (ALTER on the cluster), saved with the cluster's metadata."""

from __future__ import annotations

import asyncio

from bmq.broker.handlers.acl_bindings import NO_AUTHORIZER, binding
from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import AclBinding, AclError, Operation
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import CreateAclsRequest, CreateAclsResponse
from bmq.protocol.messages.create_acls_response import AclCreationResult


async def handle_create_acls(ctx: RequestContext, request: CreateAclsRequest,
                             version: int) -> CreateAclsResponse:
    authorizer = ctx.authorizer
    if authorizer is None:
        return CreateAclsResponse(results=[
            AclCreationResult(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER)
            for _ in request.creations])
    if not ctx.authorize_cluster(Operation.ALTER):
        return CreateAclsResponse(results=[
            AclCreationResult(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                              error_message=None) for _ in request.creations])
    results: list[AclCreationResult] = []
    valid: list[AclBinding] = []
    for creation in request.creations:
        try:
            valid.append(binding(creation))
            results.append(AclCreationResult(error_code=ErrorCode.NONE, error_message=None))
        except AclError as error:
            results.append(AclCreationResult(error_code=ErrorCode.INVALID_REQUEST,
                                             error_message=str(error)))
    if valid:
        try:
            await asyncio.get_running_loop().run_in_executor(None, authorizer.create, valid)
        except OSError as error:
            for result in results:
                if result.error_code == ErrorCode.NONE:
                    result.error_code = ErrorCode.UNKNOWN_SERVER_ERROR
                    result.error_message = f"could not save the ACLs: {error}"
    return CreateAclsResponse(results=results)
