"""DescribeProducers: the active producers of partitions this broker owns, with the first
offset of each one's open transaction (kafka-transactions.sh describe-producers)."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import DescribeProducersRequest, DescribeProducersResponse
from bmq.protocol.messages.describe_producers_response import (
    PartitionResponse,
    ProducerState,
    TopicResponse,
)


async def _partition(ctx: RequestContext, topic: str, index: int) -> PartitionResponse:
    result = PartitionResponse(partition_index=index)
    try:
        partition = await ctx.broker.served_partition(topic, index)
    except KafkaError as error:
        result.error_code = error.code
        return result
    for pid, entry in partition.log.producer_state().items():
        if not pid.isdigit():
            continue   # the aborted-transaction index kept beside the producers
        batches = entry["batches"]
        result.active_producers.append(ProducerState(
            producer_id=int(pid), producer_epoch=entry["epoch"],
            last_sequence=batches[-1][1] if batches else -1,
            last_timestamp=batches[-1][4] if batches else -1,
            current_txn_start_offset=entry.get("txn_first", -1)))
    return result


async def handle_describe_producers(ctx: RequestContext, request: DescribeProducersRequest,
                                    version: int) -> DescribeProducersResponse:
    return DescribeProducersResponse(topics=[
        TopicResponse(name=t.name, partitions=[await _partition(ctx, t.name, i)
                                               for i in t.partition_indexes])
        if ctx.authorize(Operation.READ, ResourceType.TOPIC, t.name)
        else TopicResponse(name=t.name, partitions=[
            PartitionResponse(partition_index=i,
                              error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for i in t.partition_indexes])
        for t in request.topics])
