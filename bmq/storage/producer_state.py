"""Idempotent-producer state of one partition: per producer id, its epoch and last 5 batches.

Rules (Kafka's): a batch whose epoch equals the producer's and whose sequence range equals one of
the cached batches is a duplicate; a lower epoch is fenced (INVALID_PRODUCER_EPOCH); a higher
epoch starts over at sequence 0; within an epoch each batch must start right after the previous
one's last sequence (wrapping from 2**31-1 to 0); an unknown producer may start anywhere.
Batches without a producer id (-1) are not checked.

Transactions: a transactional batch opens its producer's transaction at its base offset unless
one is open (``txn_first``); a control batch (marker, written by the transaction coordinator)
closes it, and an ABORT marker records (producer id, first offset, marker offset) in
``aborted``: the aborted-transaction index read_committed fetches answer with (the log cleaner
takes an entry out when it removes its marker: ``remove_aborted``). Both are part of
the checkpoint (and rebuilt by recovery's scan past it), so they survive restarts and kill -9.
The last stable offset is the smallest ``txn_first`` (see ``first_unstable_offset``).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    NO_SEQUENCE,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    control_type,
)

BATCHES_KEPT = 5
SEQUENCE_MASK = 0x7FFFFFFF

# What a batch is to a transaction (``record``'s ``kind``).
TXN_NONE = 0
TXN_DATA = 1
TXN_COMMIT = 2
TXN_ABORT = 3
# The checkpoint's key for the aborted-transaction index (beside the producer ids): the
# entries not sealed yet; the sealed ones are in chunk files the checkpoint names (CHUNKS_KEY,
# bmq/storage/log/aborted_index.py), so a checkpoint stays small however many aborts there are.
ABORTED_KEY = "txn_aborted"
CHUNKS_KEY = "txn_aborted_chunks"
# How many times the log cleaner removed entries (with their ABORT markers): a reader that
# merged an older document's entries rebuilds its index when this changes (published_txns).
REMOVALS_KEY = "txn_aborted_removals"
INDEX_KEYS = (ABORTED_KEY, CHUNKS_KEY, REMOVALS_KEY)


def txn_kind(header: BatchHeader, body: bytes | bytearray | memoryview) -> int:
    """What ``header``'s batch is to a transaction; ``body`` is the batch after its header
    (read only for control batches, to tell a COMMIT from an ABORT)."""
    if header.is_control:
        kind = control_type(body)
        return TXN_ABORT if kind == CONTROL_ABORT else TXN_COMMIT if kind == CONTROL_COMMIT \
            else TXN_NONE
    return TXN_DATA if header.attributes & TRANSACTIONAL_FLAG else TXN_NONE


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int   # the ABORT marker's offset


class AbortedBatches:
    """Which transactional batches belong to aborted transactions, for readers that skip them
    themselves at read_committed (Index Query, the Spark source): a producer has one
    transaction open at a time, so its batch at offset o is aborted if one of its aborted
    transactions spans o (first offset <= o <= the ABORT marker). ``load`` gives the aborted
    transactions, (producer id, first offset, marker offset) each; it is called at the first
    transactional batch, so a log without transactions never asks for them. (An entry whose
    ABORT marker the log cleaner has removed since, from an older state document, is
    harmless here: it spans only its own transaction's batches, and none of those is left.)"""

    def __init__(self, load: Callable[[], Iterable[tuple[int, int, int]]]) -> None:
        self._load: Callable[[], Iterable[tuple[int, int, int]]] | None = load
        self._spans: dict[int, list[tuple[int, int]]] = {}

    def __contains__(self, header: BatchHeader) -> bool:
        if not header.attributes & TRANSACTIONAL_FLAG:
            return False
        if self._load is not None:
            for producer_id, first, marker in self._load():
                self._spans.setdefault(producer_id, []).append((first, marker))
            self._load = None
        return any(first <= header.base_offset <= marker
                   for first, marker in self._spans.get(header.producer_id, ()))


def marker_order(aborted: AbortedTxn) -> tuple[int, int]:
    """The order of an aborted-transaction index: by ABORT marker offset (the order markers
    are appended and replayed in; the producer id only makes the order total)."""
    return aborted.last_offset, aborted.producer_id


def _marker_offset(aborted: AbortedTxn) -> int:
    return aborted.last_offset


def aborted_after(aborted: list[AbortedTxn], offset: int) -> int:
    """The index in ``aborted`` (by marker offset) of its first entry whose marker is at or
    past ``offset``."""
    return bisect_left(aborted, offset, key=_marker_offset)


def aborted_between(aborted: list[AbortedTxn], start: int, end: int) -> list[AbortedTxn]:
    """Aborted transactions with data in [start, end): a fetch of that range needs them.
    ``aborted`` is by marker offset: those whose marker is before ``start`` are skipped by
    bisection; a transaction's first offset is in no order, so the rest is filtered."""
    return [a for a in aborted[aborted_after(aborted, start):]
            if a.first_offset < end]


def aborted_from(aborted: list[AbortedTxn], log_start: int) -> list[AbortedTxn]:
    """``aborted`` (by marker offset) without the transactions wholly before the log start
    (retention removed them)."""
    if aborted and aborted[0].last_offset < log_start:
        return aborted[aborted_after(aborted, log_start):]
    return aborted


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int
    max_timestamp: int


class ProducerEntry:
    __slots__ = ("batches", "epoch", "last_ms", "txn_first")

    def __init__(self, epoch: int, last_ms: int = -1, txn_first: int = -1) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=BATCHES_KEPT)
        self.last_ms = last_ms
        # The first offset of this producer's open transaction, -1 if none.
        self.txn_first = txn_first

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None

    def copy(self) -> ProducerEntry:
        other = ProducerEntry(self.epoch, self.last_ms, self.txn_first)
        other.batches.extend(self.batches)
        return other


