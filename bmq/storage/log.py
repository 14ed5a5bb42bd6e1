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

Leader epochs: one writer per partition (append layout: local directories, HDFS).
``PartitionLog.open(..., epoch=N)`` means "the controller made me the owner for leader epoch
N". Epoch 0 is the single-node mode and keeps exactly the layout above. Files, under
``{topic}/{partition}/``::

    checkpoint.json                          epoch 0's checkpoint (version 1, as above)
    checkpoint-{epoch:010d}.json             the checkpoint of the owner of ``epoch`` (version 2)
    {base:020d}.log / .index / .timeindex    segments written by epoch 0
    {base:020d}-{epoch:010d}.log / ...       segments started by the owner of ``epoch``
    {stem}-i{epoch:010d}.index / .timeindex  indexes a later owner wrote for a segment it sealed

Version 2 checkpoints add ``"epoch"`` (whose file it is), ``"data_epoch"`` (the epoch whose
writer may have appended past the recorded sizes: the file's own epoch, except in a claim) and,
per segment, ``"epoch"`` (its file name) and ``"index_epoch"`` (if its index files were written
by a later owner). The checkpoint of the highest epoch is the truth; everyone ignores the
others (a stale owner may go on rewriting its own).

Takeover, ``open`` with epoch N: (1) read the newest checkpoint, epoch E; E > N raises
FENCED_LEADER_EPOCH; (2) write ``checkpoint-N.json`` as a *claim* (E's content, data epoch
E's); (3) list the files and recover: segments the checkpoint lists are trusted at their
recorded sizes, the data epoch's active segment and later rolls are scanned (CRC-checked) to
the end of their valid data, and sealed there - never truncated or appended to, the old owner
may still hold them; (4) start a new segment ``{end:020d}-{N:010d}.log``, write the epoch-N
checkpoint, delete files no checkpoint of N refers to and older checkpoints. Before a flush is
acknowledged (and before retention deletes files) an owner with epoch > 0 lists the directory
and fails with FENCED_LEADER_EPOCH if a higher epoch's checkpoint exists. So a flush the old
owner acknowledged was synced before its check, the check before the claim, the claim before
our scan: the scan sees it. Bytes it writes after the claim are past the size we sealed at (or
in files no checkpoint of N lists) and never become visible. A fenced owner that nevertheless
deleted files (retention racing the claim) is the one window left; the owner reopening in the
same epoch (a restart) continues its own active segment as in epoch 0.

Readers (``PartitionLog.open_reader``): a ``LogReader`` lists the checkpoint files, reads the
newest and serves reads from the segments it lists, up to their recorded sizes - durable data
only, never anything of a fenced owner. Owners with epoch > 0 republish their checkpoint after
a flush at most every ``LogConfig.publish_interval_ms`` (and at every ``checkpoint()``), so a
reader's ``refresh()`` is one listing and one small read. Object stores: see
``bmq.storage.objects`` (``PartitionLog.open`` returns an ``ObjectPartitionLog`` there).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from array import array
from bisect import bisect_right
from collections.abc import Callable
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
    iter_headers,
    parse_stem,
)

logger = logging.getLogger(__name__)

CHECKPOINT_FILE = "checkpoint.json"
CHECKPOINT_VERSION = 1
CHECKPOINT_VERSION_EPOCHS = 2
_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d{10})\.json$")
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


def _check_name(topic: str, partition: int) -> None:
    if not _TOPIC_RE.match(topic) or topic in (".", "..") or partition < 0:
        raise ValueError(f"invalid topic partition {topic!r}-{partition}")


def _parse_files(names: list[str], suffix: str) -> list[tuple[int, int, int]]:
    """(base, epoch, seq) of every segment file among ``names``."""
    out = []
    for name in names:
        if name.endswith(suffix):
            parsed = parse_stem(name[: -len(suffix)])
            if parsed is not None:
                out.append(parsed)
    return out


