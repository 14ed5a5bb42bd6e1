"""ApiVersions: which APIs and versions this broker serves."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from bmq.protocol.messages.api_versions_response import ApiVersion


def supported_versions() -> list[ApiVersion]:
    from bmq.broker.handlers import HANDLERS  # the registry lists this module too

    return [
        ApiVersion(api_key=key, min_version=spec.min_version, max_version=spec.max_version)
        for key, spec in sorted(HANDLERS.items())
    ]


def api_versions_error() -> ApiVersionsResponse:
    """The v0 answer to an ApiVersions version we cannot parse (the client retries lower)."""
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION,
                               api_keys=supported_versions())


async def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest,
                              version: int) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=supported_versions())
