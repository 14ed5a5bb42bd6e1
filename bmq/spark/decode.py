"""Record batches from segment files to Arrow columns, in Spark's Kafka source schema.

Decompression is ``bmq.protocol.record_codec.decompress`` (all four codecs, raw and xerial
snappy). Field parsing is columnar: one Python step per record finds where records start
(their length varints), then numpy decodes every other varint of all records of a chunk at once
and gathers keys and values through Arrow binary views; headers the same way, one numpy pass
per header position. ``record_codec.decode_batch`` remains the reference the tests compare
against.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from bmq.protocol.record_codec import NONE, RecordDecodeError, decompress
from bmq.protocol.records import (
    CONTROL_FLAG,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    TIMESTAMP_TYPE_LOG_APPEND,
    BatchHeader,
    crc_ok,
    read_header,
)
from bmq.spark.ranges import DataLossError, ReadRange
from bmq.storage.base import Storage

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()),
                                   pa.field("value", pa.binary())]))
ARROW_SCHEMA = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
    pa.field("headers", HEADERS_TYPE),
])

READ_CHUNK = 16 << 20          # bytes read from a segment file at a time
ARROW_CHUNK_BYTES = 8 << 20    # decoded payload per Arrow batch (about)
ARROW_CHUNK_RECORDS = 131072
_PAD = bytes(32)               # lets vectorised reads run past the end without bounds checks
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_INT32 = struct.Struct(">i")


# ------------------------------------------------------------------------------ batches
def _check_header(h: BatchHeader, pos: int, path: str) -> None:
    if h.magic != MAGIC_V2 or h.batch_length < _MIN_BATCH_LENGTH or h.last_offset_delta < 0:
        raise DataLossError(f"{path}: no valid batch at position {pos} (file changed?)")


def iter_file_batches(storage: Storage, rng: ReadRange, *, verify_crc: bool = True,
                      chunk: int = READ_CHUNK) -> Iterator[tuple[bytes, int, BatchHeader]]:
    """(buffer, position in buffer, header) of each batch of ``rng`` that holds offsets of
    its range, read ``chunk`` bytes at a time."""
    path = rng.path
    pos = rng.start_pos
    if pos > 0:
        probe = storage.read_range(path, pos, HEADER_SIZE)
        if len(probe) < HEADER_SIZE or read_header(probe).base_offset != rng.hint_offset:
            pos = 0   # the index hint was wrong: scan from the segment's start
    end = rng.end_pos
    next_offset = -1
    while True:
        while pos < end:
            data = storage.read_range(path, pos, min(chunk, end - pos))
            if len(data) < HEADER_SIZE:
                raise DataLossError(f"{path}: ends at {pos + len(data)}, expected {end} bytes")
            q = 0
            n = len(data)
            while n - q >= HEADER_SIZE:
                h = read_header(data, q)
                _check_header(h, pos + q, path)
                if q + h.size > n:
                    if q == 0:   # one batch larger than the chunk
                        data = storage.read_range(path, pos, h.size)
                        n = len(data)
                        if n < h.size:
                            raise DataLossError(f"{path}: batch at {pos} cut short")
                        continue
                    break
                if h.base_offset >= rng.end_offset:
                    return
                if h.next_offset > rng.start_offset and not h.attributes & CONTROL_FLAG:
                    if verify_crc and not crc_ok(data, q, h):
                        raise DataLossError(f"{path}: CRC-32C mismatch in batch at {pos + q}")
                    yield data, q, h
                next_offset = h.next_offset
                q += h.size
            if q == 0:
                raise DataLossError(f"{path}: truncated batch at {pos}")
            pos += q
        if next_offset >= rng.end_offset or end >= rng.limit_pos:
            return
        end = rng.limit_pos   # the end hint was short: read on to the segment's end


def iter_reader_batches(storage: Storage, rng: ReadRange, *, verify_crc: bool = True,
                        chunk: int = READ_CHUNK) -> Iterator[tuple[bytes, int, BatchHeader]]:
    """Like ``iter_file_batches`` for a range of a partition in a layout this module does not
    read itself (``segment`` -1): through ``PartitionLog.open_reader``."""
    from bmq.protocol.errors import KafkaError
    from bmq.storage.log import PartitionLog

    reader = PartitionLog.open_reader(storage, rng.topic, rng.partition)
    name = f"{rng.topic}-{rng.partition}"
    try:
        offset = rng.start_offset
        while offset < rng.end_offset:
            try:
                data = bytes(reader.read(offset, chunk))
            except KafkaError as exc:
                raise DataLossError(f"{name}: offset {offset} unreadable: {exc}") from exc
            if not data:
                raise DataLossError(f"{name}: ends at {offset}, expected {rng.end_offset}")
            q = 0
            while len(data) - q >= HEADER_SIZE:
                h = read_header(data, q)
                _check_header(h, q, name)
                if q + h.size > len(data) or h.base_offset >= rng.end_offset:
                    break
                if h.next_offset > offset and not h.attributes & CONTROL_FLAG:
                    if verify_crc and not crc_ok(data, q, h):
                        raise DataLossError(f"{name}: CRC-32C mismatch at offset {offset}")
                    yield data, q, h
                offset = max(offset, h.next_offset)
                q += h.size
            if q == 0:
                break   # the next batch starts at or after the end of the range
    finally:
        reader.close()


# ------------------------------------------------------------------------------ varints
def _varint_at(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = result = 0
    n = len(data)
    while True:
        if pos >= n or shift > 63:
            raise RecordDecodeError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def _walk(payload: bytes | memoryview, count: int, base: int, starts: list[int],
          ends: list[int]) -> None:
    """Append where each of the ``count`` records of ``payload`` starts (after its length)
    and ends, shifted by ``base``; the records must fill the payload exactly."""
    p = 0
    n = len(payload)
    add_start = starts.append
    add_end = ends.append
    for _ in range(count):
        if p >= n:
            raise RecordDecodeError("fewer records than the batch header counts")
        b = payload[p]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            p += 1
        elif p + 1 < n and payload[p + 1] < 0x80:   # records of 64 B to 8 KiB
            raw = (b & 0x7F) | (payload[p + 1] << 7)
            length = (raw >> 1) ^ -(raw & 1)
            p += 2
        else:
            length, p = _varint_at(payload, p)
        if length < 1:
            raise RecordDecodeError(f"bad record length {length}")
        add_start(base + p)
        p += length
        add_end(base + p)
    if p != n:
        raise RecordDecodeError("records do not fill the batch")


_U7F = np.uint64(0x7F)
_U1 = np.uint64(1)


def _vvarint(u8: U8, pos: I64) -> tuple[I64, I64]:
    """Zig-zag varints at every position of ``pos``: (values, positions after them)."""
    b = u8[pos]
    cont = b >= 0x80
    if not cont.any():
        raw = b.astype(np.int64)
        return (raw >> 1) ^ -(raw & 1), pos + 1
    result = (b & 0x7F).astype(np.uint64)
    length = np.ones(len(pos), np.int64)
    idx = np.flatnonzero(cont)
    shift = 7
    while idx.size:
        if shift > 63:
            raise RecordDecodeError("varint longer than 10 bytes")
        bb = u8[pos[idx] + length[idx]]
        result[idx] |= (bb.astype(np.uint64) & _U7F) << np.uint64(shift)
        length[idx] += 1
        idx = idx[bb >= 0x80]
        shift += 7
    value = (result >> _U1).astype(np.int64) ^ -(result & _U1).astype(np.int64)
    return value, pos + length


def _binary(buf: pa.Buffer, u8: U8, starts: I64, lengths: I64) -> pa.Array:
    """A binary column of the spans ``[start, start + length)`` of ``buf`` (null where the
    length is -1), built as Arrow binary views over ``buf`` and cast to plain binary."""
    n = len(starts)
    valid = lengths >= 0
    lens = np.where(valid, lengths, 0)
    views = np.zeros((n, 4), np.int32)
    views[:, 0] = lens
    v8 = views.view(np.uint8)
    take = np.minimum(lens, 12)
    inline = u8[starts[:, None] + np.arange(12)]
    inline[np.arange(12)[None, :] >= take[:, None]] = 0
    v8[:, 4:16] = inline
    long_ = lens > 12
    if long_.any():
        views[long_, 2] = 0
        views[long_, 3] = starts[long_]
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    arr = pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(views), buf])
    return arr.cast(pa.binary())


def _headers(buf: pa.Buffer, u8: U8, hstart: I64, hcount: I64, rend: I64) -> pa.Array:
    """The headers column; records without headers get null, as in Spark's Kafka source (a
    null list is also what Spark turns into rows cheapest: nothing to copy).

    Columnar like keys and values: step j decodes the j-th header of every record that has
    more than j (as many numpy passes as the most headers a record has), and keys and values
    become Arrow arrays through binary views, with no Python step per record."""
    n = len(hstart)
    with_headers = hcount != 0
    if not with_headers.any():
        return pa.nulls(n, HEADERS_TYPE)
    rows = np.flatnonzero(with_headers)
    counts = hcount[rows]
    # A header takes at least 2 bytes (two length varints): this bounds the loop below.
    if (counts < 0).any() or (2 * counts > rend[rows] - hstart[rows]).any():
        raise RecordDecodeError("bad header count")
    total = int(counts.sum())
    slot0 = np.cumsum(counts) - counts          # slot of each record's first header
    key_start = np.empty(total, np.int64)
    key_len = np.empty(total, np.int64)
    value_start = np.empty(total, np.int64)
    value_len = np.empty(total, np.int64)
    pos = hstart[rows]
    active = np.arange(len(rows))
    for j in range(int(counts.max())):
        active = active[counts[active] > j]
        klen, p = _vvarint(u8, pos[active])
        if (klen < 0).any():
            raise RecordDecodeError("null header key")
        slot = slot0[active] + j
        key_start[slot] = p
        key_len[slot] = klen
        vlen, p = _vvarint(u8, p + klen)
        if (vlen < -1).any():
            raise RecordDecodeError("negative header value length")
        value_start[slot] = p
        value_len[slot] = vlen
        pos[active] = p + np.maximum(vlen, 0)
    if (pos != rend[rows]).any():
        raise RecordDecodeError("record length does not match its headers")
    raw_keys = _binary(buf, u8, key_start, key_len)
    try:
        keys = raw_keys.cast(pa.string())
    except pa.ArrowInvalid:   # not UTF-8: replace, as the Java client's String(bytes, UTF_8)
        keys = pa.array([k.decode("utf-8", "replace") for k in raw_keys.to_pylist()],
                        pa.string())
    structs = pa.StructArray.from_arrays([keys, _binary(buf, u8, value_start, value_len)],
                                         names=["key", "value"])
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.where(with_headers, hcount, 0), out=offsets[1:])
    validity = pa.py_buffer(np.packbits(with_headers, bitorder="little"))
    return pa.ListArray.from_buffers(HEADERS_TYPE, n, [validity, pa.py_buffer(offsets)],
                                     children=[structs])


class ColumnBuilder:
    """Accumulates whole batches of one partition; ``build`` returns them as an Arrow batch
    holding only the offsets in ``[start_offset, end_offset)``."""

    def __init__(self, topic: str, partition: int, start_offset: int, end_offset: int,
                 include_headers: bool = True) -> None:
        self.topic = topic
        self.partition = partition
        self.start_offset = start_offset
        self.end_offset = end_offset
        self.include_headers = include_headers
        self._payloads: list[bytes | memoryview] = []
        self._batches: list[tuple[int, int, int, int, int]] = []  # base, base ts, max ts, type, n
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._size = 0
        self.records = 0
        self.trim = False

    @property
    def pending_bytes(self) -> int:
        return self._size

    def add(self, data: bytes, pos: int, h: BatchHeader) -> None:
        raw = memoryview(data)[pos + HEADER_SIZE:pos + h.size]
        if h.record_count <= 0:
            return
        codec = h.compression
        # Uncompressed bodies stay views of the read buffer: build() copies each byte once.
        body = raw if codec == NONE else decompress(codec, bytes(raw))
        _walk(body, h.record_count, self._size, self._starts, self._ends)
        self._payloads.append(body)
        self._size += len(body)
        log_append = 1 if h.attributes & TIMESTAMP_TYPE_LOG_APPEND else 0
        self._batches.append((h.base_offset, h.base_timestamp, h.max_timestamp, log_append,
                              h.record_count))
        self.records += h.record_count
        if h.base_offset < self.start_offset or h.last_offset >= self.end_offset:
            self.trim = True

    def build(self) -> pa.RecordBatch | None:
        if not self._batches:
            return None
        payload = b"".join([*self._payloads, _PAD])
        batches = self._batches
        starts = np.array(self._starts, np.int64)
        ends = np.array(self._ends, np.int64)
        self._payloads, self._batches, self._starts, self._ends = [], [], [], []
        self._size = 0
        self.records = 0
        trim, self.trim = self.trim, False
        try:
            return self._columns(payload, batches, starts, ends, trim)
        except IndexError as exc:   # lengths pointing far outside the payload
            raise RecordDecodeError(f"record fields run past the batch: {exc}") from exc

    def _columns(self, payload: bytes, batches: list[tuple[int, int, int, int, int]],
                 starts: I64, ends: I64, trim: bool) -> pa.RecordBatch:
        u8 = np.frombuffer(payload, np.uint8)
        meta = np.array(batches, np.int64)
        counts = meta[:, 4]
        which = np.repeat(np.arange(len(batches)), counts)
        p = starts + 1                           # skip the record attributes
        ts_delta, p = _vvarint(u8, p)
        off_delta, p = _vvarint(u8, p)
        key_len, p = _vvarint(u8, p)
        key_start = p
        p = p + np.maximum(key_len, 0)
        if (p > ends).any():
            raise RecordDecodeError("record key runs past the record")
        value_len, p = _vvarint(u8, p)
        value_start = p
        p = p + np.maximum(value_len, 0)
        if (p > ends).any():
            raise RecordDecodeError("record value runs past the record")
        header_count, p = _vvarint(u8, p)
        no_headers = header_count == 0
        if (no_headers & (p != ends)).any() or (p > ends).any():
            raise RecordDecodeError("record length does not match its fields")
        if (key_len < -1).any() or (value_len < -1).any():
            raise RecordDecodeError("negative key or value length")
        offsets = meta[which, 0] + off_delta
        log_append = meta[which, 3].astype(bool)
        timestamps = np.where(log_append, meta[which, 2], meta[which, 1] + ts_delta)
        if trim:
            keep = (offsets >= self.start_offset) & (offsets < self.end_offset)
            sel = np.flatnonzero(keep)
            offsets, timestamps, log_append = offsets[sel], timestamps[sel], log_append[sel]
            key_start, key_len = key_start[sel], key_len[sel]
            value_start, value_len = value_start[sel], value_len[sel]
            header_count, p, ends = header_count[sel], p[sel], ends[sel]
        n = len(offsets)
        buf = pa.py_buffer(payload)
        columns: list[Any] = [
            _binary(buf, u8, key_start, key_len),
            _binary(buf, u8, value_start, value_len),
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array(offsets),
            pa.array(timestamps * 1000, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            pa.array(log_append.astype(np.int32)),
        ]
        names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
        if self.include_headers:
            columns.append(_headers(buf, u8, p, header_count, ends))
            names.append("headers")
        return pa.RecordBatch.from_arrays(columns, names=names)


def read_range(storage: Storage, rng: ReadRange, *, include_headers: bool = True,
               verify_crc: bool = True, chunk_bytes: int = ARROW_CHUNK_BYTES,
               chunk_records: int = ARROW_CHUNK_RECORDS,
               on_batch: Callable[[int], None] | None = None) -> Iterator[pa.RecordBatch]:
    """The records of ``rng`` as Arrow batches (``ARROW_SCHEMA``, minus ``headers`` unless
    ``include_headers``). ``on_batch`` is called with each record batch's size in bytes."""
    builder = ColumnBuilder(rng.topic, rng.partition, rng.start_offset, rng.end_offset,
                            include_headers)
    source = (iter_reader_batches(storage, rng, verify_crc=verify_crc) if rng.segment < 0
              else iter_file_batches(storage, rng, verify_crc=verify_crc))
    for data, pos, h in source:
        builder.add(data, pos, h)
        if on_batch is not None:
            on_batch(h.size)
        if builder.pending_bytes >= chunk_bytes or builder.records >= chunk_records:
            out = builder.build()
            if out is not None and out.num_rows:
                yield out
    out = builder.build()
    if out is not None and out.num_rows:
        yield out
