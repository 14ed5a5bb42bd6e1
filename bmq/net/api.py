"""How a role registers the Kafka APIs it serves, and the ApiVersions listing derived from it."""

from __future__ import annotations

import copy
import importlib
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, Protocol

from bmq.net.broker_apis import CLIENT_BMQ_REQUESTS
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    KAFKA4_MIN_VERSIONS,
    REQUEST_APIS,
    REQUEST_TYPES,
    ApiVersionsResponse,
)
from bmq.protocol.messages.api_versions_response import ApiVersion
from bmq.protocol.primitives import Reader

log = logging.getLogger(__name__)

# Api keys from here up are BMQ's own (proxy <-> broker, bmq/protocol/specs/): served, but not
# listed in ApiVersions, so Kafka clients do not see them; those for clients excepted
# (bmq.net.broker_apis.CLIENT_BMQ_REQUESTS).
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


class ApiSpec:
    """One Kafka API: the versions a role serves and the coroutine that answers it.

    The request class and the handler are imported when the API is first used (``handler``
    may be a ``"package.module:function"`` reference): a broker serves some thirty APIs, and
    importing all their message modules and handlers up front was a quarter of its start-up.
    """

    __slots__ = ("_handler", "_request", "_request_type", "api_key", "kafka4_min_version",
                 "listed", "max_version", "min_version", "name")

    def __init__(self, request_name: str, handler: Handler | str) -> None:
        """``request_name``: the generated request class, e.g. ``"ProduceRequest"``; every
        version our codec reads and writes is served."""
        self.api_key, self.min_version, self.max_version = REQUEST_APIS[request_name]
        # Kafka 4's lowest version: min_version is Kafka 3.9's where Kafka 4 removed older ones
        self.kafka4_min_version = KAFKA4_MIN_VERSIONS.get(request_name, self.min_version)
        # The API's name as metrics label it: "Produce", "Fetch", "JoinGroup", ...
        self.name = request_name.removesuffix("Request")
        # In ApiVersions: Kafka's APIs and BMQ's own for clients.
        self.listed = (self.api_key < FIRST_INTERNAL_API_KEY
                       or request_name in CLIENT_BMQ_REQUESTS)
        self._request = request_name
        self._request_type: type[RequestMessage] | None = None
        self._handler = handler

    @property
    def request_type(self) -> type[RequestMessage]:
        if self._request_type is None:
            self._request_type = REQUEST_TYPES[self.api_key]
        return self._request_type

    @property
    def handler(self) -> Handler:
        if isinstance(self._handler, str):
            module, _, function = self._handler.partition(":")
            self._handler = getattr(importlib.import_module(module), function)
        assert not isinstance(self._handler, str)
        return self._handler


def kafka4_versions(handlers: Mapping[int, ApiSpec]) -> dict[int, ApiSpec]:
    """The same APIs served only at the versions Kafka 4 serves: a role's table when
    ``bmq.legacy.clients.enable`` is off, so old clients are refused as Kafka 4 refuses them
    (a version it does not list disconnects, and ApiVersions does not list them)."""
    table = {}
    for key, spec in handlers.items():
        if spec.kafka4_min_version != spec.min_version:
            spec = copy.copy(spec)
            spec.min_version = spec.kafka4_min_version
        table[key] = spec
    return table


class ApiTables:
    """A role's API table both ways: every version its codec serves, and only Kafka 4's; the
    role serves one of them by its ``bmq.legacy.clients.enable``."""

    __slots__ = ("every", "kafka4")

    def __init__(self, every: dict[int, ApiSpec]) -> None:
        self.every = every
        self.kafka4 = kafka4_versions(every)

    def served(self, legacy_clients: bool) -> dict[int, ApiSpec]:
        return self.every if legacy_clients else self.kafka4


def preload(handlers: Mapping[int, ApiSpec]) -> threading.Thread:
    """Import every request class and handler of a role's APIs on a daemon thread, once the
    role serves (it starts no slower for it). A running server then no longer needs BMQ's files
    to answer any API: reinstalling the package under it (``pip install .`` replacing an
    editable install) made every new connection fail with ModuleNotFoundError."""
    def load() -> None:
        for spec in list(handlers.values()):
            spec.request_type  # noqa: B018 (the property imports the class)
            spec.handler  # noqa: B018 (and the handler's module)
        log.debug("loaded the %d APIs served", len(handlers))

    thread = threading.Thread(target=load, name="bmq-preload", daemon=True)
    thread.start()
    return thread


def supported_versions(handlers: Mapping[int, ApiSpec]) -> list[ApiVersion]:
    return [
        ApiVersion(api_key=key, min_version=s.min_version, max_version=s.max_version)
        for key, s in sorted(handlers.items()) if s.listed
    ]


def api_versions_error(handlers: Mapping[int, ApiSpec]) -> ApiVersionsResponse:
    """The v0 answer to an ApiVersions version we cannot parse (the client retries lower)."""
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION,
                               api_keys=supported_versions(handlers))
