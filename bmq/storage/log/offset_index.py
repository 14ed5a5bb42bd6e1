"""The offset and time indexes of segments (Kafka's ``.index`` and ``.timeindex``; not the field
indexes of Index Query, ``bmq.index``): read from their files (checked, and rebuilt from the
batch headers when bad), written, and learned by readers as they read past what the files
held."""

from __future__ import annotations

import logging
from array import array
from collections.abc import Callable

from bmq.storage.log.segments import LogSegments
from bmq.storage.segment import (
    Segment,
    decode_offset_index,
    decode_time_index,
    encode_offset_index,
    encode_time_index,
    iter_headers,
)

logger = logging.getLogger(__name__)

# (offset index: relative offsets, positions), (time index: timestamps, relative offsets)
IndexArrays = tuple[tuple["array[int]", "array[int]"], tuple["array[int]", "array[int]"]]


def read_indexes(segments: LogSegments, seg: Segment) -> IndexArrays | None:
    """The checkpointed entries of a segment's index files; None if unusable."""
    try:
        idx_data = b""
        tidx_data = b""
        if seg.idx_persisted:
            idx_data = segments.storage.read_range(segments.path(seg.index_file), 0,
                                                   8 * seg.idx_persisted)
        if seg.tidx_persisted:
            tidx_data = segments.storage.read_range(segments.path(seg.timeindex_file), 0,
                                                    12 * seg.tidx_persisted)
        idx = decode_offset_index(idx_data, seg.idx_persisted)
        tidx = decode_time_index(tidx_data, seg.tidx_persisted)
    except (OSError, ValueError) as exc:
        logger.info("%s: index of segment %d unusable (%s)", segments, seg.base, exc)
        return None
    if not seg.validate_indexes(idx, tidx):
        logger.info("%s: index of segment %d inconsistent", segments, seg.base)
        return None
    return idx, tidx


def rebuild_indexes(segments: LogSegments, seg: Segment, end: int,
                    pread: Callable[[int, int], bytes] | None = None) -> IndexArrays:
    """Indexes of a durable segment from its batch headers (no CRC: data is trusted)."""
    interval = segments.config.index_interval_bytes
    rel: array[int] = array("I")
    pos_: array[int] = array("I")
    ts: array[int] = array("q")
    trel: array[int] = array("I")
    max_ts = -1
    off_max = seg.base
    since = 0
    last_entry = -(1 << 63)
    if pread is None:
        pread = segments.reader(seg).pread
    for pos, base, size, _next, batch_max in iter_headers(pread, 0, end):
        if batch_max > max_ts:
            max_ts, off_max = batch_max, base
        if since >= interval:
            rel.append(base - seg.base)
            pos_.append(pos)
            if max_ts > last_entry:
                ts.append(max_ts)
                trel.append(off_max - seg.base)
                last_entry = max_ts
            since = 0
        since += size
    return (rel, pos_), (ts, trel)


def write_index_files(segments: LogSegments, seg: Segment) -> None:
    """Replace both index files of ``seg`` with its in-memory entries, not durably: a file a
    crash left missing or short is rebuilt from the segment on first use (``read_indexes``),
    and the four syncs of two durable replacements were most of a partition's takeover."""
    assert seg.idx_rel is not None and seg.idx_pos is not None
    assert seg.tidx_ts is not None and seg.tidx_rel is not None
    segments.storage.write_atomic(segments.path(seg.index_file),
                                  encode_offset_index(seg.idx_rel, seg.idx_pos), durable=False)
    segments.storage.write_atomic(segments.path(seg.timeindex_file),
                                  encode_time_index(seg.tidx_ts, seg.tidx_rel), durable=False)
    seg.idx_persisted = len(seg.idx_rel)
    seg.tidx_persisted = len(seg.tidx_ts)
    seg.idx_pending.clear()
    seg.tidx_pending.clear()


def ensure_index(segments: LogSegments, seg: Segment) -> None:
    """Load a sealed segment's indexes on first use, rebuilding them if they are bad."""
    if seg.idx_rel is not None:
        return
    with seg.lock:
        if seg.idx_rel is not None:
            return
        indexes = read_indexes(segments, seg)
        if indexes is not None:
            with segments.lock:
                seg.set_indexes(*indexes)
            return
        rebuild_sealed_index(segments, seg)


def rebuild_sealed_index(segments: LogSegments, seg: Segment) -> None:
    with seg.lock:
        idx, tidx = rebuild_indexes(segments, seg, seg.size)
        probe = Segment(seg.base, epoch=seg.epoch, seq=seg.seq)
        probe.index_epoch = seg.index_epoch
        probe.set_indexes(idx, tidx)
        try:
            if not segments.readonly:   # readers never write
                write_index_files(segments, probe)
        except OSError as exc:  # the in-memory index is what matters
            logger.warning("%s: could not rewrite index of %d: %s", segments, seg.base, exc)
        with segments.lock:
            seg.set_indexes(idx, tidx)
            seg.idx_persisted, seg.tidx_persisted = probe.idx_persisted, probe.tidx_persisted
    logger.info("%s: rebuilt the indexes of segment %d", segments, seg.base)


class LearnedIndex:
    """Index entries a read-only reader learns while it reads past the end of a segment's known
    index (a segment its writer is still filling: the reader knows the index only up to the
    writer's last checkpoint). Kept in memory only, so the next read there is one lookup, not
    another scan (the proxy reads tails this way)."""

    __slots__ = ("_last", "_positions", "_rels", "_seg", "_segments")

    def __init__(self, segments: LogSegments, seg: Segment) -> None:
        self._segments = segments
        self._seg = seg
        self._rels: list[int] = []
        self._positions: list[int] = []
        learn = segments.readonly and seg.idx_pos is not None
        self._last = (seg.idx_pos[-1] if seg.idx_pos else -1) if learn else None

    def saw(self, base_offset: int, position: int) -> None:
        last = self._last
        if last is None:
            return
        if position - (self._positions[-1] if self._positions else last) >= \
                self._segments.config.index_interval_bytes:
            self._rels.append(base_offset - self._seg.base)
            self._positions.append(position)

    def commit(self) -> None:
        if not self._positions:
            return
        seg = self._seg
        with self._segments.lock:
            if seg.idx_pos is not None and seg.idx_rel is not None and \
                    (seg.idx_pos[-1] if seg.idx_pos else -1) == self._last:
                seg.idx_rel.extend(self._rels)
                seg.idx_pos.extend(self._positions)
        self._last = self._positions[-1]
        self._positions = []
        self._rels = []
