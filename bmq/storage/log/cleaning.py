"""What the log cleaner (``bmq.cleaner``, which does the record work) needs of a partition log:
the segments it may clean, their batches in bounded chunks, cleaned segments written beside the
originals, and one swap that puts them in place.

Crash safety. A cleaned segment is written under a name no state document lists (the cleaning
owner's epoch and a fresh sequence number, ``segment_stem``) and synced with its index files;
only then does one state document write (the checkpoint or manifest, replaced atomically) list
it instead of the segments it replaces. A kill -9 before that write leaves files no state
document names, which the next owner's garbage collection deletes; after it, the originals are
such files. If no state document is readable, recovery lists the files and takes a cleaned
segment (once its index files, written last, exist) before the originals it replaced
(``recovery.listed_segments``). Readers in this process keep reading a replaced segment they
hold; readers elsewhere (proxies, Spark) follow the state document, and the replaced files are
deleted only ``file.delete.delay.ms`` later (a read that still misses one re-reads the state
document).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from bmq.protocol.records import LOG_OVERHEAD
from bmq.storage.base import AppendFile
from bmq.storage.log.aborted_index import RewrittenChunks, rewrite_chunks
from bmq.storage.log.config import SCAN_CHUNK, clock_ms
from bmq.storage.log.host import LogHost
from bmq.storage.log.layout import Layout
from bmq.storage.log.offset_index import write_index_files
from bmq.storage.log.retention import delete_segments
from bmq.storage.producer_state import AbortedTxn
from bmq.storage.segment import CorruptLogError, Segment, iter_headers


@dataclass(slots=True)
class Cleanable:
    """The sealed segments the cleaner may rewrite (oldest first: never the active segment nor
    anything at or past the last stable offset) and the aborted transactions among them."""

    segments: list[Segment]
    aborted: list[AbortedTxn]


class CleanedSegment:
    """A cleaned segment being written: appended and synced on file systems, one PUT on object
    stores; its indexes are built from the batch headers as they go by."""

    def __init__(self, log: LogHost, seq: int, base: int, next_offset: int) -> None:
        self._log = log
        self.segment = Segment(base, clock_ms(), log.leader_epoch, seq)
        self.segment.next_offset = next_offset
        self._since_index = 0
        self._parts: list[bytes] = []
        self._file: AppendFile | None = None
        if log.storage.supports_append:
            self._file = log.storage.open_append(log.segments.path(self.segment.log_file))

    def write(self, batches: bytes) -> None:
        """Append whole batches."""
        if not batches:
            return
        seg = self.segment
        assert seg.idx_rel is not None and seg.idx_pos is not None
        assert seg.tidx_ts is not None and seg.tidx_rel is not None
        view = memoryview(batches)
        interval = self._log.config.index_interval_bytes
        for pos, base, size, _next, max_ts in iter_headers(
                lambda p, n: bytes(view[p:p + n]), 0, len(batches)):
            if max_ts > seg.max_timestamp:
                seg.max_timestamp, seg.offset_of_max_timestamp = max_ts, base
            if self._since_index >= interval:
                seg.idx_rel.append(base - seg.base)
                seg.idx_pos.append(seg.size + pos)
                if seg.max_timestamp > seg.last_time_entry:
                    seg.tidx_ts.append(seg.max_timestamp)
                    seg.tidx_rel.append(seg.offset_of_max_timestamp - seg.base)
                self._since_index = 0
            self._since_index += size
        if self._file is not None:
            self._file.write([batches])
        else:
            self._parts.append(batches)
        seg.size += len(batches)

    def finish(self) -> Segment:
        """Make the segment and its indexes durable (still listed nowhere)."""
        seg = self.segment
        assert seg.tidx_ts is not None and seg.tidx_rel is not None
        if seg.max_timestamp > seg.last_time_entry:
            seg.tidx_ts.append(seg.max_timestamp)
            seg.tidx_rel.append(seg.offset_of_max_timestamp - seg.base)
        if self._file is not None:
            self._file.sync()
            self._file.close()
            self._file = None
        else:
            self._log.storage.write_atomic(self._log.segments.path(seg.log_file),
                                           b"".join(self._parts))
            self._parts = []
        write_index_files(self._log.segments, seg)
        return seg

    def abandon(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
        self._log.segments.delete_files(self.segment)


class Cleaning:
    """The log cleaner's side of a partition log (``PartitionLog`` hands its entry points
    over), with the files of replaced segments waiting for their deletion."""

    def __init__(self, log: LogHost, layout: Layout) -> None:
        self._log = log
        self._layout = layout
        # Segments the log cleaner replaced (when, segment): deleted after a delay.
        self._replaced: list[tuple[float, Segment]] = []
        # ... and the aborted-transaction index chunks it wrote again (when, file name).
        self._replaced_chunks: list[tuple[float, str]] = []

    def cleanable(self) -> Cleanable:
        log = self._log
        segments = log.segments
        with segments.lock:
            if log.closed or log.failed is not None:
                return Cleanable([], [])
            first_open = log.durable_producers.first_unstable_offset()
            stable = segments.high_watermark if first_open is None else first_open
            sealed = self._layout.sealed(segments)
            cleanable = []
            for seg in sealed:
                if seg.next_offset > stable:
                    break
                cleanable.append(seg)
            if not cleanable:
                return Cleanable([], [])
            aborted = log.durable_producers.aborted_between(cleanable[0].base,
                                                            cleanable[-1].next_offset)
        return Cleanable(cleanable, aborted)

    def each_chunk(self, seg: Segment, consume: Callable[[bytes], int]) -> None:
        """Feed ``seg``'s batches to ``consume`` in chunks of about ``SCAN_CHUNK`` bytes;
        ``consume`` returns how many bytes of whole batches it took (a partial batch at the
        end of a chunk comes again at the start of the next)."""
        storage = self._log.storage
        path = self._log.segments.path(seg.log_file)
        pos = 0
        while pos < seg.size:
            want = min(SCAN_CHUNK, seg.size - pos)
            data = storage.read_range(path, pos, want)
            taken = consume(data)
            if taken == 0 and len(data) >= 12:   # one batch larger than a chunk
                size = int.from_bytes(data[8:12], "big") + LOG_OVERHEAD
                data = storage.read_range(path, pos, min(size, seg.size - pos))
                taken = consume(data)
            if taken == 0:
                raise CorruptLogError(f"{self._log}: no whole batch at {pos} of segment {seg.base}")
            pos += taken

    def start_cleaned(self, base: int, next_offset: int) -> CleanedSegment:
        return CleanedSegment(self._log, self._layout.cleaned_seq(self._log.segments), base,
                              next_offset)

    def replace_cleaned(self, replacements: list[tuple[list[Segment], Segment]],
                        aborts: Collection[int] = ()) -> bool:
        """Put each cleaned segment in place of the run of segments it replaces, with one state
        document write; False (and the cleaned files deleted) if the log changed meanwhile
        (retention, DeleteRecords, a merge of objects) or is closed. ``aborts`` are the
        offsets of the ABORT markers the cleaned segments no longer hold: their entries leave
        the aborted-transaction index in the same write (a read_committed client given an
        entry skips its producer's batches until it meets the marker)."""
        log = self._log
        with log.io_lock:
            stale = log.closed or log.failed is not None
            chunks = None if stale or not aborts else self._rewrite_chunks(aborts)
            if not stale:
                with log.segments.lock:
                    segments = list(log.segments.by_offset)
                    where = {id(seg): i for i, seg in enumerate(segments)}
                    for run, new in reversed(replacements):
                        i = where.get(id(run[0]), -1)
                        if i < 0 or any(segments[i + k] is not seg for k, seg in enumerate(run)):
                            stale = True
                            break
                        segments[i:i + len(run)] = [new]
                    if not stale:
                        log.segments.install(segments)
                        log.segments.rewrites += 1
                        for run, _new in replacements:
                            for seg in run:
                                seg.retired = True
                        if chunks is not None:
                            # (Under the same lock as the segments: no fetch here sees the
                            # new segments with the old index.)
                            log.durable_producers.remove_aborted(aborts, chunks.sealed)
                            log.live_producers.remove_aborted(aborts, chunks.sealed)
            if stale:
                self.discard_cleaned([new for _run, new in replacements])
                for name in chunks.written if chunks is not None else ():
                    log.storage.delete(log.segments.path(name))
                return False
            log.publish_state()
            log.fence_check()
            now = time.monotonic()
            self._replaced.extend((now, seg) for run, _new in replacements for seg in run)
            if chunks is not None:
                self._replaced_chunks.extend((now, name) for name in chunks.replaced)
        return True

    def _rewrite_chunks(self, aborts: Collection[int]) -> RewrittenChunks:
        """Under ``io_lock`` (nothing seals meanwhile): the sealed chunks of the aborted-
        transaction index without the entries of ``aborts``, written under new names."""
        log = self._log
        with log.segments.lock:
            chunks = log.durable_producers.sealed_chunks()
        stamp = f"{log.leader_epoch:010d}-{self._layout.cleaned_seq(log.segments):012d}"
        return rewrite_chunks(chunks, aborts, stamp,
                              lambda name, data: log.storage.write_atomic(
                                  log.segments.path(name), data))

    def discard_cleaned(self, cleaned: list[Segment]) -> None:
        """Delete cleaned segments that were never swapped in."""
        for seg in cleaned:
            self._log.segments.delete_files(seg)

    def delete_replaced(self, delay_ms: int) -> int:
        """Delete the files of segments (and aborted-transaction index chunks) the cleaner
        replaced at least ``delay_ms`` ago; returns how many segments and chunks."""
        log = self._log
        with log.io_lock:
            if log.closed:
                return 0   # the next owner's garbage collection deletes them
            cutoff = time.monotonic() - delay_ms / 1000
            due = [seg for when, seg in self._replaced if when <= cutoff]
            chunks = [name for when, name in self._replaced_chunks if when <= cutoff]
            if not due and not chunks:
                return 0
            log.fence_check()   # a new owner's claim may still name them
            self._replaced = [(when, seg) for when, seg in self._replaced if when > cutoff]
            self._replaced_chunks = [(when, name) for when, name in self._replaced_chunks
                                     if when > cutoff]
            delete_segments(log, due)
            for name in chunks:
                with contextlib.suppress(FileNotFoundError):
                    log.storage.delete(log.segments.path(name))
            return len(due) + len(chunks)
