"""The Kafka APIs the broker serves (``bmq.net.broker_apis``): api key -> versions and handler,
``handle_<module>`` of ``bmq.broker.handlers.<module>`` (SASL's: of bmq.security.handlers).

Versions come from the generated message classes, so the broker never advertises a version its
codec cannot read or write.
"""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.net.api import ApiSpec, ApiTables
from bmq.net.broker_apis import BROKER_REQUESTS, handler_module
from bmq.security.handlers import SASL_APIS, SASL_REQUESTS

HANDLERS: dict[int, ApiSpec] = {
    spec.api_key: spec
    for spec in (
        ApiSpec(name, f"bmq.broker.handlers.{module}:handle_{module}")
        for name, module in ((name, handler_module(name)) for name in BROKER_REQUESTS
                             if name not in SASL_REQUESTS)
    )
}
# SASL is answered as on every role that serves clients.
HANDLERS.update({spec.api_key: spec for spec in SASL_APIS})
# With and without the versions Kafka 4 removed (bmq.legacy.clients.enable).
TABLES = ApiTables(HANDLERS)

__all__ = ["HANDLERS", "TABLES", "ApiSpec", "RequestContext"]
