"""ListOffsets from a broker: earliest, latest, max timestamp, or the first offset at or after a
time, answered like every ListOffsets in BMQ (bmq.readpath.list_offsets) over the broker's own
logs. With an authorizer, topics the principal may not DESCRIBE get
TOPIC_AUTHORIZATION_FAILED."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from bmq.readpath.list_offsets import answer_list_offsets


async def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest,
                              version: int) -> ListOffsetsResponse:
    refused = {t.name for t in request.topics
               if not ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, t.name)}
    return await answer_list_offsets(ctx.broker.fetch_views, request, refused, version)
