"""The durable extent of a partition's log on storage, as segments and byte ranges, for readers
that plan their own reads (Spark splits segments by byte range and reads the files directly).

The owner opens its logs (``PartitionLog.open`` recovers them: truncating torn tails, deleting
temporary files, writing a checkpoint), which an outside reader must never do. This module only
reads: ``checkpoint.json``, the directory listing, the ``.log`` files and the ``.index`` files.

What a ``DurableLog`` covers is what the owner's recovery would accept:

* segments sealed before the last checkpoint are trusted with their checkpointed sizes;
* the last checkpointed segment is trusted up to its checkpointed size, and everything after
  that (its tail and any newer segment) is scanned batch by batch with recovery's own scan
  (framing, consecutive offsets, CRC-32C), stopping at the first batch that fails it (a batch
  still being written, or a torn tail the owner will cut off).

Its high watermark is therefore the end of the valid data found, never beyond what a restarted
broker would serve. Files of segments below the checkpoint's first segment are being deleted by
retention and are ignored; segments that disappear meanwhile are skipped at the front of the log
(retention) and end the extent elsewhere.

Only the plain layout (``bmq serve``'s) is walked file by file here; every other layout
(cluster-mode epochs, the object layout) is read through ``LogReader`` (``reader.py``), which
follows what its writer published, so ``segments`` is empty and reads go through the reader.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from bmq.storage.base import Storage
from bmq.storage.log.aborted_index import load_sealed
from bmq.storage.log.partition_log import PartitionLog
from bmq.storage.log.scan import record_producer_batch, valid_batches, visible_size
from bmq.storage.log.state import CheckpointFiles
from bmq.storage.producer_state import AbortedTxn, ProducerStateTable
from bmq.storage.segment import Segment, decode_offset_index, index_name, log_name, parse_base


@dataclass(slots=True, frozen=True)
class DurableSegment:
    """A segment's valid bytes ``[0, size)`` hold offsets ``[base, next_offset)``."""

    base: int
    size: int
    next_offset: int


@dataclass(slots=True)
class DurableLog:
    """A partition's durable log: offsets ``[log_start_offset, high_watermark)`` in ``segments``."""

    topic: str
    partition: int
    log_start_offset: int
    high_watermark: int
    segments: list[DurableSegment] = field(default_factory=list)
    # Layouts other than the plain one (cluster-mode epochs, the object-store layout) are read
    # through ``PartitionLog.open_reader``: then ``segments`` is empty and ``size_bytes`` is
    # the reader's estimate.
    via_reader: bool = False
    reader_bytes: int = 0
    # Transactions (read_committed readers): the last stable offset (the first offset of the
    # oldest open transaction, else the high watermark) and the aborted transactions.
    last_stable_offset: int = -1
    aborted: list[AbortedTxn] = field(default_factory=list)

    def end(self, read_committed: bool) -> int:
        """Where a reader of that isolation level stops."""
        if read_committed and 0 <= self.last_stable_offset < self.high_watermark:
            return self.last_stable_offset
        return self.high_watermark

    @property
    def dir(self) -> str:
        return f"{self.topic}/{self.partition}"

    @property
    def size_bytes(self) -> int:
        return self.reader_bytes if self.via_reader else sum(s.size for s in self.segments)

    def segments_between(self, start: int, end: int) -> list[DurableSegment]:
        """Segments holding at least one offset of ``[start, end)``."""
        return [s for s in self.segments if s.next_offset > start and s.base < end
                and s.size > 0]


def list_topics(storage: Storage) -> list[str]:
    """Topic directories under the storage root (those holding at least one partition)."""
    return [name for name in storage.list("")
            if not name.startswith((".", "_")) and list_partitions(storage, name)]


def list_partitions(storage: Storage, topic: str) -> list[int]:
    """Partition numbers of ``topic`` (numeric sub-directories), sorted."""
    return sorted(int(name) for name in storage.list(topic) if name.isdigit())


def _published_segments(storage: Storage, directory: str
                        ) -> tuple[int, dict[int, tuple[int, int]], ProducerStateTable] | None:
    """(log start offset, {base: (size, next offset)}, producer state) of what
    ``checkpoint.json`` lists, read by the storage layer's own checkpoint parser; None if
    there is no usable checkpoint."""
    state = CheckpointFiles(storage, directory).read(0)
    if state is None:
        return None
    try:
        segments = [Segment.from_meta({k: int(v) for k, v in meta.items()})
                    for meta in state["segments"]]
        producers = ProducerStateTable.from_json(state.get("producers") or {})
        load_sealed(producers, storage, directory)
        return int(state["log_start_offset"]), {s.base: (s.size, s.next_offset)
                                                 for s in segments}, producers
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _valid_extent(storage: Storage, path: str, base: int, start: int, end: int,
                  expected_offset: int, producers: ProducerStateTable) -> tuple[int, int]:
    """(end of the valid data, offset after it) of segment ``base`` from ``start`` (where the
    batch of ``expected_offset`` begins): recovery's own scan, so both agree on what is
    durable; ``producers`` learns the transactions opened, committed and aborted there."""
    valid_end, next_offset = start, expected_offset
    for pos, header in valid_batches(storage, path, start, end, expected_offset, base):
        record_producer_batch(storage, path, pos, header, producers, 0)
        valid_end, next_offset = pos + header.size, header.next_offset
    return valid_end, next_offset


