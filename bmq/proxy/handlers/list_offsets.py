"""ListOffsets from a proxy: see bmq.readpath.list_offsets."""

from __future__ import annotations

from bmq.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from bmq.proxy.handlers.base import ProxyContext
from bmq.readpath.list_offsets import answer_list_offsets


async def handle_list_offsets(ctx: ProxyContext, request: ListOffsetsRequest,
                              version: int) -> ListOffsetsResponse:
    return await answer_list_offsets(ctx.proxy, request)
