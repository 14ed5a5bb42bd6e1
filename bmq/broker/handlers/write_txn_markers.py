"""WriteTxnMarkers (inter-broker): a transaction coordinator on another broker has this broker,
the owner of the partitions, write a transaction's COMMIT or ABORT marker into them (so does
an operator's Admin.abortTransaction, for a transaction its coordinator lost). Each
partition is answered once its marker is durable; a partition this broker does not own
(any more) is answered NOT_LEADER_OR_FOLLOWER, and the coordinator retries with its new owner.
"""

from __future__ import annotations

import asyncio

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.transactions import append_marker
from bmq.metadata.acls import Operation
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from bmq.protocol.messages.write_txn_markers_request import WritableTxnMarker
from bmq.protocol.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
)
from bmq.writepath.partitions import now_ms


async def _write(ctx: RequestContext, marker: WritableTxnMarker, topic: str, index: int,
                 now: int) -> WritableTxnMarkerPartitionResult:
    broker = ctx.broker
    result = WritableTxnMarkerPartitionResult(partition_index=index)
    try:
        if not broker.can_acknowledge():
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "ack lease expired")
        wait = append_marker(await broker.served_partition(topic, index), marker.producer_id,
                             marker.producer_epoch, marker.transaction_result,
                             marker.coordinator_epoch, now)
        await asyncio.shield(wait)
        if not broker.can_acknowledge():
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "ack lease expired")
    except KafkaError as error:
        result.error_code = error.code
        return result
    broker.marker_written(topic, index, marker.producer_id, marker.transaction_result)
    return result


async def handle_write_txn_markers(ctx: RequestContext, request: WriteTxnMarkersRequest,
                                   version: int) -> WriteTxnMarkersResponse:
    now = now_ms()
    answers = []
    # CLUSTER_ACTION on any listener, as Kafka authorizes it: brokers, and an operator's
    # Admin.abortTransaction (kafka-transactions.sh abort) for a hanging transaction.
    allowed = ctx.authorize_cluster(Operation.CLUSTER_ACTION)
    for marker in request.markers:
        if not allowed:
            answers.append(WritableTxnMarkerResult(producer_id=marker.producer_id, topics=[
                WritableTxnMarkerTopicResult(name=t.name, partitions=[
                    WritableTxnMarkerPartitionResult(
                        partition_index=i, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                    for i in t.partition_indexes]) for t in marker.topics]))
            continue
        topics = []
        for topic in marker.topics:
            # Appended in request order (no await before each append), then waited together.
            partitions = await asyncio.gather(*(
                _write(ctx, marker, topic.name, index, now)
                for index in topic.partition_indexes))
            topics.append(WritableTxnMarkerTopicResult(name=topic.name,
                                                       partitions=list(partitions)))
        answers.append(WritableTxnMarkerResult(producer_id=marker.producer_id, topics=topics))
    return WriteTxnMarkersResponse(markers=answers)
