"""Fetch, as every role answers it: durable data through the proxy role's partition views and
record cache, with a long poll woken by notice of new data. `bmq proxy` reads views of shared
storage woken by the owning brokers' notices (bmq.proxy.proxy); brokers (`bmq serve`,
`bmq broker`) read their own logs, woken by their own flushes (bmq.broker.fetch_views).

No fetch sessions: every response carries session id 0, which KIP-227 allows a broker to answer
with, so clients keep sending full fetch requests.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Collection
from typing import Protocol

from bmq import metrics
from bmq.metadata.topics import TopicInfo
from bmq.protocol.errors import ErrorCode, KafkaError, check_leader_epoch
from bmq.protocol.message_sets import fetch_magic, to_message_set
from bmq.protocol.messages import FetchRequest, FetchResponse
from bmq.protocol.messages.fetch_response import (
    AbortedTransaction,
    FetchableTopicResponse,
    PartitionData,
)
from bmq.readpath.partition_view import PartitionView, next_offset_of
from bmq.readpath.views import FilteredView

READ_COMMITTED = 1


class FetchServer(Protocol):
    """What a Fetch or ListOffsets needs of the role serving it."""

    def view(self, topic: str, index: int) -> Awaitable[PartitionView | FilteredView]:
        """A partition as fetches see it: a view's (or lane's, or trunk's) filtered."""

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...

    def epoch(self, topic: str, index: int) -> int: ...

    async def catch_up(self, view: PartitionView) -> bool:
        """Bring ``view`` up to its owner's high watermark now; False if that could not be
        done (the owner unknown or not answering)."""


def _aborted(view: PartitionView | FilteredView, start: int,
             data: bytes | memoryview) -> list[AbortedTransaction]:
    """read_committed: the aborted transactions whose records ``data`` may hold, for the client
    to skip (its batches are passed on as they are)."""
    end = next_offset_of(data)
    return [AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
            for a in view.aborted_transactions(start, end)] if end > start else []


async def _read(server: FetchServer, view: PartitionView | FilteredView, offset: int,
                max_bytes: int, end: int | None) -> bytes | memoryview:
    """``view.read``, where an offset past everything the view knows is first checked with its
    owner. A proxy's view can be behind a consumer that read from the owner itself (the proxy
    was frozen or restarting meanwhile, its notices lost): Kafka's leader answers
    OFFSET_OUT_OF_RANGE only past its own log's end, and librdkafka resets the consumer to the
    earliest offset on it (seen in a pause run: 1,775 -> 0). Unconfirmed, the consumer is told
    to look for the leader again (NOT_LEADER_OR_FOLLOWER), not to reset."""
    try:
        return await view.read(offset, max_bytes, end)
    except KafkaError as error:
        if error.code != ErrorCode.OFFSET_OUT_OF_RANGE or offset < view.log_start_offset:
            raise
        if not await server.catch_up(view.source):
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"offset {offset} is past what this proxy knows of the partition "
                             "and its owner did not answer") from error
    return await view.read(offset, max_bytes, end)


async def _converted(server: FetchServer, view: PartitionView | FilteredView, offset: int,
                     data: bytes | memoryview, max_bytes: int, magic: int) -> tuple[bytes, int]:
    """``data`` read from ``offset`` as an old client's message set, and its record count.
    Batches with nothing to
    convert (transaction markers) are read past, else such a client would ask for the same
    offset forever (Kafka's down-conversion sent them unconverted for that reason)."""
    while True:
        converted, count = to_message_set(data, magic, offset)
        after = next_offset_of(data)
        if converted or after <= offset or after >= view.high_watermark:
            return converted, count
        offset = after
        data = await _read(server, view, offset, max_bytes, None)
        if not data:
            return converted, count


async def _read_all(server: FetchServer, request: FetchRequest,
                    waits: list[asyncio.Future[None]], refused: Collection[str] = (),
                    magic: int | None = None
                    ) -> tuple[list[FetchableTopicResponse], int, dict[str, int]]:
    """One pass over the asked partitions; returns the topics, the bytes of records found and
    per topic the records of the message sets converted for an old client. ``magic``: the
    message format v0/v1 an old client reads (Fetch v0-3), else None."""
    budget = request.max_bytes
    total = 0
    committed = request.isolation_level == READ_COMMITTED
    topics = []
    converted_records: dict[str, int] = {}
    for fetch_topic in request.topics:
        name = fetch_topic.topic
        topic_error = None
        if fetch_topic.topic_id.int:
            info = server.topic_by_id(fetch_topic.topic_id)
            if info is None:
                topic_error = KafkaError(ErrorCode.UNKNOWN_TOPIC_ID)
            else:
                name = info.name
        if topic_error is None and name in refused:
            topic_error = KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        partitions = []
        for asked in fetch_topic.partitions:
            result = PartitionData(partition_index=asked.partition, high_watermark=-1,
                                   last_stable_offset=-1, log_start_offset=-1,
                                   aborted_transactions=None, records=b"")
            partitions.append(result)
            try:
                if topic_error is not None:
                    raise topic_error
                view = await server.view(name, asked.partition)
                check_leader_epoch(server.epoch(name, asked.partition),
                                   asked.current_leader_epoch)
                result.high_watermark = view.high_watermark
                result.last_stable_offset = stable = view.last_stable_offset()
                result.log_start_offset = view.log_start_offset
                limit = min(asked.partition_max_bytes, budget)
                if limit > 0 or total == 0:
                    data = await _read(server, view, asked.fetch_offset, max(limit, 1),
                                       stable if committed else None)
                    result.high_watermark = view.high_watermark     # caught up meanwhile?
                    count = 0
                    if magic is not None and data:     # stored v2, converted down for it
                        data, count = await _converted(server, view, asked.fetch_offset, data,
                                                       max(limit, 1), magic)
                    # Only the first partition with data may exceed the limits (min one batch).
                    if total and len(data) > limit:
                        data = b""
                    elif count:
                        converted_records[name] = converted_records.get(name, 0) + count
                    result.records = data
                    if committed:
                        result.aborted_transactions = _aborted(view, asked.fetch_offset, data)
                    total += len(data)
                    budget -= len(data)
                waits.append(view.new_data())
            except KafkaError as error:
                result.error_code = error.code
        topics.append(FetchableTopicResponse(topic=name, topic_id=fetch_topic.topic_id,
                                             partitions=partitions))
    return topics, total, converted_records


async def answer_fetch(server: FetchServer, request: FetchRequest,
                       refused: Collection[str] = (), version: int | None = None
                       ) -> FetchResponse:
    """``refused``: topics the client may not read (TOPIC_AUTHORIZATION_FAILED); ``version``:
    the request's, whose records are converted to message format v0/v1 below Fetch v4."""
    magic = None if version is None else fetch_magic(version)
    if request.session_id != 0:
        return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
    if request.session_epoch > 0:
        return FetchResponse(error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id=0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + max(request.max_wait_ms, 0) / 1000
    while True:
        waits: list[asyncio.Future[None]] = []
        topics, total, converted_records = await _read_all(server, request, waits, refused,
                                                           magic)
        remaining = deadline - loop.time()
        if total >= request.min_bytes or remaining <= 0 or not waits:
            metrics.FETCH_WAIT_SECONDS.observe(loop.time() - started)
            # What the Fetch's accounting cannot count from v0/v1 bytes (metrics.count_fetch)
            metrics.count_messages_out(converted_records)
            return FetchResponse(error_code=ErrorCode.NONE, session_id=0, responses=topics)
        # Long poll: until a broker's notice of new durable data on one of these partitions.
        await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
