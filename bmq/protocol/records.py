"""RecordBatch (magic v2) headers, read and patched in place; records stay opaque bytes.

Layout of the 61-byte header (all big-endian)::

    0  baseOffset int64        27 baseTimestamp int64
    8  batchLength int32       35 maxTimestamp int64
    12 partitionLeaderEpoch    43 producerId int64
    16 magic int8              51 producerEpoch int16
    17 crc uint32              53 baseSequence int32
    21 attributes int16        57 recordCount int32
    23 lastOffsetDelta int32   61 records...

The CRC-32C covers everything from ``attributes`` to the end of the batch, so the broker may
rewrite ``baseOffset`` and ``partitionLeaderEpoch`` without recomputing it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

from bmq.protocol.errors import ErrorCode, KafkaError

HEADER_SIZE = 61
# baseOffset + batchLength: the part of the header not counted in batchLength.
LOG_OVERHEAD = 12
MAGIC_V2 = 2
NO_SEQUENCE = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_LOG_APPEND = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20

# The header's fields in order, for reading it and for writing a new batch's.
HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP = struct.Struct(">q")


@dataclass(slots=True, frozen=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes in a log or a request."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Decode the header at ``pos``; the caller guarantees HEADER_SIZE bytes are there."""
    return BatchHeader(*HEADER_STRUCT.unpack_from(buf, pos))


def crc_ok(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    """Hardware CRC-32C over attributes..end, compared with the stored CRC."""
    end = pos + header.size
    return crc32c.crc32c(memoryview(buf)[pos + 21 : end]) == header.crc


def seal_crc(buf: bytearray | memoryview, pos: int = 0, end: int | None = None) -> None:
    """Write the CRC-32C of the batch at ``pos`` (ending at ``end``, else at the buffer's end):
    the last step of writing a batch or changing a field the CRC covers."""
    _CRC.pack_into(buf, pos + 17, crc32c.crc32c(memoryview(buf)[pos + 21 : end]))


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def set_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _LEADER_EPOCH.pack_into(buf, pos + 12, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, header: BatchHeader,
                        now_ms: int) -> None:
    """Stamp LogAppendTime as Kafka does: set the attribute bit and maxTimestamp, redo the CRC."""
    _ATTRIBUTES.pack_into(buf, pos + 21, header.attributes | TIMESTAMP_TYPE_LOG_APPEND)
    _MAX_TIMESTAMP.pack_into(buf, pos + 35, now_ms)
    seal_crc(buf, pos, pos + header.size)


def validate_batches(buf: memoryview, max_batch_bytes: int,
                     copied: bool = False) -> list[BatchHeader]:
    """Check the framing and CRC of every batch in a Produce partition's record set.

    Raises KafkaError with the code Kafka uses: CORRUPT_MESSAGE for framing or CRC faults,
    UNSUPPORTED_FOR_MESSAGE_FORMAT for old magic, MESSAGE_TOO_LARGE for a batch over the limit.
    ``copied``: batches copied from another log as they are (a mirror's), which may be control
    batches (transaction markers) and, compacted there, hold fewer records than offsets.
    """
    headers: list[BatchHeader] = []
    pos = 0
    end = len(buf)
    if end == 0:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "empty record set")
    while pos < end:
        if end - pos < HEADER_SIZE:
            # Magic 0/1 message sets are shorter than a v2 header; report them as such.
            if end - pos > 16 and buf[pos + 16] in (0, 1):
                raise KafkaError(ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, "magic v0/v1")
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "truncated batch header")
        header = read_header(buf, pos)
        if header.magic != MAGIC_V2:
            raise KafkaError(ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                             f"record batch magic {header.magic} not supported")
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > end:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "batch length out of bounds")
        if header.size > max_batch_bytes:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                             f"batch of {header.size} bytes exceeds {max_batch_bytes}")
        offsets = header.last_offset_delta + 1
        if not (0 <= header.record_count <= offsets if copied
                else 0 < header.record_count == offsets):
            raise KafkaError(ErrorCode.INVALID_RECORD, "record count does not match offsets")
        if not crc_ok(buf, pos, header):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "CRC-32C mismatch")
        if header.attributes & CONTROL_FLAG and not copied:
            # Markers are the transaction coordinator's to write (Kafka's LogValidator).
            raise KafkaError(ErrorCode.INVALID_RECORD,
                             "Clients are not allowed to write control records")
        headers.append(header)
        pos += header.size
    return headers


CONTROL_ABORT = 0
CONTROL_COMMIT = 1


def control_type(records: bytes | bytearray | memoryview) -> int:
    """The type of a control batch (CONTROL_ABORT, CONTROL_COMMIT, ...) from the bytes after
    its header: the first record's key is ``version int16, type int16``."""
    _, pos = _read_varint(records, 0)           # record length
    _, pos = _read_varint(records, pos + 1)     # (attributes) timestamp delta
    _, pos = _read_varint(records, pos)         # offset delta
    key_length, pos = _read_varint(records, pos)
    if key_length < 4:
        return -1
    return int(struct.unpack_from(">h", records, pos + 2)[0])


def _read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7


def iter_batches(buf: bytes | bytearray | memoryview,
                 start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each complete batch; stops at a partial one."""
    pos = start
    end = len(buf)
    while end - pos >= HEADER_SIZE:
        header = read_header(buf, pos)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > end:
            return
        yield pos, header
        pos += header.size
