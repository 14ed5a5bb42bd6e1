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
from bmq.databus.streams import StreamRoute, StreamTable
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

    def known_partitions(self, stream: str) -> int | None:
        """The partition count of ``stream``'s topic if the agent knows it now, as it does for
        every message but a stream's first; None: ask ``partitions`` (which also says why a
        stream is refused)."""
        try:
            return self.cluster.known_partitions(self.table.route(stream).topic)
        except KafkaError:
            return None

    async def put(self, stream: str, records: Sequence[Record], way: str) -> list[Placement]:
        """Place ``records`` (all or none of them) in batches of ``stream``'s topic; ``way``:
        the way in they came (for the stats)."""
        try:
            partitions = await self.partitions(stream)
        except KafkaError as error:
            self.refused(error.code, len(records))
            raise
        return self.put_now(stream, records, way, partitions)

    def put_now(self, stream: str, records: Sequence[Record], way: str, partitions: int
                ) -> list[Placement]:
        """``put``, with the partition count of the stream's topic known."""
        try:
            placements = self._put(self.table.route(stream), partitions, records)
        except KafkaError as error:
            self.refused(error.code, len(records))
            raise
        self.stats.accepted[way] += len(records)
        return placements

    def refused(self, code: ErrorCode, messages: int) -> None:
        self.stats.refused[code.name] += messages

    def _put(self, route: StreamRoute, partitions: int, records: Sequence[Record]
             ) -> list[Placement]:
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


def waited_for(placements: Sequence[Placement], acks: int) -> list[asyncio.Future[Any]]:
    """What ``acks`` waits for: each batch's spooling (acks=1) or delivery (acks=all)."""
    if acks == ACKS_NONE:
        return []
    batches = list({id(p.batch): p.batch for p in placements}.values())
    return [b.spooled if acks == ACKS_SPOOLED else b.delivered for b in batches]


def check_done(futures: Sequence[asyncio.Future[Any]]) -> None:
    """Raise the error that failed one of the batches ``futures`` wait for, if any."""
    for future in futures:
        error = future.exception()
        if error is not None:
            raise error


def timed_out(acks: int, timeout_s: float) -> KafkaError:
    """The wait for ``acks`` ended after ``timeout_s``: the messages stay spooled and are
    delivered later."""
    return KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                      "not yet " + ("spooled" if acks == ACKS_SPOOLED
                                    else "taken by the cluster") + f" after {timeout_s:g} s")


async def settle(placements: Sequence[Placement], acks: int, timeout_s: float
                 ) -> list[Delivered | None]:
    """Wait as ``acks`` says; where each message went (None until the cluster took it).
    KafkaError: REQUEST_TIMED_OUT after ``timeout_s``, or the error that failed a batch."""
    futures = waited_for(placements, acks)
    if not await all_done(futures, timeout_s):
        raise timed_out(acks, timeout_s)
    check_done(futures)
    if acks != ACKS_CLUSTER:
        return [None] * len(placements)
    answers: list[Delivered | None] = []
    for placement in placements:
        where = placement.batch.delivered.result()
        answers.append(Delivered(where.topic, where.partition,
                                 where.base_offset + placement.index
                                 if where.base_offset >= 0 else -1))
    return answers


async def all_done(futures: Sequence[asyncio.Future[Any]], timeout_s: float) -> bool:
    """Whether every future is done within ``timeout_s`` (they are left alone either way)."""
    pending = [f for f in futures if not f.done()]
    return not pending or await when_done(pending, timeout_s)


def when_done(futures: Sequence[asyncio.Future[Any]], timeout_s: float | None
              ) -> asyncio.Future[bool]:
    """A future of whether every one of ``futures`` is done within ``timeout_s`` (None: no
    bound); they are left alone either way. One waiter, one timer and a callback per future:
    asyncio.wait, which does the same with sets and a task's worth of bookkeeping, was a fifth
    of the agent's time per request."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[bool] = loop.create_future()
    pending = [f for f in futures if not f.done()]
    if not pending:
        waiter.set_result(True)
        return waiter
    left = len(pending)
    timer: asyncio.TimerHandle | None = None

    def one_done(_: asyncio.Future[Any]) -> None:
        nonlocal left
        left -= 1
        if left == 0 and not waiter.done():
            if timer is not None:
                timer.cancel()
            waiter.set_result(True)

    def time_out() -> None:
        if not waiter.done():
            for future in pending:
                future.remove_done_callback(one_done)
            waiter.set_result(False)

    for future in pending:
        future.add_done_callback(one_done)
    if timeout_s is not None:
        timer = loop.call_later(timeout_s, time_out)
    return waiter
