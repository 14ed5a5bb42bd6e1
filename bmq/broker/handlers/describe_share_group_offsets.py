"""DescribeShareGroupOffsets (KIP-932): share groups' start offsets (v1: and lag, KIP-1226)."""

from __future__ import annotations

import functools

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.share.admin import describe_offsets, summaries
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
        error = ctx.broker.groups.shard_error(asked.group_id)
        if error != ErrorCode.NONE:
            group.error_code = error
            continue
        topics = None if asked.topics is None else [
            (t.topic_name, list(t.partitions)) for t in asked.topics
            if ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, t.topic_name)]
        share, peers = ctx.broker.share, ctx.broker.share_peers
        # In a cluster each share-partition is kept by its partition's leader: ask them all.
        found = summaries(share, asked.group_id) if peers is None \
            else await peers.summaries(share, asked.group_id)
        group.error_code, described = describe_offsets(
            share, asked.group_id, topics, found, functools.partial(_leader_epoch, ctx))
        group.topics = [
            DescribeShareGroupOffsetsResponseTopic(
                topic_name=t.name, topic_id=t.topic_id, partitions=[
                    DescribeShareGroupOffsetsResponsePartition(
                        partition_index=p.partition, start_offset=p.start_offset,
                        leader_epoch=p.leader_epoch, lag=p.lag, error_code=p.error)
                    for p in t.partitions])
            for t in described]
    return DescribeShareGroupOffsetsResponse(groups=groups)


def _leader_epoch(ctx: RequestContext, topic: str, index: int) -> int:
    leader = ctx.broker.partition_leader(topic, index)
    return -1 if leader is None else leader[1]
