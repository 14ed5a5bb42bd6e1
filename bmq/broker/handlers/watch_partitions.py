"""BmqWatchPartitions (BMQ-internal): tell a proxy when partitions this broker owns get new
durable data, so the proxy's long-polling fetches wake on a notice instead of polling storage.

Answered at once with every listed partition whose high watermark or cleaner swap count differs
from the one the proxy knows (or that this broker does not own); otherwise after the first flush
that advances one of them or cleaner swap in one, or after max_wait_ms with no partitions.
"""

from __future__ import annotations

import asyncio
import contextlib

from bmq.broker.handlers.base import RequestContext
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import BmqWatchPartitionsRequest, BmqWatchPartitionsResponse
from bmq.protocol.messages.bmq_watch_partitions_response import WatchedPartition, WatchedTopic
from bmq.writepath.partitions import Partition

# A proxy re-sends its watch at once after each answer; this bounds how long one may park here.
MAX_WAIT_MS = 30_000


def _changes(ctx: RequestContext, request: BmqWatchPartitionsRequest,
             waits: list[asyncio.Future[None]],
             rewrites: dict[tuple[str, int], int]) -> list[WatchedTopic]:
    """The partitions whose high watermark is not the one the watcher knows, or whose log the
    cleaner rewrote since the swap count the watcher knows (or, if it knows none, since the
    first call noted it in ``rewrites``): a watcher's view of a partition follows these
    notices, and a cleaning pass adds no data."""
    topics = []
    for topic in request.topics:
        changed = []
        for asked in topic.partitions:
            partition: Partition | None = None
            try:
                partition = ctx.broker.partition(topic.name, asked.partition_index)
                partition.check_writable()
            except KafkaError as error:
                changed.append(WatchedPartition(partition_index=asked.partition_index,
                                                error_code=error.code))
                continue
            log = partition.log
            key = (topic.name, asked.partition_index)
            known_rewrites = asked.known_rewrites if asked.known_rewrites >= 0 else \
                rewrites.setdefault(key, log.rewrites)
            if log.high_watermark != asked.known_high_watermark or \
                    log.rewrites != known_rewrites:
                changed.append(WatchedPartition(
                    partition_index=asked.partition_index, error_code=ErrorCode.NONE,
                    leader_epoch=partition.leader_epoch, high_watermark=log.high_watermark,
                    log_start_offset=log.log_start_offset, tail=log.tail()))
            else:
                waits.append(partition.new_data())
        if changed:
            topics.append(WatchedTopic(name=topic.name, partitions=changed))
    return topics


async def handle_watch_partitions(ctx: RequestContext, request: BmqWatchPartitionsRequest,
                                  version: int) -> BmqWatchPartitionsResponse:
    if not ctx.authorize_internal():    # BMQ's own brokers and proxies
        return BmqWatchPartitionsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    for topic in request.topics:        # watched: opened now if taken and not open yet
        for asked in topic.partitions:
            with contextlib.suppress(KafkaError):   # answered below
                await ctx.broker.membership.open_taken(topic.name, asked.partition_index)
    waits: list[asyncio.Future[None]] = []
    rewrites: dict[tuple[str, int], int] = {}
    topics = _changes(ctx, request, waits, rewrites)
    if not topics and waits:
        timeout = min(max(request.max_wait_ms, 0), MAX_WAIT_MS) / 1000
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        topics = _changes(ctx, request, [], rewrites)
    return BmqWatchPartitionsResponse(error_code=ErrorCode.NONE, topics=topics)
