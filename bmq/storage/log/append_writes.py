"""The append layout's write path (``AppendLayout.write``, called by ``flush``): it takes the
whole queue, decides rolls and index entries from the batch headers it already knows, writes
each segment's share with one gathered write and one sync, then publishes the new sizes, index
entries and high watermark under ``segments.lock``; and the segment files' append handles and
index files it keeps."""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field

from bmq.storage.base import AppendFile, BytesLike
from bmq.storage.handles import OPEN_FILES
from bmq.storage.log.config import BatchMeta, Queued
from bmq.storage.log.host import LogHost
from bmq.storage.log.segments import LogSegments
from bmq.storage.segment import (
    MAX_POSITION,
    MAX_RELATIVE_OFFSET,
    OFFSET_ENTRY,
    TIME_ENTRY,
    Segment,
)


@dataclass(slots=True)
class _Group:
    """What one flush writes into one segment."""

    seg: Segment
    new: bool
    size: int
    next_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    bytes_since_index: int
    last_time_entry: int
    created_ms: int
    buffers: list[BytesLike] = field(default_factory=list)
    idx_rel: list[int] = field(default_factory=list)
    idx_pos: list[int] = field(default_factory=list)
    tidx_ts: list[int] = field(default_factory=list)
    tidx_rel: list[int] = field(default_factory=list)

    def add_time_entry(self) -> None:
        self.tidx_ts.append(self.max_timestamp)
        self.tidx_rel.append(self.offset_of_max_timestamp - self.seg.base)
        self.last_time_entry = self.max_timestamp


def write(log: LogHost, queue: list[Queued]) -> None:
    """Make a flush's queue durable in the segment files (see the module's docstring)."""
    segments = log.segments
    cfg = log.config
    interval = cfg.index_interval_bytes
    segment_bytes = cfg.segment_bytes
    segment_ms = cfg.segment_ms
    group = _new_group(segments.by_offset[-1], False)
    groups = [group]
    seg_base = group.seg.base
    idempotent: list[tuple[BatchMeta, int]] = []
    for view, now_ms, metas in queue:
        run_start = pos = 0
        for meta in metas:
            size, base, last = meta[0], meta[1], meta[2]
            gsize = group.size
            if gsize and (gsize + size > segment_bytes
                          or now_ms - group.created_ms > segment_ms
                          or last - seg_base > MAX_RELATIVE_OFFSET
                          or gsize + size > MAX_POSITION):
                if pos > run_start:
                    group.buffers.append(view[run_start:pos])
                run_start = pos
                # (A copied log's gap before ``base`` ends the segment rolled away from,
                # as the cleaner's do: each segment starts where the one before ends.)
                group.next_offset = base
                group = _new_group(Segment(base, now_ms), True)
                groups.append(group)
                seg_base = base
            if group.created_ms < 0:
                group.created_ms = now_ms
            max_ts = meta[3]
            if max_ts > group.max_timestamp:
                group.max_timestamp = max_ts
                group.offset_of_max_timestamp = base
            if group.bytes_since_index >= interval:
                group.idx_rel.append(base - seg_base)
                group.idx_pos.append(group.size)
                if group.max_timestamp > group.last_time_entry:
                    group.add_time_entry()
                group.bytes_since_index = 0
            group.bytes_since_index += size
            group.size += size
            group.next_offset = last + 1
            if meta[4] >= 0:
                idempotent.append((meta, now_ms))
            pos += size
        if pos > run_start:
            group.buffers.append(view if run_start == 0 and pos == view.nbytes
                                 else view[run_start:pos])

    # I/O: one gathered write and one sync per segment touched (normally exactly one).
    for i, g in enumerate(groups):
        seg = g.seg
        if g.new:
            _seal(segments, groups[i - 1])
        if g.new or (g.buffers and seg.appender is None):   # (closed while idle)
            seg.appender = open_appender(segments, seg)
        if g.buffers:
            assert seg.appender is not None
            seg.appender.write(g.buffers)
            seg.appender.sync()
    active = groups[-1]
    _track_appender(log, active.seg)
    for t, r in zip(active.tidx_ts, active.tidx_rel, strict=True):
        active.seg.tidx_pending += TIME_ENTRY.pack(t, r)
    for r, p in zip(active.idx_rel, active.idx_pos, strict=True):
        active.seg.idx_pending += OFFSET_ENTRY.pack(r, p)
    for g in groups:
        g.seg.bytes_since_index = g.bytes_since_index
        g.seg.created_ms = g.created_ms

    # Only an owner that is still the newest may acknowledge (see ``recovery.claim``).
    log.fence_check()

    # Publish.
    written = 0
    with segments.lock:
        for g in groups:
            seg = g.seg
            written += g.size - seg.size
            seg.size = g.size
            seg.next_offset = g.next_offset
            seg.max_timestamp = g.max_timestamp
            seg.offset_of_max_timestamp = g.offset_of_max_timestamp
            assert seg.idx_rel is not None and seg.idx_pos is not None
            assert seg.tidx_ts is not None and seg.tidx_rel is not None
            seg.idx_rel.extend(g.idx_rel)
            seg.idx_pos.extend(g.idx_pos)
            seg.tidx_ts.extend(g.tidx_ts)
            seg.tidx_rel.extend(g.tidx_rel)
            if g.new:
                segments.by_offset.append(seg)
                segments.bases.append(seg.base)
        segments.size_bytes += written
        segments.high_watermark = groups[-1].next_offset
        durable = log.durable_producers
        for meta, now_ms in idempotent:
            durable.record(meta[4], meta[5], meta[6], meta[7], meta[1], meta[2], meta[3],
                           now_ms, meta[8])


