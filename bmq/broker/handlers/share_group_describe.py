"""ShareGroupDescribe (KIP-932): state, epochs and members (with assignments) of share
groups."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.share.groups import ASSIGNOR
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.acl_operations import GROUP_OPERATIONS, authorized
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import ShareGroupDescribeRequest, ShareGroupDescribeResponse
from bmq.protocol.messages.share_group_describe_response import (
    Assignment,
    DescribedGroup,
    Member,
    TopicPartitions,
)


async def handle_share_group_describe(ctx: RequestContext, request: ShareGroupDescribeRequest,
                                      version: int) -> ShareGroupDescribeResponse:
    described = []
    groups = ctx.broker.share.groups
    for group_id in request.group_ids:
        result = DescribedGroup(group_id=group_id, authorized_operations=authorized(
            ctx.operations(GROUP_OPERATIONS, ResourceType.GROUP, group_id),
            request.include_authorized_operations))
        described.append(result)
        if not ctx.authorize(Operation.DESCRIBE, ResourceType.GROUP, group_id):
            result.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        error = ctx.broker.groups.shard_error(group_id)
        if error != ErrorCode.NONE:
            result.error_code = error
            continue
        try:
            group = groups.describe(group_id)
        except KafkaError as failure:
            # Membership is in memory, the share-partitions are durable: a group with
            # share-partitions and no member since this coordinator started (a restart, a
            # move) exists, empty, as in Kafka, whose groups are durable.
            if failure.code != ErrorCode.GROUP_ID_NOT_FOUND \
                    or not await ctx.broker.share_admin.keys(group_id):
                result.error_code, result.error_message = failure.code, failure.message
                continue
            group = groups.get_or_create(group_id)
        result.group_state = group.state
        result.group_epoch = result.assignment_epoch = group.epoch
        result.assignor_name = ASSIGNOR
        result.members = [
            Member(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.epoch,
                   client_id=m.client_id, client_host=m.client_host,
                   subscribed_topic_names=list(m.topics),
                   assignment=Assignment(topic_partitions=[
                       TopicPartitions(topic_id=topic_id, topic_name=groups.topic_name(topic_id),
                                       partitions=partitions)
                       for topic_id, partitions in m.assignment.items()]))
            for m in group.members.values()]
    return ShareGroupDescribeResponse(groups=described)
