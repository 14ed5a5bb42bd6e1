"""The log over its segments: the segments in offset order, the offsets that bound the log, and
the lock that guards them. A partition's owner (``PartitionLog``) and its read-only readers
(``LogReader``) each hold one; reads (``reading``), indexes (``offset_index``), retention and the
layouts work on it."""

from __future__ import annotations

import contextlib
import functools
import threading

from bmq.storage.base import ReadFile, Storage
from bmq.storage.handles import OPEN_FILES
from bmq.storage.log.config import LogConfig
from bmq.storage.segment import Segment


class LogSegments:
    """``lock`` guards the in-memory state shared with the event loop (the segment list and
    bases, offsets, sizes, indexes of segments) and is held only for in-memory work, never
    across a syscall."""

    def __init__(self, storage: Storage, partition_dir: str, config: LogConfig, *,
                 readonly: bool) -> None:
        self.storage = storage
        self.dir = partition_dir
        self.config = config
        #: True for a ``LogReader``'s segments: nothing is written to storage for them, not
        #: even an index file that had to be rebuilt.
        self.readonly = readonly
        self.lock = threading.Lock()
        self.by_offset: list[Segment] = []
        self.bases: list[int] = []   # of ``by_offset``, which reads bisect
        self.size_bytes = 0
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        # Bumped when segments are replaced by others (the cleaner's, or, in a reader, any
        # segment leaving what it lists): batches cached from the old ones are stale.
        self.rewrites = 0

    def path(self, name: str) -> str:
        return f"{self.dir}/{name}"

    def install(self, segments: list[Segment]) -> None:
        """Under ``lock`` (or before the log is shared): make ``segments`` the segment list,
        with the bases reads bisect and the total size."""
        self.by_offset = segments
        self.bases = [s.base for s in segments]
        self.size_bytes = sum(s.size for s in segments)

    def retire(self, count: int) -> list[Segment]:
        """Under ``lock``: take the first ``count`` segments out of the log."""
        count = min(count, len(self.by_offset) - 1)   # the last one (active, or tail) stays
        if count <= 0:
            return []
        retired = self.by_offset[:count]
        self.by_offset = self.by_offset[count:]
        self.bases = self.bases[count:]
        for seg in retired:
            self.size_bytes -= seg.size
            seg.retired = True
        if self.log_start_offset < self.by_offset[0].base:
            self.log_start_offset = self.by_offset[0].base
        return retired

    def retire_all(self) -> list[Segment]:
        """Under ``lock``: every segment leaves the log's use; returns those no read holds,
        whose handles the caller closes (after the lock: other handles close when their last
        read ends)."""
        for seg in self.by_offset:
            seg.retired = True
        return [seg for seg in self.by_offset if seg.readers == 0]

    def reader(self, seg: Segment) -> ReadFile:
        """The segment's read handle, opened on first use; only for a read that holds
        ``seg.readers`` (the process's pool of handles closes those no read holds)."""
        reader = seg.reader
        if reader is None:
            with seg.lock:
                if seg.reader is None:
                    seg.reader = self.storage.open_read(self.path(seg.log_file))
                reader = seg.reader
        OPEN_FILES.used(reader, functools.partial(self._close_unused_reader, seg, reader))
        return reader

    def _close_unused_reader(self, seg: Segment, handle: ReadFile) -> bool:
        """The pool's closer of ``seg``'s read handle: False while a read holds it."""
        with self.lock:     # reads take seg.readers under it: none can start meanwhile
            if seg.readers:
                return False
            if seg.reader is not handle:
                return True
            seg.reader = None
        with contextlib.suppress(OSError):
            handle.close()
        return True

    def release(self, seg: Segment) -> None:
        """A read of ``seg`` ended (it took ``seg.readers`` under ``lock``)."""
        with self.lock:
            seg.readers -= 1
            close = seg.retired and seg.readers == 0
        if close:
            seg.close_handles()

    def delete_files(self, seg: Segment) -> None:
        for name in seg.file_names():
            self.storage.delete(self.path(name))

    def __repr__(self) -> str:
        return f"PartitionLog({self.storage.url}/{self.dir})"

    __str__ = __repr__
