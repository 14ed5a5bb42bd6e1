"""Idempotent-producer state of one partition: per producer id, its epoch and last 5 batches.

Rules (Kafka's): a batch whose epoch equals the producer's and whose sequence range equals one of
the cached batches is a duplicate; a lower epoch is fenced (INVALID_PRODUCER_EPOCH); a higher
epoch starts over at sequence 0; within an epoch each batch must start right after the previous
one's last sequence (wrapping from 2**31-1 to 0); an unknown producer may start anywhere.
Batches without a producer id (-1) are not checked.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, NamedTuple

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.records import NO_SEQUENCE, BatchHeader

BATCHES_KEPT = 5
SEQUENCE_MASK = 0x7FFFFFFF


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int
    max_timestamp: int


class ProducerEntry:
    __slots__ = ("batches", "epoch", "last_ms")

    def __init__(self, epoch: int, last_ms: int = -1) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=BATCHES_KEPT)
        self.last_ms = last_ms

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
        other = ProducerEntry(self.epoch, self.last_ms)
        other.batches.extend(self.batches)
        return other


class ProducerStateTable:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self.producers)

    def check(self, headers: Sequence[BatchHeader]) -> BatchMetadata | None:
        """Validate every batch of one append (raising KafkaError) before anything changes.

        Returns the cached metadata of the first batch found to be a duplicate, in which case
        nothing of the append must be written (as Kafka does)."""
        after: dict[int, tuple[int, int]] = {}  # producer -> (epoch, last seq) within this append
        for header in headers:
            pid = header.producer_id
            if pid < 0:
                continue
            epoch = header.producer_epoch
            first_seq = header.base_sequence
            if pid in after:
                current_epoch, current_last = after[pid]
            else:
                entry = self.producers.get(pid)
                if entry is None:
                    after[pid] = (epoch, header.last_sequence)
                    continue
                duplicate = entry.find_duplicate(epoch, first_seq, header.last_sequence)
                if duplicate is not None:
                    return duplicate
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
               last_offset: int, max_timestamp: int, now_ms: int) -> None:
        """Remember a batch that was appended (or found in the log during recovery)."""
        entry = self.producers.get(pid)
        if entry is None or epoch > entry.epoch:
            entry = self.producers[pid] = ProducerEntry(epoch)
        elif epoch < entry.epoch:
            return  # a fenced epoch's batch seen during recovery: nothing to remember
        elif entry.batches and base_offset <= entry.batches[-1].last_offset:
            return  # already known (recovery replaying past a checkpoint)
        entry.batches.append(BatchMetadata(first_seq, last_seq, base_offset, last_offset,
                                           max_timestamp))
        if now_ms > entry.last_ms:
            entry.last_ms = now_ms

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for ``expiration_ms`` (by append time); return how many."""
        stale = [pid for pid, e in self.producers.items() if now_ms - e.last_ms >= expiration_ms]
        for pid in stale:
            del self.producers[pid]
        return len(stale)

    def truncate(self, end_offset: int) -> None:
        """Forget batches at or past ``end_offset`` (after the log lost its tail)."""
        for pid in list(self.producers):
            entry = self.producers[pid]
            kept = [m for m in entry.batches if m.last_offset < end_offset]
            if not kept:
                del self.producers[pid]
            elif len(kept) != len(entry.batches):
                entry.batches.clear()
                entry.batches.extend(kept)

    def copy(self) -> ProducerStateTable:
        other = ProducerStateTable()
        other.producers = {pid: e.copy() for pid, e in self.producers.items()}
        return other

    def to_json(self) -> dict[str, Any]:
        return {
            str(pid): {
                "epoch": e.epoch,
                "last_ms": e.last_ms,
                "batches": [list(m) for m in e.batches],
            }
            for pid, e in self.producers.items()
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProducerStateTable:
        table = cls()
        for pid, item in data.items():
            entry = ProducerEntry(int(item["epoch"]), int(item.get("last_ms", -1)))
            for m in item["batches"]:
                entry.batches.append(BatchMetadata(*(int(x) for x in m)))
            table.producers[int(pid)] = entry
        return table
