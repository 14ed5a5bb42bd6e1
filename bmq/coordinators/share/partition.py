"""One share-partition: what a share group has done with one topic partition (KIP-932).

The records from the share-partition start offset (SPSO) to the end offset (SPEO, the next
offset never acquired) are kept as runs of consecutive offsets in the same state: AVAILABLE
(deliverable, once its retry back-off has passed), ACQUIRED (locked by one member until its
lock expires), ACKNOWLEDGED, ARCHIVED, or ARCHIVING (on its way to the dead-letter topic).
Runs split when one acknowledgement covers part of one, so a consumer that accepts whole
batches keeps a handful of runs whatever its throughput.

Everything here is synchronous and in memory; ``changes`` collects what a mutation altered,
for the coordinator to append to the share-group state log before it answers.
"""

from __future__ import annotations

import enum
from bisect import bisect_right
from dataclasses import dataclass, field
from operator import attrgetter

from bmq.protocol.errors import ErrorCode


class RecordState(enum.IntEnum):
    """Kafka's record states (the numbers are Kafka's; ARCHIVING is KIP-1191's)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3
    ARCHIVED = 4


class AckType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
# Why records go to the dead-letter topic (its ``bmq.dlq.reason`` header; "" for none).
REJECTED = "rejected"
DELIVERY_LIMIT = "delivery.count.limit"
DEAD_LETTER_REASONS = ("", REJECTED, DELIVERY_LIMIT)


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """A share group's configs as a share-partition uses them."""

    lock_ms: int = 30_000
    delivery_limit: int = 5
    backoff_ms: tuple[int, ...] = (0,)
    dlq_topic: str = ""
    # share.isolation.level=read_committed: acquire below the last stable offset only, never
    # the records of aborted transactions nor control records.
    read_committed: bool = False

    def backoff(self, delivery_count: int) -> int:
        """The delay before a record delivered ``delivery_count`` times is deliverable again."""
        steps = self.backoff_ms
        return steps[min(max(delivery_count, 1), len(steps)) - 1]


@dataclass(slots=True)
class Run:
    first: int
    last: int
    state: RecordState
    count: int = 0                 # delivery count
    member: str = ""               # who holds the lock (ACQUIRED)
    deadline: int = 0              # when the lock expires (ms, coordinators.clock)
    available_at: int = 0          # deliverable from (ms, coordinators.clock): the back-off
    reason: str = ""               # why it is ARCHIVING (a DEAD_LETTER_REASONS entry)

    def copy(self, first: int, last: int) -> Run:
        return Run(first, last, self.state, self.count, self.member, self.deadline,
                   self.available_at, self.reason)


@dataclass(frozen=True, slots=True)
class Acquired:
    first: int
    last: int
    count: int


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """Records to write to the dead-letter topic before they are archived."""

    first: int
    last: int
    count: int
    reason: str


_FIRST = attrgetter("first")


