"""The timer of one partition (RocketMQ 5's TimerLog and TimerWheel, on shared storage).

* **Timer log**: a produce batch with scheduled records is appended, as wrappers
  (``records``), to the partition's timer log, a log beside it with the same leader epoch
  (fenced like it); the produce is answered once that is durable.
* **Index**: a durable record is indexed by (due time, timer log offset). Records due within
  the loaded window (up to ``LOOKAHEAD_MS`` + ``WINDOW_MS`` ahead) wait in a heap in memory;
  later ones wait in memory only until the next run is written (``runs``), then on storage,
  and are read back one window at a time as their time comes: memory follows the near future,
  not the number of pending records.
* **Merging**: a timer that accepts a few records a second for weeks writes a run every
  ``RUN_INTERVAL_S``; above ``MAX_RUNS`` runs the smallest are merged into one (written first,
  then named in the state document, then the old ones deleted), up to ``MERGE_ENTRIES``
  entries, the size of a run written at full rate: so there are about ``MAX_RUNS`` runs plus
  one per 100,000 pending records (a few hundred bytes of memory each), whatever the rate.
* **Delivery**: every tick the records due are popped in (due, offset) order, framed into
  batches and appended to the partition as the timer's own idempotent producer, whose sequence
  number is the count of records delivered. After a crash the partition's producer state says
  how many were really appended, so the records the state document had not yet counted are
  skipped: each record is delivered once.
"""

from __future__ import annotations

import asyncio
import functools
import logging

from bmq.coordinators.clock import steady_now_ms
from bmq.coordinators.timers import wheel
from bmq.coordinators.timers.records import SEQUENCE_MASK, Held, hold_batch, mentions_schedule
from bmq.coordinators.timers.runs import open_run
from bmq.coordinators.timers.state import TimerState, read_state, replay
from bmq.coordinators.timers.wheel import TimerWheel
from bmq.coordinators.transactions.records import marker_batch
from bmq.protocol.records import TRANSACTIONAL_FLAG, BatchHeader
from bmq.storage import AppendResult

log = logging.getLogger(__name__)


