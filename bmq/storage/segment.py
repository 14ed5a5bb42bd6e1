"""One log segment: its file names, in-memory metadata and sparse indexes.

Files, for a segment whose first offset is ``base``::

    {base:020d}.log        record batches exactly as served to consumers
    {base:020d}.index      offset index: (offset - base: uint32, file position: uint32), big-endian
    {base:020d}.timeindex  time index: (max timestamp so far: int64, offset - base: uint32)

(``{base:020d}`` is the stem of segments written in leader epoch 0; later epochs and the
object layout add the epoch and a sequence number to it: see ``segment_stem``.)

Index entries are added while appending once ``index_interval_bytes`` have gone by since the
previous entry; each points at the start of a batch. The time index gets an entry alongside when
the maximum timestamp so far has grown, naming the batch that set it. Both are rebuildable from
the log, so they are written lazily (on roll and checkpoint) and never on the produce path.
"""

from __future__ import annotations

import contextlib
import re
import struct
import sys
import threading
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterator
from operator import lt

from bmq.protocol.records import HEADER_SIZE, LOG_OVERHEAD
from bmq.storage.base import AppendFile, ReadFile
from bmq.storage.handles import OPEN_FILES

OFFSET_ENTRY = struct.Struct(">II")
TIME_ENTRY = struct.Struct(">qI")
MAX_RELATIVE_OFFSET = 0x7FFFFFFF
MAX_POSITION = 0xFFFFFFFF

_LENGTH = struct.Struct(">qi")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_MAX_TIMESTAMP = struct.Struct(">q")
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_LITTLE = sys.byteorder == "little"
assert array("I").itemsize == 4


class CorruptLogError(Exception):
    """Durable log data that does not parse (bad disk, or files changed behind our back)."""


def log_name(base: int) -> str:
    return f"{base:020d}.log"


def index_name(base: int) -> str:
    return f"{base:020d}.index"


def segment_stem(base: int, epoch: int = 0, seq: int = -1) -> str:
    """File name (without suffix) of a segment: ``{base:020d}`` for epoch 0 (the original
    layout), ``{base:020d}-{epoch:010d}`` for a segment started by the owner of leader epoch
    ``epoch``, ``{base:020d}-{epoch:010d}-{seq:012d}`` for an object (object-store layout)."""
    if seq >= 0:
        return f"{base:020d}-{epoch:010d}-{seq:012d}"
    if epoch:
        return f"{base:020d}-{epoch:010d}"
    return f"{base:020d}"


_STEM_RE = re.compile(r"^(\d{20})(?:-(\d{10}))?(?:-(\d{12}))?$")


def parse_stem(stem: str) -> tuple[int, int, int] | None:
    """(base, epoch, seq) of a name made by ``segment_stem`` (seq -1 for file segments)."""
    m = _STEM_RE.match(stem)
    if m is None:
        return None
    return int(m[1]), int(m[2] or 0), int(m[3]) if m[3] else -1


def parse_base(name: str, suffix: str) -> int | None:
    stem = name[: -len(suffix)] if name.endswith(suffix) else ""
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def encode_offset_index(rel: array[int], pos: array[int]) -> bytes:
    combined = array("I", bytes(8 * len(rel)))
    combined[0::2] = rel
    combined[1::2] = pos
    if _LITTLE:
        combined.byteswap()
    return combined.tobytes()


def decode_offset_index(data: bytes, count: int) -> tuple[array[int], array[int]]:
    if len(data) < 8 * count:
        raise ValueError("offset index shorter than its checkpointed entry count")
    combined = array("I")
    combined.frombytes(data[: 8 * count])
    if _LITTLE:
        combined.byteswap()
    return combined[0::2], combined[1::2]


def encode_time_index(ts: array[int], rel: array[int]) -> bytes:
    return b"".join(TIME_ENTRY.pack(t, r) for t, r in zip(ts, rel, strict=True))


def decode_time_index(data: bytes, count: int) -> tuple[array[int], array[int]]:
    if len(data) < 12 * count:
        raise ValueError("time index shorter than its checkpointed entry count")
    ts: array[int] = array("q")
    rel: array[int] = array("I")
    for t, r in TIME_ENTRY.iter_unpack(data[: 12 * count]):
        ts.append(t)
        rel.append(r)
    return ts, rel


def _increasing(values: array[int]) -> bool:
    return all(map(lt, values, values[1:]))


