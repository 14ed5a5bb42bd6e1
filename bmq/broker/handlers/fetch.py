"""Fetch from a broker: answered by the proxy role running in the broker's process, over the
broker's own logs (bmq.broker.fetch_views, bmq.readpath.fetch), like every fetch in BMQ. With
an authorizer, topics the principal may not READ get TOPIC_AUTHORIZATION_FAILED."""

from __future__ import annotations

import dataclasses

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import FetchRequest, FetchResponse
from bmq.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData
from bmq.readpath.fetch import answer_fetch


async def handle_fetch(ctx: RequestContext, request: FetchRequest, version: int) -> FetchResponse:
    denied: list[FetchableTopicResponse] = []
    if ctx.authorizing:
        allowed = []
        for topic in request.topics:
            info = ctx.broker.topics.by_id(topic.topic_id) if topic.topic_id.int else None
            name = info.name if info is not None else topic.topic
            if ctx.authorize(Operation.READ, ResourceType.TOPIC, name):
                allowed.append(topic)
            else:
                denied.append(FetchableTopicResponse(
                    topic=topic.topic, topic_id=topic.topic_id, partitions=[
                        PartitionData(partition_index=p.partition, high_watermark=-1,
                                      error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                      aborted_transactions=None, records=b"")
                        for p in topic.partitions]))
        if denied and not allowed:
            return FetchResponse(responses=denied)
        request = dataclasses.replace(request, topics=allowed)
    response = await answer_fetch(ctx.broker.fetch_views, request)
    response.responses += denied
    return response
