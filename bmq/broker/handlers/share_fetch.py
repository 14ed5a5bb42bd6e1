"""ShareFetch (KIP-932): acknowledge records and acquire more, in a share session, from the
partitions this broker leads (bmq.coordinators.share)."""

from __future__ import annotations

import uuid

from bmq.broker.handlers.base import RequestContext
from bmq.broker.handlers.share_acknowledge import acknowledgements, topic_results
from bmq.coordinators.share import AckBatch, PartitionResult
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ShareFetchRequest, ShareFetchResponse
from bmq.protocol.messages.share_fetch_response import (
    AcquiredRecords,
    LeaderIdAndEpoch,
    PartitionData,
    ShareFetchableTopicResponse,
)


async def handle_share_fetch(ctx: RequestContext, request: ShareFetchRequest,
                             version: int) -> ShareFetchResponse:
    group_id = request.group_id or ""
    if not ctx.authorize(Operation.READ, ResourceType.GROUP, group_id):
        return ShareFetchResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    share = ctx.broker.share
    wanted: dict[tuple[uuid.UUID, int], list[AckBatch]] = {}
    refused = acknowledgements(ctx, request.topics, wanted)
    forget = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    error, results = await share.share_fetch(
        group_id, request.member_id or "", request.share_session_epoch, request.max_wait_ms,
        request.max_records, wanted, forget)
    lock_ms = share.settings(group_id).lock_ms
    if error != ErrorCode.NONE:
        return ShareFetchResponse(error_code=error, acquisition_lock_timeout_ms=lock_ms)
    results += refused

    def partition(result: PartitionResult) -> PartitionData:
        leader = ctx.broker.partition_leader_of(result.topic_id, result.partition)
        return PartitionData(
            partition_index=result.partition, error_code=result.error,
            acknowledge_error_code=result.ack_error,
            current_leader=LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1]),
            # Never null: librdkafka 2.16 drops a whole response with a null records field.
            records=result.records or b"",
            acquired_records=[AcquiredRecords(first_offset=a.first, last_offset=a.last,
                                              delivery_count=a.count)
                              for a in result.acquired])

    return ShareFetchResponse(
        acquisition_lock_timeout_ms=lock_ms,
        responses=[ShareFetchableTopicResponse(topic_id=topic_id, partitions=[
            partition(r) for r in rs]) for topic_id, rs in topic_results(results).items()])