def _plain_layout(storage: Storage, names: list[str]) -> bool:
    """Epoch 0 of the append layout (``bmq serve``): ``checkpoint.json`` and segments named by
    base offset alone. Epoch checkpoints or epoch-named segments mean cluster mode."""
    if not storage.supports_append:
        return False
    for name in names:
        if name.startswith("checkpoint-") or (name.endswith(".log")
                                               and parse_base(name, ".log") is None):
            return False
    return True


def _through_reader(storage: Storage, topic: str, partition: int) -> DurableLog:
    """A view through the storage layer's own read-only reader (what its writer last
    published: its newest checkpoint or manifest)."""
    reader = PartitionLog.open_reader(storage, topic, partition)
    try:
        start, end = reader.log_start_offset, reader.high_watermark
        return DurableLog(topic, partition, start, end, via_reader=True,
                          reader_bytes=reader.size_bytes,
                          last_stable_offset=reader.last_stable_offset(),
                          aborted=reader.aborted_transactions(start, end))
    finally:
        reader.close()


def open_durable(storage: Storage, topic: str, partition: int) -> DurableLog:
    """The durable log of one partition as it is on storage now (see the module notes)."""
    directory = f"{topic}/{partition}"
    names = storage.list(directory)
    if not _plain_layout(storage, names):
        return _through_reader(storage, topic, partition)
    published = _published_segments(storage, directory)
    bases = sorted(b for b in (parse_base(n, ".log") for n in names) if b is not None)
    ck_segs = published[1] if published else {}
    producers = published[2] if published else ProducerStateTable()
    last_base = max(ck_segs) if ck_segs else None
    if ck_segs:
        bases = [b for b in bases if b >= min(ck_segs)]
    segments: list[DurableSegment] = []
    for base in bases:
        if segments and base != segments[-1].next_offset:
            break   # not a continuation: the broker would drop it
        path = f"{directory}/{log_name(base)}"
        try:
            file_size = visible_size(storage, path)
        except FileNotFoundError:
            if segments:
                break
            continue   # deleted by retention meanwhile
        meta = ck_segs.get(base)
        if meta is not None and file_size >= meta[0] and base != last_base:
            segments.append(DurableSegment(base, meta[0], meta[1]))
            continue
        start, expected = (meta if meta is not None and file_size >= meta[0] else (0, base))
        try:
            end, next_offset = _valid_extent(storage, path, base, start, file_size, expected,
                                             producers)
        except FileNotFoundError:
            if segments:
                break
            continue
        segments.append(DurableSegment(base, end, next_offset))
        if end < file_size:
            break   # a batch in flight or a torn tail: nothing after it is durable yet
    if segments:
        log_start = segments[0].base
        if published is not None:
            log_start = max(log_start, published[0])
        high_watermark = segments[-1].next_offset
        log_start = min(log_start, high_watermark)
    else:
        log_start = high_watermark = published[0] if published else 0
    producers.truncate(high_watermark)
    first_open = producers.first_unstable_offset()
    return DurableLog(topic, partition, log_start, high_watermark, segments,
                      last_stable_offset=high_watermark if first_open is None
                      else min(first_open, high_watermark),
                      aborted=producers.aborted_between(log_start, high_watermark))


def index_entries(storage: Storage, view: DurableLog,
                  seg: DurableSegment) -> list[tuple[int, int]]:
    """(offset, position) entries of a segment's offset index that are plausible for the
    segment's valid range, in increasing order; [] when the index is missing or unusable.

    They are hints only: a reader checks that the batch found at a position starts at the
    offset it was promised, and scans from the segment's start otherwise."""
    try:
        data = storage.read_all(f"{view.dir}/{index_name(seg.base)}")
    except FileNotFoundError:
        return []
    entries: list[tuple[int, int]] = []
    last_rel = last_pos = -1
    for rel, pos in zip(*decode_offset_index(data, len(data) // 8), strict=True):
        offset = seg.base + rel
        if rel <= last_rel or pos <= last_pos or offset >= seg.next_offset or pos >= seg.size:
            break   # past the synced entries (or garbage): stop trusting the file
        entries.append((offset, pos))
        last_rel, last_pos = rel, pos
    return entries


def position_for(entries: list[tuple[int, int]], offset: int) -> tuple[int, int]:
    """(offset, position) of the last index entry at or before ``offset``; (-1, 0) if none."""
    i = bisect_right(entries, (offset, 1 << 62)) - 1
    return entries[i] if i >= 0 else (-1, 0)
