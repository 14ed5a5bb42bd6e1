"""AlterShareGroupOffsets (KIP-932): new start offsets for an empty share group."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.share.admin import alter_offsets
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse
from bmq.protocol.messages.alter_share_group_offsets_response import (
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)


async def handle_alter_share_group_offsets(
        ctx: RequestContext, request: AlterShareGroupOffsetsRequest,
        version: int) -> AlterShareGroupOffsetsResponse:
    if not ctx.authorize(Operation.READ, ResourceType.GROUP, request.group_id):
        return AlterShareGroupOffsetsResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = ctx.broker.groups.shard_error(request.group_id)
    if error != ErrorCode.NONE:
        return AlterShareGroupOffsetsResponse(error_code=error)
    refused = [t.topic_name for t in request.topics
               if not ctx.authorize(Operation.READ, ResourceType.TOPIC, t.topic_name)]
    error, altered = await alter_offsets(
        ctx.broker.share, ctx.broker.share_admin, request.group_id, [
            (t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions])
            for t in request.topics if t.topic_name not in refused])
    responses = [AlterShareGroupOffsetsResponseTopic(
        topic_name=t.name, topic_id=t.topic_id, partitions=[
            AlterShareGroupOffsetsResponsePartition(partition_index=p.partition,
                                                    error_code=p.error)
            for p in t.partitions]) for t in altered]
    responses += [AlterShareGroupOffsetsResponseTopic(
        topic_name=t.topic_name, partitions=[AlterShareGroupOffsetsResponsePartition(
            partition_index=p.partition_index,
            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions])
        for t in request.topics if t.topic_name in refused]
    return AlterShareGroupOffsetsResponse(error_code=error, responses=responses)
