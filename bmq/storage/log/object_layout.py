"""The object layout of a partition log, for object stores (S3 and the like), which cannot
append to an object (``PartitionLog.open`` uses it when the storage has
``supports_append == False``); only the on-storage layout and the I/O differ.

Layout, under ``{topic}/{partition}/``::

    {base:020d}-{epoch:010d}-{seq:012d}.log        one immutable object per flush (or merge)
    {base:020d}-{epoch:010d}-{seq:012d}.index      offset / time index of a merged object
    {base:020d}-{epoch:010d}-{seq:012d}.timeindex  (same encoding as segment index files)
    manifest/{epoch:010d}.json                     the manifest of the owner of that epoch

``base`` is the first offset in the object, ``epoch`` the leader epoch of the writer that made
it and ``seq`` that writer's counter (object names are never reused, so no PUT ever replaces
data). The manifest is the checkpoint of the append layout with ``segments`` listing objects
(each with ``epoch`` and ``seq``) and ``next_seq``; it is replaced (one PUT) by every flush,
merge, retention and DeleteRecords. The manifest of the highest epoch is the truth: a stale
owner's later manifest PUTs (a lower epoch) are ignored by everyone.

Write path. ``flush`` PUTs the queued batches as one object, then PUTs the manifest listing it,
then lists ``manifest/`` and fails with FENCED_LEADER_EPOCH if a higher epoch exists; only then
is the high watermark advanced and the flush acknowledged (acks=all).

Takeover (``open`` with epoch N). Read the newest manifest (epoch E <= N, else fenced); PUT a
claim ``manifest/N.json`` with the same content (data epoch E) so that E's owner fails its
next fence check; list the objects: those of epoch E with ``seq >= next_seq`` that continue the
offsets are objects E stored but had not (or had, after our read) put in its manifest; they are
complete (PUTs are atomic), each is CRC-checked and included in order. Then the epoch-N
manifest is written and objects of lower epochs not in it, and older manifests, are deleted.
An object E PUTs after our listing never enters an epoch-N manifest: E's fence check after that
PUT sees the claim, so it was never acknowledged.

Merging. ``merge_objects`` (called by ``checkpoint``, i.e. from the broker's maintenance
loop) rewrites runs of adjacent objects smaller than ``segment_bytes`` into one object of at
most ``segment_bytes`` with index objects, swaps them in the manifest, and deletes the replaced
objects on the next call (so in-flight reads, here and in other processes, can finish).
Retention and DeleteRecords drop whole objects.

Readers elsewhere (proxies) follow the owner's ``tail``, its newest objects, sent with each
notice of new data: their view grows without a LIST or a manifest GET, and they re-read the
manifest only when a tail does not continue their view (a merge, more flushes between two
notices than a tail lists, a new owner). A read of an object merged away and since deleted
re-reads the manifest too.
"""

from __future__ import annotations

import logging
import struct
from bisect import bisect_right
from typing import Any

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.records import HEADER_SIZE, LOG_OVERHEAD
from bmq.storage.base import Storage
from bmq.storage.log.aborted_index import load_sealed
from bmq.storage.log.config import MAX_READ_BYTES, BatchMeta, Queued, clock_ms, parse_files
from bmq.storage.log.fencing import FencedEpochError
from bmq.storage.log.host import LogHost
from bmq.storage.log.layout import Layout
from bmq.storage.log.offset_index import rebuild_indexes, write_index_files
from bmq.storage.log.reading import read_batches
from bmq.storage.log.recovery import (
    Recovered,
    claim,
    close_gap,
    collect_garbage,
    continues,
    listed_segments,
    recover_segment,
)
from bmq.storage.log.segments import LogSegments
from bmq.storage.log.state import CHECKPOINT_VERSION_EPOCHS, ManifestFiles
from bmq.storage.producer_state import ProducerStateTable
from bmq.storage.segment import MAX_POSITION, Segment

logger = logging.getLogger(__name__)

