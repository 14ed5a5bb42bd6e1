"""ApiVersions: which APIs and versions this broker serves (share groups: `bmq serve` only,
see bmq.net.broker_apis)."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.net.api import supported_versions
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ApiVersionsRequest, ApiVersionsResponse


async def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest,
                              version: int) -> ApiVersionsResponse:
    from bmq.broker.handlers import HANDLERS, SINGLE_BROKER_HANDLERS  # (lists this module too)

    handlers = HANDLERS if ctx.broker.share.offsets_admin else {
        key: spec for key, spec in HANDLERS.items() if key not in SINGLE_BROKER_HANDLERS}
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=supported_versions(handlers))
