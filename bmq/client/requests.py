"""Requests to brokers that need no routing: one to one broker, or one to each of several."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from bmq.net.client import BrokerLink, LinkError, LinkPool, LinkSecurity

log = logging.getLogger(__name__)

Address = tuple[str, int]


async def ask_once(address: Address, request: Any, version: int, timeout: float,
                   client_id: str, security: LinkSecurity | None = None) -> Any:
    """Send one request to one broker, on a link of its own closed after, and return its
    decoded response: TimeoutError after ``timeout`` seconds, LinkError if it closed first."""
    link = BrokerLink(*address, client_id=client_id, security=security)
    try:
        return await asyncio.wait_for(link.request(request, version), timeout)
    finally:
        link.close()


async def ask_each(links: LinkPool, requests: Sequence[tuple[Address, Any]], version: int
                   ) -> list[Any]:
    """Each request sent to its broker, all at once: the decoded responses in order, None for
    a broker that could not be reached (each answer stands alone: one broker's failure does
    not fail the others')."""
    async def ask(address: Address, request: Any) -> Any:
        try:
            return await links.get(*address).request(request, version)
        except (LinkError, OSError) as error:
            log.info("%s to %s:%d failed: %s", type(request).__name__, *address, error)
            return None

    return list(await asyncio.gather(*(ask(address, request) for address, request in requests)))


async def ask_first(links: LinkPool, addresses: Sequence[Address], request: Any, version: int,
                    timeout: float) -> Any:
    """The request sent to each address in turn until one answers (requests any broker
    answers: InitProducerId, CreateTopics): its decoded response; LinkError naming every
    failure if none did."""
    failures = []
    for address in dict.fromkeys(addresses):
        try:
            return await asyncio.wait_for(links.get(*address).request(request, version), timeout)
        except (LinkError, OSError, TimeoutError) as error:
            failures.append(f"{address[0]}:{address[1]}: {error or 'timed out'}")
    raise LinkError(f"no broker answered {type(request).__name__} ({'; '.join(failures)})")
