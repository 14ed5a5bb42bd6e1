"""Open partition logs, their asynchronous group-commit writer, and the waits built on it.

Produce appends to a log in memory on the event loop; a flush of everything queued then runs on a
worker thread (one write and one fsync for many batches). While it runs new appends queue up and
go out together in the next flush: group commit without a timer. When a flush makes data durable,
acks=all producers waiting on it are answered and long-polling fetches are woken.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from typing import Protocol

from bmq import metrics
from bmq.cleaner import CleanerService
from bmq.metadata.topics import SNAPSHOTTED_TOPICS
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.records import BatchHeader, set_leader_epoch
from bmq.storage import LogConfig, PartitionLog, Storage

log = logging.getLogger(__name__)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# A log whose flush failed on storage is reopened after this long, then twice as long ... up to
# REOPEN_MAX_S between attempts, for as long as this broker holds the partition.
REOPEN_FIRST_S = 1.0
REOPEN_MAX_S = 30.0
# A flush that has not returned after this long has hung on storage (hdfs-native's writer can
# wait for ever on a DataNode that died mid-pipeline): the partition is failed as if the flush
# had raised, and reopened, leaving the hung call behind on its worker thread where the storage
# fences it off (``Storage.fences_writers``), else once it has returned (a slow write must
# not land after the reopened log's).
FLUSH_STALL_S = 15.0
REOPEN_STALL_S = 60.0   # ... and a reopening that has not finished after this long, too
_CLOSES_IN_FLIGHT = 256   # partitions closed together at shutdown


# A transaction marker appended to a partition goes to what the partition holds elsewhere too
# (its timer log): (producer id, producer epoch, commit, coordinator epoch, now) -> the
# durability of that copy, or None if nothing was held for the producer.
MarkerHook = Callable[[int, int, bool, int, int], "asyncio.Future[None] | None"]


class Partition:
    """One partition this broker leads: its log plus the futures waiting on its writer."""

    def __init__(self, log_: PartitionLog, executor: Executor, leader_epoch: int = 0,
                 write_allowed: Callable[[], bool] | None = None,
                 min_flush_interval_s: float = 0.0,
                 reopen: Callable[[], PartitionLog] | None = None) -> None:
        """``reopen``: opens the log again (for the same leader epoch) after a flush failed on
        storage; without it such a partition stays unavailable."""
        self.log = log_
        self._reopen = reopen
        self._recovering: asyncio.Task[None] | None = None
        self.leader_epoch = leader_epoch
        # Cluster mode: the ack lease. No flush starts while it has run out (the partition may
        # belong to another broker by now); the flush is retried once contact is confirmed.
        self._write_allowed = write_allowed
        self._retry: asyncio.TimerHandle | None = None
        # Object stores: each flush is a PUT (paid per request), so flushes of one partition
        # start at least this far apart and what arrives meanwhile goes out together.
        self._min_flush_interval = min_flush_interval_s
        self._last_flush_start = -1e18
        self._executor = executor
        self._flush: asyncio.Future[int] | None = None     # the flush running, if any
        self._flush_watch: asyncio.TimerHandle | None = None
        self._hung: asyncio.Future[int] | None = None       # a flush given up on as hung
        self._failed: BaseException | None = None
        # (offset, future) pairs in offset order: appends arrive in offset order.
        self._durable_waiters: deque[tuple[int, asyncio.Future[None]]] = deque()
        self._data_waiter: asyncio.Future[None] | None = None
        self._idle: asyncio.Event = asyncio.Event()
        self._idle.set()
        self.marker_hook: MarkerHook | None = None
        # KIP-890 part 1's verification guards (bmq.broker.handlers.produce): producer id ->
        # the guard of the verifications its transaction's coordinator was asked for here. A
        # marker of the producer clears it, so a batch verified while its transaction was
        # ongoing but arriving after the transaction's marker (a retry, or a write a proxy
        # forwarded late) is refused instead of appended after the marker, in no transaction
        # or in the producer's next one.
        self._verifications: dict[int, object] = {}

    @property
    def topic(self) -> str:
        return self.log.topic

    @property
    def index(self) -> int:
        return self.log.partition

    def schedule_flush(self) -> None:
        """Start a flush unless one is running; the running one restarts itself when done."""
        if self._flush is not None or self._failed is not None:
            return
        if self.log.pending_bytes() == 0:
            self._idle.set()
            return
        loop = asyncio.get_running_loop()
        if self._write_allowed is not None and not self._write_allowed():
            if self._retry is None:
                self._retry = loop.call_later(0.05, self._retry_flush)
            return
        wait = self._last_flush_start + self._min_flush_interval - loop.time()
        if wait > 0:
            self._idle.clear()      # (a drain waits for this flush too)
            if self._retry is None:
                self._retry = loop.call_later(wait, self._retry_flush)
            return
        self._last_flush_start = loop.time()
        self._idle.clear()
        future = loop.run_in_executor(self._executor, self._timed_flush)
        self._flush = future
        future.add_done_callback(self._flushed)
        self._flush_watch = loop.call_later(FLUSH_STALL_S, self._flush_stalled, future)

    def _flush_stalled(self, flush: asyncio.Future[int]) -> None:
        if flush is not self._flush or flush.done():
            return
        log.error("flush of %s-%d has not returned in %.0f s: storage hangs", self.topic,
                  self.index, FLUSH_STALL_S)
        self._flush = None      # its late end, if any, is not this partition's any more
        self._hung = flush
        self._fail(KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                              f"flush hung for {FLUSH_STALL_S:.0f} s"))

    def _timed_flush(self) -> int:
        """log.flush() on the worker thread, observed once per flush for the metrics."""
        size = self.log.pending_bytes()  # appends racing with this read join this flush
        started = time.perf_counter()
        high_watermark = self.log.flush(publish=False)
        metrics.FLUSH_SECONDS.observe(time.perf_counter() - started)
        metrics.FLUSH_BYTES.observe(size)
        return high_watermark

    def _retry_flush(self) -> None:
        self._retry = None
        if self._failed is None:
            self.schedule_flush()

    def _flushed(self, future: asyncio.Future[int]) -> None:
        if future is not self._flush:      # given up on as hung: the partition failed already
            if not future.cancelled():
                future.exception()          # (retrieved: nothing waits for it any more)
            return
        self._flush = None
        if self._flush_watch is not None:
            self._flush_watch.cancel()
        error = future.exception()
        if error is not None:
            log.error("flush of %s-%d failed: %s", self.topic, self.index, error)
            self._fail(error)
            return
        high_watermark = future.result()
        while self._durable_waiters and self._durable_waiters[0][0] < high_watermark:
            _, waiter = self._durable_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        self._wake_data()
        if self.log.pending_bytes():
            self.schedule_flush()
        else:
            self._idle.set()
        if self.log.publish_due():       # after the acks: they need the data only
            asyncio.get_running_loop().run_in_executor(
                self._executor, self.log.publish_if_due).add_done_callback(
                functools.partial(_report_error, f"{self.topic}-{self.index}: publishing"))

    def _fail(self, error: BaseException) -> None:
        """The log is unusable: refuse what waits on it, and reopen it if it failed on storage."""
        self._failed = error
        # Fenced by a newer owner (cluster mode): clients must go to the new leader.
        code = (ErrorCode.NOT_LEADER_OR_FOLLOWER if isinstance(error, KafkaError)
                and error.code == ErrorCode.FENCED_LEADER_EPOCH
                else ErrorCode.KAFKA_STORAGE_ERROR)
        while self._durable_waiters:
            _, waiter = self._durable_waiters.popleft()
            if not waiter.done():
                waiter.set_exception(KafkaError(code, str(error)))
        self._idle.set()
        if code == ErrorCode.KAFKA_STORAGE_ERROR and self._reopen is not None:
            metrics.STORAGE_FAILURES.labels("failed").inc()
            self._recovering = asyncio.get_running_loop().create_task(self._recover())

    async def _recover(self) -> None:
        """Reopen the log after a flush failed on storage (a DataNode dropped out of an HDFS
        pipeline that found no replacement, an object store's error, a full disk), with
        back-off, until it opens. The reopened log holds what was durable (the failed flush's
        batches were refused with KAFKA_STORAGE_ERROR, which producers retry; any of them the
        storage kept whole are recognised as duplicates) and is written on a new pipeline or
        connection. Meanwhile the partition answers KAFKA_STORAGE_ERROR."""
        loop = asyncio.get_running_loop()
        hung, self._hung = self._hung, None
        if hung is not None and not self.log.storage.fences_writers:
            await asyncio.wait([hung])
        # Not waited for: a hung flush may hold the log's handles (their closing gives up on
        # a writer that does not let go, whose lease the reopening recovers).
        loop.run_in_executor(self._executor, self.log.abandon).add_done_callback(
            functools.partial(_report_error, f"{self.topic}-{self.index}: letting the failed "
                              "log go"))
        delay = REOPEN_FIRST_S
        while True:
            await asyncio.sleep(delay)
            assert self._reopen is not None
            opening = loop.run_in_executor(self._executor, self._reopen)
            try:
                fresh = await asyncio.wait_for(asyncio.shield(opening), REOPEN_STALL_S)
            except BaseException as error:
                # Given up (it failed or hangs, or the partition moved or closes): a log that
                # still opens is shut unused.
                opening.add_done_callback(_abandon_opened)
                if not isinstance(error, Exception):
                    raise
                delay = min(delay * 2, REOPEN_MAX_S)
                log.warning("%s-%d: reopening after a storage failure failed (again in %.0f s):"
                            " %s", self.topic, self.index, delay,
                            error if not isinstance(error, TimeoutError)
                            else f"it hangs after {REOPEN_STALL_S:.0f} s")
                continue
            self.log = fresh
            self._failed = None
            metrics.STORAGE_FAILURES.labels("reopened").inc()
            log.warning("%s-%d reopened after a storage failure: writable again from offset %d",
                        self.topic, self.index, fresh.log_end_offset)
            return

    async def stop_recovering(self) -> None:
        """Give up reopening the log (the partition is closing or moved)."""
        task, self._recovering = self._recovering, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def check_writable(self) -> None:
        if self._failed is not None:
            if isinstance(self._failed, KafkaError) and self._failed.code in (
                    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER):
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "a newer leader owns it")
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"log unavailable: {self._failed}")

    def append_batch(self, batch: bytearray, header: BatchHeader,
                     now: int) -> asyncio.Future[None]:
        """Append one batch a coordinator built (its records, a marker) and start a flush; the
        future is done once it is durable. Raises KafkaError if the log cannot take it."""
        self.check_writable()
        appended = self.log.append(memoryview(batch), [header], now)
        if header.is_control and header.producer_id >= 0:     # a transaction marker
            self._verifications.pop(header.producer_id, None)
        self.schedule_flush()
        return self.durable(appended.last_offset)

    def append_copied(self, records: memoryview, headers: list[BatchHeader],
                      now: int) -> asyncio.Future[None]:
        """Append batches copied from another log (a mirror's) at the offsets they have there,
        gaps included (``PartitionLog.append(copied=True)``), and start a flush; the future is
        done once they are durable. Raises KafkaError, writing nothing, if they do not continue
        this log (OFFSET_OUT_OF_RANGE when the first starts before its end offset)."""
        self.check_writable()
        if self.log.config.message_timestamp_type == "LogAppendTime":
            raise KafkaError(ErrorCode.INVALID_CONFIG, "copied batches keep their timestamps: "
                             "message.timestamp.type must be CreateTime")
        position = 0
        for header in headers:      # this log's leader epoch, as for every batch it takes
            set_leader_epoch(records, position, self.leader_epoch)
            position += header.size
        appended = self.log.append(records, headers, now, copied=True)
        self.schedule_flush()
        return self.durable(appended.last_offset)

    async def start_copy_at(self, offset: int) -> None:
        """Empty the log and start it at ``offset``, past its end (``PartitionLog.start_at``):
        the source of a mirrored partition deleted everything it has. Long polls wake up."""
        self.check_writable()
        await asyncio.get_running_loop().run_in_executor(self._executor, self.log.start_at,
                                                         offset)
        self._wake_data()

    def start_verification(self, producer_id: int) -> object:
        """The guard of a verification of the producer's transaction about to be asked
        (shared with any still waiting: as Kafka, one per producer until its next marker)."""
        return self._verifications.setdefault(producer_id, object())

    def verification_holds(self, producer_id: int, guard: object) -> bool:
        """Whether no marker of the producer was appended since ``guard`` was given out."""
        return self._verifications.get(producer_id) is guard

    def durable(self, last_offset: int) -> asyncio.Future[None]:
        """A future done once every offset up to ``last_offset`` is durable."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if last_offset < self.log.high_watermark:
            future.set_result(None)
        else:
            self._durable_waiters.append((last_offset, future))
        return future

    def new_data(self) -> asyncio.Future[None]:
        """A future done at the next advance of the high watermark, or once the log cleaner
        swapped segments (shared by all fetchers and watchers)."""
        if self._data_waiter is None or self._data_waiter.done():
            loop = asyncio.get_running_loop()
            self._data_waiter = loop.create_future()
            if self.log.on_rewrite is None:
                self.log.on_rewrite = functools.partial(_call_soon, loop, self._wake_data)
        return self._data_waiter

    def _wake_data(self) -> None:
        if self._data_waiter is not None:
            if not self._data_waiter.done():
                self._data_waiter.set_result(None)
            self._data_waiter = None

    def abandon(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
        if self._recovering is not None:
            self._recovering.cancel()
            self._recovering = None
        self._idle.set()
        self._failed = KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "partition moved")
        while self._durable_waiters:
            _, waiter = self._durable_waiters.popleft()
            if not waiter.done():
                waiter.set_exception(KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        self.log.abandon()

    async def drain(self) -> None:
        """Wait until everything appended so far is flushed."""
        self.schedule_flush()
        await self._idle.wait()


def _report_error(what: str, done: asyncio.Future[None]) -> None:
    """The end of work nothing waits for (its error is only worth a line in the log)."""
    if not done.cancelled() and done.exception() is not None:
        log.warning("%s: %s", what, done.exception())


def _abandon_opened(opening: asyncio.Future[PartitionLog]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        opening.result().abandon()


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    """``callback`` on ``loop`` from another thread (nothing if the loop has closed)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback)


class PartitionHooks(Protocol):
    """What runs with a partition's life on this broker (the timer log of scheduled records)."""

    async def opened(self, partition: Partition) -> None:
        """The partition was opened (for this leader epoch); before it is served."""

    async def closing(self, partition: Partition, delete: bool) -> None:
        """The partition is being closed (handed over, or deleted with its topic)."""

    def abandoned(self, partition: Partition) -> None:
        """The partition was dropped without flushing (its write right is gone)."""


class PartitionManager:
    """All partitions of this broker, keyed by (topic, index)."""

    def __init__(self, storage: Storage, executor: Executor,
                 write_allowed: Callable[[], bool] | None = None,
                 object_flush_interval_ms: int = 0) -> None:
        self._storage = storage
        self._executor = executor
        self._min_flush_interval_s = (
            0.0 if storage.supports_append else object_flush_interval_ms / 1000)
        self.write_allowed = write_allowed
        self._partitions: dict[tuple[str, int], Partition] = {}
        self.hooks: PartitionHooks | None = None

    def get(self, topic: str, index: int) -> Partition | None:
        return self._partitions.get((topic, index))

    def all(self) -> Iterable[Partition]:
        return list(self._partitions.values())

    async def open(self, topic: str, index: int, config: LogConfig,
                   leader_epoch: int | None = None) -> Partition:
        """Open (and recover) a partition's log on a worker thread.

        With ``leader_epoch`` (cluster mode) the log is opened for that epoch: the single-writer
        right on shared storage, fencing every writer of a lower epoch."""
        existing = self._partitions.get((topic, index))
        if existing is not None:
            return existing
        partition = await self.open_unlisted(topic, index, config, leader_epoch)
        if self.hooks is not None:
            try:
                await self.hooks.opened(partition)
            except BaseException:
                partition.abandon()
                raise
        self._partitions[(topic, index)] = partition
        return partition

    async def open_unlisted(self, topic: str, index: int, config: LogConfig,
                            leader_epoch: int | None = None) -> Partition:
        """Open a log as ``open`` does, without listing it among the broker's partitions (an
        internal log that belongs to one of them)."""
        opener = functools.partial(PartitionLog.open, self._storage, topic, index, config,
                                   epoch=leader_epoch or 0)
        log_ = await asyncio.get_running_loop().run_in_executor(self._executor, opener)
        return Partition(log_, self._executor, leader_epoch or 0, self.write_allowed,
                         self._min_flush_interval_s, reopen=opener)

    def abandon(self, topic: str, index: int) -> None:
        """Drop a partition without flushing (its write right is gone): queued batches are
        discarded, their producers told NOT_LEADER_OR_FOLLOWER, the log is shut."""
        partition = self._partitions.pop((topic, index), None)
        if partition is not None:
            partition.abandon()
            if self.hooks is not None:
                self.hooks.abandoned(partition)

    async def close(self, topic: str, index: int, delete: bool = False) -> None:
        partition = self._partitions.pop((topic, index), None)
        if partition is None:
            return
        await partition.stop_recovering()
        if self.hooks is not None:
            await self.hooks.closing(partition, delete)
        await partition.drain()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(
            self._executor, partition.log.delete if delete else partition.log.close)

    async def close_all(self) -> None:
        """Close every partition, some hundreds at a time (each publishes its state document:
        one after the other, a broker of 10,000 partitions took 17 s to stop)."""
        keys = list(self._partitions)
        for start in range(0, len(keys), _CLOSES_IN_FLIGHT):
            await asyncio.gather(*(self.close(topic, index)
                                   for topic, index in keys[start:start + _CLOSES_IN_FLIGHT]))

    async def maintain(self, checkpoint_interval_ms: int, retention_interval_ms: int,
                       cleaner: CleanerService | None = None) -> None:
        """Checkpoints, retention and the log cleaner of compacted topics, each on its own
        schedule, until cancelled at shutdown."""
        await asyncio.gather(
            self._every(checkpoint_interval_ms, lambda log_: log_.checkpoint()),
            self._every(retention_interval_ms, lambda log_: log_.apply_retention(now_ms())),
            *([cleaner.run(lambda: [p.log for p in self.all()
                                    if p.log.topic not in SNAPSHOTTED_TOPICS])]
              if cleaner else []),
        )

    async def _every(self, interval_ms: int, work: Callable[[PartitionLog], object]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval_ms / 1000)
            for partition in self.all():
                try:
                    await loop.run_in_executor(self._executor, work, partition.log)
                except Exception:
                    log.exception("maintenance of %s-%d failed", partition.topic, partition.index)
