"""Every role's API table resolves: each API it lists names a handler that exists, takes the
request class the table decodes, and serves exactly the versions our codec reads and writes.
Handlers are imported on first use (bmq.net.api.ApiSpec), so a misspelt entry would otherwise
only show when a client first sends that API."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping
from typing import Any

import pytest

from bmq.broker.handlers import HANDLERS as BROKER_HANDLERS
from bmq.net.api import FIRST_INTERNAL_API_KEY, ApiSpec, supported_versions
from bmq.net.broker_apis import BROKER_REQUESTS, CLIENT_BMQ_REQUESTS
from bmq.protocol.messages import REQUEST_APIS
from bmq.proxy.handlers import HANDLERS as PROXY_HANDLERS

TABLES: dict[str, Mapping[int, ApiSpec]] = {"broker": BROKER_HANDLERS, "proxy": PROXY_HANDLERS}
FOR_CLIENTS = {REQUEST_APIS[name][0] for name in CLIENT_BMQ_REQUESTS}
ENTRIES = [(role, key) for role, table in TABLES.items() for key in sorted(table)]


@pytest.mark.parametrize(("role", "api_key"), ENTRIES, ids=[f"{r}-{k}" for r, k in ENTRIES])
def test_each_entry_resolves_to_a_handler_of_its_request(role: str, api_key: int) -> None:
    spec = TABLES[role][api_key]
    request_type = spec.request_type
    assert request_type.API_KEY == api_key == spec.api_key
    assert (spec.min_version, spec.max_version) == (request_type.MIN_VERSION,
                                                     request_type.MAX_VERSION)
    handler = spec.handler
    assert inspect.iscoroutinefunction(handler), handler
    assert len(inspect.signature(handler).parameters) == 3, handler  # (context, request, version)
    hints = typing.get_type_hints(handler)
    request_hint = hints[list(inspect.signature(handler).parameters)[1]]
    assert request_hint in (request_type, Any), (handler, request_hint, request_type)


def test_the_broker_serves_every_api_of_its_list_and_the_proxy_every_public_one() -> None:
    broker = {REQUEST_APIS[name][0] for name in BROKER_REQUESTS}
    assert set(BROKER_HANDLERS) == broker
    public = {key for key in broker if key < FIRST_INTERNAL_API_KEY} | FOR_CLIENTS
    # The proxy answers some itself (OffsetForLeaderEpoch among them) and relays the others.
    assert public <= set(PROXY_HANDLERS)
    # Of BMQ's internal APIs, only those for clients and `bmq mirror`'s, which the proxy
    # splits over the owners.
    internal = {key for key in PROXY_HANDLERS if key >= FIRST_INTERNAL_API_KEY}
    assert internal == {REQUEST_APIS["BmqMirrorAppendRequest"][0]} | FOR_CLIENTS


def test_api_versions_lists_what_each_table_serves_and_nothing_internal() -> None:
    """Nothing internal but BMQ's APIs for clients (the databus stream mappings)."""
    assert len(FOR_CLIENTS) == 2
    for table in TABLES.values():
        listed = {v.api_key: (v.min_version, v.max_version) for v in supported_versions(table)}
        assert listed == {key: (spec.min_version, spec.max_version)
                          for key, spec in table.items()
                          if key < FIRST_INTERNAL_API_KEY or key in FOR_CLIENTS}


def test_a_misspelt_handler_is_caught() -> None:
    """The resolution above really fails for a table entry that names nothing."""
    spec = ApiSpec("HeartbeatRequest", "bmq.broker.handlers.heartbeat:handle_heartbeet")
    with pytest.raises(AttributeError):
        _ = spec.handler
