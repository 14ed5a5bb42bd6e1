"""DeleteGroups: remove empty groups and their committed offsets (tombstones in the log)."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.protocol.messages import DeleteGroupsRequest, DeleteGroupsResponse
from bmq.protocol.messages.delete_groups_response import DeletableGroupResult


async def handle_delete_groups(ctx: RequestContext, request: DeleteGroupsRequest,
                               version: int) -> DeleteGroupsResponse:
    results = await ctx.broker.groups.delete_groups(list(dict.fromkeys(request.groups_names)))
    return DeleteGroupsResponse(results=[
        DeletableGroupResult(group_id=group_id, error_code=code)
        for group_id, code in results.items()])
