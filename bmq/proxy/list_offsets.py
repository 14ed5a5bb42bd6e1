"""ListOffsets, as every role answers it: through the proxy role's partition views, each first
brought up to its owner's high watermark (``catch_up``: a round trip for a `bmq proxy`, nothing
for a broker, whose views read its own logs), so the end offset includes every acknowledged
record."""

from __future__ import annotations

from bmq.protocol.errors import KafkaError, check_leader_epoch
from bmq.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from bmq.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)
from bmq.proxy.fetch import FetchServer
from bmq.storage.offsets import NO_TIMESTAMP


async def answer_list_offsets(server: FetchServer,
                              request: ListOffsetsRequest) -> ListOffsetsResponse:
    topics = []
    for asked_topic in request.topics:
        partitions = []
        for asked in asked_topic.partitions:
            result = ListOffsetsPartitionResponse(partition_index=asked.partition_index,
                                                  timestamp=NO_TIMESTAMP, offset=-1)
            partitions.append(result)
            try:
                view = await server.view(asked_topic.name, asked.partition_index)
                await server.catch_up(view)
                epoch = server.epoch(asked_topic.name, asked.partition_index)
                check_leader_epoch(epoch, asked.current_leader_epoch)
                result.leader_epoch = epoch
                result.offset, result.timestamp = await view.list_offset(asked.timestamp)
            except KafkaError as error:
                result.error_code = error.code
        topics.append(ListOffsetsTopicResponse(name=asked_topic.name, partitions=partitions))
    return ListOffsetsResponse(topics=topics)
