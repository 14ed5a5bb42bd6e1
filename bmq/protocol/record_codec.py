"""Decoding (and recompressing) the records inside RecordBatch v2, for the few places that
need them, and encoding records a broker writes itself (dead-letter records).

The produce and fetch paths move batches as opaque bytes; this serves ListOffsets by timestamp
(which must answer with a record's exact offset), batch readers such as the Spark data source,
and the produce path only for topics whose configs ask the broker to look inside
(compression.type other than producer, cleanup.policy=compact). All four Kafka codecs are
handled; snappy comes either raw (librdkafka) or in xerial framing (the Java client), and is
written in xerial framing as Kafka's broker writes it.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import cramjam
import crc32c

from bmq.protocol.primitives import encode_varint
from bmq.protocol.records import (
    COMPRESSION_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    TIMESTAMP_TYPE_LOG_APPEND,
    BatchHeader,
    iter_batches,
    read_header,
)

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
# compression.type's names of the codecs.
CODEC_IDS = {"uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_INT32 = struct.Struct(">i")
# xerial framing as snappy-java writes it: magic, version 1, compatible version 1, then
# 32 KiB input blocks each as (int32 length, raw snappy block).
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 << 10
# An LZ4 frame as Kafka's producer and broker write it: independent 64 KiB blocks, no content
# size or checksum. Magic, FLG 0x60, BD 0x40 and the descriptor's xxhash byte 0x82 are constant.
_LZ4_FRAME_HEADER = bytes.fromhex("04224d18604082")
_LZ4_BLOCK = 64 << 10
_LZ4_UNCOMPRESSED = 0x80000000
_LZ4_DEFAULT_LEVEL = 9  # Kafka's default, its fast mode; other levels use high compression
_UINT32_LE = struct.Struct("<I")
_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")
_BATCH_LENGTH = struct.Struct(">i")
_BATCH_HEAD = struct.Struct(">qiibIhiqqqhii")


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


def _snappy_xerial(data: bytes) -> bytes:
    out = [_XERIAL_HEADER]
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        out += [_INT32.pack(len(block)), block]
    return b"".join(out)


def _lz4_frame(data: bytes, level: int | None) -> bytes:
    out = [_LZ4_FRAME_HEADER]
    fast = level is None or level == _LZ4_DEFAULT_LEVEL
    for start in range(0, len(data), _LZ4_BLOCK):
        chunk = data[start : start + _LZ4_BLOCK]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False) if fast else
                      cramjam.lz4.compress_block(chunk, mode="high_compression",
                                                 compression=level, store_size=False))
        if len(block) >= len(chunk):  # incompressible: stored as is, flagged
            out += [_UINT32_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED), chunk]
        else:
            out += [_UINT32_LE.pack(len(block)), block]
    out.append(b"\x00\x00\x00\x00")  # end mark
    return b"".join(out)


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """``data`` compressed as a batch's records section with ``codec`` (None or -1: the
    codec's default level)."""
    if level == -1:
        level = None
    if codec == NONE:
        return data
    if codec == GZIP:
        packer = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, 31)
        return packer.compress(data) + packer.flush()
    if codec == SNAPPY:
        return _snappy_xerial(data)
    if codec == LZ4:
        return _lz4_frame(data, level)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3 if level is None else level))
    raise ValueError(f"unknown compression codec {codec}")


def recompress_batch(batch: bytes | memoryview, header: BatchHeader, codec: int,
                     level: int | None = None) -> bytes:
    """The batch with its records section recompressed with ``codec``: every header field but
    the length, the codec bits and the CRC is kept, and the records themselves are unchanged
    (only the compressed bytes around them are)."""
    records = decompress(header.compression, bytes(batch[HEADER_SIZE : header.size]))
    payload = compress(codec, records, level)
    out = bytearray(HEADER_SIZE + len(payload))
    out[:HEADER_SIZE] = batch[:HEADER_SIZE]
    out[HEADER_SIZE:] = payload
    _BATCH_LENGTH.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    _ATTRIBUTES.pack_into(out, 21, (header.attributes & ~COMPRESSION_MASK) | codec)
    _CRC.pack_into(out, 17, crc32c.crc32c(memoryview(out)[21:]))
    return bytes(out)


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
    return [_read_record(cursor, header) for _ in range(header.record_count)]


