"""What every API handler receives, and how it is registered."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from bmq.broker.broker import Broker
from bmq.protocol.headers import RequestHeader
from bmq.protocol.primitives import Reader


@dataclass(frozen=True, slots=True)
class RequestContext:
    broker: Broker
    header: RequestHeader
    # The client's address as Kafka shows it in DescribeGroups ("/127.0.0.1").
    client_host: str
    # The request frame; record memoryviews in the decoded request point into it.
    frame: bytearray


class RequestMessage(Protocol):
    """What the generated request classes offer the dispatcher."""

    API_KEY: ClassVar[int]
    MIN_VERSION: ClassVar[int]
    MAX_VERSION: ClassVar[int]

    @classmethod
    def read(cls, r: Reader, version: int) -> Any: ...


Handler = Callable[[RequestContext, Any, int], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One Kafka API: the versions BMQ serves and the coroutine that answers it."""

    request_type: type[RequestMessage]
    min_version: int
    max_version: int
    handler: Handler
