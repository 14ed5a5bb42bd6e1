"""DescribeShareGroupOffsets (KIP-932): share groups' start offsets (v1: and lag, KIP-1226)."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.share.admin import describe_offsets
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
)
from bmq.protocol.messages.describe_share_group_offsets_response import (
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)


async def handle_describe_share_group_offsets(
        ctx: RequestContext, request: DescribeShareGroupOffsetsRequest,
        version: int) -> DescribeShareGroupOffsetsResponse:
    groups = []
    for asked in request.groups:
        group = DescribeShareGroupOffsetsResponseGroup(group_id=asked.group_id)
        groups.append(group)
        if not ctx.authorize(Operation.DESCRIBE, ResourceType.GROUP, asked.group_id):
            group.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        error = ctx.broker.groups.shard_error(asked.group_id) if ctx.broker.share.offsets_admin \
            else ErrorCode.UNSUPPORTED_VERSION
        if error != ErrorCode.NONE:
            group.error_code = error
            continue
        topics = None if asked.topics is None else [
            (t.topic_name, list(t.partitions)) for t in asked.topics
            if ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, t.topic_name)]
        group.error_code, described = describe_offsets(ctx.broker.share, asked.group_id, topics)
        group.topics = [
            DescribeShareGroupOffsetsResponseTopic(
                topic_name=t.name, topic_id=t.topic_id, partitions=[
                    DescribeShareGroupOffsetsResponsePartition(
                        partition_index=p.partition, start_offset=p.start_offset,
                        leader_epoch=p.leader_epoch, lag=p.lag, error_code=p.error)
                    for p in t.partitions])
            for t in described]
    return DescribeShareGroupOffsetsResponse(groups=groups)
