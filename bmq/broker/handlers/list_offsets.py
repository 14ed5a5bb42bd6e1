"""ListOffsets: earliest, latest, max timestamp, or the first offset at or after a time."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.protocol.errors import KafkaError, check_leader_epoch
from bmq.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from bmq.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)
from bmq.storage.offsets import NO_TIMESTAMP, list_offset


async def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest,
                              version: int) -> ListOffsetsResponse:
    broker = ctx.broker
    topics = []
    for asked_topic in request.topics:
        partitions = []
        for asked in asked_topic.partitions:
            result = ListOffsetsPartitionResponse(partition_index=asked.partition_index,
                                                  timestamp=NO_TIMESTAMP, offset=-1)
            partitions.append(result)
            try:
                partition = broker.partition(asked_topic.name, asked.partition_index)
                check_leader_epoch(partition.leader_epoch, asked.current_leader_epoch)
                result.leader_epoch = partition.leader_epoch
                result.offset, result.timestamp = list_offset(partition.log, asked.timestamp)
            except KafkaError as error:
                result.error_code = error.code
        topics.append(ListOffsetsTopicResponse(name=asked_topic.name, partitions=partitions))
    return ListOffsetsResponse(topics=topics)
