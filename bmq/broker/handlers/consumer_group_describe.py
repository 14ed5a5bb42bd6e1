"""ConsumerGroupDescribe (KIP-848): epochs, assignor and members (current and target
assignments) of consumer groups; classic groups are GROUP_ID_NOT_FOUND, as in Kafka (clients
then describe them with DescribeGroups)."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.groups.records import Assignment
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.acl_operations import GROUP_OPERATIONS, authorized
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
from bmq.protocol.messages.consumer_group_describe_response import (
    Assignment as DescribedAssignment,
)
from bmq.protocol.messages.consumer_group_describe_response import (
    DescribedGroup,
    Member,
    TopicPartitions,
)

# KIP-1099's MemberType: this broker's consumer groups have consumer-protocol members only.
CONSUMER_MEMBER = 1


def _assignment(ctx: RequestContext, assignment: Assignment) -> DescribedAssignment:
    topics = []
    for topic_id, partitions in sorted(assignment.items()):
        info = ctx.broker.topics.by_id(topic_id)
        if info is not None:
            topics.append(TopicPartitions(topic_id=topic_id, topic_name=info.name,
                                          partitions=sorted(partitions)))
    return DescribedAssignment(topic_partitions=topics)


async def handle_consumer_group_describe(ctx: RequestContext,
                                         request: ConsumerGroupDescribeRequest,
                                         version: int) -> ConsumerGroupDescribeResponse:
    groups = ctx.broker.groups
    described = []
    for group_id in request.group_ids:
        result = DescribedGroup(group_id=group_id, authorized_operations=authorized(
            ctx.operations(GROUP_OPERATIONS, ResourceType.GROUP, group_id),
            request.include_authorized_operations))
        described.append(result)
        if not ctx.authorize(Operation.DESCRIBE, ResourceType.GROUP, group_id):
            result.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        error, message, group = groups.describe_consumer_group(group_id)
        if group is None:
            result.error_code, result.error_message = error, message
            continue
        result.group_state = group.state
        result.group_epoch = group.group_epoch
        result.assignment_epoch = group.assignment_epoch
        result.assignor_name = group.assignor_name(groups.assignors())
        result.members = [
            Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                   member_epoch=m.member_epoch, client_id=m.client_id,
                   client_host=m.client_host,
                   subscribed_topic_names=list(m.subscribed_topic_names),
                   subscribed_topic_regex=m.subscribed_topic_regex,
                   assignment=_assignment(ctx, m.assigned),
                   target_assignment=_assignment(ctx, m.target), member_type=CONSUMER_MEMBER)
            for m in group.members.values()]
    return ConsumerGroupDescribeResponse(groups=described)
