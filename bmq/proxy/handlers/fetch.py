"""Fetch from a proxy: see bmq.readpath.fetch. With an authorizer, topics the client's principal
may not READ get TOPIC_AUTHORIZATION_FAILED, as from a broker."""

from __future__ import annotations

from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.messages import FetchRequest, FetchResponse
from bmq.proxy.handlers.base import ProxyContext
from bmq.readpath.fetch import answer_fetch


async def handle_fetch(ctx: ProxyContext, request: FetchRequest, version: int) -> FetchResponse:
    refused: set[str] = set()
    if ctx.authorizing:
        topics = ctx.proxy.cluster.topics
        for topic in request.topics:
            info = topics.by_id(topic.topic_id) if topic.topic_id.int else None
            name = info.name if info is not None else topic.topic
            if not ctx.authorize(Operation.READ, ResourceType.TOPIC, name):
                refused.add(name)
    return await answer_fetch(ctx.proxy, request, refused, version)
