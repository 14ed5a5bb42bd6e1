"""ListOffsets from a broker: earliest, latest, max timestamp, or the first offset at or after a
time, answered like every ListOffsets in BMQ (bmq.readpath.list_offsets) over the broker's own
logs."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from bmq.readpath.list_offsets import answer_list_offsets


async def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest,
                              version: int) -> ListOffsetsResponse:
    return await answer_list_offsets(ctx.broker.fetch_views, request)