def _non_decreasing(values: array[int]) -> bool:
    return not any(map(lt, values[1:], values))


def iter_headers(pread: Callable[[int, int], bytes], start: int, end: int,
                 block: int = 65536) -> Iterator[tuple[int, int, int, int, int]]:
    """(position, base offset, size, next offset, max timestamp) of each batch in [start, end).

    For durable data only: framing problems raise CorruptLogError. Reads ``block`` bytes at a
    time, so runs of small batches cost one read and big batches one short read each."""
    pos = start
    buf = b""
    buf_pos = start
    while pos < end:
        off = pos - buf_pos
        if off + HEADER_SIZE > len(buf):
            buf = pread(pos, min(block, end - pos))
            buf_pos = pos
            off = 0
            if len(buf) < HEADER_SIZE:
                raise CorruptLogError(f"truncated batch header at position {pos}")
        base, length = _LENGTH.unpack_from(buf, off)
        size = length + LOG_OVERHEAD
        if length < _MIN_BATCH_LENGTH or pos + size > end:
            raise CorruptLogError(f"bad batch length {length} at position {pos}")
        delta = _LAST_OFFSET_DELTA.unpack_from(buf, off + 23)[0]
        max_ts = _MAX_TIMESTAMP.unpack_from(buf, off + 35)[0]
        yield pos, base, size, base + delta + 1, max_ts
        pos += size


