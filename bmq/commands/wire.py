"""Requests the client library has no admin call for (transactions, client quotas), spoken with
BMQ's own Kafka client layer (``bmq.client``), secured as the command's librdkafka properties
say (``-X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-512 -X sasl.username=...
-X sasl.password=... -X ssl.ca.location=...``): TLS, and SASL PLAIN or SCRAM."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from bmq.client.login import PropertyError, login
from bmq.client.metadata import MetadataCache, bootstrap_addresses
from bmq.client.requests import Address, ask_once
from bmq.commands.common import EXIT_UNREACHABLE, Connection, fail
from bmq.listeners import ListenerError
from bmq.net.client import LinkError, LinkPool

T = TypeVar("T")
CLIENT_ID = "bmq-cli"


def _run(work: Coroutine[Any, Any, T], unreachable: str) -> T:
    """Run ``work``: bad properties exit 1, no answer exits 3 with ``unreachable: why``."""
    try:
        return asyncio.run(work)
    except (PropertyError, ListenerError) as exc:
        fail(str(exc))
    except (LinkError, OSError, TimeoutError) as exc:
        fail(f"{unreachable}: {exc}", EXIT_UNREACHABLE)


async def _brokers(conn: Connection) -> list[Address]:
    links = LinkPool(CLIENT_ID, login(conn.properties))
    try:
        cache = MetadataCache(bootstrap_addresses(conn.bootstrap), links, topics=[],
                              request_timeout_s=conn.timeout)
        await cache.refresh()
        return sorted(cache.brokers.values())
    finally:
        links.close()


def brokers(conn: Connection) -> list[Address]:
    """Every broker's address, as Metadata names them."""
    return _run(_brokers(conn), f"cannot reach the cluster at {conn.bootstrap} within "
                                f"{conn.timeout:g} s")


async def _ask(conn: Connection, address: Address, request: Any, version: int) -> Any:
    return await ask_once(address, request, version, conn.timeout, client_id=CLIENT_ID,
                          security=login(conn.properties))


def call(conn: Connection, address: Address, request: Any, version: int) -> Any:
    """Send one request to one broker and return its decoded response (exit 3 if none)."""
    return _run(_ask(conn, address, request, version),
                f"broker {address[0]}:{address[1]} did not answer")
