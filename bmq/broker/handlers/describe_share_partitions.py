"""BmqDescribeSharePartitions (BMQ-internal): the record counts of a share group's
share-partitions this broker leads, for `bmq group describe`."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.share.admin import summaries
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
    return BmqDescribeSharePartitionsResponse(error_code=ErrorCode.NONE, partitions=[
        DescribedSharePartition(
            topic_name=found.topic, partition_index=found.partition,
            start_offset=found.start_offset, end_offset=found.end_offset,
            high_watermark=found.high_watermark, in_flight=found.counts[RecordState.ACQUIRED],
            available=found.counts[RecordState.AVAILABLE],
            acknowledged=found.counts[RecordState.ACKNOWLEDGED],
            archived=found.counts[RecordState.ARCHIVED] + found.counts[RecordState.ARCHIVING],
            lag=found.lag)
        for found in summaries(ctx.broker.share, request.group_id)])
