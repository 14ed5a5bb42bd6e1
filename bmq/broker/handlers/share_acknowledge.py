"""ShareAcknowledge (KIP-932): acknowledge records acquired with ShareFetch, without fetching;
with epoch -1 it also closes the share session (what a closing consumer sends)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.share import AckBatch, PartitionResult
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ShareAcknowledgeRequest, ShareAcknowledgeResponse
from bmq.protocol.messages.share_acknowledge_response import (
    LeaderIdAndEpoch,
    PartitionData,
    ShareAcknowledgeTopicResponse,
)


def acknowledgements(ctx: RequestContext, topics: Sequence[Any],
                     wanted: dict[tuple[uuid.UUID, int], list[AckBatch]]
                     ) -> list[PartitionResult]:
    """Fill ``wanted`` with the request's partitions and their acknowledgements; returns the
    partitions of topics the principal may not READ (TOPIC_AUTHORIZATION_FAILED)."""
    refused = []
    for topic in topics:
        info = ctx.broker.topics.by_id(topic.topic_id)
        allowed = info is None or ctx.authorize(Operation.READ, ResourceType.TOPIC, info.name)
        for part in topic.partitions:
            if not allowed:
                refused.append(PartitionResult(
                    topic.topic_id, part.partition_index,
                    error=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    ack_error=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            wanted.setdefault((topic.topic_id, part.partition_index), []).extend(
                (b.first_offset, b.last_offset, list(b.acknowledge_types))
                for b in part.acknowledgement_batches)
    return refused


def topic_results(results: list[PartitionResult]) -> dict[uuid.UUID, list[PartitionResult]]:
    by_topic: dict[uuid.UUID, list[PartitionResult]] = {}
    for result in results:
        by_topic.setdefault(result.topic_id, []).append(result)
    return by_topic


def leader(ctx: RequestContext, result: PartitionResult) -> LeaderIdAndEpoch:
    node, epoch = ctx.broker.partition_leader_of(result.topic_id, result.partition)
    return LeaderIdAndEpoch(leader_id=node, leader_epoch=epoch)


async def handle_share_acknowledge(ctx: RequestContext, request: ShareAcknowledgeRequest,
                                   version: int) -> ShareAcknowledgeResponse:
    group_id = request.group_id or ""
    if not ctx.authorize(Operation.READ, ResourceType.GROUP, group_id):
        return ShareAcknowledgeResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    wanted: dict[tuple[uuid.UUID, int], list[AckBatch]] = {}
    refused = acknowledgements(ctx, request.topics, wanted)
    error, results = await ctx.broker.share.share_acknowledge(
        group_id, request.member_id or "", request.share_session_epoch, wanted)
    if error != ErrorCode.NONE:
        return ShareAcknowledgeResponse(error_code=error)
    results += refused
    return ShareAcknowledgeResponse(responses=[
        ShareAcknowledgeTopicResponse(topic_id=topic_id, partitions=[
            PartitionData(partition_index=r.partition, error_code=r.ack_error,
                          current_leader=leader(ctx, r))
            for r in rs])
        for topic_id, rs in topic_results(results).items()])
