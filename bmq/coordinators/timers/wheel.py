"""The wheel of a partition's timer: the index of its held records (in memory near their time,
in runs on storage until then), their delivery when due, and the runs and state document it
writes. The design is in ``timer``."""

from __future__ import annotations

import asyncio
import functools
import heapq
import logging
import time
from array import array
from bisect import bisect_right
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor

from bmq import metrics
from bmq.coordinators.clock import steady_now_ms
from bmq.coordinators.timers.records import Held, delivery_batch
from bmq.coordinators.timers.runs import (
    Entry,
    Run,
    load_window,
    merge_runs,
    smallest_runs,
    write_run,
)
from bmq.coordinators.timers.state import (
    TimerState,
    drop_older_states,
    fenced,
    index_dir,
    read_held_at,
    write_state,
)
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.records import HEADER_SIZE
from bmq.storage import Storage
from bmq.writepath.partitions import Partition

log = logging.getLogger(__name__)

WINDOW_MS = 1000            # the index is loaded into memory this much at a time ...
LOOKAHEAD_MS = 2000         # ... this far ahead of the clock
KEEP_MS = 10_000            # records due this soon wait in memory with their fields
HEAP_LIMIT = 500_000        # a window is not loaded while this many records wait in memory
RUN_ENTRIES = 100_000       # a run is written at this many new records ...
RUN_INTERVAL_S = 10.0       # ... or this long after the last one
MAX_RUNS = 16               # above this many runs, the smallest are merged, ...
MERGE_FAN = 8               # ... up to this many at a time ...
MERGE_ENTRIES = RUN_ENTRIES  # ... with this many entries together at most (1.6 MB)
STATE_INTERVAL_S = 5.0      # delivery progress is written at most this often
TICK_S = 0.05               # the longest sleep when nothing is due sooner
MIN_TICK_S = 0.004          # the shortest sleep between deliveries
DELIVERY_RECORDS = 4000     # at most this many records per delivery batch
_NEVER = 2**63 - 1