class PartitionTimer(TimerWheel):
    """Holds and delivers the scheduled records of one partition this broker owns."""

    # ------------------------------------------------------------------ life
    async def load(self) -> None:
        """Read the state, the runs and the timer log after them; start delivering."""
        loop = asyncio.get_running_loop()
        state = await loop.run_in_executor(self._executor, read_state, self._storage,
                                           self._dir, self._epoch)
        self.state = state or TimerState()
        if self.state.producer_id < 0:
            self.state.producer_id = await self._allocate()
        self._runs = await loop.run_in_executor(
            self._executor, lambda: [open_run(self._storage, p) for p in self.state.runs])
        for run in self._runs:
            run.seek(self.state.due)
        self._popped = (self.state.due, self.state.offset)
        self._loaded_until = max(self.state.due, 0)
        self.accepted = self.state.accepted
        await loop.run_in_executor(self._executor, replay, self.timer_log.log, self.state,
                                   self._index, self._txn_open)
        self._indexed_end = max(self._indexed_end, self.state.spilled_through)
        self._count_skipped()
        await self._save_state(claim=True)
        self._update_gauge()
        self._task = loop.create_task(self._run())
        log.info("timer of %s-%d: %d pending, %d delivered, %d runs", self.topic,
                 self.partition.index, self.pending, self.state.delivered, len(self._runs))

    def _count_skipped(self) -> None:
        """Records appended before a crash that the state document does not count yet."""
        appended = self.partition.log.last_sequence(self.state.producer_id)
        counted = self.state.delivered
        if appended is not None and appended[0] == 0 and appended[1] >= 0:
            skip = (appended[1] + 1 - counted) & SEQUENCE_MASK
            if skip > self.pending:
                log.warning("timer of %s-%d: the partition has %d more deliveries than "
                            "pending records; none skipped", self.topic, self.partition.index,
                            skip)
                skip = 0
            self._skip = skip
        self._next_sequence = counted + self._skip

    async def close(self) -> None:
        """Hand over: stop delivering, write the state, close the timer log."""
        await self._stop()
        await self.timer_log.drain()
        self._pending_gauge.dec(self.pending)
        await self._save_state()
        await asyncio.get_running_loop().run_in_executor(self._executor,
                                                         self.timer_log.log.close)

    def abandon(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self.timer_log.abandon()
        self._pending_gauge.dec(self.pending)

    async def delete(self) -> None:
        """The topic is deleted: the timer log and the index go with it."""
        await self._stop()
        await self.timer_log.drain()
        self._pending_gauge.dec(self.pending)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self.timer_log.log.delete)
        await loop.run_in_executor(self._executor, self._storage.delete_tree, self._dir)

    async def _stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def _update_gauge(self) -> None:
        self._pending_gauge.inc(self.pending)

    # ------------------------------------------------------------------ accepting
    @staticmethod
    def would_hold(records: memoryview, headers: list[BatchHeader]) -> bool:
        """Whether ``hold`` takes these batches (else they go to the partition as usual)."""
        return headers[0].producer_id >= 0 or mentions_schedule(records, headers)

    def hold(self, records: memoryview, headers: list[BatchHeader],
             now: int) -> tuple[AppendResult, asyncio.Future[None]] | None:
        """Hold a produce's batches in the timer log if any record is scheduled (a batch is
        held whole: its other records are due at once, after the ones before them), and
        always those of idempotent and transactional producers, whose sequence numbers must
        stay in one log; None for the rest. Returns the timer log append (offsets there) and
        its durability. Raises INVALID_RECORD for a malformed schedule header; then nothing is
        written."""
        if not self.would_hold(records, headers):
            return None
        self.timer_log.check_writable()
        accepted = steady_now_ms()      # the clock deliveries are timed by, not ``now``
        floor = max(accepted, self._popped[0])
        held: list[list[Held]] = []
        parts: list[bytearray] = []
        timer_headers: list[BatchHeader] = []
        position = 0
        for header in headers:
            batch, timer_header, batch_held = hold_batch(
                records[position:position + header.size], header, accepted, floor,
                accepted + wheel.KEEP_MS)
            held.append(batch_held)
            parts.append(batch)
            timer_headers.append(timer_header)
            position += header.size
        appended = self.timer_log.log.append(memoryview(bytearray().join(parts)), timer_headers,
                                             now, sequences_from=self.partition.log)
        answer = self.timer_log.durable(appended.last_offset)
        if appended.duplicate:
            return appended, answer
        self.timer_log.schedule_flush()
        offset = appended.base_offset
        flat = []
        for batch_held in held:
            for record in batch_held:
                record.offset = offset
                offset += 1
                flat.append(record)
        first = headers[0]
        txn = first.producer_id if first.attributes & TRANSACTIONAL_FLAG else None
        if txn is None and flat:
            self._hold_in_flight(flat)
        self.timer_log.durable(appended.last_offset).add_done_callback(
            functools.partial(self._held_durable, flat, txn))
        return appended, answer

    def _held_durable(self, held: list[Held], txn: int | None,
                      future: asyncio.Future[None]) -> None:
        if txn is None and held:
            self._end_in_flight(held)
        if future.cancelled() or future.exception() is not None:
            # The timer log failed: it is replayed from what was durable (a producer's retry
            # of these records may find them there, a duplicate answered without a hold).
            self._fail()
            return
        if txn is None:
            self._index(held)
        else:
            self._txn_open.setdefault(txn, []).extend(held)

    def on_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                  coordinator_epoch: int, now: int) -> asyncio.Future[None] | None:
        """A transaction marker for the partition: the same marker in the timer log, then the
        transaction's held records are indexed (COMMIT) or dropped (ABORT)."""
        if producer_id not in self._txn_open:
            return None
        batch, header = marker_batch(producer_id, producer_epoch, commit, coordinator_epoch,
                                     now, self.timer_log.leader_epoch)
        durable = self.timer_log.append_batch(batch, header, now)
        durable.add_done_callback(functools.partial(self._marker_durable, producer_id, commit))
        return durable

    def _marker_durable(self, producer_id: int, commit: bool,
                        future: asyncio.Future[None]) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        held = self._txn_open.pop(producer_id, [])
        if commit and held:
            self._txn_unspilled.setdefault(producer_id, held[0].offset)
            self._index(held)
