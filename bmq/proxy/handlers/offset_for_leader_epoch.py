"""OffsetForLeaderEpoch (KIP-101/320): where a leader epoch's data ends, so a consumer whose
partition changed owners can check its position; answered from the segments' epochs, once the
view is brought up to its owner's high watermark (as for ListOffsets): a consumer told an end
below its position seeks back to it."""

from __future__ import annotations

import asyncio

from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode, KafkaError, check_leader_epoch
from bmq.protocol.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from bmq.protocol.messages.offset_for_leader_epoch_request import OffsetForLeaderPartition
from bmq.protocol.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderTopicResult,
)
from bmq.proxy.handlers.base import ProxyContext


async def _answer(ctx: ProxyContext, topic: str,
                  asked: OffsetForLeaderPartition) -> EpochEndOffset:
    result = EpochEndOffset(partition=asked.partition, error_code=ErrorCode.NONE,
                            leader_epoch=-1, end_offset=-1)
    proxy = ctx.proxy
    try:
        # Kafka asks DESCRIBE on the topic for this API.
        ctx.require(Operation.DESCRIBE, ResourceType.TOPIC, topic)
        view = await proxy.view(topic, asked.partition)
        source = view.source
        await proxy.catch_up(source)
        current = proxy.epoch(topic, asked.partition)
        check_leader_epoch(current, asked.current_leader_epoch)
        result.leader_epoch, result.end_offset = source.end_offset_for_epoch(
            asked.leader_epoch, current)
    except KafkaError as error:
        result.error_code = error.code
    return result


async def handle_offset_for_leader_epoch(ctx: ProxyContext, request: OffsetForLeaderEpochRequest,
                                         version: int) -> OffsetForLeaderEpochResponse:
    # Partitions are answered concurrently: their catch-up round trips overlap.
    return OffsetForLeaderEpochResponse(topics=[
        OffsetForLeaderTopicResult(topic=asked_topic.topic, partitions=list(
            await asyncio.gather(*(_answer(ctx, asked_topic.topic, asked)
                                   for asked in asked_topic.partitions))))
        for asked_topic in request.topics])
