"""ListGroups: every group this coordinator knows, share groups (type ``share``) included (v4+
filter by state, v5+ by type)."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.share import GROUP_TYPE_SHARE
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.messages import ListGroupsRequest, ListGroupsResponse
from bmq.protocol.messages.list_groups_response import ListedGroup


async def handle_list_groups(ctx: RequestContext, request: ListGroupsRequest,
                             version: int) -> ListGroupsResponse:
    states = set(request.states_filter) if version >= 4 and request.states_filter else None
    types = set(request.types_filter) if version >= 5 and request.types_filter else None
    error, groups = ctx.broker.groups.list_groups(states, types)
    listed = [ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type,
                          group_state=g.state, group_type=g.group_type) for g in groups]
    if types is None or GROUP_TYPE_SHARE in {t.lower() for t in types}:
        wanted = {s.lower() for s in states} if states else None
        listed += [ListedGroup(group_id=g.group_id, protocol_type=GROUP_TYPE_SHARE,
                               group_state=g.state, group_type=GROUP_TYPE_SHARE)
                   for g in ctx.broker.share.groups.listed()
                   if wanted is None or g.state.lower() in wanted]
    return ListGroupsResponse(error_code=error, groups=[
        g for g in listed
        if ctx.authorize(Operation.DESCRIBE, ResourceType.GROUP, g.group_id, audit=False)])
