"""Heartbeat: a member is alive; the answer tells it whether a rebalance is under way."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import HeartbeatRequest, HeartbeatResponse


async def handle_heartbeat(ctx: RequestContext, request: HeartbeatRequest,
                           version: int) -> HeartbeatResponse:
    if not ctx.authorize(Operation.READ, ResourceType.GROUP, request.group_id):
        return HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = ctx.broker.groups.heartbeat(
        request.group_id, request.member_id,
        request.group_instance_id if version >= 3 else None, request.generation_id)
    return HeartbeatResponse(error_code=error)
