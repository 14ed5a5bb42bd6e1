"""How a message enters the agent, whatever the way in (the Kafka port, HTTP): its stream
routed to a topic, checked (the stream, its size, room in the spool), placed in batches; and
the wait its application asked for (acks): none, until spooled, or until the cluster took it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from bmq.databus.batcher import Batcher, Delivered, Placement, record_size
from bmq.databus.cluster import Cluster
from bmq.databus.settings import DatabusSettings
from bmq.databus.stats import Stats
from bmq.databus.streams import StreamTable
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.record_codec import Record

ACKS_NONE, ACKS_SPOOLED, ACKS_CLUSTER = 0, 1, -1


class Intake:
    def __init__(self, settings: DatabusSettings, table: StreamTable, cluster: Cluster,
                 batcher: Batcher, stats: Stats) -> None:
        self.settings = settings
        self.table = table
        self.cluster = cluster
        self.batcher = batcher
        self.stats = stats

    async def partitions(self, stream: str) -> int:
        """The partition count of the topic ``stream`` goes to; KafkaError if it has none."""
        route = self.table.route(stream)
        partitions = await self.cluster.partitions(route.topic)
        if partitions is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"stream {stream}: its topic {route.topic} is not in the cluster")
        return partitions

    async def put(self, stream: str, records: Sequence[Record], way: str) -> list[Placement]:
        """Place ``records`` (all or none of them) in batches of ``stream``'s topic; ``way``:
        the way in they came (for the stats)."""
        try:
            placements = await self._put(stream, records)
        except KafkaError as error:
            self.refused(error.code, len(records))
            raise
        self.stats.accepted[way] += len(records)
        return placements

    def refused(self, code: ErrorCode, messages: int) -> None:
        self.stats.refused[code.name] += messages

    async def _put(self, stream: str, records: Sequence[Record]) -> list[Placement]:
        route = self.table.route(stream)
        partitions = await self.partitions(stream)
        total = 0
        for record in records:
            size = record_size(record)
            if size > self.batcher.max_records_bytes:     # alone in a batch, still too large
                raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                                 f"a message of {size} bytes; the databus takes at most "
                                 f"{self.batcher.max_records_bytes}")
            total += size
        self.batcher.room(total)
        return self.batcher.add(route, partitions, records)


async def settle(placements: Sequence[Placement], acks: int, timeout_s: float
                 ) -> list[Delivered | None]:
    """Wait as ``acks`` says; where each message went (None until the cluster took it).
    KafkaError: REQUEST_TIMED_OUT after ``timeout_s`` (the messages stay spooled and are
    delivered later), or the error that failed a batch."""
    if acks == ACKS_NONE:
        return [None] * len(placements)
    batches = list({id(p.batch): p.batch for p in placements}.values())
    futures = [b.spooled if acks == ACKS_SPOOLED else b.delivered for b in batches]
    if not await all_done(futures, timeout_s):
        raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                         "not yet " + ("spooled" if acks == ACKS_SPOOLED
                                       else "taken by the cluster") + f" after {timeout_s:g} s")
    for future in futures:
        error = future.exception()
        if error is not None:
            raise error
    if acks == ACKS_SPOOLED:
        return [None] * len(placements)
    answers: list[Delivered | None] = []
    for placement in placements:
        where = placement.batch.delivered.result()
        answers.append(Delivered(where.topic, where.partition,
                                 where.base_offset + placement.index
                                 if where.base_offset >= 0 else -1))
    return answers


async def all_done(futures: Sequence[asyncio.Future[Any]], timeout_s: float) -> bool:
    """Whether every future is done within ``timeout_s`` (they are left alone either way).
    One waiter, one timer and a callback per future: asyncio.wait, which does the same with
    sets and a task's worth of bookkeeping, was a fifth of the agent's time per request."""
    pending = [f for f in futures if not f.done()]
    if not pending:
        return True
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[bool] = loop.create_future()
    left = len(pending)

    def one_done(_: asyncio.Future[Any]) -> None:
        nonlocal left
        left -= 1
        if left == 0 and not waiter.done():
            waiter.set_result(True)

    for future in pending:
        future.add_done_callback(one_done)
    def time_out() -> None:
        if not waiter.done():
            waiter.set_result(False)

    timer = loop.call_later(timeout_s, time_out)
    try:
        return await waiter
    finally:
        timer.cancel()
        for future in pending:
            future.remove_done_callback(one_done)
