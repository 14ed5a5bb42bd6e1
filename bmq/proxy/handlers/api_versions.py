"""ApiVersions: the proxy serves the broker's APIs at the same versions (it relays what it does
not answer itself), plus OffsetForLeaderEpoch."""

from __future__ import annotations

from bmq.net.api import supported_versions
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from bmq.proxy.handlers.base import ProxyContext


async def handle_api_versions(ctx: ProxyContext, request: ApiVersionsRequest,
                              version: int) -> ApiVersionsResponse:
    from bmq.proxy.handlers import TABLES  # the registry lists this module too

    served = TABLES.served(ctx.proxy.config.legacy_clients_enable)
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=supported_versions(served))
