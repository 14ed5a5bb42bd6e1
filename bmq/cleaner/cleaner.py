"""One cleaning pass over a compacted partition log, as Kafka's log cleaner makes it.

The log is split where Kafka splits it: the *clean* part (segments already cleaned, from the
log start), the *dirty* part after it, and what is not cleanable at all: the active segment (on
object stores the newest object), anything at or past the last stable offset (open
transactions), and segments with records younger than ``min.compaction.lag.ms``. A pass runs
when the dirty part is at least ``min.cleanable.dirty.ratio`` of the cleanable log, when its
oldest record waited ``max.compaction.lag.ms``, or when tombstones are due for removal.

1. The offset map (``_keymap.KeyMap``, fixed memory) takes each key of the dirty part with its
   latest offset, segment by segment, until it is full: the pass then ends before the segment
   that did not fit, or, in the first dirty segment, at the batch that did not (the cleaned
   segment stays dirty from there, ``Segment.dirty_from``); the next pass goes on from there.
2. Every segment from the log start to the end of what was mapped is rewritten, in groups of
   adjacent segments that fit one segment: a record stays unless the map holds a later offset
   for its key, its batch belongs to an aborted transaction, or it is a tombstone of a segment
   cleaned ``delete.retention.ms`` ago. Batches keep their base offset, last offset delta,
   producer id, epoch and base sequence (offsets keep their gaps). A transaction marker goes
   as tombstones do (see below) once no record of its transaction is left (Kafka's rule): a
   COMMIT marker when the pass keeps no record of its transaction, an ABORT marker always (the
   records of aborted transactions never stay; see ``_keymap.c``).
3. The cleaned segments replace the originals with one state document write (see
   ``bmq.storage.log.cleaning``); the originals' files go ``file.delete.delay.ms`` later. The
   same write drops the aborted-transaction index entries of the ABORT markers removed, as
   Kafka's cleaner drops them from the cleaned segment's ``.txnindex``: a read_committed
   client given an entry skips its producer's batches from the entry's first offset until it
   meets the ABORT marker, so an entry without its marker would hide that producer's later
   committed records. Chunk files of the index losing entries are written again under new
   names first (``bmq.storage.log.aborted_index``): a kill -9 at any step leaves the old
   segments with the old index or the new ones with the new.

Tombstones: a cleaned segment remembers when its records were first cleaned; its tombstones
(and the markers left without records, counted with them: ``Segment.tombstones``) are
removed by the first pass ``delete.retention.ms`` after that (Kafka counts from the first
cleaning too, per batch), so a consumer that starts reading from the log start within that time
sees every delete and every transaction's outcome.
"""

from __future__ import annotations

import logging
import os
import signal
import struct
from dataclasses import dataclass

import crc32c

from bmq.cleaner._keymap import KeyMap
from bmq.protocol.record_codec import compress, decompress
from bmq.storage.log import PartitionLog
from bmq.storage.log.object_layout import MAX_OBJECT_BYTES
from bmq.storage.producer_state import AbortedTxn
from bmq.storage.segment import MAX_RELATIVE_OFFSET, Segment

_ENTRY_BYTES = 24   # one slot of the map: a 128-bit key hash and an offset
# Test hook (as the transaction coordinator's): SIGKILL this process at a named step of a pass:
# "written" (cleaned segments durable, not swapped in) or "swapped" (originals not deleted).
CRASH_ENV = "BMQ_CLEANER_CRASH_AT"

logger = logging.getLogger(__name__)


