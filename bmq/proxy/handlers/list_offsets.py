"""ListOffsets from a proxy: answered from the partition's view of shared storage, first brought
up to the owner's high watermark (one round trip), so the end offset includes every
acknowledged record."""

from __future__ import annotations

from bmq.protocol.errors import KafkaError, check_leader_epoch
from bmq.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from bmq.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)
from bmq.proxy.handlers.base import ProxyContext
from bmq.storage.offsets import NO_TIMESTAMP


async def handle_list_offsets(ctx: ProxyContext, request: ListOffsetsRequest,
                              version: int) -> ListOffsetsResponse:
    proxy = ctx.proxy
    topics = []
    for asked_topic in request.topics:
        partitions = []
        for asked in asked_topic.partitions:
            result = ListOffsetsPartitionResponse(partition_index=asked.partition_index,
                                                  timestamp=NO_TIMESTAMP, offset=-1)
            partitions.append(result)
            try:
                view = await proxy.view(asked_topic.name, asked.partition_index)
                await proxy.catch_up(view)
                epoch = proxy.cluster.epoch(asked_topic.name, asked.partition_index)
                check_leader_epoch(epoch, asked.current_leader_epoch)
                result.leader_epoch = epoch
                result.offset, result.timestamp = await view.list_offset(asked.timestamp)
            except KafkaError as error:
                result.error_code = error.code
        topics.append(ListOffsetsTopicResponse(name=asked_topic.name, partitions=partitions))
    return ListOffsetsResponse(topics=topics)
