"""Reads: the segment holding an offset is found by bisection, the batch by the sparse offset
index and a few header reads; then one ``pread`` fetches the data. Readers hold a reference to
the segment so that retention never closes a descriptor under them. Also the timestamp lookups
(ListOffsets by time, max timestamp)."""

from __future__ import annotations

import logging
from bisect import bisect_right

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.records import HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2, read_header
from bmq.storage.log.config import MAX_READ_BYTES
from bmq.storage.log.indexes import LearnedIndex, SegmentIndexes
from bmq.storage.segment import CorruptLogError, Segment, iter_headers

logger = logging.getLogger(__name__)


class Reading(SegmentIndexes):
    def read(self, offset: int, max_bytes: int) -> bytes | memoryview:
        """Whole batches from the one holding ``offset`` (the first even if larger than
        ``max_bytes``), durable data only."""
        return self.layout.read(self, offset, max_bytes)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: the largest leader epoch <= ``epoch`` that wrote this log, and
        the offset where its data ends (the next epoch's first offset, or the high watermark);
        (-1, -1) if there is none. Every owner starts a segment of its own epoch when it takes
        over, so the segments' epochs and base offsets are the epoch history."""
        with self._lock:
            starts: list[tuple[int, int]] = []
            for seg in self._segments:
                if not starts or seg.data_epoch > starts[-1][0]:
                    starts.append((seg.data_epoch, seg.base))
            end = self.high_watermark
        for i in range(len(starts) - 1, -1, -1):
            if starts[i][0] <= epoch:
                return starts[i][0], starts[i + 1][1] if i + 1 < len(starts) else end
        return -1, -1

    def _release(self, seg: Segment) -> None:
        with self._lock:
            seg.readers -= 1
            close = seg.retired and seg.readers == 0
        if close:
            seg.close_handles()

    def read_batches(self, offset: int, max_bytes: int) -> bytes | memoryview:
        """Whole batches from the one holding ``offset``, within one segment (the next one
        when the cleaner removed every record of this one from ``offset`` on)."""
        while True:
            with self._lock:
                if offset < self.log_start_offset or offset > self.high_watermark:
                    raise KafkaError(
                        ErrorCode.OFFSET_OUT_OF_RANGE,
                        f"offset {offset} not in [{self.log_start_offset}, "
                        f"{self.high_watermark}]")
                if offset == self.high_watermark:
                    return b""
                seg = self._segments[bisect_right(self._bases, offset) - 1]
                end = seg.size
                last = seg is self._segments[-1]
                seg.readers += 1
                located = seg.lookup(offset) if seg.idx_rel is not None else None
            try:
                if located is None:
                    self._ensure_index(seg)
                    located = seg.lookup(offset)
                data = self._read_segment(seg, offset, located[0], located[1], end, max_bytes)
            except FileNotFoundError as exc:  # deleted by retention while we got to it
                raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                 f"offset {offset} deleted") from exc
            except CorruptLogError as exc:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self}: {exc}") from exc
            finally:
                self._release(seg)
            if data or last:
                return data
            offset = max(offset + 1, seg.next_offset)

    def _read_segment(self, seg: Segment, offset: int, pos: int, at: int, end: int,
                      max_bytes: int) -> bytes | memoryview:
        reader = self._reader(seg)
        # Batches between the indexed one and the wanted one start less than an index interval
        # after it: reading that much more keeps the answer as close to max_bytes as possible.
        slack = 0 if at == offset else self.config.index_interval_bytes
        max_bytes = min(max_bytes, MAX_READ_BYTES)
        data = reader.pread(pos, min(max(max_bytes, HEADER_SIZE) + slack, end - pos))
        n = len(data)
        q = 0
        learned = LearnedIndex(self, seg)
        while True:
            if q + HEADER_SIZE > n:
                # The containing batch starts beyond what we read: locate it by headers.
                learned.commit()
                return self._read_located(seg, offset, pos + q, end, max_bytes)
            h = read_header(data, q)
            # (A cleaned segment's first batch may start after its base: the cleaner left a gap.)
            gap = pos == 0 and seg.cleaned_ms >= 0 and h.base_offset > at
            if q == 0 and ((h.base_offset != at and not gap) or h.magic != MAGIC_V2
                           or h.batch_length < HEADER_SIZE - LOG_OVERHEAD):
                # The index points somewhere odd: rebuild it, then find the batch by scanning.
                logger.warning("%s: index of segment %d is wrong near offset %d", self,
                               seg.base, offset)
                if seg is not self._segments[-1]:
                    self._rebuild_sealed_index(seg)
                return self._read_located(seg, offset, 0, end, max_bytes)
            size = h.batch_length + LOG_OVERHEAD
            learned.saw(h.base_offset, pos + q)
            if h.base_offset + h.last_offset_delta >= offset:
                break
            q += size
        learned.commit()
        if q + size > n:
            # Larger than what we read (min-one-batch, or past max_bytes after skipping).
            return reader.pread(pos + q, size)
        return _trim(data, q, size, max_bytes)

    def _read_located(self, seg: Segment, offset: int, start: int, end: int,
                      max_bytes: int) -> bytes | memoryview:
        reader = self._reader(seg)
        max_bytes = min(max_bytes, MAX_READ_BYTES)
        learned = LearnedIndex(self, seg)
        try:
            for pos, base, size, next_offset, _ts in iter_headers(reader.pread, start, end):
                learned.saw(base, pos)
                if next_offset > offset:
                    data = reader.pread(pos, min(max(max_bytes, size), end - pos))
                    if len(data) < size:
                        raise CorruptLogError(f"short read of batch at {pos}")
                    return _trim(data, 0, size, max_bytes)
        finally:
            learned.commit()
        if seg.cleaned_ms >= 0:
            return b""   # the cleaner left a gap from ``offset`` to the segment's end
        raise CorruptLogError(f"offset {offset} not found in segment {seg.base}")

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        i = 0
        while True:
            with self._lock:
                log_start = self.log_start_offset
                segments = self._segments
                while i < len(segments) and (segments[i].max_timestamp < timestamp
                                             or segments[i].size == 0):
                    i += 1
                if i >= len(segments):
                    return None
                seg = segments[i]
                end, next_offset = seg.size, seg.next_offset
                seg.readers += 1
                loaded = seg.index_loaded
                if loaded:
                    pos = self._time_position(seg, timestamp, log_start, next_offset, end)
            try:
                if not loaded:   # a sealed segment: its indexes do not change once loaded
                    self._ensure_index(seg)
                    pos = self._time_position(seg, timestamp, log_start, next_offset, end)
                reader = self._reader(seg)
                for _pos, base, _size, batch_next, max_ts in iter_headers(reader.pread, pos,
                                                                          end):
                    if batch_next > log_start and max_ts >= timestamp:
                        return max(base, log_start), max_ts
            except FileNotFoundError:
                pass  # deleted meanwhile: look further on
            except CorruptLogError as exc:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self}: {exc}") from exc
            finally:
                self._release(seg)
            # The segment list may have changed meanwhile: go on after ``seg``.
            with self._lock:
                i = bisect_right(self._bases, seg.base)

    @staticmethod
    def _time_position(seg: Segment, timestamp: int, log_start: int, next_offset: int,
                       end: int) -> int:
        """Where to start scanning ``seg`` for the first batch with max timestamp >= target:
        the batch that set the largest indexed maximum <= target (earlier ones are all below
        it), or the log start if that is later."""
        start_offset = max(seg.time_lookup(timestamp), log_start)
        return seg.lookup(start_offset)[0] if start_offset < next_offset else end

    def max_timestamp(self) -> tuple[int, int] | None:
        with self._lock:
            best: Segment | None = None
            for seg in self._segments:
                if seg.size and (best is None or seg.max_timestamp > best.max_timestamp):
                    best = seg
            if best is None:
                return None
            return max(best.offset_of_max_timestamp, self.log_start_offset), best.max_timestamp


def _trim(data: bytes, start: int, first_size: int, max_bytes: int) -> bytes | memoryview:
    """Whole batches of ``data`` from ``start``: the first always, then as many as fit."""
    n = len(data)
    limit = min(n, start + max(max_bytes, first_size))
    end = start + first_size
    while end + LOG_OVERHEAD <= limit:
        size = int.from_bytes(data[end + 8:end + 12], "big", signed=True) + LOG_OVERHEAD
        if size < HEADER_SIZE or end + size > limit:
            break
        end += size
    if start == 0 and end == n:
        return data
    return memoryview(data)[start:end]
