"""How a role registers the Kafka APIs it serves, and the ApiVersions listing derived from it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ApiVersionsResponse
from bmq.protocol.messages.api_versions_response import ApiVersion
from bmq.protocol.primitives import Reader

# Api keys from here up are BMQ's own (proxy <-> broker, bmq/protocol/specs/): served, but never
# listed in ApiVersions, so Kafka clients do not see them.
FIRST_INTERNAL_API_KEY = 32000


class RequestMessage(Protocol):
    """What the generated request classes offer the dispatcher."""

    API_KEY: ClassVar[int]
    MIN_VERSION: ClassVar[int]
    MAX_VERSION: ClassVar[int]

    @classmethod
    def read(cls, r: Reader, version: int) -> Any: ...


# (request context, decoded request, version) -> response object, or None for no response.
Handler = Callable[[Any, Any, int], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One Kafka API: the versions a role serves and the coroutine that answers it."""

    request_type: type[RequestMessage]
    min_version: int
    max_version: int
    handler: Handler

    @property
    def name(self) -> str:
        """The API's name as metrics label it: "Produce", "Fetch", "JoinGroup", ..."""
        return self.request_type.__name__.removesuffix("Request")


def spec(request_type: type[RequestMessage], handler: Handler) -> ApiSpec:
    """Serve every version our generated codec reads and writes."""
    return ApiSpec(request_type, request_type.MIN_VERSION, request_type.MAX_VERSION, handler)


def supported_versions(handlers: Mapping[int, ApiSpec]) -> list[ApiVersion]:
    return [
        ApiVersion(api_key=key, min_version=s.min_version, max_version=s.max_version)
        for key, s in sorted(handlers.items()) if key < FIRST_INTERNAL_API_KEY
    ]


def api_versions_error(handlers: Mapping[int, ApiSpec]) -> ApiVersionsResponse:
    """The v0 answer to an ApiVersions version we cannot parse (the client retries lower)."""
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION,
                               api_keys=supported_versions(handlers))
