"""ApiVersions: which APIs and versions this broker serves."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.net.api import supported_versions
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ApiVersionsRequest, ApiVersionsResponse


async def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest,
                              version: int) -> ApiVersionsResponse:
    from bmq.broker.handlers import TABLES  # (lists this module too)

    served = TABLES.served(ctx.broker.config.legacy_clients_enable)
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=supported_versions(served))