def crash_point(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        logger.warning("%s=%s: killing this process", CRASH_ENV, name)
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass(slots=True)
class CleanResult:
    """What one pass did."""

    segments_read: int = 0
    segments_written: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_kept: int = 0
    records_removed: int = 0
    markers_removed: int = 0
    swapped: bool = False


class _MapFull(Exception):
    """The offset map is full; its argument is the offset of the first batch not mapped."""


def map_slots(buffer_bytes: int) -> int:
    """Slots of an offset map in ``buffer_bytes`` of memory (a power of two, at least 16; at
    most 3/4 of them are filled)."""
    slots = 16
    while slots * 2 * _ENTRY_BYTES <= buffer_bytes:   # the next power of two fits too
        slots *= 2
    return slots


def _packed(aborted: list[AbortedTxn]) -> bytes:
    return b"".join(struct.pack("=qqq", a.producer_id, a.first_offset, a.last_offset)
                    for a in aborted)


def needs_cleaning(log: PartitionLog, segments: list[Segment], now_ms: int) -> bool:
    """Whether a pass over the cleanable ``segments`` is due (Kafka's ratio, lag and tombstone
    rules)."""
    cfg = log.config
    dirty = [s for s in segments if s.cleaned_ms < 0]
    if any(s.tombstones and s.cleaned_ms + cfg.delete_retention_ms <= now_ms
           for s in segments if s.cleaned_ms >= 0):
        return True
    if not dirty:
        return False
    if 0 <= dirty[0].created_ms <= now_ms - cfg.max_compaction_lag_ms:
        return True
    total = sum(s.size for s in segments)
    return total > 0 and sum(s.size for s in dirty) / total >= cfg.min_cleanable_dirty_ratio


class LogCleaner:
    """Cleans logs one at a time with one offset map of ``buffer_bytes`` (Kafka's
    ``log.cleaner.dedupe.buffer.size``); not thread-safe: one per cleaner thread."""

    def __init__(self, buffer_bytes: int) -> None:
        self.slots = map_slots(buffer_bytes)

    def clean(self, log: PartitionLog, now_ms: int, force: bool = False) -> CleanResult | None:
        """One pass if one is due (or ``force``); None if there was nothing to do."""
        cfg = log.config
        cleanable = log.cleanable()
        segments: list[Segment] = []
        for seg in cleanable.segments:
            if cfg.min_compaction_lag_ms > 0 and \
                    now_ms - max(seg.max_timestamp, seg.created_ms) < cfg.min_compaction_lag_ms:
                break
            segments.append(seg)
        if not segments or not (force or needs_cleaning(log, segments, now_ms)):
            return None
        result = CleanResult()
        aborted = _packed(cleanable.aborted)
        # No more slots than the dirty part has offsets: a small log costs little memory.
        dirty_offsets = sum(s.next_offset - s.base for s in segments if s.cleaned_ms < 0)
        keymap = KeyMap(min(self.slots, map_slots(_ENTRY_BYTES * 4 * dirty_offsets)))
        end, cut = self._map_dirty(log, segments, keymap, aborted)
        groups = self._groups(log, segments[:end])
        replacements: list[tuple[list[Segment], Segment]] = []
        aborts: list[int] = []   # offsets of the ABORT markers removed
        try:
            for group in groups:
                new = self._rewrite(log, group, keymap, aborted, now_ms, result, aborts)
                if cut >= 0 and group[-1] is segments[end - 1]:
                    # Partly mapped: still dirty from the cut on (the next pass maps the rest).
                    new.cleaned_ms, new.dirty_from = -1, cut
                replacements.append((group, new))
        except BaseException:
            log.discard_cleaned([new for _group, new in replacements])
            raise
        result.segments_written = len(replacements)
        crash_point("written")
        result.swapped = log.replace_cleaned(replacements, set(aborts))
        crash_point("swapped")
        return result

    @staticmethod
    def _map_dirty(log: PartitionLog, segments: list[Segment], keymap: KeyMap, aborted: bytes
                   ) -> tuple[int, int]:
        """Map the dirty segments' keys: (how many of ``segments`` this pass cleans, the
        offset where the map filled up in the last of them, or -1)."""
        first_dirty = next((i for i, s in enumerate(segments) if s.cleaned_ms < 0),
                           len(segments))
        for i in range(first_dirty, len(segments)):
            seg = segments[i]

            def add(data: bytes, seg: Segment = seg) -> int:
                taken, full = keymap.add_batches(data, aborted, seg.dirty_from, decompress)
                if full:
                    raise _MapFull(int.from_bytes(data[taken:taken + 8], "big"))
                return taken
            try:
                log.each_chunk(seg, add)
            except _MapFull as full:
                # As Kafka: the pass ends where the map filled up. Within the first dirty
                # segment that is mid-segment: the cleaned segment stays dirty from there.
                if i > first_dirty:
                    return i, -1
                return i + 1, int(full.args[0])
        return len(segments), -1

    @staticmethod
    def _groups(log: PartitionLog, segments: list[Segment]) -> list[list[Segment]]:
        """Adjacent segments cleaned into one: at most a segment's size together, one leader
        epoch (its history stays exact), never clean and dirty ones together (a tombstone's
        time in the clean part is the newest of its group's)."""
        limit = log.config.segment_bytes
        if not log.storage.supports_append:
            limit = min(limit, MAX_OBJECT_BYTES)
        groups: list[list[Segment]] = []
        size = 0
        for seg in segments:
            group = groups[-1] if groups else None
            if group is not None and size + seg.size <= limit \
                    and seg.next_offset - group[0].base <= MAX_RELATIVE_OFFSET \
                    and seg.data_epoch == group[0].data_epoch \
                    and (seg.cleaned_ms < 0) == (group[0].cleaned_ms < 0):
                group.append(seg)
                size += seg.size
            else:
                groups.append([seg])
                size = seg.size
        return groups

    @staticmethod
    def _rewrite(log: PartitionLog, group: list[Segment], keymap: KeyMap, aborted: bytes,
                 now_ms: int, result: CleanResult, aborts: list[int]) -> Segment:
        cfg = log.config
        writer = log.start_cleaned(group[0].base, group[-1].next_offset)
        tombstones = 0
        try:
            for seg in group:
                drop_tombstones = 0 <= seg.cleaned_ms <= now_ms - cfg.delete_retention_ms

                def retain(data: bytes, drop: bool = drop_tombstones) -> int:
                    nonlocal tombstones
                    out, kept, removed, taken, tombs, markers, gone = keymap.retain_batches(
                        data, aborted, drop, decompress, compress, crc32c.crc32c)
                    result.markers_removed += markers
                    aborts.extend(offset for (offset,) in struct.iter_unpack("=q", gone))
                    writer.write(out)
                    result.records_kept += kept
                    result.records_removed += removed
                    result.bytes_written += len(out)
                    tombstones += tombs
                    return taken
                log.each_chunk(seg, retain)
                result.bytes_read += seg.size
                result.segments_read += 1
            new = writer.segment
            if new.max_timestamp < 0:   # every record removed: time retention as before
                newest = max(group, key=lambda s: s.max_timestamp)
                new.max_timestamp = newest.max_timestamp
                new.offset_of_max_timestamp = newest.offset_of_max_timestamp
            new.created_ms = min((s.created_ms for s in group if s.created_ms >= 0), default=-1)
            new.cleaned_ms = now_ms if group[0].cleaned_ms < 0 else \
                max(s.cleaned_ms for s in group)
            new.tombstones = tombstones
            new.origin_epoch = group[0].data_epoch
            return writer.finish()
        except BaseException:
            writer.abandon()
            raise
