"""LeaveGroup: members leave (v3+ a batch, by member id and/or group instance id)."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import LeaveGroupRequest, LeaveGroupResponse
from bmq.protocol.messages.leave_group_response import MemberResponse


async def handle_leave_group(ctx: RequestContext, request: LeaveGroupRequest,
                             version: int) -> LeaveGroupResponse:
    if not ctx.authorize(Operation.READ, ResourceType.GROUP, request.group_id):
        return LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    leaving: list[tuple[str, str | None, str | None]]
    if version >= 3:
        leaving = [(m.member_id, m.group_instance_id, m.reason if version >= 5 else None)
                   for m in request.members]
    else:
        leaving = [(request.member_id, None, None)]
    error, member_errors = ctx.broker.groups.leave_group(request.group_id, leaving)
    if version >= 3:
        # A group-level error comes without per-member results.
        return LeaveGroupResponse(error_code=error, members=[
            MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=code)
            for (member_id, instance_id, _), code in zip(leaving, member_errors, strict=False)])
    # v0-2 have one member and one error code: the group's, else the member's.
    if error == ErrorCode.NONE:
        error = next((code for code in member_errors if code != ErrorCode.NONE), ErrorCode.NONE)
    return LeaveGroupResponse(error_code=error)
