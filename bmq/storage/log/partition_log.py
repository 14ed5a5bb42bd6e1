"""The log of one partition: Kafka's segmented log on a ``Storage``, in one of two layouts
(``layout``), put together from its parts rather than inherited from them: the log over its
segments (``segments``), which reads (``reading``) and indexes (``offset_index``) work on; the
layout, which owns the write path and the state documents of its kind of storage and whose
loader (``recovery``) returns what it recovered for the log to install; the owner's state
documents (``publication``); ``retention``; and the log cleaner's side (``cleaning``). The
parts see the log through ``host.LogHost``.

Threads. ``append`` and ``read`` run on the broker's event loop; ``flush`` (and the other
methods that do I/O: ``checkpoint``, ``apply_retention``, ``delete_records``, ``close``,
``delete``) run on worker threads. Two locks:

* ``segments.lock`` guards the in-memory state shared with the loop (queue, offsets, segment
  list, segment sizes and indexes). It is held only for in-memory work, never across a syscall.
* ``io_lock`` serialises the I/O methods among themselves (one flush at a time, checkpoints
  consistent with the flushed state, segment deletion apart from rolls).

Write path. ``append`` rewrites base offsets in the caller's buffer and queues the memoryview;
``flush`` takes the whole queue and hands it to the layout, which makes it durable, checks the
fence and publishes the new high watermark under ``segments.lock``. Reads: see ``reading``.

Durability. Everything below the high watermark has been synced. The state document (the
append layout's checkpoint, the object layout's manifest) records the log start offset, the
recovery point (= high watermark at that time), the segments with their sizes and index entry
counts, and the producer state as of the recovery point. Recovery trusts the checkpointed
prefix and scans everything after it, checking framing, offsets and CRC-32C, truncating at the
first bad batch.

Each layout describes its files, its state documents, the takeover by a new owner and the
fence: ``append_layout`` (checkpoints), ``object_layout`` (manifests).

Readers (``PartitionLog.open_reader``): a ``LogReader`` (``reader``) lists the checkpoint files,
reads the newest and serves reads from the segments it lists, up to their recorded sizes - durable
data only, never anything of a fenced owner. Owners with epoch > 0 republish their checkpoint
after a flush at most every ``LogConfig.publish_interval_ms`` (and at every ``checkpoint()``), so
a reader's ``refresh()`` is one listing and one small read. Object stores: see
``bmq.storage.log.object_layout`` (``PartitionLog.open`` picks it for storage that cannot append).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Collection, Iterable
from typing import Any

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.records import (
    HEADER_SIZE,
    BatchHeader,
    set_base_offset,
    set_log_append_time,
)
from bmq.storage.base import Storage
from bmq.storage.log import reading, retention
from bmq.storage.log.append_layout import AppendLayout
from bmq.storage.log.cleaning import Cleanable, CleanedSegment, Cleaning
from bmq.storage.log.config import (
    DEFAULT_PRODUCER_EXPIRATION_MS,
    AppendResult,
    BatchMeta,
    LogConfig,
    Queued,
    check_copied,
    check_name,
)
from bmq.storage.log.fencing import FencedEpochError
from bmq.storage.log.layout import Layout
from bmq.storage.log.object_layout import ObjectLayout
from bmq.storage.log.publication import Publication, as_written
from bmq.storage.log.published_txns import TAIL_KEY, tail_txn_state
from bmq.storage.log.reader import LogReader
from bmq.storage.log.recovery import Recovered
from bmq.storage.log.segments import LogSegments
from bmq.storage.producer_state import (
    TXN_NONE,
    AbortedTxn,
    ProducerEntry,
    ProducerStateTable,
    txn_kind,
)
from bmq.storage.segment import Segment

logger = logging.getLogger(__name__)


def _layout_for(storage: Storage) -> Layout:
    return AppendLayout() if storage.supports_append else ObjectLayout()


class PartitionLog:
    """The log of one partition. Create with ``PartitionLog.open`` (the one writer) or read with
    ``PartitionLog.open_reader`` (any number of read-only readers, in other processes too)."""

    def __init__(self, storage: Storage, topic: str, partition: int, config: LogConfig,
                 epoch: int, layout: Layout) -> None:
        self.storage = storage
        self.topic = topic
        self.partition = partition
        self.config = config
        self.leader_epoch = epoch
        self.layout = layout
        self.dir = f"{topic}/{partition}"
        self.state_files = layout.state_files(storage, self.dir)
        self.segments = LogSegments(storage, self.dir, config, readonly=False)
        self.producer_expiration_ms = DEFAULT_PRODUCER_EXPIRATION_MS
        self.io_lock = threading.Lock()
        self._queue: list[Queued] = []
        self._pending = 0
        self.live_producers = ProducerStateTable()      # includes queued batches
        self.durable_producers = ProducerStateTable()   # as of the high watermark
        self._failed: BaseException | None = None
        self._closed = False
        self._publication = Publication(self, layout)
        self._cleaning = Cleaning(self, layout)
        # Called (from the cleaner's thread) once the cleaner's segments are published: the
        # owner tells readers elsewhere, which follow its notices of new data.
        self.on_rewrite: Callable[[], None] | None = None

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
        recovered = log.layout.load(log)
        log._take_over(recovered)
        log.layout.collect_garbage(log, recovered.listed)
        return log

    @classmethod
    def open_reader(cls, storage: Storage, topic: str, partition: int,
                    config: LogConfig | None = None) -> LogReader:
        """A read-only reader of the durable data as its writer last published it."""
        check_name(topic, partition)
        segments = LogSegments(storage, f"{topic}/{partition}", config or LogConfig(),
                               readonly=True)
        return LogReader(topic, partition, segments, _layout_for(storage))

    def _take_over(self, recovered: Recovered) -> None:
        """Install what the layout's loader recovered, publish this owner's state document,
        then check that no higher epoch claimed the partition meanwhile."""
        segments = self.segments
        segments.install(recovered.segments)
        segments.log_start_offset = recovered.log_start_offset
        segments.log_end_offset = segments.high_watermark = recovered.segments[-1].next_offset
        self.durable_producers = recovered.producers
        self.live_producers = recovered.producers.copy()
        with self.io_lock:
            self._publication.written = as_written(recovered.stored_state)
            self.publish_state()
        self.fence_check()

    def append(self, records: memoryview, headers: list[BatchHeader], now_ms: int,
               sequences_from: PartitionLog | None = None, copied: bool = False
               ) -> AppendResult:
        """Append whole batches (their base offsets are set in ``records``). ``sequences_from``:
        a log sharing this one's producer sequence numbers (a partition and its timer log,
        which holds idempotent producers' batches while scheduling is on): a producer whose
        newest batch went there continues its sequence here.

        ``copied``: batches of another log (a mirror's source), appended as a Kafka follower
        appends its leader's: at their own offsets, each at or past the end of the one before
        (a compacted source's gaps are kept), their producer sequences not checked again
        (the source did; its cleaner may have removed some). Raises KafkaError, writing
        nothing, for a batch before the log end offset (OFFSET_OUT_OF_RANGE) or so far past
        the high watermark that a segment could not index it (INVALID_RECORD)."""
        if not headers:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "no record batches")
        log_append_time = self.config.message_timestamp_type == "LogAppendTime"
        elsewhere = None if sequences_from is None else sequences_from.producer_entries(
            {h.producer_id for h in headers if h.producer_id >= 0})
        segments = self.segments
        with segments.lock:
            self._check_writable()
            producers = self.live_producers
            if copied:
                check_copied(headers, segments.log_end_offset, segments.high_watermark)
            else:
                duplicate = producers.check(headers, elsewhere)
                if duplicate is not None:
                    return AppendResult(
                        duplicate.base_offset, duplicate.last_offset,
                        duplicate.max_timestamp if log_append_time else -1,
                        segments.log_start_offset, duplicate=True)
            first = offset = headers[0].base_offset if copied else segments.log_end_offset
            pos = 0
            metas: list[BatchMeta] = []
            for h in headers:
                if copied:
                    offset = h.base_offset
                else:
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
            segments.log_end_offset = offset
            log_start = segments.log_start_offset
        return AppendResult(first, offset - 1, now_ms if log_append_time else -1, log_start)

    def pending_bytes(self) -> int:
        return self._pending

    def flush(self, publish: bool = True) -> int:
        """Make the queued batches durable; returns the high watermark. With ``publish``, the
        state document too once a publish interval has passed (else ``publish_if_due``)."""
        with self.io_lock:
            with self.segments.lock:
                self._check_writable()
                queue = self._queue
                if not queue:
                    return self.segments.high_watermark
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
            if publish and self._publication.due():
                self._publication.publish_after_flush()
            return self.segments.high_watermark

    def publish_due(self) -> bool:
        """Whether a state document is due (``Publication.due``)."""
        return self._publication.due()

    def publish_if_due(self) -> None:
        """The state document, if due, written outside ``io_lock``
        (``Publication.publish_if_due``)."""
        self._publication.publish_if_due()

    def checkpoint(self) -> None:
        if self._closed:
            return
        self.layout.maintain(self)
        with self.io_lock:
            if not self._closed:
                self.publish_state()

    def merge_objects(self) -> int:
        """Merge small flush objects into larger ones (object layout); the append layout has
        nothing to merge. Returns how many objects were merged away."""
        return self.layout.merge(self)

    def close(self) -> None:
        if self._closed:
            return
        error: BaseException | None = None
        if self._failed is None:
            try:
                self.flush()
            except KafkaError as exc:
                error = exc
        with self.io_lock:
            if self._closed:
                return
            try:
                self.publish_state()
            finally:
                self._shut()
        if error is not None:
            raise error

    def delete(self) -> None:
        with self.io_lock:
            self.fence_check()   # a fenced owner must not remove the new owner's data
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
        segments = self.segments
        with segments.lock:
            doc = {"epoch": self.leader_epoch, "high_watermark": segments.high_watermark,
                   "log_start_offset": segments.log_start_offset,
                   "rewrites": segments.rewrites,
                   "segments": [seg.meta() for seg in self.layout.tail_segments(segments)]}
            txn = tail_txn_state(self.durable_producers, segments.high_watermark,
                                 self._publication.published_hw)
        if txn is not None:
            doc[TAIL_KEY] = txn
        return json.dumps(doc, separators=(",", ":")).encode()

    def last_stable_offset(self) -> int:
        """Kafka's LSO: the first offset of the oldest open transaction among the durable data,
        else the high watermark (what read_committed consumers may read up to)."""
        with self.segments.lock:
            first = self.durable_producers.first_unstable_offset()
            hw = self.segments.high_watermark
            return hw if first is None else min(first, hw)

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [start, end) (Fetch's aborted_transactions)."""
        with self.segments.lock:
            return self.durable_producers.aborted_between(start, end)

    def in_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether the producer has a transaction open here at ``producer_epoch`` (appended,
        perhaps not durable yet): its next batches need no verification with the
        coordinator."""
        with self.segments.lock:
            entry = self.live_producers.producers.get(producer_id)
            return entry is not None and entry.epoch == producer_epoch and entry.txn_first >= 0

    def producer_entries(self, producer_ids: Iterable[int]) -> dict[int, ProducerEntry]:
        """Copies of the known producers among ``producer_ids`` (appended batches included)."""
        with self.segments.lock:
            producers = self.live_producers.producers
            return {pid: producers[pid].copy() for pid in producer_ids if pid in producers}

    def last_sequence(self, producer_id: int) -> tuple[int, int] | None:
        """(epoch, last sequence) of the producer's newest durable batch, None if unknown."""
        with self.segments.lock:
            entry = self.durable_producers.producers.get(producer_id)
            return None if entry is None else (entry.epoch, entry.last_seq)

    def open_transactions(self) -> dict[int, int]:
        """producer id -> first offset of its open transaction (durable data)."""
        with self.segments.lock:
            return self.durable_producers.open_transactions()

    def producer_state(self) -> dict[str, Any]:
        """Producer state as of the high watermark (what the checkpoint stores)."""
        with self.segments.lock:
            return self.durable_producers.to_json()

    # Reads (``reading``, through the layout for the object layout's reads across objects).

    def read(self, offset: int, max_bytes: int) -> bytes | memoryview:
        """Whole batches from the one holding ``offset`` (the first even if larger than
        ``max_bytes``), durable data only."""
        return self.layout.read(self.segments, offset, max_bytes)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        return reading.offset_for_timestamp(self.segments, timestamp)

    def max_timestamp(self) -> tuple[int, int] | None:
        return reading.max_timestamp(self.segments)

    def end_offset_for_epoch(self, epoch: int, current_epoch: int = -1) -> tuple[int, int]:
        return reading.end_offset_for_epoch(self.segments, epoch, current_epoch)

    def delete_records(self, before_offset: int) -> int:
        return retention.delete_records(self, before_offset)

    def start_at(self, offset: int) -> None:
        """Empty the log and start it at ``offset``, past its end (Kafka's
        ``truncateFullyAndStartAt``): a mirror's source deleted everything this log holds."""
        retention.start_at(self, offset, self.layout.make_file)

    def apply_retention(self, now_ms: int) -> int:
        return retention.apply_retention(self, now_ms, self.layout.kept_at_end)

    # The log cleaner's entry points (``cleaning``).

    def cleanable(self) -> Cleanable:
        return self._cleaning.cleanable()

    def each_chunk(self, seg: Segment, consume: Callable[[bytes], int]) -> None:
        self._cleaning.each_chunk(seg, consume)

    def start_cleaned(self, base: int, next_offset: int) -> CleanedSegment:
        return self._cleaning.start_cleaned(base, next_offset)

    def replace_cleaned(self, replacements: list[tuple[list[Segment], Segment]],
                        aborts: Collection[int] = ()) -> bool:
        """See ``Cleaning.replace_cleaned``; readers elsewhere hear of a swap (``on_rewrite``)."""
        if not self._cleaning.replace_cleaned(replacements, aborts):
            return False
        if self.on_rewrite is not None:
            self.on_rewrite()
        return True

    def discard_cleaned(self, cleaned: list[Segment]) -> None:
        self._cleaning.discard_cleaned(cleaned)

    def delete_replaced(self, delay_ms: int) -> int:
        return self._cleaning.delete_replaced(delay_ms)

    # What the parts see (``host.LogHost``).

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def failed(self) -> BaseException | None:
        return self._failed

    @property
    def log_start_offset(self) -> int:
        return self.segments.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.segments.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.segments.high_watermark

    @property
    def size_bytes(self) -> int:
        return self.segments.size_bytes

    @property
    def rewrites(self) -> int:
        """Swaps of the cleaner's segments so far (``LogSegments.rewrites``)."""
        return self.segments.rewrites

    def fence_check(self) -> None:
        """Raise FencedEpochError if an owner with a higher epoch has claimed the partition
        (one listing; only in cluster mode, i.e. epoch > 0)."""
        if self.leader_epoch <= 0:
            return
        epochs = self.state_files.epochs()
        if epochs and epochs[-1] > self.leader_epoch:
            error = FencedEpochError(f"{self}: epoch {self.leader_epoch} fenced by {epochs[-1]}",
                                     epochs[-1])
            self._failed = error
            raise error

    def _check_writable(self) -> None:
        if self._closed:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self} is closed")
        if self._failed is not None:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self} failed: {self._failed}")

    def publish_state(self) -> None:
        """Under ``io_lock``: publish this owner's state document."""
        self._publication.publish()

    def seal_aborted(self) -> None:
        """Under ``io_lock``, before a state document is built (``Publication.seal_aborted``)."""
        self._publication.seal_aborted()

    def write_state(self, state: dict[str, Any]) -> None:
        """Under ``io_lock``: write a state document built now."""
        self._publication.write(state)

    def _shut(self) -> None:
        with self.segments.lock:
            self._closed = True
            self._queue = []
            self._pending = 0
            idle = self.segments.retire_all()
        for seg in idle:
            seg.close_handles()

    def __repr__(self) -> str:
        return f"PartitionLog({self.storage.url}/{self.dir})"

    __str__ = __repr__
