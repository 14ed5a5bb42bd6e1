"""Decoding the records inside RecordBatch v2, for the few places that need them.

The produce and fetch paths never call this: they move batches as opaque bytes. It serves
ListOffsets by timestamp (which must answer with a record's exact offset) and batch readers such
as the Spark data source. All four Kafka codecs are handled; snappy comes either raw (librdkafka)
or in xerial framing (the Java client).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import cramjam

from bmq.protocol.records import (
    HEADER_SIZE,
    TIMESTAMP_TYPE_LOG_APPEND,
    BatchHeader,
    iter_batches,
)

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_INT32 = struct.Struct(">i")


class RecordDecodeError(ValueError):
    """A batch whose records cannot be decoded (bad compression or framing)."""


@dataclass(slots=True, frozen=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _snappy(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    # xerial framing: magic, version, compatible version, then (int32 length, raw block)*.
    pos, out = 16, []
    while pos < len(data):
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + length])))
        pos += length
    return b"".join(out)


def decompress(codec: int, data: bytes) -> bytes:
    try:
        if codec == NONE:
            return data
        if codec == GZIP:
            return zlib.decompress(data, wbits=47)  # 32 + 15: gzip or zlib header
        if codec == SNAPPY:
            return _snappy(data)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except (zlib.error, cramjam.DecompressionError, struct.error) as error:
        raise RecordDecodeError(f"cannot decompress codec {codec}: {error}") from error
    raise RecordDecodeError(f"unknown compression codec {codec}")


class _Cursor:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def varint(self) -> int:
        shift = result = 0
        data = self.data
        while True:
            if self.pos >= len(data) or shift > 63:
                raise RecordDecodeError("truncated varint")
            byte = data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)  # zig-zag
            shift += 7

    def take(self, length: int) -> bytes | None:
        if length < 0:
            return None
        end = self.pos + length
        if end > len(self.data):
            raise RecordDecodeError("truncated record field")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk


def decode_batch(batch: bytes | memoryview, header: BatchHeader) -> list[Record]:
    """The records of one whole batch (``batch`` starts at the batch's first byte)."""
    payload = decompress(header.compression, bytes(batch[HEADER_SIZE : header.size]))
    cursor = _Cursor(payload)
    log_append = bool(header.attributes & TIMESTAMP_TYPE_LOG_APPEND)
    records = []
    for _ in range(header.record_count):
        length = cursor.varint()
        end = cursor.pos + length
        cursor.pos += 1  # record attributes, unused
        timestamp_delta = cursor.varint()
        offset_delta = cursor.varint()
        key = cursor.take(cursor.varint())
        value = cursor.take(cursor.varint())
        headers = []
        for _ in range(cursor.varint()):
            name = cursor.take(cursor.varint())
            if name is None:   # as the Java client's DefaultRecord: a header key is required
                raise RecordDecodeError("null header key")
            headers.append((name.decode("utf-8", "replace"), cursor.take(cursor.varint())))
        if cursor.pos != end:
            raise RecordDecodeError("record length does not match its fields")
        timestamp = header.max_timestamp if log_append else header.base_timestamp + timestamp_delta
        records.append(Record(header.base_offset + offset_delta, timestamp, key, value, headers))
    return records


def iter_records(data: bytes | memoryview) -> Iterator[Record]:
    """Every record of every complete batch in ``data``, in offset order."""
    for pos, header in iter_batches(data):
        yield from decode_batch(memoryview(data)[pos : pos + header.size], header)
