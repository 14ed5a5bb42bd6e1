"""Requests the client library has no admin call for (transactions, client quotas), spoken with
BMQ's own Kafka client layer (``bmq.client``), secured as the command's librdkafka properties
say (``-X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-512 -X sasl.username=...
-X sasl.password=... -X ssl.ca.location=...``): TLS, and SASL PLAIN or SCRAM."""

from __future__ import annotations

import asyncio
from typing import Any

from bmq.client.login import PropertyError, login
from bmq.client.requests import Address, ask_once
from bmq.commands.common import EXIT_UNREACHABLE, Connection, fail
from bmq.net.client import LinkError


def brokers(conn: Connection) -> list[Address]:
    """Every broker's address, as Metadata names them."""
    return sorted((b.host, b.port) for b in conn.metadata().brokers.values())


async def _ask(conn: Connection, address: Address, request: Any, version: int) -> Any:
    return await ask_once(address, request, version, conn.timeout, client_id="bmq-cli",
                          security=login(conn.properties))


def call(conn: Connection, address: Address, request: Any, version: int) -> Any:
    """Send one request to one broker and return its decoded response (exit 3 if none)."""
    try:
        return asyncio.run(_ask(conn, address, request, version))
    except PropertyError as exc:
        fail(str(exc))
    except (LinkError, OSError, TimeoutError) as exc:
        fail(f"broker {address[0]}:{address[1]} did not answer: {exc}", EXIT_UNREACHABLE)
