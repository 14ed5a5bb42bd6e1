"""Fetch from a broker: answered by the proxy role running in the broker's process, over the
broker's own logs (bmq.broker.fetch_views, bmq.readpath.fetch), like every fetch in BMQ. With
an authorizer, topics the principal may not READ get TOPIC_AUTHORIZATION_FAILED."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.messages import FetchRequest, FetchResponse
from bmq.readpath.fetch import answer_fetch


async def handle_fetch(ctx: RequestContext, request: FetchRequest, version: int) -> FetchResponse:
    refused: set[str] = set()
    if ctx.authorizing:
        for topic in request.topics:
            info = ctx.broker.topics.by_id(topic.topic_id) if topic.topic_id.int else None
            name = info.name if info is not None else topic.topic
            if not ctx.authorize(Operation.READ, ResourceType.TOPIC, name):
                refused.add(name)
    return await answer_fetch(ctx.broker.fetch_views, request, refused, version)