# Merged objects are at most segment_bytes, and at most this (ranged GETs make larger objects
# pointless, and a smaller target bounds how often the same bytes are rewritten).
MAX_OBJECT_BYTES = 64 << 20
# Objects at least this fraction of the target are not merged any further.
_MERGED_FRACTION = 0.5
# Objects a tail lists (LogReader.advance).
TAIL_OBJECTS = 4
_LENGTH = struct.Struct(">qi")
_DELTA = struct.Struct(">i")


class ObjectLayout(Layout):
    """Flushes are immutable objects listed by a manifest; the log's last segment is an empty
    virtual tail at the high watermark (the next object's base)."""

    kept_at_end = 2   # the newest object (as the append layout keeps its active segment), tail

    def __init__(self) -> None:
        self._next_seq = 0
        self._trash: list[Segment] = []   # merged away: deleted on the next merge
        # What the open listed, to collect garbage from on the first merge: on an object
        # store every delete (and the listing it needs) is a request the takeover would wait on.
        self._garbage: list[str] | None = None

    @staticmethod
    def state_files(storage: Storage, partition_dir: str) -> ManifestFiles:
        return ManifestFiles(storage, partition_dir)

    def state(self, log: LogHost) -> dict[str, Any]:
        segments = log.segments
        with segments.lock:
            return self._manifest(log, segments.by_offset[:-1], segments.high_watermark)

    def _manifest(self, log: LogHost, objects: list[Segment], high_watermark: int
                  ) -> dict[str, Any]:
        return {
            "version": CHECKPOINT_VERSION_EPOCHS,
            "layout": "objects",
            "topic": log.topic,
            "partition": log.partition,
            "epoch": log.leader_epoch,
            "data_epoch": log.leader_epoch,
            "next_seq": self._next_seq,
            "log_start_offset": log.segments.log_start_offset,
            "recovery_point": high_watermark,
            "high_watermark": high_watermark,
            "segments": [seg.meta() for seg in objects],
            "producers": log.durable_producers.to_json(),
        }

    def load(self, log: LogHost) -> Recovered:
        storage = log.storage
        epoch = log.leader_epoch
        storage.makedirs(log.state_files.directory)
        top, state = log.state_files.newest()
        if top > epoch:
            raise FencedEpochError(f"{log}: epoch {epoch} is older than the current {top}", top)
        data_epoch = int(state["data_epoch"]) if state is not None else epoch
        if epoch > top:
            claim(log, state, data_epoch)
        names = storage.list(log.dir)
        found = sorted(parse_files(names, ".log"))

        metas = state.get("segments") if state is not None else None
        producers = ProducerStateTable()
        log_start = recovery_point = 0
        next_seq = 0
        objects: list[Segment] = []
        if state is not None and metas is not None:
            try:
                objects = [Segment.from_meta({k: int(v) for k, v in m.items()}) for m in metas]
                producers = ProducerStateTable.from_json(state["producers"])
                load_sealed(producers, log.storage, log.dir)
                log_start = int(state["log_start_offset"])
                recovery_point = int(state["recovery_point"])
                next_seq = int(state.get("next_seq", 0))
            except (ValueError, TypeError, KeyError) as exc:
                logger.warning("%s: malformed manifest (%s), scanning every object", log, exc)
                objects, metas = [], None
                producers = ProducerStateTable()
        if metas is not None:
            # Objects the data epoch stored after (or without) its last manifest update.
            listed = {seg.stem for seg in objects}
            candidates = sorted(((seq, base, e) for base, e, seq in found
                                 if e == data_epoch and seq >= next_seq), key=lambda t: t[0])
            tail = [Segment(base, epoch=e, seq=seq) for seq, base, e in candidates]
            tail = [seg for seg in tail if seg.stem not in listed]
        else:
            # No manifest to go by: every object, in offset order (newer writers first).
            tail = listed_segments(found, epoch)
        end = objects[-1].next_offset if objects else max(log_start, recovery_point)
        now = clock_ms()
        for seg in tail:
            if metas is None and objects:
                if not continues(objects[-1], seg):
                    continue
            elif (objects or metas is not None) and seg.base != end:
                continue   # not the continuation (e.g. a merged object never swapped in)
            try:
                size = storage.size(log.segments.path(seg.log_file))
            except FileNotFoundError:
                continue
            valid_end = recover_segment(log.segments, seg, 0, size, producers, now,
                                        gaps_cleaned=metas is None)
            if valid_end == 0:
                continue
            if metas is None and objects:
                close_gap(objects[-1], seg, now)
            if valid_end < size:
                logger.warning("%s: object %s is valid up to %d of %d bytes", log,
                               seg.log_file, valid_end, size)
            if not objects:
                log_start = max(log_start, seg.base) if metas is not None else seg.base
            objects.append(seg)
            end = seg.next_offset
            if valid_end < size:
                break
        log_start = min(max(log_start, objects[0].base), end) if objects else end
        while objects and objects[0].next_offset <= log_start:
            objects.pop(0)
        if end < recovery_point:
            logger.warning("%s: objects end at %d, before the recovery point %d", log, end,
                           recovery_point)
            producers.truncate(end)
        # Our own sequence numbers continue after any object of this epoch (a restart).
        own = [seq for _b, e, seq in found if e == epoch]
        self._next_seq = max([next_seq if data_epoch == epoch else 0, *(s + 1 for s in own)])

        # After the objects, the empty virtual tail segment at the end.
        return Recovered([*objects, Segment(end, epoch=log.leader_epoch)], log_start, producers,
                         names)

    def collect_garbage(self, log: LogHost, listed: list[str]) -> None:
        """At the first merge instead (see ``_garbage``)."""
        self._garbage = listed

    def write(self, log: LogHost, queue: list[Queued]) -> None:
        segments = log.segments
        interval = log.config.index_interval_bytes
        with segments.lock:
            base = segments.by_offset[-1].base
            seq = self._next_seq
            self._next_seq += 1
        seg = Segment(base, created_ms=queue[0][1], epoch=log.leader_epoch, seq=seq)
        assert seg.idx_rel is not None and seg.idx_pos is not None
        assert seg.tidx_ts is not None and seg.tidx_rel is not None
        buffers: list[memoryview] = []
        idempotent: list[tuple[BatchMeta, int]] = []
        size = 0
        since = 0
        for view, now_ms, metas in queue:
            buffers.append(view)
            for meta in metas:
                batch_size, first, last, max_ts = meta[0], meta[1], meta[2], meta[3]
                if max_ts > seg.max_timestamp:
                    seg.max_timestamp = max_ts
                    seg.offset_of_max_timestamp = first
                if since >= interval:
                    seg.idx_rel.append(first - base)
                    seg.idx_pos.append(size)
                    if seg.max_timestamp > seg.last_time_entry:
                        seg.tidx_ts.append(seg.max_timestamp)
                        seg.tidx_rel.append(seg.offset_of_max_timestamp - base)
                    since = 0
                since += batch_size
                size += batch_size
                seg.next_offset = last + 1
                if meta[4] >= 0:
                    idempotent.append((meta, now_ms))
        if seg.max_timestamp > seg.last_time_entry:
            seg.tidx_ts.append(seg.max_timestamp)
            seg.tidx_rel.append(seg.offset_of_max_timestamp - base)
        if size > MAX_POSITION:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{log}: flush of {size} bytes")
        seg.size = size
        log.storage.write_atomic(segments.path(seg.log_file), b"".join(buffers))

        with segments.lock:
            durable = log.durable_producers
            for meta, now_ms in idempotent:
                durable.record(meta[4], meta[5], meta[6], meta[7], meta[1], meta[2], meta[3],
                               now_ms, meta[8])
            objects = [*segments.by_offset[:-1], seg]
        log.seal_aborted()
        log.write_state(self._manifest(log, objects, seg.next_offset))
        log.fence_check()
        with segments.lock:
            tail = segments.by_offset[-1]
            tail.base = tail.next_offset = seg.next_offset
            segments.by_offset.insert(len(segments.by_offset) - 1, seg)
            segments.bases = [s.base for s in segments.by_offset]
            segments.size_bytes += size
            segments.high_watermark = seg.next_offset

    def read(self, segments: LogSegments, offset: int, max_bytes: int) -> bytes | memoryview:
        """Continues into the following objects while ``max_bytes`` allows: one flush is often
        far smaller than a fetch."""
        first = read_batches(segments, offset, max_bytes)
        total = len(first)
        if not total or total >= max_bytes:
            return first
        parts: list[bytes | memoryview] = [first]
        position = _next_offset(first)
        limit = min(max_bytes, MAX_READ_BYTES)
        while total < limit and position < segments.high_watermark:
            with segments.lock:
                seg = segments.by_offset[bisect_right(segments.bases, position) - 1]
                if seg.base == position and seg.size > limit - total:
                    break   # the next object does not fit: leave it to the next read
            try:
                more = read_batches(segments, position, limit - total)
            except KafkaError:
                break
            if not more or total + len(more) > limit:
                break
            parts.append(more)
            total += len(more)
            position = _next_offset(more)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def tail_segments(self, segments: LogSegments) -> list[Segment]:
        # The newest objects, not the virtual tail: several flushes may land between two
        # notices, and a tail that does not continue a reader's view makes it re-read the
        # manifest instead (a LIST and a GET on the store, which the tail is there to save).
        return segments.by_offset[-1 - TAIL_OBJECTS:-1]

    def maintain(self, log: LogHost) -> None:
        try:
            self.merge(log)
        except KafkaError:
            raise
        except Exception as exc:   # merging is an optimisation: the manifest still goes out
            logger.warning("%s: merging objects failed: %s", log, exc)

    def sealed(self, segments: LogSegments) -> list[Segment]:
        """Objects never change, but the newest ones are what the append layout's active
        segment would hold: those less than ``segment.bytes`` from the end and younger than
        ``segment.ms`` are left alone, as Kafka leaves its active segment. An object the
        cleaner wrote was sealed once already, and so is everything before it."""
        objects = segments.by_offset[:-1]
        cfg = segments.config
        now = clock_ms()
        size = 0
        start = len(objects)
        while start > 0:
            seg = objects[start - 1]
            if size + seg.size >= cfg.segment_bytes or now - seg.created_ms >= cfg.segment_ms \
                    or seg.cleaned_ms >= 0 or seg.dirty_from >= 0:
                break
            size += seg.size
            start -= 1
        return objects[:start]

    def cleaned_seq(self, segments: LogSegments) -> int:
        with segments.lock:
            seq = self._next_seq
            self._next_seq += 1
        return seq

    def merge(self, log: LogHost) -> int:
        if log.closed or log.failed is not None:
            return 0
        garbage, self._garbage = self._garbage, None
        if garbage is not None:
            collect_garbage(log, garbage)
        self._empty_trash(log)
        target = min(log.config.segment_bytes, MAX_OBJECT_BYTES)
        with log.segments.lock:
            objects = log.segments.by_offset[:-1]
        runs: list[list[Segment]] = []
        run: list[Segment] = []
        total = 0
        for seg in objects:
            small = seg.size < target * _MERGED_FRACTION
            # Cleaned objects merge among themselves only: merged with uncleaned ones they
            # would count as never cleaned, their tombstones waiting another cleaning. Objects
            # of one leader epoch only: the objects' epochs are the partition's epoch history
            # (OffsetForLeaderEpoch); a merge across a new owner's first offset would hide
            # where it began, and consumers checking their position would take the log for
            # truncated and reset.
            if small and total + seg.size <= target and \
                    (not run or (seg.next_offset - run[0].base <= 0x7FFFFFFF
                                 and (seg.cleaned_ms >= 0) == (run[0].cleaned_ms >= 0)
                                 and seg.data_epoch == run[0].data_epoch)):
                run.append(seg)
                total += seg.size
                continue
            if len(run) > 1:
                runs.append(run)
            run, total = ([seg], seg.size) if small else ([], 0)
        if len(run) > 1:
            runs.append(run)
        merged = 0
        for run in runs:
            if log.closed:
                break       # (a closing broker should not wait for merges nobody will read)
            merged += self._merge_run(log, run)
        return merged

    def _merge_run(self, log: LogHost, run: list[Segment]) -> int:
        segments = log.segments
        data = b"".join(log.storage.read_range(segments.path(seg.log_file), 0, seg.size)
                        for seg in run if seg.size)   # (the cleaner may leave empty objects)
        with segments.lock:
            seq = self._next_seq
            self._next_seq += 1
        first = run[0]
        new = Segment(first.base, created_ms=first.created_ms, epoch=log.leader_epoch, seq=seq)
        new.size = len(data)
        new.next_offset = run[-1].next_offset
        if first.data_epoch != new.epoch:
            new.origin_epoch = first.data_epoch   # its records' epoch, not the merger's
        best = max(run, key=lambda s: s.max_timestamp)
        new.max_timestamp = best.max_timestamp
        new.offset_of_max_timestamp = best.offset_of_max_timestamp
        if all(seg.cleaned_ms >= 0 for seg in run):   # still clean (bmq.cleaner)
            new.cleaned_ms = max(seg.cleaned_ms for seg in run)
            new.tombstones = sum(seg.tombstones for seg in run)
        view = memoryview(data)
        new.set_indexes(*rebuild_indexes(segments, new, len(data),
                                         lambda p, n: bytes(view[p:p + n])))
        if new.max_timestamp > new.last_time_entry:
            assert new.tidx_ts is not None and new.tidx_rel is not None
            new.tidx_ts.append(new.max_timestamp)
            new.tidx_rel.append(new.offset_of_max_timestamp - new.base)
        log.storage.write_atomic(segments.path(new.log_file), data)
        write_index_files(segments, new)
        with log.io_lock:
            if log.closed or log.failed is not None:
                return 0
            with segments.lock:
                current = segments.by_offset
                try:
                    i = next(k for k, s in enumerate(current) if s is first)
                except StopIteration:
                    i = -1
                if i < 0 or current[i:i + len(run)] != run or \
                        any(a is not b for a, b in zip(current[i:i + len(run)], run,
                                                       strict=True)):
                    stale = True    # retention or DeleteRecords got there first
                else:
                    stale = False
                    segments.install([*current[:i], new, *current[i + len(run):]])
                    for seg in run:
                        seg.retired = True
            if stale:
                segments.delete_files(new)
                return 0
            log.publish_state()
            log.fence_check()
            self._trash.extend(run)
        return len(run)

    def _empty_trash(self, log: LogHost) -> None:
        """Delete objects merged away by the previous merge (readers have moved on)."""
        if not self._trash:
            return
        log.fence_check()
        trash, self._trash = self._trash, []
        for seg in trash:
            if log.closed:
                return      # unlisted objects: the next owner's garbage collection takes them
            with log.segments.lock:
                unused = seg.readers == 0
            if unused:
                seg.close_handles()
            log.segments.delete_files(seg)


def _next_offset(data: bytes | memoryview) -> int:
    """The offset after the last whole batch of ``data``."""
    pos = 0
    next_offset = 0
    n = len(data)
    while pos + HEADER_SIZE <= n:
        base, length = _LENGTH.unpack_from(data, pos)
        delta = _DELTA.unpack_from(data, pos + 23)[0]
        next_offset = base + delta + 1
        pos += length + LOG_OVERHEAD
    return next_offset


def object_names(log: LogHost) -> list[str]:
    """Data objects of a log (for tests and tools)."""
    return [n for n in log.storage.list(log.dir) if n.endswith(".log")]
