"""Spooled batches on their way to the cluster: per topic partition in spool order, one batch
in flight at a time (so a partition's batches, and a key's messages, arrive in order), the
heads of every partition sent together in one Produce request (``bmq.client.produce`` splits
it by owner). The agent is an idempotent producer of the cluster: each batch gets its
producer id, epoch and sequence when first sent (written to the spool first), so a batch sent
again (a retry, or after the agent restarted) is recognised by the cluster, not written twice.

A batch the cluster refuses for good (too large, not authorized, corrupt) leaves the spool
and its applications get the error; anything else (the cluster unreachable, a partition
moving, a topic not there yet) is retried, with back-off, until it is taken."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from bmq.databus.batcher import Delivered, OpenBatch
from bmq.databus.cluster import Cluster
from bmq.databus.spool import Spool, SpooledBatch
from bmq.databus.stats import Stats
from bmq.net.client import LinkError
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import ProduceRequest, ProduceResponse
from bmq.protocol.messages.produce_request import PartitionProduceData, TopicProduceData

log = logging.getLogger(__name__)

REQUEST_BYTES = 8 << 20             # the most one Produce request carries
REQUEST_TIMEOUT_MS = 30000
BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 2.0
TAKEN = (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER)
# The cluster does not know the producer (its state expired) or the sequence: the batch is
# sent again under a new producer id.
PRODUCER_LOST = (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID,
                 ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
REFUSED = (ErrorCode.CORRUPT_MESSAGE, ErrorCode.MESSAGE_TOO_LARGE,
           ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_RECORD,
           ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.INVALID_TOPIC_EXCEPTION,
           ErrorCode.POLICY_VIOLATION, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
           ErrorCode.INVALID_TIMESTAMP, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


@dataclass(eq=False)
class Outgoing:
    spooled: SpooledBatch
    waiting: OpenBatch | None       # None: recovered from the spool, nobody waits
    queued_at: float = 0.0          # time.monotonic() when it was handed to the sender


class Sender:
    def __init__(self, cluster: Cluster, spool: Spool, stats: Stats) -> None:
        self.cluster = cluster
        self.spool = spool
        self.stats = stats
        self._queues: dict[tuple[str, int], deque[Outgoing]] = {}
        self._busy: set[tuple[str, int]] = set()
        self._wake = asyncio.Event()
        self._producer: tuple[int, int] | None = None
        self._sequences: dict[tuple[str, int], int] = {}
        self._backoff = 0.0
        self._requests: set[asyncio.Task[None]] = set()
        self.failing = ""           # why the cluster is not taking batches now ("": it is)
        # Set once the cluster took every batch recovered from the last run's spool; and for
        # each of them still in the spool, a future done once it left.
        self.recovered_sent = asyncio.Event()
        self._recovered: dict[int, asyncio.Future[None]] = {}

    def enqueue(self, spooled: SpooledBatch, waiting: OpenBatch | None) -> None:
        if waiting is None:
            self._recovered[spooled.id] = asyncio.get_running_loop().create_future()
        self._queues.setdefault((spooled.topic, spooled.partition), deque()).append(
            Outgoing(spooled, waiting, time.monotonic()))
        self._wake.set()

    def _left(self, item: Outgoing) -> None:
        """``item`` left the spool."""
        if item.waiting is None:
            self._recovered.pop(item.spooled.id).set_result(None)
            if not self._recovered:
                self.recovered_sent.set()

    def last_run_left(self, batch_ids: Iterable[int]) -> list[asyncio.Future[None]]:
        """For each of these batches of the last run still in the spool, a future done once
        it left (the cluster took it, or refused it for good)."""
        return [self._recovered[i] for i in batch_ids if i in self._recovered]

    def pending(self) -> int:
        return sum(len(queue) for queue in self._queues.values())

    def oldest_waiting_s(self) -> float:
        """How long the oldest batch of this run not yet sent has waited for its turn, while
        the cluster answers; 0 if none waits or the cluster is failing (then the spool takes
        the backlog). Batches recovered from the last run are left out: nobody waits for
        them."""
        if self.failing:
            return 0.0
        oldest = now = time.monotonic()
        for key, queue in self._queues.items():
            for item in itertools.islice(queue, 1 if key in self._busy else 0, None):
                if item.waiting is not None:
                    oldest = min(oldest, item.queued_at)
                    break
        return now - oldest

    async def run(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                if self._backoff:
                    await asyncio.sleep(self._backoff)
                heads = [queue[0] for key, queue in self._queues.items()
                         if queue and key not in self._busy]
                if not heads:
                    continue
                if self._producer is None:
                    try:
                        self._producer = await self.cluster.init_producer_id()
                        self._sequences.clear()
                    except (LinkError, OSError, TimeoutError, KafkaError) as error:
                        self._failed(f"no producer id: {error}")
                        continue
                for part in _requests(heads):
                    for item in part:
                        self._busy.add(_key(item))
                        self._assign(item)
                    task = asyncio.get_running_loop().create_task(self._send(part))
                    self._requests.add(task)
                    task.add_done_callback(self._requests.discard)
        finally:
            for task in list(self._requests):
                task.cancel()

    def _assign(self, item: Outgoing) -> None:
        if item.spooled.producer is not None:
            return      # sent before (this run or the last): the same id and sequence again
        assert self._producer is not None
        key = _key(item)
        sequence = self._sequences.get(key, 0)
        self.spool.assign(item.spooled, *self._producer, sequence)
        self._sequences[key] = (sequence + item.spooled.records) % (1 << 31)

    async def _send(self, items: list[Outgoing]) -> None:
        topics: dict[str, TopicProduceData] = {}
        for item in items:
            topics.setdefault(item.spooled.topic, TopicProduceData(
                name=item.spooled.topic)).partition_data.append(PartitionProduceData(
                    index=item.spooled.partition, records=bytes(item.spooled.data)))
        request = ProduceRequest(acks=-1, timeout_ms=REQUEST_TIMEOUT_MS,
                                 topic_data=list(topics.values()))
        answers = {}
        started = time.perf_counter()
        self.stats.produce_requests += 1
        try:
            response = await self.cluster.produce(request)
            log.debug("%d batches (%d bytes) taken in %.1f ms", len(items),
                      sum(len(item.spooled.data) for item in items),
                      (time.perf_counter() - started) * 1000)
            assert isinstance(response, ProduceResponse)
            answers = {(topic.name, part.index): part for topic in response.responses
                       for part in topic.partition_responses}
        except (LinkError, OSError, TimeoutError) as error:
            self._failed(f"cluster unreachable: {error or 'timed out'}")
        retry = False
        for item in items:
            key = _key(item)
            self._busy.discard(key)
            answer = answers.get(key)
            if answer is None:
                retry = True
                continue
            code = ErrorCode(answer.error_code)
            if code in TAKEN:
                self._taken(item, answer.base_offset)
            elif code in REFUSED:
                self._refused(item, KafkaError(code, answer.error_message))
            else:
                if code in PRODUCER_LOST:
                    log.warning("%s-%d: %s for the databus's producer: sending again under a "
                                "new producer id", *key, code.name)
                    self._producer = None
                    item.spooled.producer = None
                # REQUEST_TIMED_OUT: the router waited for the owner already (and answers at
                # once while the owner is stalled): again after the first back-off, not
                # seconds later (an agent whose own loop is too busy to read the owner's
                # answers in time gets it from a healthy cluster).
                self._failed(f"{key[0]}-{key[1]}: {code.name}",
                             grow=code != ErrorCode.REQUEST_TIMED_OUT)
                retry = True
        if not retry:
            if self.failing:
                log.info("the cluster takes batches again")
            self.failing, self._backoff = "", 0.0
        self._wake.set()

    def _taken(self, item: Outgoing, base_offset: int) -> None:
        queue = self._queues[_key(item)]
        queue.popleft()
        if not queue:
            del self._queues[_key(item)]
        self.spool.done(item.spooled)
        self._left(item)
        self.stats.forwarded_batches += 1
        self.stats.forwarded_records += item.spooled.records
        if item.waiting is not None and not item.waiting.delivered.done():
            item.waiting.delivered.set_result(
                Delivered(item.spooled.topic, item.spooled.partition, base_offset))

    def _refused(self, item: Outgoing, error: KafkaError) -> None:
        log.error("%s-%d: the cluster refused a batch of %d records for good: %s",
                  item.spooled.topic, item.spooled.partition, item.spooled.records, error)
        queue = self._queues[_key(item)]
        queue.popleft()
        if not queue:
            del self._queues[_key(item)]
        self.spool.done(item.spooled)
        self._left(item)
        self.stats.dropped[error.code.name] += item.spooled.records
        if item.waiting is not None and not item.waiting.delivered.done():
            item.waiting.delivered.set_exception(error)
            item.waiting.delivered.exception()     # retrieved: acks=1 has nobody waiting

    def _failed(self, why: str, grow: bool = True) -> None:
        if why != self.failing:
            log.warning("batches not taken: %s (retrying with back-off)", why)
        self.failing = why
        self._backoff = (min(BACKOFF_MAX_S, max(BACKOFF_FIRST_S, self._backoff * 2)) if grow
                         else BACKOFF_FIRST_S)
        self._wake.set()

    async def stop(self) -> None:
        for task in list(self._requests):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _key(item: Outgoing) -> tuple[str, int]:
    return item.spooled.topic, item.spooled.partition


def _requests(heads: list[Outgoing]) -> list[list[Outgoing]]:
    """The heads grouped into requests of at most REQUEST_BYTES (a larger batch alone)."""
    parts: list[list[Outgoing]] = [[]]
    size = 0
    for item in heads:
        length = len(item.spooled.data)
        if parts[-1] and size + length > REQUEST_BYTES:
            parts.append([])
            size = 0
        parts[-1].append(item)
        size += length
    return parts
