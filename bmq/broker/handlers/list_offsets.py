"""ListOffsets from a broker: earliest, latest, max timestamp, or the first offset at or after a
time, answered like every ListOffsets in BMQ (bmq.readpath.list_offsets) over the broker's own
logs. With an authorizer, topics the principal may not DESCRIBE get
TOPIC_AUTHORIZATION_FAILED."""

from __future__ import annotations

import dataclasses

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from bmq.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)
from bmq.readpath.list_offsets import answer_list_offsets


async def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest,
                              version: int) -> ListOffsetsResponse:
    denied: list[ListOffsetsTopicResponse] = []
    if ctx.authorizing:
        allowed = [t for t in request.topics
                   if ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, t.name)]
        denied = [ListOffsetsTopicResponse(name=t.name, partitions=[
            ListOffsetsPartitionResponse(partition_index=p.partition_index,
                                         error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for p in t.partitions]) for t in request.topics if t not in allowed]
        request = dataclasses.replace(request, topics=allowed)
    response = await answer_list_offsets(ctx.broker.fetch_views, request)
    response.topics += denied
    return response
