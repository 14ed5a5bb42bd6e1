"""The timers of every partition this broker owns: opened, handed over and deleted with their
partitions (``PartitionHooks``), so a timer log moves with its partition in cluster mode and
the new owner resumes it with the partition's new leader epoch."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor

from bmq.coordinators.clock import steady_now_ms
from bmq.coordinators.timers.runs import count_due
from bmq.coordinators.timers.state import has_state, index_dir, read_state, timer_log_name
from bmq.coordinators.timers.timer import PartitionTimer
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.storage import LogConfig, Storage
from bmq.writepath.partitions import Partition, PartitionManager

log = logging.getLogger(__name__)

# The timer log keeps what the timer has not delivered (the timer moves its start); segments
# are small so that delivered ones are deleted soon. Its offset index, which stays in memory,
# has an entry per 32 KiB rather than 4 KiB: with every pending record in the timer log, that
# is 0.1 byte of memory per pending record instead of 0.8 (reads start up to 32 KiB early).
TIMER_LOG_CONFIG = LogConfig(segment_bytes=64 << 20, retention_ms=-1, retention_bytes=-1,
                             max_message_bytes=2**31 - 1, index_interval_bytes=32 << 10)
RESTART_FIRST_S = 0.5   # a failed timer is started again after this, doubling up to
RESTART_MAX_S = 8.0


class TimerService:
    """Scheduled delivery on this broker: one ``PartitionTimer`` per partition of a topic
    with ``bmq.delay.enable=true``."""

    def __init__(self, partitions: PartitionManager, storage: Storage, executor: Executor,
                 allocate_producer_id: Callable[[], Awaitable[int]]) -> None:
        self._partitions = partitions
        self._storage = storage
        self._executor = executor
        self._allocate = allocate_producer_id
        self._timers: dict[tuple[str, int], PartitionTimer] = {}
        self._starting: dict[Partition, asyncio.Future[PartitionTimer]] = {}
        partitions.hooks = self

    def timer(self, partition: Partition) -> PartitionTimer | None:
        return self._timers.get((partition.topic, partition.index))

    async def start(self, partition: Partition) -> PartitionTimer:
        """The partition's timer, opened (its timer log recovered and replayed) if need be."""
        key = (partition.topic, partition.index)
        timer = self._timers.get(key)
        if timer is not None:
            if timer.partition is partition:
                return timer
            # The timer of an earlier opening of the partition, which was handed over or
            # abandoned while that timer was still loading (so the hooks found no timer to
            # stop): it delivers nothing any more. Kept, it stood in for this opening's timer,
            # and the partition's pending records were never delivered.
            del self._timers[key]
            timer.abandon()
        starting = self._starting.get(partition)
        if starting is None:
            starting = self._starting[partition] = asyncio.ensure_future(self._open(partition))
            starting.add_done_callback(lambda done: self._started(partition, done))
        return await asyncio.shield(starting)

    def _started(self, partition: Partition, done: asyncio.Future[PartitionTimer]) -> None:
        """An opening ended; its failure is logged here, as its callers may be gone (their
        own requests cancelled while it loaded)."""
        self._starting.pop(partition, None)
        if not done.cancelled() and done.exception() is not None:
            log.info("timer of %s-%d not started: %r", partition.topic, partition.index,
                     done.exception())

    async def _open(self, partition: Partition) -> PartitionTimer:
        timer_log = await self._partitions.open_unlisted(
            timer_log_name(partition.topic), partition.index, TIMER_LOG_CONFIG,
            partition.leader_epoch)
        timer = PartitionTimer(partition, timer_log, self._storage, self._executor,
                               self._allocate)
        try:
            await timer.load()
            # Handed over or abandoned while loading: the timer of a later opening of the
            # partition must not be replaced by this one (see ``start``).
            partition.check_writable()
        except BaseException:
            timer.abandon()
            raise
        partition.marker_hook = timer.on_marker
        timer.on_failure = functools.partial(self._failed, timer)
        self._timers[(partition.topic, partition.index)] = timer
        return timer

    def _failed(self, timer: PartitionTimer) -> None:
        """``timer`` stopped on a failed delivery or hold: abandoned, and started again from
        its durable state once its partition is writable (a produce meanwhile waits for it).
        Without this, a partition that reopened in place after a storage failure (its owner
        unchanged) held new records and never delivered them."""
        partition = timer.partition
        key = (partition.topic, partition.index)
        if self._timers.get(key) is not timer:
            return      # abandoned or handed over already
        del self._timers[key]
        partition.marker_hook = None
        timer.abandon()
        if partition not in self._starting:
            starting = self._starting[partition] = asyncio.ensure_future(
                self._restart(partition))
            starting.add_done_callback(lambda done: self._started(partition, done))

    async def _restart(self, partition: Partition) -> PartitionTimer:
        delay = RESTART_FIRST_S
        while self._partitions.get(partition.topic, partition.index) is partition:
            await partition.drain()     # the deliveries appended: durable, or failed
            try:
                partition.check_writable()
                timer = await self._open(partition)
            except (KafkaError, OSError) as error:
                log.info("timer of %s-%d not started again yet (again in %.1f s): %s",
                         partition.topic, partition.index, delay, error)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RESTART_MAX_S)
                continue
            log.info("timer of %s-%d started again", partition.topic, partition.index)
            return timer
        raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "the partition moved")

    # ------------------------------------------------------------------ PartitionHooks
    async def opened(self, partition: Partition) -> None:
        """A timer starts with its partition if the topic has scheduled delivery, or had it:
        turning ``bmq.delay.enable`` off stops holding new records (their headers are then
        only headers, as in Kafka), but what is pending is still delivered at its time."""
        if partition.log.config.delay_enable or await asyncio.get_running_loop(
                ).run_in_executor(self._executor, has_state, self._storage,
                                  index_dir(partition.topic, partition.index)):
            await self.start(partition)

    async def closing(self, partition: Partition, delete: bool) -> None:
        partition.marker_hook = None
        timer = self._timers.pop((partition.topic, partition.index), None)
        if timer is None:
            return
        try:
            await (timer.delete() if delete else timer.close())
        except (KafkaError, OSError) as error:
            log.warning("timer of %s-%d not closed cleanly: %s", partition.topic,
                        partition.index, error)

    def abandoned(self, partition: Partition) -> None:
        partition.marker_hook = None
        timer = self._timers.pop((partition.topic, partition.index), None)
        if timer is not None:
            timer.abandon()

    # ------------------------------------------------------------------ describing
    async def pending_by_due(self, topic: str, partitions: int,
                             ahead_ms: list[int]) -> dict[int, list[int]]:
        """For each partition of ``topic`` this broker owns, its records held by due time:
        how many are due within ``ahead_ms[0]`` of now (or overdue), between each of
        ``ahead_ms`` and the next, and later (``len(ahead_ms) + 1`` counts, summing to its
        pending count). Records being delivered at that instant count as due now. A partition
        whose runs could not be read is left out."""
        now = steady_now_ms()
        bounds = [now + ahead for ahead in ahead_ms]
        loop = asyncio.get_running_loop()
        found = {}
        for index in range(partitions):
            timer = self._timers.get((topic, index))
            if timer is None:
                continue
            pending = timer.pending
            counts, runs = timer.pending_by_due(bounds)
            try:
                for run, position in runs:
                    more = await loop.run_in_executor(self._executor, count_due,
                                                      self._storage, run, position, bounds)
                    counts = [mine + theirs for mine, theirs in zip(counts, more, strict=True)]
            except OSError:     # a run merged or delivered meanwhile: asked again next time
                continue
            counts[0] += max(0, pending - sum(counts))
            found[index] = counts
        return found

    def pending(self, topic: str, partitions: int) -> dict[int, int]:
        """Scheduled records not delivered yet, per partition: live for the partitions this
        broker owns, else as their owner last wrote in the timer's state (storage I/O)."""
        counts = {}
        for index in range(partitions):
            timer = self._timers.get((topic, index))
            if timer is not None:
                counts[index] = timer.pending
                continue
            try:
                state = read_state(self._storage, index_dir(topic, index), 2**31)
            except (KafkaError, OSError, ValueError):
                state = None
            counts[index] = 0 if state is None else state.pending
        return counts