def decode_record_at(payload: bytes, position: int, header: BatchHeader) -> Record:
    """The one record at ``position`` of a batch's (decompressed) records: for readers that
    found where a record starts without decoding the others (bmq.field_index)."""
    cursor = _Cursor(payload)
    cursor.pos = position
    return _read_record(cursor, header)


def _read_record(cursor: _Cursor, header: BatchHeader) -> Record:
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
    log_append = bool(header.attributes & TIMESTAMP_TYPE_LOG_APPEND)
    timestamp = header.max_timestamp if log_append else header.base_timestamp + timestamp_delta
    return Record(header.base_offset + offset_delta, timestamp, key, value, headers)


def iter_records(data: bytes | memoryview) -> Iterator[Record]:
    """Every record of every complete batch in ``data``, in offset order."""
    for pos, header in iter_batches(data):
        yield from decode_batch(memoryview(data)[pos : pos + header.size], header)


def encode_record_fields(key: bytes | None, value: bytes | None,
                         headers: list[tuple[str, bytes | None]]) -> bytearray:
    """A record's key, value and headers as the record format encodes them (what follows its
    attributes, timestamp delta and offset delta)."""
    body = bytearray()
    for data in (key, value):
        if data is None:
            body += encode_varint(-1)
        else:
            body += encode_varint(len(data))
            body += data
    body += encode_varint(len(headers))
    for name, header_value in headers:
        raw = name.encode()
        body += encode_varint(len(raw))
        body += raw
        if header_value is None:
            body += encode_varint(-1)
        else:
            body += encode_varint(len(header_value))
            body += header_value
    return body


def frame_record(offset_delta: int, timestamp_delta: int, fields: bytes | bytearray) -> bytes:
    """One record: length, attributes, the two deltas, then ``fields``
    (``encode_record_fields``)."""
    head = b"\x00" + encode_varint(timestamp_delta) + encode_varint(offset_delta)
    return encode_varint(len(head) + len(fields)) + head + bytes(fields)


def _encode_record(offset_delta: int, timestamp_delta: int, record: Record) -> bytes:
    return frame_record(offset_delta, timestamp_delta,
                        encode_record_fields(record.key, record.value, record.headers))


def frame_batch(payload: bytes | bytearray, count: int, first_ts: int, max_ts: int, *,
                leader_epoch: int = -1, producer_id: int = -1, producer_epoch: int = -1,
                base_sequence: int = -1, attributes: int = 0) -> tuple[bytearray, BatchHeader]:
    """An uncompressed RecordBatch v2 around ``count`` framed records (base offset 0)."""
    buf = bytearray(HEADER_SIZE + len(payload))
    _BATCH_HEAD.pack_into(buf, 0, 0, HEADER_SIZE - LOG_OVERHEAD + len(payload), leader_epoch,
                          MAGIC_V2, 0, attributes, count - 1, first_ts, max_ts, producer_id,
                          producer_epoch, base_sequence, count)
    buf[HEADER_SIZE:] = payload
    struct.pack_into(">I", buf, 17, crc32c.crc32c(memoryview(buf)[21:]))
    return buf, read_header(buf)


def encode_batch(records: list[Record], leader_epoch: int = -1) -> tuple[bytearray, BatchHeader]:
    """One uncompressed RecordBatch v2 of ``records`` (keys, values, headers and timestamps
    kept; offsets renumbered from base offset 0), for a broker that writes records itself."""
    if not records:
        raise ValueError("a batch needs at least one record")
    first_ts = min(r.timestamp for r in records)
    max_ts = max(r.timestamp for r in records)
    payload = b"".join(_encode_record(i, r.timestamp - first_ts, r)
                       for i, r in enumerate(records))
    return frame_batch(payload, len(records), first_ts, max_ts, leader_epoch=leader_epoch)
