"""Fetch: whole batches from the offset asked, up to the high watermark, with a real long poll.

No fetch sessions: every response carries session id 0, which KIP-227 allows a broker to answer
with, so clients keep sending full fetch requests.
"""

from __future__ import annotations

import asyncio

from bmq.broker.broker import Broker
from bmq.broker.handlers.base import RequestContext
from bmq.protocol.errors import ErrorCode, KafkaError, check_leader_epoch
from bmq.protocol.messages import FetchRequest, FetchResponse
from bmq.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData

Empty = b""


def _read_all(broker: Broker, request: FetchRequest,
              waits: list[asyncio.Future[None]] | None) -> tuple[list[FetchableTopicResponse], int]:
    """One pass over the asked partitions; returns the topics and the bytes of records found."""
    budget = request.max_bytes
    total = 0
    topics = []
    for fetch_topic in request.topics:
        partitions = []
        try:
            name = broker.topic_name(fetch_topic.topic, fetch_topic.topic_id)
            topic_error = None
        except KafkaError as error:
            name, topic_error = fetch_topic.topic, error
        for asked in fetch_topic.partitions:
            result = PartitionData(partition_index=asked.partition, high_watermark=-1,
                                   last_stable_offset=-1, log_start_offset=-1,
                                   aborted_transactions=None, records=Empty)
            partitions.append(result)
            try:
                if topic_error is not None:
                    raise topic_error
                partition = broker.partition(name, asked.partition)
                check_leader_epoch(partition.leader_epoch, asked.current_leader_epoch)
                log = partition.log
                high_watermark = log.high_watermark
                result.high_watermark = result.last_stable_offset = high_watermark
                result.log_start_offset = log.log_start_offset
                limit = min(asked.partition_max_bytes, budget)
                if high_watermark < asked.fetch_offset <= log.log_end_offset:
                    # Appended but not yet durable: Kafka answers with no data, not an error.
                    pass
                elif limit > 0 or total == 0:
                    data = log.read(asked.fetch_offset, max(limit, 1))
                    # Only the first partition with data may exceed the limits (min one batch).
                    if total and len(data) > limit:
                        data = Empty
                    result.records = data
                    total += len(data)
                    budget -= len(data)
                if waits is not None:
                    waits.append(partition.new_data())
            except KafkaError as error:
                result.error_code = error.code
        topics.append(FetchableTopicResponse(topic=name, topic_id=fetch_topic.topic_id,
                                             partitions=partitions))
    return topics, total


async def handle_fetch(ctx: RequestContext, request: FetchRequest, version: int) -> FetchResponse:
    if request.session_id != 0:
        # We never hand out session ids, so a client naming one must start over.
        return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
    if request.session_epoch > 0:
        return FetchResponse(error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id=0)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(request.max_wait_ms, 0) / 1000
    while True:
        waits: list[asyncio.Future[None]] = []
        topics, total = _read_all(ctx.broker, request, waits)
        remaining = deadline - loop.time()
        if total >= request.min_bytes or remaining <= 0 or not waits:
            return FetchResponse(error_code=ErrorCode.NONE, session_id=0, responses=topics)
        # Long poll: sleep until a flush makes new data durable on one of these partitions.
        await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
