"""OffsetDelete: drop a group's committed offsets for topics it no longer consumes (KIP-496)."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import OffsetDeleteRequest, OffsetDeleteResponse
from bmq.protocol.messages.offset_delete_response import (
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)


async def handle_offset_delete(ctx: RequestContext, request: OffsetDeleteRequest,
                               version: int) -> OffsetDeleteResponse:
    broker = ctx.broker
    if not ctx.authorize(Operation.DELETE, ResourceType.GROUP, request.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    errors: dict[tuple[str, int], ErrorCode] = {}
    asked: list[tuple[str, int]] = []
    for topic in request.topics:
        info = broker.topics.get(topic.name)
        readable = ctx.authorize(Operation.READ, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if not readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p.partition_index < info.partitions:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                asked.append(tp)
    group_error, results = await broker.groups.delete_offsets(request.group_id, asked)
    errors.update(results)
    topics: dict[str, list[OffsetDeleteResponsePartition]] = {}
    for topic in request.topics:
        for p in topic.partitions:
            code = errors.get((topic.name, p.partition_index))
            if code is not None:
                topics.setdefault(topic.name, []).append(OffsetDeleteResponsePartition(
                    partition_index=p.partition_index, error_code=code))
    return OffsetDeleteResponse(error_code=group_error, topics=[
        OffsetDeleteResponseTopic(name=name, partitions=partitions)
        for name, partitions in topics.items()])
