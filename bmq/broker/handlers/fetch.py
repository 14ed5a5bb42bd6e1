"""Fetch from a broker: answered by the proxy role running in the broker's process, over the
broker's own logs (bmq.broker.fetch_views, bmq.readpath.fetch), like every fetch in BMQ."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.protocol.messages import FetchRequest, FetchResponse
from bmq.readpath.fetch import answer_fetch


async def handle_fetch(ctx: RequestContext, request: FetchRequest, version: int) -> FetchResponse:
    return await answer_fetch(ctx.broker.fetch_views, request)
