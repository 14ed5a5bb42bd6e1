"""DeleteGroups: remove empty groups and their committed offsets (tombstones in the log); a
share group's share-partitions are forgotten likewise (bmq.coordinators.share.admin)."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.share.admin import delete_group
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import DeleteGroupsRequest, DeleteGroupsResponse
from bmq.protocol.messages.delete_groups_response import DeletableGroupResult


async def handle_delete_groups(ctx: RequestContext, request: DeleteGroupsRequest,
                               version: int) -> DeleteGroupsResponse:
    asked = list(dict.fromkeys(request.groups_names))
    allowed = [g for g in asked if ctx.authorize(Operation.DELETE, ResourceType.GROUP, g)]
    results: dict[str, ErrorCode] = {}
    for group_id in allowed:
        if ctx.broker.groups.shard_error(group_id) == ErrorCode.NONE:
            deleted = await delete_group(ctx.broker.share, ctx.broker.share_admin, group_id)
            if deleted is not None:
                results[group_id] = deleted
    classic = [g for g in allowed if g not in results]
    if classic:
        results.update(await ctx.broker.groups.delete_groups(classic))
    return DeleteGroupsResponse(results=[
        DeletableGroupResult(group_id=group_id, error_code=results.get(
            group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
        for group_id in asked])
