"""Reads: the segment holding an offset is found by bisection, the batch by the sparse offset
index and a few header reads; then one ``pread`` fetches the data. Readers hold a reference to
the segment so that retention never closes a descriptor under them. Also the timestamp lookups
(ListOffsets by time, max timestamp). Both the owner and its readers read this way, each over
its own ``LogSegments``."""

from __future__ import annotations

import logging
from bisect import bisect_right

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.records import HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2, read_header
from bmq.storage.log.config import MAX_READ_BYTES
from bmq.storage.log.offset_index import LearnedIndex, ensure_index, rebuild_sealed_index
from bmq.storage.log.segments import LogSegments
from bmq.storage.segment import CorruptLogError, Segment, iter_headers

logger = logging.getLogger(__name__)


def end_offset_for_epoch(segments: LogSegments, epoch: int,
                         current_epoch: int = -1) -> tuple[int, int]:
    """OffsetForLeaderEpoch, as Kafka's leader answers it from its epoch history: the largest
    leader epoch <= ``epoch`` that wrote this log and the offset where its data ends (the next
    epoch's first offset, or the high watermark); an epoch older than the log's first, itself
    with the log's first offset; (-1, -1) for an epoch newer than any. Every owner starts a
    segment of its own epoch when it first writes, so the segments' epochs and base offsets are
    the epoch history; the partition's ``current_epoch`` (its owner's) ends it, as Kafka's
    leader records its epoch when it takes over: without it, a consumer checking its position
    at the current epoch of a partition not written since the move (or never) was told (-1, -1)
    and took it for a truncated log (librdkafka resets the offset by its policy)."""
    with segments.lock:
        starts: list[tuple[int, int]] = []
        for seg in segments.by_offset:
            if not starts or seg.data_epoch > starts[-1][0]:
                starts.append((seg.data_epoch, seg.base))
        end = segments.high_watermark
    if current_epoch >= 0 and (not starts or current_epoch > starts[-1][0]):
        starts.append((current_epoch, end))
    for i in range(len(starts) - 1, -1, -1):
        if starts[i][0] <= epoch:
            return starts[i][0], starts[i + 1][1] if i + 1 < len(starts) else end
    return (epoch, starts[0][1]) if starts and epoch >= 0 else (-1, -1)


def read_batches(segments: LogSegments, offset: int, max_bytes: int) -> bytes | memoryview:
    """Whole batches from the one holding ``offset``, within one segment (the next one
    when the cleaner removed every record of this one from ``offset`` on)."""
    while True:
        with segments.lock:
            if offset < segments.log_start_offset or offset > segments.high_watermark:
                raise KafkaError(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    f"offset {offset} not in [{segments.log_start_offset}, "
                    f"{segments.high_watermark}]")
            if offset == segments.high_watermark:
                return b""
            seg = segments.by_offset[bisect_right(segments.bases, offset) - 1]
            end = seg.size
            last = seg is segments.by_offset[-1]
            seg.readers += 1
            located = seg.lookup(offset) if seg.idx_rel is not None else None
        try:
            if located is None:
                ensure_index(segments, seg)
                located = seg.lookup(offset)
            data = _read_segment(segments, seg, offset, located[0], located[1], end, max_bytes)
        except FileNotFoundError as exc:  # deleted by retention while we got to it
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"offset {offset} deleted") from exc
        except CorruptLogError as exc:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{segments}: {exc}") from exc
        finally:
            segments.release(seg)
        if data or last:
            return data
        offset = max(offset + 1, seg.next_offset)


def _read_segment(segments: LogSegments, seg: Segment, offset: int, pos: int, at: int, end: int,
                  max_bytes: int) -> bytes | memoryview:
    reader = segments.reader(seg)
    # Batches between the indexed one and the wanted one start less than an index interval
    # after it: reading that much more keeps the answer as close to max_bytes as possible.
    slack = 0 if at == offset else segments.config.index_interval_bytes
    max_bytes = min(max_bytes, MAX_READ_BYTES)
    data = reader.pread(pos, min(max(max_bytes, HEADER_SIZE) + slack, end - pos))
    n = len(data)
    q = 0
    learned = LearnedIndex(segments, seg)
    while True:
        if q + HEADER_SIZE > n:
            # The containing batch starts beyond what we read: locate it by headers.
            learned.commit()
            return _read_located(segments, seg, offset, pos + q, end, max_bytes)
        h = read_header(data, q)
        # (A segment's first batch may start after its base: a gap the cleaner left, or a
        # copied log's.)
        gap = pos == 0 and h.base_offset > at
        if q == 0 and ((h.base_offset != at and not gap) or h.magic != MAGIC_V2
                       or h.batch_length < HEADER_SIZE - LOG_OVERHEAD):
            # The index points somewhere odd: rebuild it, then find the batch by scanning.
            logger.warning("%s: index of segment %d is wrong near offset %d", segments,
                           seg.base, offset)
            if seg is not segments.by_offset[-1]:
                rebuild_sealed_index(segments, seg)
            return _read_located(segments, seg, offset, 0, end, max_bytes)
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


def _read_located(segments: LogSegments, seg: Segment, offset: int, start: int, end: int,
                  max_bytes: int) -> bytes | memoryview:
    reader = segments.reader(seg)
    max_bytes = min(max_bytes, MAX_READ_BYTES)
    learned = LearnedIndex(segments, seg)
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
    # A gap from ``offset`` to the segment's end (the cleaner's, or a copied log's before a
    # roll): ``read_batches`` goes on in the next segment.
    return b""


def offset_for_timestamp(segments: LogSegments, timestamp: int) -> tuple[int, int] | None:
    i = 0
    while True:
        with segments.lock:
            log_start = segments.log_start_offset
            by_offset = segments.by_offset
            while i < len(by_offset) and (by_offset[i].max_timestamp < timestamp
                                          or by_offset[i].size == 0):
                i += 1
            if i >= len(by_offset):
                return None
            seg = by_offset[i]
            end, next_offset = seg.size, seg.next_offset
            seg.readers += 1
            loaded = seg.index_loaded
            if loaded:
                pos = _time_position(seg, timestamp, log_start, next_offset, end)
        try:
            if not loaded:   # a sealed segment: its indexes do not change once loaded
                ensure_index(segments, seg)
                pos = _time_position(seg, timestamp, log_start, next_offset, end)
            reader = segments.reader(seg)
            for _pos, base, _size, batch_next, max_ts in iter_headers(reader.pread, pos,
                                                                      end):
                if batch_next > log_start and max_ts >= timestamp:
                    return max(base, log_start), max_ts
        except FileNotFoundError:
            pass  # deleted meanwhile: look further on
        except CorruptLogError as exc:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{segments}: {exc}") from exc
        finally:
            segments.release(seg)
        # The segment list may have changed meanwhile: go on after ``seg``.
        with segments.lock:
            i = bisect_right(segments.bases, seg.base)


def _time_position(seg: Segment, timestamp: int, log_start: int, next_offset: int,
                   end: int) -> int:
    """Where to start scanning ``seg`` for the first batch with max timestamp >= target:
    the batch that set the largest indexed maximum <= target (earlier ones are all below
    it), or the log start if that is later."""
    start_offset = max(seg.time_lookup(timestamp), log_start)
    return seg.lookup(start_offset)[0] if start_offset < next_offset else end


def max_timestamp(segments: LogSegments) -> tuple[int, int] | None:
    with segments.lock:
        best: Segment | None = None
        for seg in segments.by_offset:
            if seg.size and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        return max(best.offset_of_max_timestamp, segments.log_start_offset), best.max_timestamp


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
