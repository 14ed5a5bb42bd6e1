"""ListOffsets from a proxy: see bmq.readpath.list_offsets. With an authorizer, topics the
client's principal may not DESCRIBE get TOPIC_AUTHORIZATION_FAILED, as from a broker."""

from __future__ import annotations

from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from bmq.proxy.handlers.base import ProxyContext
from bmq.readpath.list_offsets import answer_list_offsets


async def handle_list_offsets(ctx: ProxyContext, request: ListOffsetsRequest,
                              version: int) -> ListOffsetsResponse:
    refused = {t.name for t in request.topics
               if not ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, t.name)}
    return await answer_list_offsets(ctx.proxy, request, refused, version)
