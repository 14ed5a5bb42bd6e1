"""The SASL APIs, answered alike by every role that serves clients (brokers and proxies): they
touch only the connection's security session (any context with an ``Authorizing`` session)."""

from __future__ import annotations

from bmq.net.api import ApiSpec
from bmq.net.broker_apis import handler_module

SASL_REQUESTS = ("SaslHandshakeRequest", "SaslAuthenticateRequest")
SASL_APIS = [ApiSpec(name, f"bmq.security.handlers.{module}:handle_{module}")
             for name in SASL_REQUESTS for module in [handler_module(name)]]