@dataclass(slots=True)
class SharePartition:
    start_offset: int
    runs: list[Run] = field(default_factory=list)
    # The runs changed since the coordinator last took them (copies, in the order changed).
    changes: list[Run] = field(default_factory=list)

    @property
    def end_offset(self) -> int:
        return self.runs[-1].last + 1 if self.runs else self.start_offset

    # ------------------------------------------------------------------ runs
    def _split(self, offset: int) -> int:
        """Make ``offset`` the first of a run (start_offset <= offset <= end_offset); returns
        that run's index (len(runs) at the end)."""
        i = bisect_right(self.runs, offset, key=_FIRST) - 1
        if i < 0:
            return 0
        run = self.runs[i]
        if run.first == offset:
            return i
        if offset > run.last:
            return i + 1
        tail = run.copy(offset, run.last)
        run.last = offset - 1
        self.runs.insert(i + 1, tail)
        return i + 1

    def _span(self, first: int, last: int) -> range:
        """Indexes of the runs exactly covering [first, last] (split as needed)."""
        start = self._split(first)
        end = self._split(last + 1)
        return range(start, end)

    def _changed(self, run: Run) -> None:
        self.changes.append(run.copy(run.first, run.last))

    def take_changes(self) -> list[Run]:
        changes, self.changes = self.changes, []
        return changes

    def _advance(self) -> None:
        """Move the start offset past the records nobody will receive again."""
        runs = self.runs
        drop = 0
        while drop < len(runs) and runs[drop].state in DONE:
            drop += 1
        if drop:
            self.start_offset = runs[drop - 1].last + 1
            del runs[:drop]

    def lag(self, high_watermark: int) -> int:
        """Records from the start offset to ``high_watermark`` not yet done with."""
        done = sum(r.last - r.first + 1 for r in self.runs if r.state in DONE)
        return max(high_watermark - self.start_offset - done, 0)

    # ------------------------------------------------------------------ acquiring
    def acquire(self, member: str, max_records: int, new_end: int, now: int,
                settings: ShareSettings) -> list[Acquired]:
        """Lock up to ``max_records`` deliverable records for ``member``: released records
        whose back-off has passed first, in offset order, then new ones before ``new_end``
        (the high watermark, or the end of the batch where ``max_records`` ends: Kafka
        exceeds MaxRecords to acquire whole batches)."""
        acquired: list[Acquired] = []
        left = max_records
        i = 0
        while i < len(self.runs) and left > 0:
            run = self.runs[i]
            if run.state != RecordState.AVAILABLE or run.available_at > now:
                i += 1
                continue
            if run.last - run.first + 1 > left:
                self._split(run.first + left)
            run.state = RecordState.ACQUIRED
            run.count += 1
            run.member = member
            run.deadline = now + settings.lock_ms
            left -= run.last - run.first + 1
            acquired.append(Acquired(run.first, run.last, run.count))
            self._changed(run)
            i += 1
        first = self.end_offset
        if left > 0 and first < new_end:
            run = Run(first, new_end - 1, RecordState.ACQUIRED, 1, member,
                      now + settings.lock_ms)
            self.runs.append(run)
            acquired.append(Acquired(run.first, run.last, 1))
            self._changed(run)
        return acquired

    def archive_acquired(self, acquired: list[Acquired],
                         skipped: list[tuple[int, int]]) -> list[Acquired]:
        """Archive the ``skipped`` ranges of what was just ``acquired`` (read_committed: records
        of aborted transactions, control records: never to be delivered); returns the rest."""
        for first, last in skipped:
            span = self._span(first, last)
            for i in span:
                run = self.runs[i]
                run.state, run.member = RecordState.ARCHIVED, ""
                self._changed(run)
            self._merge_done(span.start, span.stop + 1)
        self._advance()
        kept = []
        for got in acquired:
            first = got.first
            for skip_first, skip_last in skipped:
                if skip_last < first or skip_first > got.last:
                    continue
                if skip_first > first:
                    kept.append(Acquired(first, skip_first - 1, got.count))
                first = skip_last + 1
            if first <= got.last:
                kept.append(Acquired(first, got.last, got.count))
        return kept

    # ------------------------------------------------------------------ acknowledging
    def check_ack(self, member: str, first: int, last: int, types: list[int]) -> ErrorCode:
        """Whether ``member`` may acknowledge [first, last] with ``types`` (nothing changes)."""
        if first > last or not types or (len(types) != 1 and len(types) != last - first + 1):
            return ErrorCode.INVALID_REQUEST
        if any(t not in AckType._value2member_map_ for t in types):
            return ErrorCode.INVALID_REQUEST
        if first < self.start_offset or last >= self.end_offset:
            return ErrorCode.INVALID_RECORD_STATE
        i = bisect_right(self.runs, first, key=_FIRST) - 1
        while i < len(self.runs) and self.runs[i].first <= last:
            run = self.runs[i]
            if run.state != RecordState.ACQUIRED or run.member != member:
                return ErrorCode.INVALID_RECORD_STATE
            i += 1
        return ErrorCode.NONE

    def acknowledge(self, first: int, last: int, types: list[int], now: int,
                    settings: ShareSettings) -> list[DeadLetter]:
        """Apply a checked acknowledgement (``check_ack``); returns what goes to the
        dead-letter topic (those records are ARCHIVING until ``archive``)."""
        if len(types) == 1:
            dead = self._settle(first, last, AckType(types[0]), now, settings)
        else:
            dead = []
            start = first
            for offset in range(first, last + 1):       # one type per offset: runs of equal
                end = offset - first + 1
                if end == len(types) or types[end] != types[offset - first]:
                    dead += self._settle(start, offset, AckType(types[offset - first]), now,
                                         settings)
                    start = offset + 1
        self._advance()
        return dead

    def _merge_done(self, lo: int, hi: int) -> None:
        """Join neighbouring finished runs of one state among runs[lo:hi]: behind a record
        that waits (a long back-off holds the start offset), later acknowledged records then
        stay one run instead of one per fetch."""
        i = max(lo, 1)
        while i < min(hi, len(self.runs)):
            before, run = self.runs[i - 1], self.runs[i]
            if run.state in DONE and run.state == before.state:
                before.last = run.last
                del self.runs[i]
                hi -= 1
            else:
                i += 1

    def _settle(self, first: int, last: int, ack: AckType, now: int,
                settings: ShareSettings) -> list[DeadLetter]:
        dead: list[DeadLetter] = []
        span = self._span(first, last)
        for i in span:
            run = self.runs[i]
            if ack == AckType.RENEW:
                run.deadline = now + settings.lock_ms
                continue
            if ack == AckType.ACCEPT:
                run.state = RecordState.ACKNOWLEDGED
            elif ack == AckType.GAP:
                run.state = RecordState.ARCHIVED        # no record there: nothing to deliver
            elif ack == AckType.REJECT:
                dead += self._give_up(run, REJECTED, settings)
            else:
                dead += self._release(run, now, settings)
            run.member = ""
            self._changed(run)
        self._merge_done(span.start, span.stop + 1)
        return dead

    def _release(self, run: Run, now: int, settings: ShareSettings) -> list[DeadLetter]:
        """A delivery failed (released, lock expired): deliverable again after the back-off,
        or given up at the delivery limit."""
        if run.count >= settings.delivery_limit:
            return self._give_up(run, DELIVERY_LIMIT, settings)
        run.state = RecordState.AVAILABLE
        run.available_at = now + settings.backoff(run.count)
        return []

    @staticmethod
    def _give_up(run: Run, reason: str, settings: ShareSettings) -> list[DeadLetter]:
        if not settings.dlq_topic:
            run.state = RecordState.ARCHIVED
            return []
        run.state = RecordState.ARCHIVING
        run.reason = reason
        return [DeadLetter(run.first, run.last, run.count, reason)]

    def archive(self, letter: DeadLetter) -> None:
        """The dead letters of [first, last] are durable on the dead-letter topic."""
        for i in self._span(letter.first, letter.last):
            run = self.runs[i]
            if run.state == RecordState.ARCHIVING:
                run.state, run.reason = RecordState.ARCHIVED, ""
                self._changed(run)
        self._advance()

    # ------------------------------------------------------------------ locks
    def expire_locks(self, now: int, settings: ShareSettings,
                     member: str | None = None) -> list[DeadLetter]:
        """Release the records whose lock has expired (or, with ``member``, every record that
        member holds: its share session closed)."""
        dead: list[DeadLetter] = []
        for run in self.runs:
            if run.state != RecordState.ACQUIRED:
                continue
            if (run.member == member) if member is not None else run.deadline <= now:
                dead += self._release(run, now, settings)
                run.member = ""
                self._changed(run)
        self._advance()
        return dead

    def counts(self) -> dict[RecordState, int]:
        """Records per state from the start offset to the end offset."""
        found = dict.fromkeys(RecordState, 0)
        for run in self.runs:
            found[run.state] += run.last - run.first + 1
        return found

    def expiring(self, now: int) -> int:
        """How many acquired records' locks have expired by ``now``."""
        return sum(r.last - r.first + 1 for r in self.runs
                   if r.state == RecordState.ACQUIRED and r.deadline <= now)

    def due(self, since: int, now: int) -> tuple[bool, bool, bool]:
        """(a lock has expired by ``now``, a back-off ended in (since, now], records wait to
        be dead-lettered): what a sweep of the share-partition's timers acts on."""
        expired = ended = archiving = False
        for run in self.runs:
            if run.state == RecordState.ACQUIRED and run.deadline <= now:
                expired = True
            elif run.state == RecordState.AVAILABLE and since < run.available_at <= now:
                ended = True
            elif run.state == RecordState.ARCHIVING:
                archiving = True
        return expired, ended, archiving

    # ------------------------------------------------------------------ replay
    def apply(self, start_offset: int, runs: list[Run]) -> None:
        """Apply a state update read back from the log (a replay)."""
        for run in runs:
            if run.last < start_offset:
                continue
            first = max(run.first, start_offset)
            if first >= self.end_offset:
                if first > self.end_offset:       # never acquired in between: available
                    self.runs.append(Run(self.end_offset, first - 1, RecordState.AVAILABLE))
                self.runs.append(run.copy(first, run.last))
                continue
            span = self._span(first, min(run.last, self.end_offset - 1))
            self.runs[span.start:span.stop] = [run.copy(first, min(run.last,
                                                                  self.end_offset - 1))]
            if run.last >= self.end_offset:
                self.runs.append(run.copy(self.end_offset, run.last))
        if start_offset > self.start_offset:
            if start_offset >= self.end_offset:
                self.runs.clear()
            else:
                del self.runs[:self._split(start_offset)]
            self.start_offset = start_offset

    def restarted(self) -> None:
        """After a replay: the members that held locks are gone, and so are their locks: the
        next sweep releases their records as after any lock expiry (delivery counts kept), so
        a record at the delivery limit is given up, not delivered once more."""
        for run in self.runs:
            if run.state == RecordState.ACQUIRED:
                run.member = ""
                run.deadline = 0

    def unwritten_dead_letters(self, settings: ShareSettings) -> list[DeadLetter]:
        """The ARCHIVING records (their dead letters were not written, or not known to be:
        a failed write, a restart), to write again. (A run read from a record of the first
        state format has no reason: guessed from its delivery count.)"""
        return [DeadLetter(r.first, r.last, r.count, r.reason or (
                    DELIVERY_LIMIT if r.count >= settings.delivery_limit else REJECTED))
                for r in self.runs if r.state == RecordState.ARCHIVING]