def _newer(here: ProducerEntry | None, there: ProducerEntry | None) -> ProducerEntry | None:
    """Of one producer's entries in two logs sharing its sequence numbers, the one its next
    batch continues: the later epoch, else the later append."""
    if there is None:
        return here
    if here is None or (there.epoch, there.last_ms) > (here.epoch, here.last_ms):
        return there
    return here


class ProducerStateTable:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.aborted: list[AbortedTxn] = []
        # The first ``sealed_count`` entries of ``aborted`` are in the chunk files ``sealed``
        # names (each with the marker offset of its last entry).
        self.sealed: list[tuple[str, int]] = []
        self.sealed_count = 0
        self.removals = 0   # REMOVALS_KEY
        # producer id -> first offset of its open transaction: the LSO is asked on every fetch,
        # so it is found among the open transactions, not among all producers.
        self.open_txns: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.producers)

    def check(self, headers: Sequence[BatchHeader],
              elsewhere: Mapping[int, ProducerEntry] | None = None) -> BatchMetadata | None:
        """Validate every batch of one append (raising KafkaError) before anything changes.

        Returns the cached metadata of the first batch found to be a duplicate, in which case
        nothing of the append must be written (as Kafka does). ``elsewhere``: the producers
        of a log sharing this one's sequence numbers (a partition and its timer log); a
        producer's entry there continues its sequence when it is newer than the one here."""
        after: dict[int, tuple[int, int]] = {}  # producer -> (epoch, last seq) within this append
        for header in headers:
            pid = header.producer_id
            if pid < 0 or header.is_control or header.base_sequence == NO_SEQUENCE:
                # Markers, and a coordinator's transactional batches (TxnOffsetCommit), carry
                # no sequence: the coordinator checked their epoch.
                continue
            epoch = header.producer_epoch
            first_seq = header.base_sequence
            if pid in after:
                current_epoch, current_last = after[pid]
            else:
                entry = self.producers.get(pid)
                other = elsewhere.get(pid) if elsewhere is not None else None
                if entry is None and other is None:
                    after[pid] = (epoch, header.last_sequence)
                    continue
                if entry is not None:
                    duplicate = entry.find_duplicate(epoch, first_seq, header.last_sequence)
                    if duplicate is not None:
                        return duplicate
                if other is not None and \
                        other.find_duplicate(epoch, first_seq, header.last_sequence):
                    # Written to the other log (its offsets are not this log's): Kafka's
                    # answer for a duplicate whose metadata it no longer has, which clients
                    # take for success.
                    raise KafkaError(ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
                                     f"producer {pid} sequence {first_seq} was written")
                entry = _newer(entry, other)
                assert entry is not None
                current_epoch, current_last = entry.epoch, entry.last_seq
            if epoch < current_epoch:
                raise KafkaError(
                    ErrorCode.INVALID_PRODUCER_EPOCH,
                    f"producer {pid} epoch {epoch} is older than the current {current_epoch}")
            if epoch > current_epoch or current_last == NO_SEQUENCE:
                if first_seq != 0:
                    raise KafkaError(
                        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                        f"producer {pid} epoch {epoch} must start at sequence 0, not {first_seq}")
            elif first_seq != (current_last + 1) & SEQUENCE_MASK:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {pid} sequence {first_seq} does not follow {current_last}")
            after[pid] = (epoch, header.last_sequence)
        return None

    def record(self, pid: int, epoch: int, first_seq: int, last_seq: int, base_offset: int,
               last_offset: int, max_timestamp: int, now_ms: int, kind: int = TXN_NONE) -> None:
        """Remember a batch that was appended (or found in the log during recovery)."""
        entry = self.producers.get(pid)
        if kind >= TXN_COMMIT:
            self._end_txn(entry, pid, epoch, last_offset, kind)
            return
        if entry is None or epoch > entry.epoch:
            entry = self.producers[pid] = ProducerEntry(epoch,
                                                        txn_first=self.open_txns.get(pid, -1))
        elif epoch < entry.epoch:
            return  # a fenced epoch's batch seen during recovery: nothing to remember
        elif entry.batches and base_offset <= entry.batches[-1].last_offset:
            return  # already known (recovery replaying past a checkpoint)
        if kind == TXN_DATA and entry.txn_first < 0:
            entry.txn_first = self.open_txns[pid] = base_offset
        if first_seq == NO_SEQUENCE:
            return
        entry.batches.append(BatchMetadata(first_seq, last_seq, base_offset, last_offset,
                                           max_timestamp))
        if now_ms > entry.last_ms:
            entry.last_ms = now_ms

    def _end_txn(self, entry: ProducerEntry | None, pid: int, epoch: int, offset: int,
                 kind: int) -> None:
        """A marker: the producer's open transaction (if any) ends. A marker of a higher epoch
        (the coordinator aborting a timed-out transaction fences the producer) moves the
        epoch on; a marker written again after a crash finds nothing open and changes nothing.
        """
        if entry is None:
            self.producers[pid] = ProducerEntry(epoch)
            return
        if epoch < entry.epoch:
            return
        if kind == TXN_ABORT and entry.txn_first >= 0:
            self.aborted.append(AbortedTxn(pid, entry.txn_first, offset))
        entry.txn_first = -1
        self.open_txns.pop(pid, None)
        if epoch > entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, None if none is open."""
        return min(self.open_txns.values()) if self.open_txns else None

    def open_transactions(self) -> dict[int, int]:
        """producer id -> first offset of its open transaction."""
        return dict(self.open_txns)

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        return aborted_between(self.aborted, start, end)

    def drop_aborted_before(self, log_start: int) -> list[str]:
        """Forget the aborted transactions wholly before the log start; returns the chunk
        files that hold only such entries (to delete once a checkpoint no longer names them)."""
        kept = aborted_from(self.aborted, log_start)
        self.sealed_count = max(0, self.sealed_count - (len(self.aborted) - len(kept)))
        self.aborted = kept
        dropped = [name for name, end in self.sealed if end < log_start]
        if dropped:
            self.sealed = [(name, end) for name, end in self.sealed if end >= log_start]
        return dropped

    def unsealed(self) -> list[AbortedTxn]:
        return self.aborted[self.sealed_count:]

    def seal(self, name: str, count: int) -> None:
        """The first ``count`` entries of ``aborted`` are now (also) in chunk file ``name``."""
        self.sealed.append((name, self.aborted[count - 1].last_offset))
        self.sealed_count = count

    def sealed_chunks(self) -> list[tuple[str, int, list[AbortedTxn]]]:
        """Each sealed chunk file (``sealed``) with its entries (those not dropped below the
        log start)."""
        chunks: list[tuple[str, int, list[AbortedTxn]]] = []
        start = 0
        for name, end in self.sealed:
            stop = bisect_right(self.aborted, end, start, self.sealed_count, key=_marker_offset)
            chunks.append((name, end, self.aborted[start:stop]))
            start = stop
        return chunks

    def remove_aborted(self, markers: Collection[int], sealed: list[tuple[str, int]]) -> None:
        """Forget the aborted transactions whose ABORT marker (offset in ``markers``) the log
        cleaner removed; ``sealed`` names the chunk files that hold the sealed ones left."""
        kept = [a for a in self.aborted[:self.sealed_count] if a.last_offset not in markers]
        left = kept + [a for a in self.aborted[self.sealed_count:]
                       if a.last_offset not in markers]
        if len(left) == len(self.aborted):
            return   # markers without an entry (written again after a coordinator's crash)
        self.aborted = left
        self.sealed_count = len(kept)
        self.sealed = sealed
        self.removals += 1

    def add_sealed(self, entries: list[AbortedTxn]) -> None:
        """Entries read back from the chunk files (at load): they precede the unsealed ones."""
        self.aborted = entries + self.aborted
        self.sealed_count = len(entries)

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for ``expiration_ms`` (by append time); return how many."""
        stale = [pid for pid, e in self.producers.items()
                 if now_ms - e.last_ms >= expiration_ms and e.txn_first < 0]
        for pid in stale:
            del self.producers[pid]
        return len(stale)

    def truncate(self, end_offset: int) -> None:
        """Forget batches at or past ``end_offset`` (after the log lost its tail)."""
        for pid in list(self.producers):
            entry = self.producers[pid]
            kept = [m for m in entry.batches if m.last_offset < end_offset]
            if entry.txn_first >= end_offset:
                entry.txn_first = -1
                self.open_txns.pop(pid, None)
            if not kept and entry.txn_first < 0:
                del self.producers[pid]
            elif len(kept) != len(entry.batches):
                entry.batches.clear()
                entry.batches.extend(kept)
        self.aborted = [a for a in self.aborted if a.last_offset < end_offset]
        self.sealed_count = min(self.sealed_count, len(self.aborted))

    def copy(self) -> ProducerStateTable:
        other = ProducerStateTable()
        other.producers = {pid: e.copy() for pid, e in self.producers.items()}
        other.aborted = list(self.aborted)
        other.sealed = list(self.sealed)
        other.sealed_count = self.sealed_count
        other.removals = self.removals
        other.open_txns = dict(self.open_txns)
        return other

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            str(pid): {
                "epoch": e.epoch,
                "last_ms": e.last_ms,
                "batches": [list(m) for m in e.batches],
                **({"txn_first": e.txn_first} if e.txn_first >= 0 else {}),
            }
            for pid, e in self.producers.items()
        }
        if len(self.aborted) > self.sealed_count:
            data[ABORTED_KEY] = [list(a) for a in self.unsealed()]
        if self.sealed:
            data[CHUNKS_KEY] = [list(chunk) for chunk in self.sealed]
        if self.removals:
            data[REMOVALS_KEY] = self.removals
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProducerStateTable:
        table = cls()
        for pid, item in data.items():
            if pid == ABORTED_KEY:
                table.aborted = [AbortedTxn(*(int(x) for x in a)) for a in item]
                continue
            if pid == CHUNKS_KEY:   # read back by the log (aborted_index.load_sealed)
                table.sealed = [(str(name), int(end)) for name, end in item]
                continue
            if pid == REMOVALS_KEY:
                table.removals = int(item)
                continue
            entry = ProducerEntry(int(item["epoch"]), int(item.get("last_ms", -1)),
                                  int(item.get("txn_first", -1)))
            for m in item["batches"]:
                entry.batches.append(BatchMetadata(*(int(x) for x in m)))
            table.producers[int(pid)] = entry
            if entry.txn_first >= 0:
                table.open_txns[int(pid)] = entry.txn_first
        return table