@dataclass(slots=True)
class LogConfig:
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000      # -1 = unlimited
    retention_bytes: int = -1                     # -1 = unlimited
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"    # or "LogAppendTime"
    # Cluster mode (epoch > 0): how often flushes also publish the checkpoint, which is what
    # readers in other processes (``PartitionLog.open_reader``) see. Object stores publish on
    # every flush (the manifest is part of the flush).
    publish_interval_ms: int = 1000


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
    """The log of one partition. Create with ``PartitionLog.open`` (the one writer) or read with
    ``PartitionLog.open_reader`` (any number of read-only views, in other processes too)."""

    def __init__(self, storage: Storage, topic: str, partition: int, config: LogConfig,
                 epoch: int = 0) -> None:
        self.storage = storage
        self.topic = topic
        self.partition = partition
        self.config = config
        self.leader_epoch = epoch
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
        self._readonly = False
        self._checkpointed = b""   # the checkpoint last written
        self._published_ms = 0.0   # monotonic time of the last checkpoint write

    # ------------------------------------------------------------------------------ opening
    @classmethod
    def open(cls, storage: Storage, topic: str, partition: int, config: LogConfig, *,
             epoch: int = 0) -> PartitionLog:
        """Open (and recover) the partition for writing as the owner of leader ``epoch``.

        Everything a lower-epoch owner made durable before this call is recovered; nothing it
        writes afterwards ever becomes visible. Raises ``KafkaError(FENCED_LEADER_EPOCH)`` if
        an owner with a higher epoch has opened the partition. On storages that cannot append
        (object stores) the result is an ``ObjectPartitionLog`` with the same API."""
        _check_name(topic, partition)
        if epoch < 0:
            raise ValueError(f"invalid leader epoch {epoch}")
        log_cls: type[PartitionLog] = cls
        if not storage.supports_append:
            from bmq.storage.objects import ObjectPartitionLog
            log_cls = ObjectPartitionLog
        log = log_cls(storage, topic, partition, config, epoch)
        log._load()
        return log

    @classmethod
    def open_reader(cls, storage: Storage, topic: str, partition: int,
                    config: LogConfig | None = None) -> LogReader:
        """A read-only view of the durable data as its writer last published it."""
        _check_name(topic, partition)
        log_cls: type[PartitionLog] = cls
        if not storage.supports_append:
            from bmq.storage.objects import ObjectPartitionLog
            log_cls = ObjectPartitionLog
        log = log_cls(storage, topic, partition, config or LogConfig(), 0)
        log._readonly = True
        return LogReader(log)

    def _path(self, name: str) -> str:
        return f"{self.dir}/{name}"

    # -- checkpoints -----------------------------------------------------------------------
    def _state_dir(self) -> str:
        """Where the per-epoch state files (checkpoints / manifests) live."""
        return self.dir

    def _state_name(self, epoch: int) -> str:
        return CHECKPOINT_FILE if epoch == 0 else f"checkpoint-{epoch:010d}.json"

    def _parse_state_name(self, name: str) -> int | None:
        if name == CHECKPOINT_FILE:
            return 0
        m = _CHECKPOINT_RE.match(name)
        return int(m[1]) if m else None

    def _state_epochs(self) -> list[int]:
        """Epochs that have a state file, ascending (one listing)."""
        epochs = (self._parse_state_name(n) for n in self.storage.list(self._state_dir()))
        return sorted(e for e in epochs if e is not None)

    def _read_state(self, epoch: int) -> dict[str, Any] | None:
        path = f"{self._state_dir()}/{self._state_name(epoch)}"
        try:
            data = json.loads(self.storage.read_all(path))
            if data.get("version") not in (CHECKPOINT_VERSION, CHECKPOINT_VERSION_EPOCHS):
                raise ValueError(f"checkpoint version {data.get('version')}")
            for key in ("log_start_offset", "recovery_point", "segments", "producers"):
                if key not in data:
                    raise ValueError(f"checkpoint without {key}")
            data.setdefault("epoch", epoch)
            data.setdefault("data_epoch", epoch)
            return dict(data)
        except FileNotFoundError:
            return None
        except (ValueError, TypeError, KeyError) as exc:
            logger.warning("%s: unreadable checkpoint %s (%s)", self, path, exc)
            return None

    def _newest_state(self) -> tuple[int, dict[str, Any] | None]:
        """(highest epoch with a state file or -1, the newest readable state)."""
        epochs = self._state_epochs()
        top = epochs[-1] if epochs else -1
        for epoch in reversed(epochs):
            state = self._read_state(epoch)
            if state is not None:
                return top, state
            logger.warning("%s: falling back from the checkpoint of epoch %d", self, epoch)
        return top, None

    def _fence_check(self) -> None:
        """Raise FENCED_LEADER_EPOCH if an owner with a higher epoch has claimed the partition
        (one listing; only in cluster mode, i.e. epoch > 0)."""
        if self.leader_epoch <= 0 or self._readonly:
            return
        epochs = self._state_epochs()
        if epochs and epochs[-1] > self.leader_epoch:
            error = KafkaError(ErrorCode.FENCED_LEADER_EPOCH,
                               f"{self}: epoch {self.leader_epoch} fenced by {epochs[-1]}")
            self._failed = error
            raise error

    def _claim(self, state: dict[str, Any] | None, data_epoch: int) -> None:
        """Write this epoch's state file before looking at the data: from now on the previous
        owner's flushes fail their fence check, so whatever it acknowledged is already on
        storage when we scan. The claim lists exactly what ``state`` listed."""
        claim = dict(state) if state is not None else {
            "version": CHECKPOINT_VERSION_EPOCHS, "topic": self.topic,
            "partition": self.partition, "log_start_offset": 0, "recovery_point": 0,
            "high_watermark": 0, "segments": None, "producers": {}}
        claim["version"] = CHECKPOINT_VERSION_EPOCHS
        claim["epoch"] = self.leader_epoch
        claim["data_epoch"] = data_epoch
        self.storage.write_atomic(f"{self._state_dir()}/{self._state_name(self.leader_epoch)}",
                                  json.dumps(claim, separators=(",", ":")).encode())

    def _load(self) -> None:
        storage = self.storage
        epoch = self.leader_epoch
        storage.makedirs(self.dir)
        top, ckpt = self._newest_state()
        if top > epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH,
                             f"{self}: epoch {epoch} is older than the current {top}")
        names = storage.list(self.dir)
        files = _parse_files(names, ".log")
        if ckpt is not None:
            data_epoch = int(ckpt["data_epoch"])
        else:
            data_epoch = max([e for _b, e, _s in files if e <= epoch], default=epoch)
        if epoch > 0 and epoch > top:
            self._claim(ckpt, data_epoch)
            names = storage.list(self.dir)   # what the old owner wrote before our claim
            files = _parse_files(names, ".log")
        takeover = data_epoch < epoch
        for name in names:
            if ".tmp." in name:
                storage.delete(self._path(name))

        ck_metas: list[dict[str, int]] | None = None
        recovery_point = 0
        log_start = 0
        producers = ProducerStateTable()
        if ckpt is not None and ckpt.get("segments") is not None:
            try:
                ck_metas = [{k: int(v) for k, v in m.items()} for m in ckpt["segments"]]
                recovery_point = int(ckpt["recovery_point"])
                log_start = int(ckpt["log_start_offset"])
                producers = ProducerStateTable.from_json(ckpt["producers"])
            except (ValueError, TypeError, KeyError, IndexError) as exc:
                logger.warning("%s: malformed checkpoint (%s), scanning everything", self, exc)
                ck_metas, recovery_point, log_start = None, 0, 0
                producers = ProducerStateTable()

        # The chain of segments to recover: what the checkpoint lists, then the files its
        # data epoch rolled to afterwards. Without a checkpoint: every file, in offset order.
        chain: list[tuple[Segment, dict[str, int] | None]] = []
        if ck_metas is not None:
            for ck_meta in ck_metas:
                chain.append((Segment.from_meta(ck_meta), ck_meta))
            last_base = ck_metas[-1]["base_offset"] if ck_metas else -1
            for base, e, _seq in sorted(files):
                if e == data_epoch and base > last_base:
                    chain.append((Segment(base, epoch=e), None))
        else:
            by_base: dict[int, int] = {}
            for base, e, _seq in files:
                if e <= epoch:
                    by_base[base] = max(by_base.get(base, e), e)
            chain = [(Segment(b, epoch=e), None) for b, e in sorted(by_base.items())]
            if chain:
                log_start = chain[0][0].base
        ck_last = ck_metas[-1] if ck_metas else None

        now = _now_ms()
        segments: list[Segment] = []
        scanned: list[Segment] = []
        scanning = False
        for seg, meta in chain:
            own = seg.epoch == epoch   # our own file (a restart in the same epoch)
            if segments and seg.base != segments[-1].next_offset:
                logger.warning("%s: segment %d does not follow offset %d; dropping it and later "
                               "ones", self, seg.base, segments[-1].next_offset)
                break
            path = self._path(seg.log_file)
            try:
                file_size = self._visible_size(path)
            except FileNotFoundError:
                logger.warning("%s: segment file %s is missing", self, seg.log_file)
                break
            if not scanning and meta is not None and meta is not ck_last \
                    and file_size >= meta["size"]:
                # Sealed before the checkpoint: trusted at its recorded size.
                if file_size > meta["size"] and own:
                    storage.truncate(path, meta["size"])
                segments.append(seg)
                continue
            scanning = True
            start = 0
            fresh = Segment(seg.base, epoch=seg.epoch)
            if meta is not None and file_size >= meta["size"]:
                seg.idx_rel = seg.idx_pos = seg.tidx_ts = seg.tidx_rel = None
                indexes = self._read_indexes(seg)
                if indexes is not None:
                    seg.set_indexes(*indexes)
                    start = seg.size  # checkpointed prefix trusted, its indexes valid
                else:
                    seg = fresh
            else:
                seg = fresh
            valid_end = self._recover_segment(seg, start, file_size, producers, now)
            if start == 0 or valid_end > start:
                scanned.append(seg)   # bytes the checkpoint did not vouch for
            segments.append(seg)
            if valid_end < file_size:
                logger.warning("%s: %s ends at %d of its %d bytes (torn or corrupt tail, or "
                               "written after the takeover)", self, seg.log_file, valid_end,
                               file_size)
                if own:
                    storage.truncate(path, valid_end)
                break

        if takeover:
            # Seal the previous owner's segments where we found them; write a new one.
            if segments and segments[-1].size == 0:
                dropped = segments.pop()
                if dropped in scanned:
                    scanned.remove(dropped)
            start_at = segments[-1].next_offset if segments else max(log_start,
                                                                      recovery_point)
            segments.append(Segment(start_at, epoch=epoch))
            scanned.append(segments[-1])
        if not segments:
            segments.append(Segment(max(log_start, recovery_point), epoch=epoch))
            scanned.append(segments[0])
        log_end = segments[-1].next_offset
        if log_end < recovery_point:
            logger.warning("%s: log ends at %d, before its recovery point %d", self, log_end,
                           recovery_point)
            producers.truncate(log_end)
        log_start = min(max(log_start, segments[0].base), log_end)
        while len(segments) > 1 and segments[0].next_offset <= log_start:
            segments.pop(0)

        # Make what the scan accepted durable, with fresh index files. (A segment covered by
        # the checkpoint needs neither: its bytes and index entries were synced already.)
        # Index files of another owner's segment get names of our own epoch.
        for seg in scanned:
            if seg not in segments:
                continue
            if seg.epoch != epoch:
                seg.index_epoch = epoch
            try:
                appender = storage.open_append(self._path(seg.log_file))
                try:
                    appender.sync()
                finally:
                    appender.close()
            except OSError as exc:   # e.g. HDFS while the old owner still holds the lease
                if seg.epoch == epoch:
                    raise
                logger.info("%s: could not sync %s of the previous owner: %s", self,
                            seg.log_file, exc)
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
        self._fence_check()
        self._collect_garbage(names)

    def _visible_size(self, path: str) -> int:
        """The file's readable length (past what ``size`` says where it may lag)."""
        size = self.storage.size(path)
        if not self.storage.exact_size:
            while True:
                more = len(self.storage.read_range(path, size, SCAN_CHUNK))
                if not more:
                    break
                size += more
        return size

    def _collect_garbage(self, names: list[str]) -> None:
        """Remove what no longer belongs to the log: files of segments not in it (deleted,
        dropped, or written by a fenced owner) and the state files of lower epochs."""
        keep: set[str] = set()
        for seg in self._segments:
            keep.update(seg.file_names())
        for name in names:
            if self._closed:
                return      # handed over or shutting down: the next owner collects the rest
            if name in keep:
                continue
            for suffix in (".log", ".index", ".timeindex"):
                if name.endswith(suffix):
                    parsed = parse_stem(name[: -len(suffix)].split("-i", 1)[0])
                    if parsed is not None and parsed[1] <= self.leader_epoch:
                        self.storage.delete(self._path(name))
                    break
        for e in self._state_epochs():
            if e < self.leader_epoch:
                self.storage.delete(f"{self._state_dir()}/{self._state_name(e)}")

    def _recover_segment(self, seg: Segment, start: int, file_size: int,
                         producers: ProducerStateTable, now: int) -> int:
        """Scan [start, file_size) of a segment with full checks, extending ``seg`` (sizes,
        indexes, timestamps) and ``producers``; return the end of the valid data."""
        storage = self.storage
        path = self._path(seg.log_file)
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
                idx_data = self.storage.read_range(self._path(seg.index_file), 0,
                                                   8 * seg.idx_persisted)
            if seg.tidx_persisted:
                tidx_data = self.storage.read_range(self._path(seg.timeindex_file), 0,
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

    def _rebuild_indexes(self, seg: Segment, end: int,
                         pread: Callable[[int, int], bytes] | None = None,
                         ) -> tuple[tuple[array[int], array[int]],
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
        if pread is None:
            pread = self._reader(seg).pread
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

    def _write_index_files(self, seg: Segment) -> None:
        """Replace both index files of ``seg`` with its in-memory entries."""
        assert seg.idx_rel is not None and seg.idx_pos is not None
        assert seg.tidx_ts is not None and seg.tidx_rel is not None
        self.storage.write_atomic(self._path(seg.index_file),
                                  encode_offset_index(seg.idx_rel, seg.idx_pos))
        self.storage.write_atomic(self._path(seg.timeindex_file),
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
            probe = Segment(seg.base, epoch=seg.epoch, seq=seg.seq)
            probe.index_epoch = seg.index_epoch
            probe.set_indexes(idx, tidx)
            try:
                if not self._readonly:   # readers never write
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
            except KafkaError as exc:    # fenced: a higher epoch owns the partition now
                self._failed = exc
                logger.error("%s: %s", self, exc)
                raise
            except Exception as exc:
                self._failed = exc
                logger.error("%s: write failed, log unavailable until reopened: %s", self, exc)
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self}: {exc}") from exc
            if self.leader_epoch > 0 and self.config.publish_interval_ms >= 0 and \
                    (time.monotonic() - self._published_ms) * 1000 >= \
                    self.config.publish_interval_ms:
                try:
                    self._checkpoint_locked()
                except OSError as exc:   # the data is durable; the next checkpoint retries
                    logger.warning("%s: could not publish the checkpoint: %s", self, exc)
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

        # Only an owner that is still the newest may acknowledge (see ``_claim``).
        self._fence_check()

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
        path = self._path(seg.log_file)
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
                (seg.index_file, idx, 8, seg.idx_persisted),
                (seg.timeindex_file, tidx, 12, seg.tidx_persisted)):
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
                    seg.reader = self.storage.open_read(self._path(seg.log_file))
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
        learned = _LearnedIndex(self, seg)
        while True:
            if q + HEADER_SIZE > n:
                # The containing batch starts beyond what we read: locate it by headers.
                learned.commit()
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
        learned = _LearnedIndex(self, seg)
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
            if retired:
                self._checkpoint_locked()
                self._delete_segments(retired)
            return len(retired)

    def _retention_candidates(self) -> list[Segment]:
        """Under ``_lock``: the segments retention may delete, oldest first (never the active)."""
        return self._segments[:-1]

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

    def compact_objects(self) -> int:
        """Merge small flush objects into larger ones (object layout); the append layout has
        nothing to merge. Returns how many objects were merged away."""
        return 0

    # ------------------------------------------------------------------------------ lifecycle
    def checkpoint(self) -> None:
        with self._io_lock:
            if not self._closed:
                self._checkpoint_locked()

    def _checkpoint_locked(self) -> None:
        active = self._segments[-1]
        if active.idx_pending or active.tidx_pending:
            self._append_index(active, bytes(active.idx_pending), bytes(active.tidx_pending))
        self._write_state()

    def _state_dict(self) -> dict[str, Any]:
        epoch = self.leader_epoch
        with self._lock:
            segments = [seg.meta() for seg in self._segments]
            legacy = epoch == 0 and all(len(m) == 8 for m in segments)
            state: dict[str, Any] = {
                "version": CHECKPOINT_VERSION if legacy else CHECKPOINT_VERSION_EPOCHS,
                "topic": self.topic,
                "partition": self.partition,
                "log_start_offset": self.log_start_offset,
                "recovery_point": self.high_watermark,
                "high_watermark": self.high_watermark,
                "segments": segments,
            }
            if not legacy:
                state["epoch"] = state["data_epoch"] = epoch
        state["producers"] = self._durable_producers.to_json()
        return state

    def _write_state(self) -> None:
        data = json.dumps(self._state_dict(), separators=(",", ":")).encode()
        if data != self._checkpointed:   # idle partitions cost no fsync
            self.storage.write_atomic(
                f"{self._state_dir()}/{self._state_name(self.leader_epoch)}", data)
            self._checkpointed = data
        self._published_ms = time.monotonic()

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
            self._fence_check()   # a fenced owner must not remove the new owner's data
            self._shut()
        self.storage.delete_tree(self.dir)

    def abandon(self) -> None:
        """Give the log up without flushing: queued batches are dropped, nothing is written.

        For an owner that lost its right to write (its ZooKeeper session, or a higher epoch on
        storage): whatever it had not made durable must not become visible.
        """
        self._shut()

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

    def tail(self) -> bytes:
        """What a ``LogReader`` elsewhere needs to see everything durable now without reading
        storage (``LogReader.advance``): the newest segments as a checkpoint would list them."""
        with self._lock:
            doc = {"epoch": self.leader_epoch, "high_watermark": self.high_watermark,
                   "log_start_offset": self.log_start_offset,
                   "segments": [seg.meta() for seg in self._tail_segments()]}
        return json.dumps(doc, separators=(",", ":")).encode()

    def _tail_segments(self) -> list[Segment]:
        """The segments a tail lists: the active one, and the one before in case it rolled."""
        return self._segments[-2:]

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: the largest leader epoch <= ``epoch`` that wrote this log, and
        the offset where its data ends (the next epoch's first offset, or the high watermark);
        (-1, -1) if there is none. Every owner starts a segment of its own epoch when it takes
        over, so the segments' epochs and base offsets are the epoch history."""
        log = self
        with log._lock:
            starts: list[tuple[int, int]] = []
            for seg in log._segments:
                if not starts or seg.epoch > starts[-1][0]:
                    starts.append((seg.epoch, seg.base))
            end = log.high_watermark
        for i in range(len(starts) - 1, -1, -1):
            if starts[i][0] <= epoch:
                return starts[i][0], starts[i + 1][1] if i + 1 < len(starts) else end
        return -1, -1

    def producer_state(self) -> dict[str, Any]:
        """Producer state as of the high watermark (what the checkpoint stores)."""
        with self._lock:
            return self._durable_producers.to_json()

    def __repr__(self) -> str:
        return f"PartitionLog({self.storage.url}/{self.dir})"

    __str__ = __repr__


class _LearnedIndex:
    """Index entries a read-only view learns while it reads past the end of a segment's known
    index (a segment its writer is still filling: the view knows the index only up to the
    writer's last checkpoint). Kept in memory only, so the next read there is one lookup, not
    another scan (the proxy reads tails this way)."""

    __slots__ = ("_last", "_log", "_positions", "_rels", "_seg")

    def __init__(self, log: PartitionLog, seg: Segment) -> None:
        self._log = log
        self._seg = seg
        self._rels: list[int] = []
        self._positions: list[int] = []
        learn = log._readonly and seg.idx_pos is not None
        self._last = (seg.idx_pos[-1] if seg.idx_pos else -1) if learn else None

    def saw(self, base_offset: int, position: int) -> None:
        last = self._last
        if last is None:
            return
        if position - (self._positions[-1] if self._positions else last) >= \
                self._log.config.index_interval_bytes:
            self._rels.append(base_offset - self._seg.base)
            self._positions.append(position)

    def commit(self) -> None:
        if not self._positions:
            return
        seg = self._seg
        with self._log._lock:
            if seg.idx_pos is not None and seg.idx_rel is not None and \
                    (seg.idx_pos[-1] if seg.idx_pos else -1) == self._last:
                seg.idx_rel.extend(self._rels)
                seg.idx_pos.extend(self._positions)
        self._last = self._positions[-1]
        self._positions = []
        self._rels = []


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


class LogReader:
    """A read-only view of a partition for processes that do not write it (the proxy tier,
    brokers answering for partitions led elsewhere). It sees the durable data as the writer
    last published it (its newest checkpoint or manifest) and never writes to storage.

    ``refresh()`` costs one listing of the partition's state files and one small read (none
    when nothing changed); reads go straight to the segment files or objects. A file deleted
    by retention or compaction meanwhile makes a read refresh once and retry."""

    def __init__(self, log: PartitionLog) -> None:
        self._log = log
        self._state = b""
        self._tail: dict[str, Any] | None = None   # the newest tail applied (see advance)
        self.leader_epoch = -1
        self.refresh()

    @property
    def topic(self) -> str:
        return self._log.topic

    @property
    def partition(self) -> int:
        return self._log.partition

    @property
    def high_watermark(self) -> int:
        return self._log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self._log.log_end_offset   # a view sees durable data only: the high watermark

    @property
    def log_start_offset(self) -> int:
        return self._log.log_start_offset

    @property
    def size_bytes(self) -> int:
        return self._log.size_bytes

    def refresh(self) -> bool:
        """Re-read the newest published state; True if it changed."""
        log = self._log
        epochs = log._state_epochs()
        for epoch in reversed(epochs):
            path = f"{log._state_dir()}/{log._state_name(epoch)}"
            try:
                raw = log.storage.read_all(path)
                state = json.loads(raw)
            except FileNotFoundError:
                continue              # replaced or removed meanwhile
            except ValueError:
                logger.warning("%s: unreadable state %s", log, path)
                continue
            if epoch < self.leader_epoch:
                return False          # never go back to an older owner's view
            if raw == self._state:
                return False
            if state.get("segments") is None:
                return False          # a claim without a known state: keep the current view
            self._apply(state)
            self._state = raw
            self.leader_epoch = epoch
            tail = self._tail
            if tail is not None and tail["epoch"] == epoch:
                self._extend(tail)    # a checkpoint older than the tail we saw: keep the tail
            return True
        return False

    def advance(self, tail: bytes | None) -> bool:
        """Extend the view to what the owner's ``PartitionLog.tail`` describes, without reading
        storage; a tail that does not continue this view (a new owner, a missed roll, a merge of
        objects) or no tail at all makes it ``refresh`` instead. True if the view changed."""
        if tail is None:
            return self.refresh()
        doc = json.loads(tail)
        if doc["epoch"] < self.leader_epoch:
            return False
        changed = self._extend(doc) if doc["epoch"] == self.leader_epoch else None
        if changed is None:
            changed = self.refresh()
            if doc["epoch"] == self.leader_epoch:
                changed = bool(self._extend(doc)) or changed
        self._tail = doc
        return changed

    def _extend(self, doc: dict[str, Any]) -> bool | None:
        """Apply a tail that continues this view's segments: whether anything changed, or None
        if the tail does not continue them."""
        log = self._log
        with log._lock:
            segments = log._segments
            if not segments:
                return None
            known = {seg.stem: seg for seg in segments}
            for meta in doc["segments"]:
                seg = Segment.from_meta({k: int(v) for k, v in meta.items()})
                last = segments[-1]
                mine = known.get(seg.stem)
                if mine is not None:
                    if mine is last and seg.size > last.size:
                        last.size, last.next_offset = seg.size, seg.next_offset
                        if seg.max_timestamp > last.max_timestamp:
                            last.max_timestamp = seg.max_timestamp
                            last.offset_of_max_timestamp = seg.offset_of_max_timestamp
                elif seg.base == last.next_offset:
                    segments.append(seg)
                    log._bases.append(seg.base)
                else:
                    return None
            log._size_bytes = sum(s.size for s in segments)
            before = (log.high_watermark, log.log_start_offset)
            end = min(int(doc["high_watermark"]), segments[-1].next_offset)
            if end > log.high_watermark:
                log.high_watermark = log.log_end_offset = end
            log.log_start_offset = max(log.log_start_offset,
                                       min(int(doc["log_start_offset"]), log.high_watermark))
            return (log.high_watermark, log.log_start_offset) != before

    def _apply(self, state: dict[str, Any]) -> None:
        log = self._log
        metas = state["segments"]
        with log._lock:
            old = {(s.stem, s.size): s for s in log._segments}
            segments = []
            for meta in metas:
                seg = Segment.from_meta({k: int(v) for k, v in meta.items()})
                kept = old.pop((seg.stem, seg.size), None)
                segments.append(kept if kept is not None else seg)
            retired = list(old.values())
            for seg in retired:
                seg.retired = True
            idle = [seg for seg in retired if seg.readers == 0]
            log._segments = segments
            log._bases = [s.base for s in segments]
            log._size_bytes = sum(s.size for s in segments)
            hw = int(state.get("high_watermark", state["recovery_point"]))
            end = segments[-1].next_offset if segments else hw
            log.high_watermark = log.log_end_offset = min(hw, end) if segments else hw
            log.log_start_offset = min(int(state["log_start_offset"]), log.high_watermark)
        for seg in idle:
            seg.close_handles()

    def read(self, offset: int, max_bytes: int) -> bytes | memoryview:
        try:
            return self._read(offset, max_bytes)
        except KafkaError as exc:
            if exc.code != ErrorCode.OFFSET_OUT_OF_RANGE or not self.refresh():
                raise
        return self._read(offset, max_bytes)

    def _read(self, offset: int, max_bytes: int) -> bytes | memoryview:
        if not self._log._segments:
            if offset == self.high_watermark == self.log_start_offset:
                return b""
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"{self._log}: nothing published")
        return self._log.read(offset, max_bytes)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        return self._log.offset_for_timestamp(timestamp) if self._log._segments else None

    def max_timestamp(self) -> tuple[int, int] | None:
        return self._log.max_timestamp() if self._log._segments else None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self._log.end_offset_for_epoch(epoch)

    def close(self) -> None:
        self._log._shut()

    def __repr__(self) -> str:
        return f"LogReader({self._log.storage.url}/{self._log.dir})"