class Segment:
    """Metadata of one segment. Fields read by readers change only under the log's lock."""

    __slots__ = (
        "appender", "base", "bytes_since_index", "cleaned_ms", "created_ms", "dirty_from",
        "epoch", "idx_pending",
        "idx_persisted", "idx_pos", "idx_rel", "index_epoch", "lock", "max_timestamp",
        "next_offset", "offset_of_max_timestamp", "origin_epoch", "reader", "readers", "retired",
        "seq", "size", "tidx_pending", "tidx_persisted", "tidx_rel", "tidx_ts", "tombstones",
    )

    def __init__(self, base: int, created_ms: int = -1, epoch: int = 0, seq: int = -1) -> None:
        self.base = base
        self.epoch = epoch                 # leader epoch of the writer that created the file
        self.seq = seq                     # object sequence number (object layout), else -1
        self.index_epoch = epoch           # epoch whose owner wrote the index files
        self.size = 0                      # durable bytes
        self.next_offset = base            # offset after the last durable batch
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base
        self.created_ms = created_ms       # append time of the first batch (-1: empty)
        # Log cleaner (bmq.cleaner): when the records were first cleaned (-1: never, "dirty"),
        # in a dirty segment the offset below which a pass already mapped its keys (-1: none),
        # tombstones still in the segment, and the leader epoch that wrote the records (a
        # cleaned segment's file is named after the cleaning owner's epoch; -1: ``epoch``).
        self.cleaned_ms = -1
        self.dirty_from = -1
        self.tombstones = 0
        self.origin_epoch = -1
        # Indexes; None while not loaded (sealed segments load on first use).
        self.idx_rel: array[int] | None = array("I")
        self.idx_pos: array[int] | None = array("I")
        self.tidx_ts: array[int] | None = array("q")
        self.tidx_rel: array[int] | None = array("I")
        self.idx_persisted = 0             # entries durable in the .index file
        self.tidx_persisted = 0
        # Writer side (flush thread only).
        self.bytes_since_index = 0
        self.idx_pending = bytearray()     # encoded entries not yet in the files
        self.tidx_pending = bytearray()
        self.appender: AppendFile | None = None
        # Reader side.
        self.reader: ReadFile | None = None
        self.readers = 0                   # reads in progress (handles stay open meanwhile)
        self.retired = False               # removed from the log; close handles when unused
        self.lock = threading.RLock()      # lazy index load and reader open

    @property
    def data_epoch(self) -> int:
        """The leader epoch that wrote the segment's records (OffsetForLeaderEpoch)."""
        return self.epoch if self.origin_epoch < 0 else self.origin_epoch

    @property
    def stem(self) -> str:
        return segment_stem(self.base, self.epoch, self.seq)

    @property
    def index_stem(self) -> str:
        """Index files are named after the log file, unless a later owner sealed the segment
        (it then writes them under its own epoch, never into files the old owner may touch)."""
        if self.index_epoch == self.epoch:
            return self.stem
        return f"{self.stem}-i{self.index_epoch:010d}"

    @property
    def log_file(self) -> str:
        return self.stem + ".log"

    @property
    def index_file(self) -> str:
        return self.index_stem + ".index"

    @property
    def timeindex_file(self) -> str:
        return self.index_stem + ".timeindex"

    def file_names(self) -> tuple[str, str, str]:
        return self.log_file, self.index_file, self.timeindex_file

    @property
    def index_loaded(self) -> bool:
        return self.idx_rel is not None

    @property
    def last_time_entry(self) -> int:
        return self.tidx_ts[-1] if self.tidx_ts else -(1 << 63)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(position, base offset) of the last indexed batch starting at or before ``offset``."""
        rel, pos = self.idx_rel, self.idx_pos
        assert rel is not None and pos is not None
        i = bisect_right(rel, offset - self.base) - 1
        if i < 0:
            return 0, self.base
        return pos[i], self.base + rel[i]

    def time_lookup(self, timestamp: int) -> int:
        """Offset from which to scan for the first batch with max timestamp >= ``timestamp``."""
        ts, rel = self.tidx_ts, self.tidx_rel
        assert ts is not None and rel is not None
        i = bisect_right(ts, timestamp) - 1
        return self.base if i < 0 else self.base + rel[i]

    def set_indexes(self, idx: tuple[array[int], array[int]],
                    tidx: tuple[array[int], array[int]]) -> None:
        self.idx_rel, self.idx_pos = idx
        self.tidx_ts, self.tidx_rel = tidx

    def validate_indexes(self, idx: tuple[array[int], array[int]],
                         tidx: tuple[array[int], array[int]]) -> bool:
        rel, pos = idx
        ts, trel = tidx
        span = self.next_offset - self.base
        if rel and (rel[-1] >= span or pos[-1] >= self.size):
            return False
        if trel and (max(trel) >= span):
            return False
        return _increasing(rel) and _increasing(pos) and _increasing(ts) and _non_decreasing(trel)

    def close_handles(self) -> None:
        with self.lock:
            for handle in (self.reader, self.appender):
                if handle is not None:
                    OPEN_FILES.closed(handle)
                    with contextlib.suppress(OSError):
                        handle.close()
            self.reader = None
            self.appender = None

    def meta(self) -> dict[str, int]:
        extra = {}
        if self.epoch:
            extra["epoch"] = self.epoch
        if self.seq >= 0:
            extra["seq"] = self.seq
        if self.index_epoch != self.epoch:
            extra["index_epoch"] = self.index_epoch
        if self.cleaned_ms >= 0:
            extra["cleaned_ms"] = self.cleaned_ms
            extra["tombstones"] = self.tombstones
        if self.origin_epoch >= 0:
            extra["origin_epoch"] = self.origin_epoch
        if self.dirty_from >= 0:
            extra["dirty_from"] = self.dirty_from
        return {
            "base_offset": self.base,
            "size": self.size,
            "next_offset": self.next_offset,
            "max_timestamp": self.max_timestamp,
            "offset_of_max_timestamp": self.offset_of_max_timestamp,
            "created_ms": self.created_ms,
            "index_entries": self.idx_persisted,
            "time_index_entries": self.tidx_persisted,
            **extra,
        }

    @classmethod
    def from_meta(cls, meta: dict[str, int]) -> Segment:
        """A sealed segment as a checkpoint or manifest describes it (indexes not loaded)."""
        seg = cls(int(meta["base_offset"]), int(meta["created_ms"]), int(meta.get("epoch", 0)),
                  int(meta.get("seq", -1)))
        seg.index_epoch = int(meta.get("index_epoch", seg.epoch))
        seg.size = int(meta["size"])
        seg.next_offset = int(meta["next_offset"])
        seg.max_timestamp = int(meta["max_timestamp"])
        seg.offset_of_max_timestamp = int(meta["offset_of_max_timestamp"])
        seg.idx_persisted = int(meta["index_entries"])
        seg.tidx_persisted = int(meta["time_index_entries"])
        seg.cleaned_ms = int(meta.get("cleaned_ms", -1))
        seg.tombstones = int(meta.get("tombstones", 0))
        seg.origin_epoch = int(meta.get("origin_epoch", -1))
        seg.dirty_from = int(meta.get("dirty_from", -1))
        seg.idx_rel = seg.idx_pos = seg.tidx_ts = seg.tidx_rel = None
        return seg
