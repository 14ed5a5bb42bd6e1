"""Retention and DeleteRecords: whole segments leave the log from its start (by time, size
or a new log start offset); their files are deleted once no read uses them."""

from __future__ import annotations

import contextlib

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.storage.log.core import LogCore
from bmq.storage.segment import Segment


class Retention(LogCore):
    def delete_records(self, before_offset: int) -> int:
        with self._io_lock:
            with self._lock:
                if self._closed:
                    raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self} is closed")
                if before_offset < 0 or before_offset > self.high_watermark:
                    raise KafkaError(
                        ErrorCode.OFFSET_OUT_OF_RANGE,
                        f"cannot delete before {before_offset}: high watermark is "
                        f"{self.high_watermark}")
                if before_offset <= self.log_start_offset:
                    return self.log_start_offset
                self.log_start_offset = before_offset
                count = 0
                while count < len(self._segments) - 1 and \
                        self._segments[count].next_offset <= before_offset:
                    count += 1
                retired = self._retire(count)
            self._checkpoint_locked()
            self._delete_segments(retired)
            return self.log_start_offset

    def apply_retention(self, now_ms: int) -> int:
        with self._io_lock:
            if self._closed:
                return 0
            cfg = self.config
            with self._lock:
                candidates = self._retention_candidates()
                by_start = 0
                while by_start < len(candidates) and \
                        candidates[by_start].next_offset <= self.log_start_offset:
                    by_start += 1
                by_time = 0
                if cfg.retention_ms >= 0:
                    for seg in candidates:
                        stamp = seg.max_timestamp if seg.max_timestamp >= 0 else seg.created_ms
                        if now_ms - stamp <= cfg.retention_ms:
                            break
                        by_time += 1
                by_size = 0
                if cfg.retention_bytes >= 0:
                    excess = self._size_bytes - cfg.retention_bytes
                    for seg in candidates:
                        if excess - seg.size < 0:
                            break
                        excess -= seg.size
                        by_size += 1
                retired = self._retire(max(by_start, by_time, by_size))
                self._producers.expire(now_ms, self.producer_expiration_ms)
                self._durable_producers.expire(now_ms, self.producer_expiration_ms)
                self._producers.drop_aborted_before(self.log_start_offset)
                chunks = self._durable_producers.drop_aborted_before(self.log_start_offset)
            if retired or chunks:
                self._checkpoint_locked()
                self._delete_segments(retired)
            for name in chunks:     # no checkpoint names them any more
                with contextlib.suppress(FileNotFoundError):
                    self.storage.delete(self._path(name))
            return len(retired)

    def _retention_candidates(self) -> list[Segment]:
        """Under ``_lock``: the segments retention may delete, oldest first (never the active
        segment, nor the object layout's newest object)."""
        return self._segments[:-self.layout.kept_at_end]

    def _retire(self, count: int) -> list[Segment]:
        """Under ``_lock``: take the first ``count`` segments out of the log."""
        count = min(count, len(self._segments) - 1)   # the last one (active, or tail) stays
        if count <= 0:
            return []
        retired = self._segments[:count]
        self._segments = self._segments[count:]
        self._bases = self._bases[count:]
        for seg in retired:
            self._size_bytes -= seg.size
            seg.retired = True
        if self.log_start_offset < self._segments[0].base:
            self.log_start_offset = self._segments[0].base
        return retired

    def _delete_segments(self, retired: list[Segment]) -> None:
        if retired:
            self._fence_check()   # a fenced owner must not delete what the new one may list
        for seg in retired:
            with self._lock:
                unused = seg.readers == 0
            if unused:
                seg.close_handles()
            self._delete_files(seg)

    def _delete_files(self, seg: Segment) -> None:
        for name in seg.file_names():
            self.storage.delete(self._path(name))
