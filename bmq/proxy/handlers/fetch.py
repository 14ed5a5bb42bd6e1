"""Fetch from a proxy: see bmq.readpath.fetch."""

from __future__ import annotations

from bmq.protocol.messages import FetchRequest, FetchResponse
from bmq.proxy.handlers.base import ProxyContext
from bmq.readpath.fetch import answer_fetch


async def handle_fetch(ctx: ProxyContext, request: FetchRequest, version: int) -> FetchResponse:
    return await answer_fetch(ctx.proxy, request)
