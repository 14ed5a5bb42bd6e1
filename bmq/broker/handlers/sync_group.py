"""SyncGroup: the leader hands in the assignment; every member gets its own share back."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import SyncGroupRequest, SyncGroupResponse


async def handle_sync_group(ctx: RequestContext, request: SyncGroupRequest,
                            version: int) -> SyncGroupResponse:
    if not ctx.authorize(Operation.READ, ResourceType.GROUP, request.group_id):
        return SyncGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    result = await ctx.broker.groups.sync_group(
        request.group_id,
        request.generation_id,
        request.member_id,
        request.group_instance_id if version >= 3 else None,
        # v5+ (KIP-559) name the protocol; the coordinator checks it matches the group's.
        request.protocol_type if version >= 5 else None,
        request.protocol_name if version >= 5 else None,
        {a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    return SyncGroupResponse(error_code=result.error, protocol_type=result.protocol_type,
                             protocol_name=result.protocol_name, assignment=result.assignment)
