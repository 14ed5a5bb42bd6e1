"""DeleteRecords: move a partition's log start offset forward."""

from __future__ import annotations

import asyncio

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import KafkaError
from bmq.protocol.messages import DeleteRecordsRequest, DeleteRecordsResponse
from bmq.protocol.messages.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsTopicResult,
)

HIGH_WATERMARK = -1


async def handle_delete_records(ctx: RequestContext, request: DeleteRecordsRequest,
                                version: int) -> DeleteRecordsResponse:
    broker = ctx.broker
    loop = asyncio.get_running_loop()
    topics = []
    for topic in request.topics:
        partitions = []
        for asked in topic.partitions:
            result = DeleteRecordsPartitionResult(partition_index=asked.partition_index,
                                                  low_watermark=-1)
            partitions.append(result)
            try:
                ctx.require(Operation.DELETE, ResourceType.TOPIC, topic.name)
                log = (await broker.served_partition(topic.name, asked.partition_index)).log
                offset = log.high_watermark if asked.offset == HIGH_WATERMARK else asked.offset
                result.low_watermark = await loop.run_in_executor(
                    None, log.delete_records, offset)
            except KafkaError as error:
                result.error_code = error.code
        topics.append(DeleteRecordsTopicResult(name=topic.name, partitions=partitions))
    return DeleteRecordsResponse(topics=topics)
