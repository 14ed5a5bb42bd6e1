"""JoinGroup: become a member of a group's next generation (answered when the group is ready)."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.groups import JoinRequest
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import JoinGroupRequest, JoinGroupResponse
from bmq.protocol.messages.join_group_response import JoinGroupResponseMember


async def handle_join_group(ctx: RequestContext, request: JoinGroupRequest,
                            version: int) -> JoinGroupResponse:
    if not ctx.authorize(Operation.READ, ResourceType.GROUP, request.group_id):
        return JoinGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                 generation_id=-1, protocol_name=None if version >= 7 else "",
                                 leader="", member_id=request.member_id)
    instance_id = request.group_instance_id if version >= 5 else None
    result = await ctx.broker.groups.join_group(JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=instance_id,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        session_timeout_ms=request.session_timeout_ms,
        # v0 has no rebalance timeout: the session timeout serves as both.
        rebalance_timeout_ms=(request.rebalance_timeout_ms if version >= 1
                              else request.session_timeout_ms),
        client_id=ctx.header.client_id or "",
        client_host=ctx.client_host,
        # KIP-394: v4+ dynamic members first get their member id, then join with it.
        require_known_member_id=version >= 4 and instance_id is None,
        support_skip_assignment=version >= 9,
        reason=request.reason if version >= 8 else None,
    ))
    return JoinGroupResponse(
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        # Before v7 the protocol name is not nullable: Kafka sends "" when there is none.
        protocol_name=result.protocol_name if version >= 7 else result.protocol_name or "",
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[JoinGroupResponseMember(member_id=member_id, group_instance_id=instance,
                                         metadata=metadata)
                 for member_id, instance, metadata in result.members],
    )
