"""BmqActAs (BMQ-internal): a proxy's link to this broker carries one client's requests from now
on, authorized, audited and throttled as that client's principal (see BmqActAsRequest.json).
Asked by a proxy right after it logs in; a link acts for one client only, for good."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import BmqActAsRequest, BmqActAsResponse


async def handle_act_as(ctx: RequestContext, request: BmqActAsRequest,
                        version: int) -> BmqActAsResponse:
    if not ctx.authorize_internal():
        return BmqActAsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    session = ctx.session
    if session is None or not session.act_for(request.principal, request.client_host):
        return BmqActAsResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE)
    return BmqActAsResponse(error_code=ErrorCode.NONE)
