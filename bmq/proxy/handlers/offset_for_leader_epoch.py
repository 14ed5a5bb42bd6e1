"""OffsetForLeaderEpoch (KIP-101/320): where a leader epoch's data ends, so a consumer whose
partition changed owners can check its position; answered from the segments' epochs."""

from __future__ import annotations

from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode, KafkaError, check_leader_epoch
from bmq.protocol.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from bmq.protocol.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderTopicResult,
)
from bmq.proxy.handlers.base import ProxyContext


async def handle_offset_for_leader_epoch(ctx: ProxyContext, request: OffsetForLeaderEpochRequest,
                                         version: int) -> OffsetForLeaderEpochResponse:
    proxy = ctx.proxy
    topics = []
    for asked_topic in request.topics:
        partitions = []
        for asked in asked_topic.partitions:
            result = EpochEndOffset(partition=asked.partition, error_code=ErrorCode.NONE,
                                    leader_epoch=-1, end_offset=-1)
            partitions.append(result)
            try:
                # Kafka asks DESCRIBE on the topic for this API.
                ctx.require(Operation.DESCRIBE, ResourceType.TOPIC, asked_topic.topic)
                view = await proxy.view(asked_topic.topic, asked.partition)
                current = proxy.epoch(asked_topic.topic, asked.partition)
                check_leader_epoch(current, asked.current_leader_epoch)
                result.leader_epoch, result.end_offset = view.reader.end_offset_for_epoch(
                    asked.leader_epoch, current)
            except KafkaError as error:
                result.error_code = error.code
        topics.append(OffsetForLeaderTopicResult(topic=asked_topic.topic, partitions=partitions))
    return OffsetForLeaderEpochResponse(topics=topics)
