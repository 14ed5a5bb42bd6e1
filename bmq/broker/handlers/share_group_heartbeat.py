"""ShareGroupHeartbeat (KIP-932): a share group member joins, stays and leaves; the answer
carries its epoch and, when it changed, its assignment. Served by the group's coordinator (the
broker FindCoordinator names for the group id)."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from bmq.protocol.messages.share_group_heartbeat_response import Assignment, TopicPartitions


async def handle_share_group_heartbeat(ctx: RequestContext, request: ShareGroupHeartbeatRequest,
                                       version: int) -> ShareGroupHeartbeatResponse:
    if not ctx.authorize(Operation.READ, ResourceType.GROUP, request.group_id):
        return ShareGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    topics = request.subscribed_topic_names
    if topics is not None and ctx.authorizing:
        # Kafka: subscribing to a topic needs DESCRIBE on it.
        for name in topics:
            if not ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, name):
                return ShareGroupHeartbeatResponse(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    error = ctx.broker.groups.shard_error(request.group_id)
    if error != ErrorCode.NONE:
        return ShareGroupHeartbeatResponse(error_code=error)
    _, classic = ctx.broker.groups.describe_group(request.group_id)
    if classic is not None:
        # One group id, one kind of group (Kafka answers a classic group's id the same way).
        return ShareGroupHeartbeatResponse(
            error_code=ErrorCode.GROUP_ID_NOT_FOUND,
            error_message=f"Group {request.group_id} is not a share group.")
    answer = ctx.broker.share.groups.heartbeat(
        request.group_id, request.member_id, request.member_epoch, request.rack_id, topics,
        ctx.header.client_id or "", ctx.client_host)
    assignment = None if answer.assignment is None else Assignment(topic_partitions=[
        TopicPartitions(topic_id=topic_id, partitions=partitions)
        for topic_id, partitions in answer.assignment.items()])
    return ShareGroupHeartbeatResponse(
        error_code=answer.error, error_message=answer.message, member_id=answer.member_id,
        member_epoch=answer.epoch, heartbeat_interval_ms=answer.interval_ms,
        assignment=assignment)
