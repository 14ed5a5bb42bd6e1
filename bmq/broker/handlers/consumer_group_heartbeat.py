"""ConsumerGroupHeartbeat (KIP-848): join, heartbeat and leave a consumer group; the answer
carries the member's epoch and, when it changed, its assignment."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.groups.consumer_protocol import ConsumerHeartbeat
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from bmq.protocol.messages.consumer_group_heartbeat_response import Assignment, TopicPartitions


def _group_timings(ctx: RequestContext, group_id: str) -> tuple[int, int]:
    """The group's session timeout and heartbeat interval: its own group configs
    (consumer.session.timeout.ms, consumer.heartbeat.interval.ms), else the broker's."""
    config = ctx.broker.config
    own = ctx.broker.group_configs.of(group_id) if ctx.broker.group_configs else {}
    return (int(own.get("consumer.session.timeout.ms",
                        config.group_consumer_session_timeout_ms)),
            int(own.get("consumer.heartbeat.interval.ms",
                        config.group_consumer_heartbeat_interval_ms)))


async def handle_consumer_group_heartbeat(ctx: RequestContext,
                                          request: ConsumerGroupHeartbeatRequest,
                                          version: int) -> ConsumerGroupHeartbeatResponse:
    if not ctx.authorize(Operation.READ, ResourceType.GROUP, request.group_id):
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    session_ms, interval_ms = _group_timings(ctx, request.group_id)
    # A lane a member subscribes to exists from then on: KIP-848 clients ask no Metadata of
    # their subscribed topics before the coordinator assigns them.
    for name in request.subscribed_topic_names or ():
        await ctx.broker.lane(name)
    owned = None if request.topic_partitions is None else {
        tp.topic_id: set(tp.partitions) for tp in request.topic_partitions}
    result = await ctx.broker.groups.consumer_heartbeat(ConsumerHeartbeat(
        group_id=request.group_id, member_id=request.member_id,
        member_epoch=request.member_epoch, instance_id=request.instance_id,
        rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=request.subscribed_topic_names,
        subscribed_topic_regex=request.subscribed_topic_regex if version >= 1 else None,
        server_assignor=request.server_assignor, owned=owned,
        client_id=ctx.header.client_id or "", client_host=ctx.client_host,
        session_timeout_ms=session_ms, heartbeat_interval_ms=interval_ms))
    response = ConsumerGroupHeartbeatResponse(
        error_code=result.error, error_message=result.message, member_id=result.member_id,
        member_epoch=result.member_epoch, heartbeat_interval_ms=result.heartbeat_interval_ms)
    if result.assignment is not None:
        response.assignment = Assignment(topic_partitions=[
            TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
            for topic_id, partitions in sorted(result.assignment.items())])
    return response