class TimerWheel:
    """The index and the delivery of one partition's scheduled records; ``PartitionTimer``
    starts it, stops it and feeds it."""

    def __init__(self, partition: Partition, timer_log: Partition, storage: Storage,
                 executor: Executor, allocate_producer_id: Callable[[], Awaitable[int]]) -> None:
        self.partition = partition
        self.timer_log = timer_log
        self._storage = storage
        self._executor = executor
        self._allocate = allocate_producer_id
        self.topic = partition.topic
        self._dir = index_dir(partition.topic, partition.index)
        self._epoch = partition.leader_epoch
        self.state = TimerState()
        self._runs: list[Run] = []
        # Indexed since the last run: (due, offset) pairs flat in one array, not a Python
        # object each (long-lived small objects among the many short-lived ones of a produce
        # burst would keep the allocator's arenas from being returned).
        self._memtable = array("q")
        self._indexed_end = 0                   # past the newest non-transactional record
        self._heap: list[tuple[int, int, Held | None]] = []   # due before _loaded_until
        self._far: list[tuple[int, int, Held]] = []           # due within KEEP_MS
        self._far_offsets: set[int] = set()     # theirs: a run's copy of them is skipped
        self._unheld_due = _NEVER       # the soonest memtable record in neither heap
        self._loaded_until = 0
        self._window_partial = False    # some runs loaded past _loaded_until (a read failed)
        self._unlinked: list[str] = []  # runs merged or delivered: deleted after a state write
        self._txn_open: dict[int, list[Held]] = {}
        self._txn_unspilled: dict[int, int] = {}   # committed since the last run: first offset
        self._popped: Entry = (-1, -1)          # the last record taken for delivery
        # Held records not yet durable, so not yet indexed: the soonest due time of each hold
        # (with how many holds have it). Nothing due at or after the soonest is delivered
        # until they are indexed: delivered past, a record due sooner would be taken for one
        # delivered already (it is behind the cursor) and never delivered.
        self._in_flight: dict[int, int] = {}
        self._skip = 0                          # delivered before a crash, not yet counted
        self._next_sequence = 0
        self.accepted = 0                       # records indexed, ever
        self._last_run = time.monotonic()
        self._last_save = 0.0
        self._dirty = False
        self._waiter: asyncio.Future[None] | None = None   # the loop's sleep
        self._task: asyncio.Task[None] | None = None
        # Called when a delivery or a hold failed: the service starts the timer again.
        self.on_failure: Callable[[], None] | None = None
        self._pending_gauge = metrics.SCHEDULED_PENDING.labels(self.topic)
        self._delivered_counter = metrics.SCHEDULED_DELIVERED.labels(self.topic)

    # ------------------------------------------------------------------ the index
    @property
    def pending(self) -> int:
        return self.accepted - self.state.delivered

    def pending_by_due(self, bounds: list[int]) -> tuple[list[int], list[tuple[Run, int]]]:
        """The records held, by due time, at this instant: the counts of those in memory
        before ``bounds[0]``, between each bound (steady ms, ascending) and the next, and at
        the last or later; and each run with the position it is read from, whose entries from
        there on (``count_due``, storage I/O) are the rest. Records in memory are those loaded
        from runs (the heap) and those not written to a run yet (the memtable; those of them
        due before ``_loaded_until`` are in the heap already)."""
        counts = [0] * (len(bounds) + 1)
        for due, _, _ in self._heap:
            counts[bisect_right(bounds, due)] += 1
        cursor = (self.state.due, self.state.offset)
        table = self._memtable
        for i in range(0, len(table), 2):
            if table[i] >= self._loaded_until and (table[i], table[i + 1]) > cursor:
                counts[bisect_right(bounds, table[i])] += 1
        return counts, [(run, run.position) for run in self._runs if not run.exhausted]

    def _index(self, held: list[Held]) -> None:
        """Durable records join the index (also called by the replay, off the loop)."""
        cursor = (self.state.due, self.state.offset)
        keep_until = steady_now_ms() + KEEP_MS
        wake = False
        for record in held:
            key = (record.due, record.offset)
            self._memtable.extend(key)
            self._indexed_end = max(self._indexed_end, record.offset + 1)
            if key <= cursor:
                continue        # replay: delivered already
            kept = record if record.fields is not None else None
            if record.due < self._loaded_until:
                heapq.heappush(self._heap, (record.due, record.offset, kept))
                wake = wake or self._heap[0][1] == record.offset
            elif record.due < keep_until and kept is not None:
                heapq.heappush(self._far, (record.due, record.offset, record))
                self._far_offsets.add(record.offset)
            else:   # waits in the memtable (due time and offset only) for the next run
                self._unheld_due = min(self._unheld_due, record.due)
        self.accepted += len(held)
        if self._task is not None:
            self._pending_gauge.inc(len(held))
            if wake:
                self._wake_up()

    def _wake_up(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # ------------------------------------------------------------------ the wheel
    async def _run(self) -> None:
        try:
            while True:
                try:
                    await self._tick()
                except OSError as error:    # storage trouble: the next tick tries again
                    log.warning("timer of %s-%d: %s", self.topic, self.partition.index, error)
                    await asyncio.sleep(1)
                    continue
                # Until the next record is due, at least MIN_TICK_S (deliveries of a few
                # milliseconds go out together), or until a record due sooner arrives.
                delay = TICK_S
                if self._heap:
                    delay = min(delay, max(MIN_TICK_S, (self._heap[0][0] - steady_now_ms()) / 1000))
                loop = asyncio.get_running_loop()
                self._waiter = loop.create_future()
                alarm = loop.call_later(delay, self._wake_up)
                try:
                    await self._waiter
                finally:
                    alarm.cancel()
                    self._waiter = None
        except KafkaError as error:
            log.warning("timer of %s-%d stopped: %s", self.topic, self.partition.index, error)
            self._fail()
        except Exception:
            log.exception("timer of %s-%d failed", self.topic, self.partition.index)
            self._fail()

    def _fail(self) -> None:
        """Stop: a delivery or a hold failed. The partition or the timer log failed on storage
        and reopens in place with only what was durable (or the partition moved): what this
        timer holds in memory may be ahead of that, so it is started again from its durable
        state (``on_failure``), as a next owner would."""
        if self._task is not None:
            self._task.cancel()
        if self.on_failure is not None:
            self.on_failure()

    async def _tick(self) -> None:
        if self._memtable and (len(self._memtable) >= 2 * RUN_ENTRIES or
                               time.monotonic() - self._last_run >= RUN_INTERVAL_S):
            await self._write_run()
        await self._merge_runs()
        await self._advance(steady_now_ms())
        await self._deliver(steady_now_ms())
        if self._dirty and time.monotonic() - self._last_save >= STATE_INTERVAL_S:
            await self._save_state()

    async def _advance(self, now: int) -> None:
        """Load the index up to ``LOOKAHEAD_MS`` + ``WINDOW_MS`` ahead into the heap."""
        target = now + LOOKAHEAD_MS
        if self._unheld_due < target + 2 * WINDOW_MS:
            await self._write_run()     # a window must find every record in a run or in memory
        while self._loaded_until <= target and len(self._heap) < HEAP_LIMIT:
            lows = [run.next_due for run in self._runs if not run.exhausted]
            if self._far:
                lows.append(self._far[0][0])
            if not lows or min(lows) > target + WINDOW_MS:
                self._loaded_until = target + WINDOW_MS     # nothing due meanwhile
                return
            end = max(self._loaded_until, min(lows)) + WINDOW_MS
            self._window_partial = True
            for run in [run for run in self._runs if run.next_due < end]:
                # One run at a time: a failed read leaves that run where it was.
                loaded = await asyncio.get_running_loop().run_in_executor(
                    self._executor, load_window, self._storage, run, end)
                cursor = (self.state.due, self.state.offset)
                for due, offset in loaded:
                    if (due, offset) > cursor and offset not in self._far_offsets:
                        heapq.heappush(self._heap, (due, offset, None))
            while self._far and self._far[0][0] < end:
                entry = heapq.heappop(self._far)
                self._far_offsets.discard(entry[1])
                heapq.heappush(self._heap, entry)
            self._loaded_until = end
            self._window_partial = False

    def _hold_in_flight(self, held: list[Held]) -> None:
        due = min(record.due for record in held)
        self._in_flight[due] = self._in_flight.get(due, 0) + 1

    def _end_in_flight(self, held: list[Held]) -> None:
        due = min(record.due for record in held)
        if self._in_flight[due] == 1:
            del self._in_flight[due]
            self._wake_up()
        else:
            self._in_flight[due] -= 1

    async def _deliver(self, now: int) -> None:
        heap = self._heap
        if self._in_flight:
            now = min(now, min(self._in_flight) - 1)
        while heap and heap[0][0] <= now:
            taken: list[tuple[int, int, Held | None]] = []
            while heap and heap[0][0] <= now and len(taken) < DELIVERY_RECORDS:
                entry = heapq.heappop(heap)
                self._popped = (entry[0], entry[1])
                if self._skip:
                    self._skip -= 1
                    self._counted([entry[:2]], now)
                    continue
                taken.append(entry)
            if not taken:
                continue
            if any(held is None for _, _, held in taken):
                try:
                    found = await asyncio.get_running_loop().run_in_executor(
                        self._executor, read_held_at, self.timer_log.log,
                        [o for _, o, h in taken if h is None])
                except OSError:
                    for entry in taken:     # delivered at the next try
                        heapq.heappush(heap, entry)
                    raise
                records = [held or found[offset] for _, offset, held in taken]
            else:
                records = [held for _, _, held in taken if held is not None]
            self._append(records, now)

    def _append(self, records: list[Held], now: int) -> None:
        limit = self.partition.log.config.max_message_bytes - HEADER_SIZE
        start = 0
        while start < len(records):
            size = 0
            stop = start
            while stop < len(records) and (stop == start or
                                           size + len(records[stop].fields or b"") + 32 <= limit):
                size += len(records[stop].fields or b"") + 32
                stop += 1
            chunk = records[start:stop]
            batch, header = delivery_batch(chunk, self.state.producer_id,
                                           self._next_sequence, self.partition.leader_epoch,
                                           self.partition.log.config)
            self._next_sequence += len(chunk)
            durable = self.partition.append_batch(batch, header, now)
            durable.add_done_callback(functools.partial(
                self._delivered, [(h.due, h.offset) for h in chunk]))
            start = stop

    def _delivered(self, keys: list[Entry], future: asyncio.Future[None]) -> None:
        if future.cancelled() or future.exception() is not None:
            self._fail()
            return
        now = steady_now_ms()
        self._counted(keys, now)
        self._delivered_counter.inc(len(keys))
        observe = metrics.SCHEDULED_LATENESS.observe
        for due, _ in keys:
            observe(max(0, now - due) / 1000)

    def _counted(self, keys: list[Entry], now: int) -> None:
        self.state.due, self.state.offset = keys[-1]
        self.state.delivered += len(keys)
        self._pending_gauge.dec(len(keys))
        self._dirty = True

    # ------------------------------------------------------------------ runs and state
    async def _write_run(self) -> None:
        cursor = (self.state.due, self.state.offset)
        memtable, unheld, unspilled = self._memtable, self._unheld_due, self._txn_unspilled
        spilled_through = self._indexed_end
        self._memtable = array("q")
        self._txn_unspilled = {}
        self._last_run = time.monotonic()
        # Records not in memory are in the run now: read back from it (the fields from the
        # timer log) as their window comes. Those in memory stay there (the run's copy of
        # them is skipped), with their fields.
        self._unheld_due = _NEVER
        if memtable:
            try:
                run = await asyncio.get_running_loop().run_in_executor(
                    self._executor, write_run, self._storage, self._run_path(), memtable,
                    cursor, self._loaded_until)
            except OSError:     # as it was, with what was indexed meanwhile: retried later
                self._memtable = memtable + self._memtable
                self._unheld_due = min(unheld, self._unheld_due)
                self._txn_unspilled = {**unspilled, **self._txn_unspilled}
                raise
            if run is not None:
                self._runs.append(run)
        self.state.accepted += len(memtable) // 2
        self.state.spilled_through = spilled_through
        await self._save_state(truncate=True)

    def _run_path(self) -> str:
        return f"{self._dir}/run.{self._epoch:010d}.{time.time_ns():020d}"

    async def _merge_runs(self) -> None:
        """Above ``MAX_RUNS`` runs, merge the smallest (at most ``MERGE_FAN``, together at
        most ``MERGE_ENTRIES``) into one. Not while a window is loaded in part: the merged
        run's loading starts at ``_loaded_until``, which every run must have reached."""
        if len(self._runs) <= MAX_RUNS or self._window_partial:
            return
        chosen = smallest_runs(self._runs, MERGE_FAN, MERGE_ENTRIES)
        if len(chosen) < 2:
            return
        merged = await asyncio.get_running_loop().run_in_executor(
            self._executor, merge_runs, self._storage, self._run_path(), chosen,
            (self.state.due, self.state.offset), self._loaded_until)
        paths = {run.path for run in chosen}
        self._runs = [run for run in self._runs if run.path not in paths]
        if merged is not None:
            self._runs.append(merged)
        self._unlinked += paths
        await self._save_state()

    async def _save_state(self, claim: bool = False, truncate: bool = False) -> None:
        """Write the state, then delete the runs it no longer names (delivered or merged);
        with ``truncate`` (after a run) or when runs were delivered, also move the timer log's
        start past what no run or replay needs."""
        state = self.state
        cursor = (state.due, state.offset)
        done = [run for run in self._runs if run.exhausted and run.last <= cursor]
        self._runs = [run for run in self._runs if run not in done]
        state.runs = [run.path for run in self._runs]
        state.txn_pending = {**self._txn_unspilled,
                             **{pid: held[0].offset for pid, held in self._txn_open.items()
                                if held}}
        state.pending = self.pending
        self._dirty = False
        self._last_save = time.monotonic()
        low = min([state.replay_from, *(run.min_offset for run in self._runs)])
        # Runs delivered or merged into another are deleted once this state is durable.
        self._unlinked += [run.path for run in done]
        unlinked, self._unlinked = self._unlinked, []
        try:
            await asyncio.get_running_loop().run_in_executor(
                self._executor, self._persist, state, unlinked,
                low if truncate or done else -1, claim)
        except OSError:
            self._unlinked = unlinked + self._unlinked
            raise

    def _persist(self, state: TimerState, dropped: list[str], low: int, claim: bool) -> None:
        if fenced(self._storage, self._dir, self._epoch):
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "a newer owner has the timer")
        write_state(self._storage, self._dir, self._epoch, state)
        if claim:
            drop_older_states(self._storage, self._dir, self._epoch)
        for path in dropped:
            self._storage.delete(path)
        timer_log = self.timer_log.log
        if timer_log.log_start_offset < low <= timer_log.high_watermark:     # -1: not now
            timer_log.delete_records(low)
            timer_log.checkpoint()
