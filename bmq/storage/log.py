"""A partition's log: Kafka's segmented log, on a ``Storage``.

Threads. ``append`` and ``read`` run on the broker's event loop; ``flush`` (and the other
methods that do I/O: ``checkpoint``, ``apply_retention``, ``delete_records``, ``close``,
``delete``) run on worker threads. Two locks:

* ``_lock`` guards the in-memory state shared with the loop (queue, offsets, segment list,
  segment sizes and indexes). It is held only for in-memory work, never across a syscall.
* ``_io_lock`` serialises the I/O methods among themselves (one flush at a time, checkpoints
  consistent with the flushed state, segment deletion apart from rolls).

Write path. ``append`` rewrites base offsets in the caller's buffer and queues the memoryview;
``flush`` takes the whole queue, decides rolls and index entries from the batch headers it
already knows, writes each segment's share with one gathered write and one sync, then publishes
the new sizes, index entries and high watermark under ``_lock``.

Read path. The segment containing the offset is found by bisection, the batch by the sparse
offset index and a few header reads; then one ``pread`` fetches the data. Readers hold a
reference to the segment so that retention never closes a descriptor under them.

Durability. Everything below the high watermark has been synced. ``checkpoint.json`` records
the log start offset, the recovery point (= high watermark at that time), the segments with
their sizes and index entry counts, and the producer state as of the recovery point. Recovery
trusts the checkpointed prefix and scans everything after it, checking framing, offsets and
CRC-32C, truncating at the first bad batch.

Checkpoint format (``{topic}/{partition}/checkpoint.json``, replaced atomically)::

    {"version": 1, "topic": "t", "partition": 0,
     "log_start_offset": 120,            # DeleteRecords / retention low watermark
     "recovery_point": 5000,             # everything below is synced and vouched for
     "high_watermark": 5000,             # same value: durable end at checkpoint time
     "segments": [{"base_offset": 0, "size": 1073741000, "next_offset": 3000,
                   "max_timestamp": 1700000000123, "offset_of_max_timestamp": 2990,
                   "created_ms": 1699990000000,
                   "index_entries": 262000, "time_index_entries": 261000}, ...],
     "producers": {"<producer id>": {"epoch": 3, "last_ms": 1700000000456,
                   "batches": [[first_seq, last_seq, base_offset, last_offset, max_ts],
                               ...]}}}   # the last 5 batches of each producer, oldest first

``index_entries``/``time_index_entries`` count the entries known to be synced in the index
files; sealed segments' indexes are loaded (and checked, and rebuilt if bad) on first use.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from array import array
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    crc_ok,
    read_header,
    set_base_offset,
    set_log_append_time,
)
from bmq.storage.base import AppendFile, BytesLike, ReadFile, Storage
from bmq.storage.producer_state import ProducerStateTable
from bmq.storage.segment import (
    MAX_POSITION,
    MAX_RELATIVE_OFFSET,
    OFFSET_ENTRY,
    TIME_ENTRY,
    CorruptLogError,
    Segment,
    decode_offset_index,
    decode_time_index,
    encode_offset_index,
    encode_time_index,
    index_name,
    iter_headers,
    log_name,
    parse_base,
    timeindex_name,
)

logger = logging.getLogger(__name__)

CHECKPOINT_FILE = "checkpoint.json"
CHECKPOINT_VERSION = 1
DEFAULT_PRODUCER_EXPIRATION_MS = 24 * 3600 * 1000   # Kafka's producer.id.expiration.ms
SCAN_CHUNK = 8 << 20
# A read returns at most this much (or one batch, if larger) whatever max_bytes asks for.
MAX_READ_BYTES = 64 << 20
_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]+$")

# Per batch in the queue: size, base offset, last offset, max timestamp,
# producer id, producer epoch, first sequence, last sequence.
_Meta = tuple[int, int, int, int, int, int, int, int]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class LogConfig:
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000      # -1 = unlimited
    retention_bytes: int = -1                     # -1 = unlimited
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"    # or "LogAppendTime"


@dataclass(slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False


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


class PartitionLog:
    """The log of one partition. Create with ``PartitionLog.open``."""

    def __init__(self, storage: Storage, topic: str, partition: int, config: LogConfig) -> None:
        self.storage = storage
        self.topic = topic
        self.partition = partition
        self.config = config
        self.dir = f"{topic}/{partition}"
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        self.producer_expiration_ms = DEFAULT_PRODUCER_EXPIRATION_MS
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._size_bytes = 0
        self._lock = threading.Lock()
        self._io_lock = threading.Lock()
        self._queue: list[tuple[memoryview, int, list[_Meta]]] = []
        self._pending = 0
        self._producers = ProducerStateTable()          # live: includes queued batches
        self._durable_producers = ProducerStateTable()  # as of the high watermark
        self._failed: BaseException | None = None
        self._closed = False
        self._checkpointed = b""   # the checkpoint last written

    # ------------------------------------------------------------------------------ opening
    @classmethod
    def open(cls, storage: Storage, topic: str, partition: int,
             config: LogConfig) -> PartitionLog:
        if not storage.supports_append:
            raise NotImplementedError(
                f"{storage!r} cannot append; the object-store log layout is not implemented")
        if not _TOPIC_RE.match(topic) or topic in (".", "..") or partition < 0:
            raise ValueError(f"invalid topic partition {topic!r}-{partition}")
        log = cls(storage, topic, partition, config)
        log._load()
        return log

    def _path(self, name: str) -> str:
        return f"{self.dir}/{name}"

    def _read_checkpoint(self) -> dict[str, Any] | None:
        path = self._path(CHECKPOINT_FILE)
        if not self.storage.exists(path):
            return None
        try:
            data = json.loads(self.storage.read_all(path))
            if data.get("version") != CHECKPOINT_VERSION:
                raise ValueError(f"checkpoint version {data.get('version')}")
            for key in ("log_start_offset", "recovery_point", "segments", "producers"):
                if key not in data:
                    raise ValueError(f"checkpoint without {key}")
            return dict(data)
        except (ValueError, TypeError, KeyError) as exc:
            logger.warning("%s: unreadable checkpoint (%s), recovering from the log alone",
                           self, exc)
            return None

    def _load(self) -> None:
        storage = self.storage
        storage.makedirs(self.dir)
        names = storage.list(self.dir)
        for name in names:
            if ".tmp." in name:
                storage.delete(self._path(name))
        bases = sorted(b for b in (parse_base(n, ".log") for n in names) if b is not None)
        base_set = set(bases)
        for name in names:
            b = parse_base(name, ".index")
            if b is None:
                b = parse_base(name, ".timeindex")
            if b is not None and b not in base_set:
                storage.delete(self._path(name))

        ckpt = self._read_checkpoint()
        ck_segs: dict[int, dict[str, int]] = {}
        ck_last_base: int | None = None
        recovery_point = 0
        log_start = bases[0] if bases else 0
        producers = ProducerStateTable()
        if ckpt is not None:
            try:
                for meta in ckpt["segments"]:
                    ck_segs[int(meta["base_offset"])] = {k: int(v) for k, v in meta.items()}
                ck_last_base = int(ckpt["segments"][-1]["base_offset"]) if ck_segs else None
                recovery_point = int(ckpt["recovery_point"])
                log_start = int(ckpt["log_start_offset"])
                producers = ProducerStateTable.from_json(ckpt["producers"])
            except (ValueError, TypeError, KeyError, IndexError) as exc:
                logger.warning("%s: malformed checkpoint (%s), scanning everything", self, exc)
                ck_segs, ck_last_base, recovery_point = {}, None, 0
                log_start = bases[0] if bases else 0
                producers = ProducerStateTable()

        if ck_segs:
            # Files of segments older than the checkpoint's first were being deleted.
            first_kept = min(ck_segs)
            for base in [b for b in bases if b < first_kept]:
                self._delete_files(base)
            bases = [b for b in bases if b >= first_kept]

        now = _now_ms()
        segments: list[Segment] = []
        scanned: list[Segment] = []
        dropped: list[int] = []
        scanning = False
        for i, base in enumerate(bases):
            if segments and base != segments[-1].next_offset:
                logger.warning("%s: segment %d does not follow offset %d; dropping it and later "
                               "ones", self, base, segments[-1].next_offset)
                dropped = bases[i:]
                break
            path = self._path(log_name(base))
            file_size = storage.size(path)
            meta = ck_segs.get(base)
            seg = Segment(base)
            if meta is not None and file_size >= meta["size"]:
                seg.size = meta["size"]
                seg.next_offset = meta["next_offset"]
                seg.max_timestamp = meta["max_timestamp"]
                seg.offset_of_max_timestamp = meta["offset_of_max_timestamp"]
                seg.created_ms = meta["created_ms"]
                seg.idx_persisted = meta["index_entries"]
                seg.tidx_persisted = meta["time_index_entries"]
            if not scanning and meta is not None and base != ck_last_base \
                    and file_size >= meta["size"]:
                # Sealed before the checkpoint: trusted; indexes load lazily.
                if file_size > meta["size"]:
                    storage.truncate(path, meta["size"])
                seg.idx_rel = seg.idx_pos = seg.tidx_ts = seg.tidx_rel = None
                segments.append(seg)
                continue
            scanning = True
            start = 0
            indexes = None
            if meta is not None and base == ck_last_base and file_size >= meta["size"]:
                indexes = self._read_indexes(seg)
            if indexes is not None:
                seg.set_indexes(*indexes)
                start = seg.size  # checkpointed prefix trusted, its indexes valid
            else:
                seg = Segment(base)
            valid_end = self._recover_segment(seg, start, file_size, producers, now)
            if start == 0 or valid_end > start:
                scanned.append(seg)   # bytes the checkpoint did not vouch for
            segments.append(seg)
            if valid_end < file_size:
                logger.warning("%s: truncating %s from %d to %d bytes (torn or corrupt tail)",
                               self, log_name(base), file_size, valid_end)
                storage.truncate(path, valid_end)
                dropped = bases[i + 1:]
                break
        for base in dropped:
            self._delete_files(base)

        if not segments:
            first = max(log_start, recovery_point)
            segments.append(Segment(first))
            scanned.append(segments[0])
        log_end = segments[-1].next_offset
        if log_end < recovery_point:
            logger.warning("%s: log ends at %d, before its recovery point %d", self, log_end,
                           recovery_point)
            producers.truncate(log_end)
        log_start = min(max(log_start, segments[0].base), log_end)
        while len(segments) > 1 and segments[0].next_offset <= log_start:
            self._delete_files(segments.pop(0).base)

        # Make what the scan accepted durable, with fresh index files. (A segment covered by
        # the checkpoint needs neither: its bytes and index entries were synced already.)
        for seg in scanned:
            if seg not in segments:
                continue
            path = self._path(log_name(seg.base))
            appender = storage.open_append(path)
            try:
                appender.sync()
            finally:
                appender.close()
            self._write_index_files(seg)

        self._segments = segments
        self._bases = [s.base for s in segments]
        self._size_bytes = sum(s.size for s in segments)
        self.log_start_offset = log_start
        self.log_end_offset = self.high_watermark = log_end
        self._durable_producers = producers
        self._producers = producers.copy()
        active = segments[-1]
        active.bytes_since_index = active.size - (active.idx_pos[-1] if active.idx_pos else 0)
        active.appender = self._open_appender(active)
        with self._io_lock:
            self._checkpoint_locked()

    def _recover_segment(self, seg: Segment, start: int, file_size: int,
                         producers: ProducerStateTable, now: int) -> int:
        """Scan [start, file_size) of a segment with full checks, extending ``seg`` (sizes,
        indexes, timestamps) and ``producers``; return the end of the valid data."""
        storage = self.storage
        path = self._path(log_name(seg.base))
        interval = self.config.index_interval_bytes
        assert seg.idx_rel is not None and seg.idx_pos is not None
        assert seg.tidx_ts is not None and seg.tidx_rel is not None
        pos = start
        expected = seg.next_offset
        since = pos - (seg.idx_pos[-1] if seg.idx_pos else 0)
        buf = b""
        buf_pos = pos
        while file_size - pos >= HEADER_SIZE:
            off = pos - buf_pos
            if off + HEADER_SIZE > len(buf):
                buf = storage.read_range(path, pos, min(SCAN_CHUNK, file_size - pos))
                buf_pos, off = pos, 0
                if len(buf) < HEADER_SIZE:
                    break
            h = read_header(buf, off)
            if (h.magic != MAGIC_V2 or h.batch_length < HEADER_SIZE - LOG_OVERHEAD
                    or pos + h.size > file_size or h.base_offset != expected
                    or h.last_offset_delta < 0 or pos + h.size > MAX_POSITION
                    or h.last_offset - seg.base > MAX_RELATIVE_OFFSET):
                break
            if off + h.size > len(buf):
                buf = storage.read_range(path, pos, min(max(SCAN_CHUNK, h.size), file_size - pos))
                buf_pos, off = pos, 0
                if len(buf) < h.size:
                    break
            if not crc_ok(buf, off, h):
                break
            if seg.created_ms < 0:
                seg.created_ms = h.max_timestamp if h.max_timestamp >= 0 else now
            if h.max_timestamp > seg.max_timestamp:
                seg.max_timestamp = h.max_timestamp
                seg.offset_of_max_timestamp = h.base_offset
            if since >= interval:
                seg.idx_rel.append(h.base_offset - seg.base)
                seg.idx_pos.append(pos)
                if seg.max_timestamp > seg.last_time_entry:
                    seg.tidx_ts.append(seg.max_timestamp)
                    seg.tidx_rel.append(seg.offset_of_max_timestamp - seg.base)
                since = 0
            since += h.size
            if h.producer_id >= 0:
                producers.record(h.producer_id, h.producer_epoch, h.base_sequence,
                                 h.last_sequence, h.base_offset, h.last_offset, h.max_timestamp,
                                 now)
            pos += h.size
            expected = h.next_offset
            seg.size = pos
            seg.next_offset = expected
        return pos

    def _read_indexes(self, seg: Segment) -> tuple[tuple[array[int], array[int]],
                                                  tuple[array[int], array[int]]] | None:
        """The checkpointed entries of a segment's index files; None if unusable."""
        try:
            idx_data = b""
            tidx_data = b""
            if seg.idx_persisted:
                idx_data = self.storage.read_range(self._path(index_name(seg.base)), 0,
                                                   8 * seg.idx_persisted)
            if seg.tidx_persisted:
                tidx_data = self.storage.read_range(self._path(timeindex_name(seg.base)), 0,
                                                    12 * seg.tidx_persisted)
            idx = decode_offset_index(idx_data, seg.idx_persisted)
            tidx = decode_time_index(tidx_data, seg.tidx_persisted)
        except (OSError, ValueError) as exc:
            logger.info("%s: index of segment %d unusable (%s)", self, seg.base, exc)
            return None
        if not seg.validate_indexes(idx, tidx):
            logger.info("%s: index of segment %d inconsistent", self, seg.base)
            return None
        return idx, tidx

    def _rebuild_indexes(self, seg: Segment, end: int) -> tuple[tuple[array[int], array[int]],
                                                                tuple[array[int], array[int]]]:
        """Indexes of a durable segment from its batch headers (no CRC: data is trusted)."""
        interval = self.config.index_interval_bytes
        rel: array[int] = array("I")
        pos_: array[int] = array("I")
        ts: array[int] = array("q")
        trel: array[int] = array("I")
        max_ts = -1
        off_max = seg.base
        since = 0
        last_entry = -(1 << 63)
        reader = self._reader(seg)
        for pos, base, size, _next, batch_max in iter_headers(reader.pread, 0, end):
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

    def _write_index_files(self, seg: Segment) -> None:
        """Replace both index files of ``seg`` with its in-memory entries."""
        assert seg.idx_rel is not None and seg.idx_pos is not None
        assert seg.tidx_ts is not None and seg.tidx_rel is not None
        self.storage.write_atomic(self._path(index_name(seg.base)),
                                  encode_offset_index(seg.idx_rel, seg.idx_pos))
        self.storage.write_atomic(self._path(timeindex_name(seg.base)),
                                  encode_time_index(seg.tidx_ts, seg.tidx_rel))
        seg.idx_persisted = len(seg.idx_rel)
        seg.tidx_persisted = len(seg.tidx_ts)
        seg.idx_pending.clear()
        seg.tidx_pending.clear()

    def _ensure_index(self, seg: Segment) -> None:
        """Load a sealed segment's indexes on first use, rebuilding them if they are bad."""
        if seg.idx_rel is not None:
            return
        with seg.lock:
            if seg.idx_rel is not None:
                return
            indexes = self._read_indexes(seg)
            if indexes is not None:
                with self._lock:
                    seg.set_indexes(*indexes)
                return
            self._rebuild_sealed_index(seg)

    def _rebuild_sealed_index(self, seg: Segment) -> None:
        with seg.lock:
            idx, tidx = self._rebuild_indexes(seg, seg.size)
            probe = Segment(seg.base)
            probe.set_indexes(idx, tidx)
            try:
                self._write_index_files(probe)
            except OSError as exc:  # the in-memory index is what matters
                logger.warning("%s: could not rewrite index of %d: %s", self, seg.base, exc)
            with self._lock:
                seg.set_indexes(idx, tidx)
                seg.idx_persisted, seg.tidx_persisted = probe.idx_persisted, probe.tidx_persisted
        logger.info("%s: rebuilt the indexes of segment %d", self, seg.base)

    # ------------------------------------------------------------------------------ appending
    def append(self, records: memoryview, headers: list[BatchHeader],
               now_ms: int) -> AppendResult:
        if not headers:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "no record batches")
        log_append_time = self.config.message_timestamp_type == "LogAppendTime"
        with self._lock:
            self._check_writable()
            duplicate = self._producers.check(headers)
            if duplicate is not None:
                return AppendResult(
                    duplicate.base_offset, duplicate.last_offset,
                    duplicate.max_timestamp if log_append_time else -1,
                    self.log_start_offset, duplicate=True)
            first = offset = self.log_end_offset
            pos = 0
            metas: list[_Meta] = []
            producers = self._producers
            for h in headers:
                set_base_offset(records, pos, offset)
                if log_append_time:
                    set_log_append_time(records, pos, h, now_ms)
                    max_ts = now_ms
                else:
                    max_ts = h.max_timestamp
                last = offset + h.last_offset_delta
                pid = h.producer_id
                if pid >= 0:
                    last_seq = h.last_sequence
                    producers.record(pid, h.producer_epoch, h.base_sequence, last_seq, offset,
                                     last, max_ts, now_ms)
                    metas.append((h.size, offset, last, max_ts, pid, h.producer_epoch,
                                  h.base_sequence, last_seq))
                else:
                    metas.append((h.size, offset, last, max_ts, -1, 0, 0, 0))
                offset = last + 1
                pos += h.size
            view = records if records.nbytes == pos else records[:pos]
            self._queue.append((view, now_ms, metas))
            self._pending += pos
            self.log_end_offset = offset
            log_start = self.log_start_offset
        return AppendResult(first, offset - 1, now_ms if log_append_time else -1, log_start)

    def pending_bytes(self) -> int:
        return self._pending

    def _check_writable(self) -> None:
        if self._closed:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self} is closed")
        if self._failed is not None:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self} failed: {self._failed}")

    # ------------------------------------------------------------------------------ flushing
    def flush(self) -> int:
        with self._io_lock:
            with self._lock:
                self._check_writable()
                queue = self._queue
                if not queue:
                    return self.high_watermark
                self._queue = []
                self._pending = 0
            try:
                self._write(queue)
            except Exception as exc:
                self._failed = exc
                logger.error("%s: write failed, log unavailable until reopened: %s", self, exc)
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self}: {exc}") from exc
            return self.high_watermark

    def _new_group(self, seg: Segment, new: bool) -> _Group:
        return _Group(seg=seg, new=new, size=seg.size, next_offset=seg.next_offset,
                      max_timestamp=seg.max_timestamp,
                      offset_of_max_timestamp=seg.offset_of_max_timestamp,
                      bytes_since_index=seg.bytes_since_index,
                      last_time_entry=seg.last_time_entry, created_ms=seg.created_ms)

    def _write(self, queue: list[tuple[memoryview, int, list[_Meta]]]) -> None:
        cfg = self.config
        interval = cfg.index_interval_bytes
        segment_bytes = cfg.segment_bytes
        segment_ms = cfg.segment_ms
        group = self._new_group(self._segments[-1], False)
        groups = [group]
        seg_base = group.seg.base
        idempotent: list[tuple[_Meta, int]] = []
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
                    group = self._new_group(Segment(base, now_ms), True)
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
                self._seal(groups[i - 1])
                seg.appender = self._open_appender(seg)
            if g.buffers:
                assert seg.appender is not None
                seg.appender.write(g.buffers)
                seg.appender.sync()
        active = groups[-1]
        for t, r in zip(active.tidx_ts, active.tidx_rel, strict=True):
            active.seg.tidx_pending += TIME_ENTRY.pack(t, r)
        for r, p in zip(active.idx_rel, active.idx_pos, strict=True):
            active.seg.idx_pending += OFFSET_ENTRY.pack(r, p)
        for g in groups:
            g.seg.bytes_since_index = g.bytes_since_index
            g.seg.created_ms = g.created_ms

        # Publish.
        written = 0
        with self._lock:
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
                    self._segments.append(seg)
                    self._bases.append(seg.base)
            self._size_bytes += written
            self.high_watermark = groups[-1].next_offset
            durable = self._durable_producers
            for meta, now_ms in idempotent:
                durable.record(meta[4], meta[5], meta[6], meta[7], meta[1], meta[2], meta[3],
                               now_ms)

    def _open_appender(self, seg: Segment) -> AppendFile:
        """Append handle positioned at the segment's durable size (bytes past it, e.g. a stale
        file under a reused name, are cut off first)."""
        path = self._path(log_name(seg.base))
        appender = self.storage.open_append(path)
        if appender.position != seg.size:
            appender.close()
            self.storage.truncate(path, seg.size)
            appender = self.storage.open_append(path)
        return appender

    def _seal(self, g: _Group) -> None:
        """Roll away from ``g.seg``: its data is synced already; finish and sync its indexes."""
        seg = g.seg
        if g.max_timestamp > g.last_time_entry:
            g.add_time_entry()  # the segment's final maximum, as Kafka does on roll
        idx = bytes(seg.idx_pending) + b"".join(
            OFFSET_ENTRY.pack(r, p) for r, p in zip(g.idx_rel, g.idx_pos, strict=True))
        tidx = bytes(seg.tidx_pending) + b"".join(
            TIME_ENTRY.pack(t, r) for t, r in zip(g.tidx_ts, g.tidx_rel, strict=True))
        self._append_index(seg, idx, tidx)
        if seg.appender is not None:
            seg.appender.close()
            seg.appender = None

    def _append_index(self, seg: Segment, idx: bytes, tidx: bytes) -> None:
        """Append encoded entries to both index files after their persisted entries; sync."""
        for name, data, entry, persisted in (
                (index_name(seg.base), idx, 8, seg.idx_persisted),
                (timeindex_name(seg.base), tidx, 12, seg.tidx_persisted)):
            path = self._path(name)
            appender = self.storage.open_append(path)
            try:
                if appender.position != persisted * entry:
                    # Left-overs of an interrupted write: cut back to the known entries.
                    appender.close()
                    self.storage.truncate(path, persisted * entry)
                    appender = self.storage.open_append(path)
                if data:
                    appender.write([data])
                appender.sync()
            finally:
                appender.close()
        seg.idx_persisted += len(idx) // 8
        seg.tidx_persisted += len(tidx) // 12
        seg.idx_pending.clear()
        seg.tidx_pending.clear()

    # ------------------------------------------------------------------------------ reading
    def _reader(self, seg: Segment) -> ReadFile:
        reader = seg.reader
        if reader is None:
            with seg.lock:
                if seg.reader is None:
                    seg.reader = self.storage.open_read(self._path(log_name(seg.base)))
                reader = seg.reader
        return reader

    def _release(self, seg: Segment) -> None:
        with self._lock:
            seg.readers -= 1
            close = seg.retired and seg.readers == 0
        if close:
            seg.close_handles()

    def read(self, offset: int, max_bytes: int) -> bytes | memoryview:
        with self._lock:
            if offset < self.log_start_offset or offset > self.high_watermark:
                raise KafkaError(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    f"offset {offset} not in [{self.log_start_offset}, {self.high_watermark}]")
            if offset == self.high_watermark:
                return b""
            seg = self._segments[bisect_right(self._bases, offset) - 1]
            end = seg.size
            seg.readers += 1
            located = seg.lookup(offset) if seg.idx_rel is not None else None
        try:
            if located is None:
                self._ensure_index(seg)
                located = seg.lookup(offset)
            return self._read_segment(seg, offset, located[0], located[1], end, max_bytes)
        except FileNotFoundError as exc:  # deleted by retention while we were getting to it
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"offset {offset} deleted") from exc
        except CorruptLogError as exc:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self}: {exc}") from exc
        finally:
            self._release(seg)

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
        while True:
            if q + HEADER_SIZE > n:
                # The containing batch starts beyond what we read: locate it by headers.
                return self._read_located(seg, offset, pos + q, end, max_bytes)
            h = read_header(data, q)
            if q == 0 and (h.base_offset != at or h.magic != MAGIC_V2
                           or h.batch_length < HEADER_SIZE - LOG_OVERHEAD):
                # The index points somewhere odd: rebuild it, then find the batch by scanning.
                logger.warning("%s: index of segment %d is wrong near offset %d", self,
                               seg.base, offset)
                if seg is not self._segments[-1]:
                    self._rebuild_sealed_index(seg)
                return self._read_located(seg, offset, 0, end, max_bytes)
            size = h.batch_length + LOG_OVERHEAD
            if h.base_offset + h.last_offset_delta >= offset:
                break
            q += size
        if q + size > n:
            # Larger than what we read (min-one-batch, or past max_bytes after skipping).
            return reader.pread(pos + q, size)
        return _trim(data, q, size, max_bytes)

    def _read_located(self, seg: Segment, offset: int, start: int, end: int,
                      max_bytes: int) -> bytes | memoryview:
        reader = self._reader(seg)
        max_bytes = min(max_bytes, MAX_READ_BYTES)
        for pos, _base, size, next_offset, _ts in iter_headers(reader.pread, start, end):
            if next_offset > offset:
                data = reader.pread(pos, min(max(max_bytes, size), end - pos))
                if len(data) < size:
                    raise CorruptLogError(f"short read of batch at {pos}")
                return _trim(data, 0, size, max_bytes)
        raise CorruptLogError(f"offset {offset} not found in segment {seg.base}")

    # ------------------------------------------------------------------------------ timestamps
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

    # ------------------------------------------------------------------------------ deletion
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
                candidates = self._segments[:-1]
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
            if retired:
                self._checkpoint_locked()
                self._delete_segments(retired)
            return len(retired)

    def _retire(self, count: int) -> list[Segment]:
        """Under ``_lock``: take the first ``count`` segments out of the log."""
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
        for seg in retired:
            with self._lock:
                unused = seg.readers == 0
            if unused:
                seg.close_handles()
            self._delete_files(seg.base)

    def _delete_files(self, base: int) -> None:
        for name in (log_name(base), index_name(base), timeindex_name(base)):
            self.storage.delete(self._path(name))

    # ------------------------------------------------------------------------------ lifecycle
    def checkpoint(self) -> None:
        with self._io_lock:
            if not self._closed:
                self._checkpoint_locked()

    def _checkpoint_locked(self) -> None:
        active = self._segments[-1]
        if active.idx_pending or active.tidx_pending:
            self._append_index(active, bytes(active.idx_pending), bytes(active.tidx_pending))
        with self._lock:
            state = {
                "version": CHECKPOINT_VERSION,
                "topic": self.topic,
                "partition": self.partition,
                "log_start_offset": self.log_start_offset,
                "recovery_point": self.high_watermark,
                "high_watermark": self.high_watermark,
                "segments": [seg.meta() for seg in self._segments],
            }
        state["producers"] = self._durable_producers.to_json()
        data = json.dumps(state, separators=(",", ":")).encode()
        if data != self._checkpointed:   # idle partitions cost no fsync
            self.storage.write_atomic(self._path(CHECKPOINT_FILE), data)
            self._checkpointed = data

    def close(self) -> None:
        if self._closed:
            return
        error: BaseException | None = None
        if self._failed is None:
            try:
                self.flush()
            except KafkaError as exc:
                error = exc
        with self._io_lock:
            if self._closed:
                return
            try:
                self._checkpoint_locked()
            finally:
                self._shut()
        if error is not None:
            raise error

    def delete(self) -> None:
        with self._io_lock:
            self._shut()
        self.storage.delete_tree(self.dir)

    def _shut(self) -> None:
        with self._lock:
            self._closed = True
            self._queue = []
            self._pending = 0
            segments = list(self._segments)
            for seg in segments:
                seg.retired = True
            idle = [seg for seg in segments if seg.readers == 0]
        for seg in idle:
            seg.close_handles()

    # ------------------------------------------------------------------------------ info
    @property
    def size_bytes(self) -> int:
        return self._size_bytes

    def producer_state(self) -> dict[str, Any]:
        """Producer state as of the high watermark (what the checkpoint stores)."""
        with self._lock:
            return self._durable_producers.to_json()

    def __repr__(self) -> str:
        return f"PartitionLog({self.storage.url}/{self.dir})"

    __str__ = __repr__


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