def _new_group(seg: Segment, new: bool) -> _Group:
    return _Group(seg=seg, new=new, size=seg.size, next_offset=seg.next_offset,
                  max_timestamp=seg.max_timestamp,
                  offset_of_max_timestamp=seg.offset_of_max_timestamp,
                  bytes_since_index=seg.bytes_since_index,
                  last_time_entry=seg.last_time_entry, created_ms=seg.created_ms)


def open_appender(segments: LogSegments, seg: Segment) -> AppendFile:
    """Append handle positioned at the segment's durable size (bytes past it, e.g. a stale
    file under a reused name, are cut off first)."""
    path = segments.path(seg.log_file)
    appender = segments.storage.open_append(path)
    if appender.position != seg.size:
        appender.close()
        segments.storage.truncate(path, seg.size)
        appender = segments.storage.open_append(path)
    return appender


def _seal(segments: LogSegments, g: _Group) -> None:
    """Roll away from ``g.seg``: its data is synced already; finish and sync its indexes."""
    seg = g.seg
    if g.max_timestamp > g.last_time_entry:
        g.add_time_entry()  # the segment's final maximum, as Kafka does on roll
    idx = bytes(seg.idx_pending) + b"".join(
        OFFSET_ENTRY.pack(r, p) for r, p in zip(g.idx_rel, g.idx_pos, strict=True))
    tidx = bytes(seg.tidx_pending) + b"".join(
        TIME_ENTRY.pack(t, r) for t, r in zip(g.tidx_ts, g.tidx_rel, strict=True))
    append_index(segments, seg, idx, tidx)
    if seg.appender is not None:
        OPEN_FILES.closed(seg.appender)
        seg.appender.close()
        seg.appender = None


def append_index(segments: LogSegments, seg: Segment, idx: bytes, tidx: bytes) -> None:
    """Append encoded entries to both index files after their persisted entries; sync."""
    for name, data, entry, persisted in (
            (seg.index_file, idx, 8, seg.idx_persisted),
            (seg.timeindex_file, tidx, 12, seg.tidx_persisted)):
        path = segments.path(name)
        appender = segments.storage.open_append(path)
        try:
            if appender.position != persisted * entry:
                # Left-overs of an interrupted write: cut back to the known entries.
                appender.close()
                segments.storage.truncate(path, persisted * entry)
                appender = segments.storage.open_append(path)
            if data:
                appender.write([data])
            appender.sync()
        finally:
            appender.close()
    seg.idx_persisted += len(idx) // 8
    seg.tidx_persisted += len(tidx) // 12
    seg.idx_pending.clear()
    seg.tidx_pending.clear()


def _track_appender(log: LogHost, seg: Segment) -> None:
    """Under ``io_lock``: the active segment's append handle was used now (the process's pool
    closes it once the partition is idle, or the least recently written past its limit)."""
    handle = seg.appender
    if handle is not None:
        OPEN_FILES.used(handle, functools.partial(_close_idle_appender, log, seg, handle))


def _close_idle_appender(log: LogHost, seg: Segment, handle: AppendFile) -> bool:
    """The pool's closer of ``seg``'s append handle: False while the partition is flushing (the
    next write opens it again)."""
    if not log.io_lock.acquire(blocking=False):
        return False
    try:
        if seg.appender is not handle:
            return True
        seg.appender = None
    finally:
        log.io_lock.release()
    with contextlib.suppress(OSError):
        handle.close()
    return True
