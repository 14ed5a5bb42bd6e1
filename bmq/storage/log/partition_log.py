"""The log of one partition: Kafka's segmented log on a ``Storage``, in one of two layouts
(``layout``), put together from its parts: ``recovery`` (opening), ``indexes``, ``reading``,
``retention``; each layout owns the write path and the state documents of its kind of storage.

Threads. ``append`` and ``read`` run on the broker's event loop; ``flush`` (and the other
methods that do I/O: ``checkpoint``, ``apply_retention``, ``delete_records``, ``close``,
``delete``) run on worker threads. Two locks:

* ``_lock`` guards the in-memory state shared with the loop (queue, offsets, segment list,
  segment sizes and indexes). It is held only for in-memory work, never across a syscall.
* ``_io_lock`` serialises the I/O methods among themselves (one flush at a time, checkpoints
  consistent with the flushed state, segment deletion apart from rolls).

Write path. ``append`` rewrites base offsets in the caller's buffer and queues the memoryview;
``flush`` takes the whole queue and hands it to the layout, which makes it durable, checks the
fence and publishes the new high watermark under ``_lock``. Reads: see ``reading``.

Durability. Everything below the high watermark has been synced. The state document (the
append layout's checkpoint, the object layout's manifest) records the log start offset, the
recovery point (= high watermark at that time), the segments with their sizes and index entry
counts, and the producer state as of the recovery point. Recovery trusts the checkpointed
prefix and scans everything after it, checking framing, offsets and CRC-32C, truncating at the
first bad batch.

Each layout describes its files, its state documents, the takeover by a new owner and the
fence: ``append_layout`` (checkpoints), ``object_layout`` (manifests).

Readers (``PartitionLog.open_reader``): a ``LogReader`` (``view``) lists the checkpoint files,
reads the newest and serves reads from the segments it lists, up to their recorded sizes - durable
data only, never anything of a fenced owner. Owners with epoch > 0 republish their checkpoint
after a flush at most every ``LogConfig.publish_interval_ms`` (and at every ``checkpoint()``), so
a reader's ``refresh()`` is one listing and one small read. Object stores: see
``bmq.storage.log.object_layout`` (``PartitionLog.open`` picks it for storage that cannot append).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from typing import Any

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.records import (
    HEADER_SIZE,
    BatchHeader,
    set_base_offset,
    set_log_append_time,
)
from bmq.storage.base import Storage
from bmq.storage.log.append_layout import AppendLayout
from bmq.storage.log.cleaning import Cleaning
from bmq.storage.log.config import AppendResult, BatchMeta, LogConfig, check_name
from bmq.storage.log.layout import Layout
from bmq.storage.log.object_layout import ObjectLayout
from bmq.storage.log.published_txns import TAIL_KEY, tail_txn_state
from bmq.storage.log.reading import Reading
from bmq.storage.log.recovery import Recovery
from bmq.storage.log.view import LogReader, ReadOnlyLog
from bmq.storage.producer_state import TXN_NONE, AbortedTxn, ProducerEntry, txn_kind

logger = logging.getLogger(__name__)


def _layout_for(storage: Storage) -> Layout:
    return AppendLayout() if storage.supports_append else ObjectLayout()


class PartitionLog(Recovery, Reading, Cleaning):
    """The log of one partition. Create with ``PartitionLog.open`` (the one writer) or read with
    ``PartitionLog.open_reader`` (any number of read-only views, in other processes too)."""

    @classmethod
    def open(cls, storage: Storage, topic: str, partition: int, config: LogConfig, *,
             epoch: int = 0) -> PartitionLog:
        """Open (and recover) the partition for writing as the owner of leader ``epoch``.

        Everything a lower-epoch owner made durable before this call is recovered; nothing it
        writes afterwards ever becomes visible. Raises ``FencedEpochError`` (a
        ``KafkaError(FENCED_LEADER_EPOCH)``) if an owner with a higher epoch has opened the
        partition. On storages that cannot append
        (object stores) the log uses the object layout."""
        check_name(topic, partition)
        if epoch < 0:
            raise ValueError(f"invalid leader epoch {epoch}")
        log = cls(storage, topic, partition, config, epoch, _layout_for(storage))
        log.layout.load(log)
        return log

    @classmethod
    def open_reader(cls, storage: Storage, topic: str, partition: int,
                    config: LogConfig | None = None) -> LogReader:
        """A read-only view of the durable data as its writer last published it."""
        check_name(topic, partition)
        return LogReader(ReadOnlyLog(storage, topic, partition, config or LogConfig(), 0,
                                     _layout_for(storage)))

    def append(self, records: memoryview, headers: list[BatchHeader], now_ms: int,
               sequences_from: PartitionLog | None = None) -> AppendResult:
        """Append whole batches (their base offsets are set in ``records``). ``sequences_from``:
        a log sharing this one's producer sequence numbers (a partition and its timer log,
        which holds idempotent producers' batches while scheduling is on): a producer whose
        newest batch went there continues its sequence here."""
        if not headers:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "no record batches")
        log_append_time = self.config.message_timestamp_type == "LogAppendTime"
        elsewhere = None if sequences_from is None else sequences_from.producer_entries(
            {h.producer_id for h in headers if h.producer_id >= 0})
        with self._lock:
            self._check_writable()
            duplicate = self._producers.check(headers, elsewhere)
            if duplicate is not None:
                return AppendResult(
                    duplicate.base_offset, duplicate.last_offset,
                    duplicate.max_timestamp if log_append_time else -1,
                    self.log_start_offset, duplicate=True)
            first = offset = self.log_end_offset
            pos = 0
            metas: list[BatchMeta] = []
            producers = self._producers
            for h in headers:
                set_base_offset(records, pos, offset)
                if log_append_time:
                    set_log_append_time(records, pos, h, now_ms)
                    max_ts = now_ms
                else:
                    max_ts = h.max_timestamp
                last = offset + h.last_offset_delta
                pid = h.producer_id
                if pid >= 0:
                    last_seq = h.last_sequence
                    kind = txn_kind(h, records[pos + HEADER_SIZE:pos + h.size]
                                    if h.is_control else b"")
                    producers.record(pid, h.producer_epoch, h.base_sequence, last_seq, offset,
                                     last, max_ts, now_ms, kind)
                    metas.append((h.size, offset, last, max_ts, pid, h.producer_epoch,
                                  h.base_sequence, last_seq, kind))
                else:
                    metas.append((h.size, offset, last, max_ts, -1, 0, 0, 0, TXN_NONE))
                offset = last + 1
                pos += h.size
            view = records if records.nbytes == pos else records[:pos]
            self._queue.append((view, now_ms, metas))
            self._pending += pos
            self.log_end_offset = offset
            log_start = self.log_start_offset
        return AppendResult(first, offset - 1, now_ms if log_append_time else -1, log_start)

    def pending_bytes(self) -> int:
        return self._pending

    def flush(self) -> int:
        with self._io_lock:
            with self._lock:
                self._check_writable()
                queue = self._queue
                if not queue:
                    return self.high_watermark
                self._queue = []
                self._pending = 0
            try:
                self.layout.write(self, queue)
            except KafkaError as exc:    # fenced: a higher epoch owns the partition now
                self._failed = exc
                logger.error("%s: %s", self, exc)
                raise
            except Exception as exc:
                self._failed = exc
                logger.error("%s: write failed, log unavailable until reopened: %s", self, exc)
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self}: {exc}") from exc
            if self.leader_epoch > 0 and self.config.publish_interval_ms >= 0 and (
                    (time.monotonic() - self._published_ms) * 1000 >=
                    self.config.publish_interval_ms or self._tail_outran_checkpoint()):
                try:
                    self._checkpoint_locked()
                except OSError as exc:   # the data is durable; the next checkpoint retries
                    logger.warning("%s: could not publish the checkpoint: %s", self, exc)
            return self.high_watermark

    def _tail_outran_checkpoint(self) -> bool:
        """Whether the segments a tail lists no longer reach back to the last published state
        document: a reader at that document could not follow the tail (``LogReader.advance``)
        and would see nothing new until the next publication, which an idle writer never makes.
        Publishing then costs one state write per roll or two (segments roll rarely)."""
        tail = self.layout.tail_segments(self)
        return bool(tail) and all(seg.stem != self._published_active for seg in tail)

    def checkpoint(self) -> None:
        if self._closed:
            return
        self.layout.maintain(self)
        with self._io_lock:
            if not self._closed:
                self._checkpoint_locked()

    def compact_objects(self) -> int:
        """Merge small flush objects into larger ones (object layout); the append layout has
        nothing to merge. Returns how many objects were merged away."""
        return self.layout.compact(self)

    def close(self) -> None:
        if self._closed:
            return
        error: BaseException | None = None
        if self._failed is None:
            try:
                self.flush()
            except KafkaError as exc:
                error = exc
        with self._io_lock:
            if self._closed:
                return
            try:
                self._checkpoint_locked()
            finally:
                self._shut()
        if error is not None:
            raise error

    def delete(self) -> None:
        with self._io_lock:
            self._fence_check()   # a fenced owner must not remove the new owner's data
            self._shut()
        self.storage.delete_tree(self.dir)

    def abandon(self) -> None:
        """Give the log up without flushing: queued batches are dropped, nothing is written.

        For an owner that lost its right to write (its ZooKeeper session, or a higher epoch on
        storage): whatever it had not made durable must not become visible.
        """
        self._shut()

    def tail(self) -> bytes:
        """What a ``LogReader`` elsewhere needs to see everything durable now without reading
        storage (``LogReader.advance``): the newest segments as a checkpoint would list them."""
        with self._lock:
            doc = {"epoch": self.leader_epoch, "high_watermark": self.high_watermark,
                   "log_start_offset": self.log_start_offset, "rewrites": self.rewrites,
                   "segments": [seg.meta() for seg in self.layout.tail_segments(self)]}
            txn = tail_txn_state(self._durable_producers, self.high_watermark,
                                 self._published_hw)
        if txn is not None:
            doc[TAIL_KEY] = txn
        return json.dumps(doc, separators=(",", ":")).encode()

    def last_stable_offset(self) -> int:
        """Kafka's LSO: the first offset of the oldest open transaction among the durable data,
        else the high watermark (what read_committed consumers may read up to)."""
        with self._lock:
            first = self._durable_producers.first_unstable_offset()
            return self.high_watermark if first is None else min(first, self.high_watermark)

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [start, end) (Fetch's aborted_transactions)."""
        with self._lock:
            return self._durable_producers.aborted_between(start, end)

    def in_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether the producer has a transaction open here at ``producer_epoch`` (appended,
        perhaps not durable yet): its next batches need no verification with the
        coordinator."""
        with self._lock:
            entry = self._producers.producers.get(producer_id)
            return entry is not None and entry.epoch == producer_epoch and entry.txn_first >= 0

    def producer_entries(self, producer_ids: Iterable[int]) -> dict[int, ProducerEntry]:
        """Copies of the known producers among ``producer_ids`` (appended batches included)."""
        with self._lock:
            producers = self._producers.producers
            return {pid: producers[pid].copy() for pid in producer_ids if pid in producers}

    def last_sequence(self, producer_id: int) -> tuple[int, int] | None:
        """(epoch, last sequence) of the producer's newest durable batch, None if unknown."""
        with self._lock:
            entry = self._durable_producers.producers.get(producer_id)
            return None if entry is None else (entry.epoch, entry.last_seq)

    def open_transactions(self) -> dict[int, int]:
        """producer id -> first offset of its open transaction (durable data)."""
        with self._lock:
            return self._durable_producers.open_transactions()

    def producer_state(self) -> dict[str, Any]:
        """Producer state as of the high watermark (what the checkpoint stores)."""
        with self._lock:
            return self._durable_producers.to_json()
