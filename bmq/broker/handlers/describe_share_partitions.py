"""BmqDescribeSharePartitions (BMQ-internal): the record counts of a share group's
share-partitions this broker leads, for `bmq group describe`."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.share.partition import RecordState
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    BmqDescribeSharePartitionsRequest,
    BmqDescribeSharePartitionsResponse,
)
from bmq.protocol.messages.bmq_describe_share_partitions_response import (
    DescribedSharePartition,
)


async def handle_describe_share_partitions(
        ctx: RequestContext, request: BmqDescribeSharePartitionsRequest,
        version: int) -> BmqDescribeSharePartitionsResponse:
    if not ctx.authorize_internal():
        return BmqDescribeSharePartitionsResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    share = ctx.broker.share
    described = []
    for key, state in share.state.all_states():
        info = ctx.broker.topics.by_id(key.topic_id)
        partition = None if info is None else ctx.broker.partitions.get(info.name,
                                                                        key.partition)
        if key.group_id != request.group_id or info is None or partition is None:
            continue
        counts = state.counts()
        high_watermark = partition.log.high_watermark
        described.append(DescribedSharePartition(
            topic_name=info.name, partition_index=key.partition,
            start_offset=state.start_offset, end_offset=state.end_offset,
            high_watermark=high_watermark, in_flight=counts[RecordState.ACQUIRED],
            available=counts[RecordState.AVAILABLE],
            acknowledged=counts[RecordState.ACKNOWLEDGED],
            archived=counts[RecordState.ARCHIVED] + counts[RecordState.ARCHIVING],
            lag=state.lag(high_watermark)))
    described.sort(key=lambda p: (p.topic_name, p.partition_index))
    return BmqDescribeSharePartitionsResponse(error_code=ErrorCode.NONE, partitions=described)
