"""Retention and DeleteRecords: whole segments leave the log from its start (by time, size
or a new log start offset); their files are deleted once no read uses them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.storage.log.host import LogHost
from bmq.storage.log.segments import LogSegments
from bmq.storage.producer_state import ProducerStateTable
from bmq.storage.segment import Segment


def delete_records(log: LogHost, before_offset: int) -> int:
    segments = log.segments
    with log.io_lock:
        with segments.lock:
            if log.closed:
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{log} is closed")
            if before_offset < 0 or before_offset > segments.high_watermark:
                raise KafkaError(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    f"cannot delete before {before_offset}: high watermark is "
                    f"{segments.high_watermark}")
            if before_offset <= segments.log_start_offset:
                return segments.log_start_offset
            segments.log_start_offset = before_offset
            count = 0
            while count < len(segments.by_offset) - 1 and \
                    segments.by_offset[count].next_offset <= before_offset:
                count += 1
            retired = segments.retire(count)
        log.publish_state()
        delete_segments(log, retired)
        return segments.log_start_offset


def start_at(log: LogHost, offset: int, make_file: Callable[[LogSegments, Segment], None]
             ) -> None:
    """Kafka's ``truncateFullyAndStartAt``, for a log whose records are all below ``offset``
    (a mirror's source deleted them): every segment goes, with the producer state (no
    transaction stays open below the log start), and the log starts empty at ``offset``, in a
    segment whose file (if its layout has one) ``make_file`` makes."""
    segments = log.segments
    with log.io_lock:
        with segments.lock:
            if log.closed:
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{log} is closed")
            if offset <= segments.log_end_offset or \
                    segments.high_watermark != segments.log_end_offset:
                raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                 f"cannot start at {offset}: the log ends at "
                                 f"{segments.log_end_offset}, durable up to "
                                 f"{segments.high_watermark}")
            retired = list(segments.by_offset)
            for seg in retired:
                seg.retired = True
            active = Segment(offset, epoch=log.leader_epoch)
            segments.install([active])
            segments.log_start_offset = segments.log_end_offset = offset
            segments.high_watermark = offset
            segments.rewrites += 1      # batches cached from the old segments are gone
            chunks = [name for name, _end in log.durable_producers.sealed]
            log.live_producers = ProducerStateTable()
            log.durable_producers = ProducerStateTable()
        make_file(segments, active)
        log.publish_state()
        delete_segments(log, retired)
        for name in chunks:     # no state document names them any more
            with contextlib.suppress(FileNotFoundError):
                log.storage.delete(segments.path(name))


def apply_retention(log: LogHost, now_ms: int, kept_at_end: int) -> int:
    """Retention by time and size over the segments but the last ``kept_at_end`` (the
    layout's: never the active segment, nor the object layout's newest object)."""
    segments = log.segments
    with log.io_lock:
        if log.closed:
            return 0
        cfg = log.config
        with segments.lock:
            candidates = segments.by_offset[:-kept_at_end]
            by_start = 0
            while by_start < len(candidates) and \
                    candidates[by_start].next_offset <= segments.log_start_offset:
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
                excess = segments.size_bytes - cfg.retention_bytes
                for seg in candidates:
                    if excess - seg.size < 0:
                        break
                    excess -= seg.size
                    by_size += 1
            retired = segments.retire(max(by_start, by_time, by_size))
            log.live_producers.expire(now_ms, log.producer_expiration_ms)
            log.durable_producers.expire(now_ms, log.producer_expiration_ms)
            log.live_producers.drop_aborted_before(segments.log_start_offset)
            chunks = log.durable_producers.drop_aborted_before(segments.log_start_offset)
        if retired or chunks:
            log.publish_state()
            delete_segments(log, retired)
        for name in chunks:     # no checkpoint names them any more
            with contextlib.suppress(FileNotFoundError):
                log.storage.delete(segments.path(name))
        return len(retired)


def delete_segments(log: LogHost, retired: list[Segment]) -> None:
    """Delete the files of segments taken out of the log (their handles close now, or when
    the last read of them ends)."""
    if retired:
        log.fence_check()   # a fenced owner must not delete what the new one may list
    segments = log.segments
    for seg in retired:
        with segments.lock:
            unused = seg.readers == 0
        if unused:
            seg.close_handles()
        segments.delete_files(seg)
