"""DescribeUserScramCredentials: the SCRAM mechanisms and iteration counts each user has
(never salts nor keys). No users named: every user with a credential."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.broker.handlers.scram_credentials import NO_STORE, credential_store
from bmq.metadata.acls import Operation
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from bmq.protocol.messages.describe_user_scram_credentials_response import (
    CredentialInfo,
    DescribeUserScramCredentialsResult,
)
from bmq.security.scram import MECHANISMS


async def handle_describe_user_scram_credentials(
        ctx: RequestContext, request: DescribeUserScramCredentialsRequest,
        version: int) -> DescribeUserScramCredentialsResponse:
    store = credential_store(ctx)
    if not ctx.authorize_cluster(Operation.DESCRIBE):
        return DescribeUserScramCredentialsResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None)
    if store is None:
        return DescribeUserScramCredentialsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION,
                                                    error_message=NO_STORE)
    names = [user.name for user in request.users or []] or store.users()
    results = []
    for name in dict.fromkeys(names):
        credentials = store.of_user(name)
        if names.count(name) > 1:
            results.append(DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.DUPLICATE_RESOURCE,
                error_message="Cannot describe SCRAM credentials for the same user twice in a "
                              "single request"))
        elif not credentials:
            results.append(DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                error_message="Attempt to describe a user credential that does not exist"))
        else:
            results.append(DescribeUserScramCredentialsResult(
                user=name, error_message=None, credential_infos=[
                    CredentialInfo(mechanism=MECHANISMS[c.mechanism][1], iterations=c.iterations)
                    for c in sorted(credentials, key=lambda c: c.mechanism)]))
    return DescribeUserScramCredentialsResponse(error_message=None, results=results)
