"""ListOffsets: earliest, latest, max timestamp, or the first offset at or after a time."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.broker.handlers.fetch import check_leader_epoch
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from bmq.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)
from bmq.protocol.record_codec import RecordDecodeError, iter_records
from bmq.storage import PartitionLog

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
NO_TIMESTAMP = -1


def exact_record(log: PartitionLog, found: tuple[int, int], target: int | None) -> tuple[int, int]:
    """Narrow the storage's batch-level answer to the record Kafka names.

    ``found`` is (offset, max timestamp) of the batch the indexes point at; Kafka answers with the
    first record whose timestamp is >= target (or, for the max timestamp, equals it).
    """
    offset, batch_max = found
    want = batch_max if target is None else target
    try:
        for record in iter_records(log.read(offset, 1)):
            if record.offset >= offset and (record.timestamp >= want if target is not None
                                            else record.timestamp == want):
                return record.offset, record.timestamp
    except RecordDecodeError as error:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(error)) from error
    return found


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
                check_leader_epoch(partition, asked.current_leader_epoch)
                log = partition.log
                result.leader_epoch = partition.leader_epoch
                if asked.timestamp == LATEST:
                    result.offset = log.high_watermark
                elif asked.timestamp in (EARLIEST, EARLIEST_LOCAL):
                    result.offset = log.log_start_offset
                elif asked.timestamp == LATEST_TIERED:
                    result.offset = -1  # no tiered storage: nothing is "tiered"
                elif asked.timestamp == MAX_TIMESTAMP:
                    found = log.max_timestamp()
                    if found is not None:
                        result.offset, result.timestamp = exact_record(log, found, None)
                elif asked.timestamp >= 0:
                    found = log.offset_for_timestamp(asked.timestamp)
                    if found is not None:
                        result.offset, result.timestamp = exact_record(log, found, asked.timestamp)
                else:
                    raise KafkaError(ErrorCode.INVALID_REQUEST)
            except KafkaError as error:
                result.error_code = error.code
        topics.append(ListOffsetsTopicResponse(name=asked_topic.name, partitions=partitions))
    return ListOffsetsResponse(topics=topics)
