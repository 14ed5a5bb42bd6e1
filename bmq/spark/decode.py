"""Record batches from segment files to Arrow columns, in Spark's Kafka source schema.

Decompression is ``bmq.protocol.record_codec.decompress`` (all four codecs, raw and xerial
snappy). Records are parsed by the C module ``bmq.spark.native._recdecode`` (``_recdecode.c``):
for a chunk of batch bodies it checks every record and writes the columns' Arrow buffers (offsets,
timestamps, keys, values and headers as int32 offsets plus data), which become Arrow arrays
without a Python step per record. ``record_codec.decode_batch`` remains the reference the tests
compare against.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from bmq.protocol.errors import KafkaError
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
from bmq.readpath.filters import apply_filter, compile_filter
from bmq.spark.native import _recdecode
from bmq.spark.ranges import DataLossError, ReadRange
from bmq.storage.base import Storage
from bmq.storage.log import PartitionLog
from bmq.storage.producer_state import AbortedBatches

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
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD


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


# ------------------------------------------------------------------------------ columns
Triple = tuple[bytes | None, bytes, bytes]   # (validity, int32 offsets, data) of a binary column


def _buffer(data: bytes | None) -> pa.Buffer | None:
    return None if data is None else pa.py_buffer(data)


def _binary(n: int, column: Triple) -> pa.Array:
    valid, offsets, data = column
    return pa.Array.from_buffers(pa.binary(), n, [_buffer(valid), pa.py_buffer(offsets),
                                                  pa.py_buffer(data)])


def _headers(n: int, headers: tuple[bytes | None, bytes, int, Triple, Triple]) -> pa.Array:
    """The headers column; records without headers get null, as in Spark's Kafka source (a
    null list is also what Spark turns into rows cheapest: nothing to copy)."""
    valid, offsets, count, key, value = headers
    if count == 0:
        return pa.nulls(n, HEADERS_TYPE)
    raw_keys = _binary(count, key)
    try:
        keys = raw_keys.cast(pa.string())
    except pa.ArrowInvalid:   # not UTF-8: replace, as the Java client's String(bytes, UTF_8)
        keys = pa.array([k.decode("utf-8", "replace") for k in raw_keys.to_pylist()],
                        pa.string())
    structs = pa.StructArray.from_arrays([keys, _binary(count, value)], names=["key", "value"])
    return pa.ListArray.from_buffers(HEADERS_TYPE, n, [_buffer(valid), pa.py_buffer(offsets)],
                                     children=[structs])


class ColumnBuilder:
    """Accumulates whole batches of one partition; ``build`` returns them as an Arrow batch
    holding only the offsets in ``[start_offset, end_offset)``.

    Batch bodies are kept as they are (uncompressed ones as views of the read buffer) until
    ``build``, where one call into ``bmq.spark.native._recdecode`` checks every record and copies
    its fields into Arrow buffers (each byte of a key, value or header once)."""

    def __init__(self, topic: str, partition: int, start_offset: int, end_offset: int,
                 include_headers: bool = True, record_filter: str | None = None) -> None:
        self.record_filter = None if record_filter is None else compile_filter(record_filter)
        self.topic = topic
        self.partition = partition
        self.start_offset = start_offset
        self.end_offset = end_offset
        self.include_headers = include_headers
        self._bodies: list[bytes | memoryview] = []
        self._meta: list[int] = []   # per batch: base offset, base ts, max ts, type, count
        self._size = 0
        self.records = 0

    @property
    def pending_bytes(self) -> int:
        return self._size

    def add(self, data: bytes, pos: int, h: BatchHeader) -> None:
        if self.record_filter is not None and h.record_count > 0:
            # A view's read: the batch with only its matching records (uncompressed).
            data = apply_filter(self.record_filter, memoryview(data)[pos:pos + h.size])
            pos, h = 0, read_header(data)
        if h.record_count <= 0:
            return
        raw = memoryview(data)[pos + HEADER_SIZE:pos + h.size]
        codec = h.compression
        body = raw if codec == NONE else decompress(codec, bytes(raw))
        self._bodies.append(body)
        self._meta += (h.base_offset, h.base_timestamp, h.max_timestamp,
                       1 if h.attributes & TIMESTAMP_TYPE_LOG_APPEND else 0, h.record_count)
        self._size += len(body)
        self.records += h.record_count

    def build(self) -> pa.RecordBatch | None:
        if not self._bodies:
            return None
        bodies, meta = self._bodies, np.array(self._meta, np.int64)
        self._bodies, self._meta = [], []
        self._size = 0
        self.records = 0
        try:
            n, offsets, timestamps, types, key, value, headers = _recdecode.decode(
                bodies, meta, self.start_offset, self.end_offset, self.include_headers)
        except ValueError as exc:
            raise RecordDecodeError(str(exc)) from exc
        columns: list[Any] = [
            _binary(n, key),
            _binary(n, value),
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(offsets)]),
            pa.Array.from_buffers(ARROW_SCHEMA.field("timestamp").type, n,
                                  [None, pa.py_buffer(timestamps)]),
            pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(types)]),
        ]
        names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
        if headers is not None:
            columns.append(_headers(n, headers))
            names.append("headers")
        return pa.RecordBatch.from_arrays(columns, names=names)


def read_range(storage: Storage, rng: ReadRange, *, include_headers: bool = True,
               verify_crc: bool = True, chunk_bytes: int = ARROW_CHUNK_BYTES,
               chunk_records: int = ARROW_CHUNK_RECORDS,
               on_batch: Callable[[int], None] | None = None,
               record_filter: str | None = None) -> Iterator[pa.RecordBatch]:
    """The records of ``rng`` as Arrow batches (``ARROW_SCHEMA``, minus ``headers`` unless
    ``include_headers``). ``on_batch`` is called with each record batch's size in bytes.
    ``record_filter``: a view's filter; only the records it matches."""
    builder = ColumnBuilder(rng.topic, rng.partition, rng.start_offset, rng.end_offset,
                            include_headers, record_filter)
    source = (iter_reader_batches(storage, rng, verify_crc=verify_crc) if rng.segment < 0
              else iter_file_batches(storage, rng, verify_crc=verify_crc))
    aborted = AbortedBatches(lambda: rng.aborted)
    for data, pos, h in source:
        if h in aborted:
            continue    # a batch of an aborted transaction (read_committed)
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
