"""DeleteGroups: remove empty groups and their committed offsets (tombstones in the log)."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import DeleteGroupsRequest, DeleteGroupsResponse
from bmq.protocol.messages.delete_groups_response import DeletableGroupResult


async def handle_delete_groups(ctx: RequestContext, request: DeleteGroupsRequest,
                               version: int) -> DeleteGroupsResponse:
    asked = list(dict.fromkeys(request.groups_names))
    allowed = [g for g in asked if ctx.authorize(Operation.DELETE, ResourceType.GROUP, g)]
    results = await ctx.broker.groups.delete_groups(allowed) if allowed else {}
    return DeleteGroupsResponse(results=[
        DeletableGroupResult(group_id=group_id, error_code=results.get(
            group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
        for group_id in asked])
