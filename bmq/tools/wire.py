"""Requests the client library has no admin call for (transactions, client quotas), spoken with
BMQ's own Kafka client (``bmq.net.client``), in plaintext (listeners with TLS or SASL are not
supported by these commands yet)."""

from __future__ import annotations

import asyncio
from typing import Any

from bmq.net.client import BrokerLink, LinkError
from bmq.tools.common import EXIT_UNREACHABLE, Connection, fail


def brokers(conn: Connection) -> list[tuple[str, int]]:
    """Every broker's address, as Metadata names them."""
    return sorted((b.host, b.port) for b in conn.metadata().brokers.values())


async def _ask(conn: Connection, address: tuple[str, int], request: Any, version: int) -> Any:
    link = BrokerLink(*address)
    try:
        return await asyncio.wait_for(link.request(request, version), conn.timeout)
    finally:
        link.close()


def call(conn: Connection, address: tuple[str, int], request: Any, version: int) -> Any:
    """Send one request to one broker and return its decoded response (exit 3 if none)."""
    try:
        return asyncio.run(_ask(conn, address, request, version))
    except (LinkError, OSError, TimeoutError) as exc:
        fail(f"broker {address[0]}:{address[1]} did not answer: {exc}", EXIT_UNREACHABLE)
