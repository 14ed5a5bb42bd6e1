"""ApiVersions: the proxy serves the broker's APIs at the same versions (it relays what it does
not answer itself), plus OffsetForLeaderEpoch."""

from __future__ import annotations

from bmq.net.api import supported_versions
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from bmq.proxy.handlers.base import ProxyContext


async def handle_api_versions(ctx: ProxyContext, request: ApiVersionsRequest,
                              version: int) -> ApiVersionsResponse:
    from bmq.proxy.handlers import HANDLERS  # the registry lists this module too

    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=supported_versions(HANDLERS))
