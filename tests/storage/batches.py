"""Valid RecordBatch v2 byte strings (correct CRC-32C, built by the record-batch codec) for the
storage tests."""

from __future__ import annotations

import struct
from collections.abc import Sequence

from bmq.protocol.record_codec import encode_record, frame_batch
from bmq.protocol.records import BatchHeader, set_base_offset, validate_batches


def make_batch(values: Sequence[bytes], *, base_offset: int = 0, timestamp: int = 1_000,
               timestamps: Sequence[int] | None = None, producer_id: int = -1,
               producer_epoch: int = -1, base_sequence: int = -1, attributes: int = 0,
               leader_epoch: int = -1, key: bytes | None = None) -> bytes:
    """One uncompressed batch holding ``values`` (all with ``key``)."""
    assert values
    stamps = list(timestamps) if timestamps is not None else [timestamp] * len(values)
    first_ts = stamps[0]
    records = b"".join([encode_record(i, ts - first_ts, key, v)
                        for i, (v, ts) in enumerate(zip(values, stamps, strict=True))])
    batch, _ = frame_batch(records, len(values), first_ts, max(stamps),
                           leader_epoch=leader_epoch, producer_id=producer_id,
                           producer_epoch=producer_epoch, base_sequence=base_sequence,
                           attributes=attributes)
    set_base_offset(batch, 0, base_offset)
    return bytes(batch)


def sized_batch(total_size: int, tag: int = 0, **kwargs: object) -> bytes:
    """A batch of exactly ``total_size`` bytes whose first value starts with ``b"<tag>:"``.

    One record when that size is reachable; some sizes are not (varint lengths jump), and then
    a second, empty record makes up the difference."""
    head = f"{tag}:".encode()
    for extra in ([], [b""], [b"", b""]):
        for key in (None, b"k"):
            fill = total_size - 61 - 10 - 8 * len(extra)
            for _ in range(4):
                values = [head + b"x" * max(fill - len(head), 0), *extra]
                candidate = make_batch(values, key=key, **kwargs)  # type: ignore[arg-type]
                if len(candidate) == total_size:
                    return candidate
                fill += total_size - len(candidate)
    raise AssertionError(f"cannot make a batch of {total_size} bytes")


def request(*batches: bytes) -> tuple[memoryview, list[BatchHeader]]:
    """What the broker hands to PartitionLog.append: a writable view and validated headers."""
    view = memoryview(bytearray(b"".join(batches)))
    return view, validate_batches(view, 1 << 31)


def with_offset(batch: bytes, base_offset: int) -> bytes:
    """``batch`` as it will be stored: base offset rewritten (not covered by the CRC)."""
    return struct.pack(">q", base_offset) + batch[8:]


def split(data: bytes | memoryview) -> list[BatchHeader]:
    """Headers of a read result, checking framing and CRC of every batch."""
    view = memoryview(bytes(data))
    return validate_batches(view, 1 << 31) if len(view) else []


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), pos


def first_value(batch: bytes) -> bytes:
    """The value of the first record of an uncompressed batch."""
    pos = 61
    _length, pos = _read_varint(batch, pos)
    pos += 1  # attributes
    _ts_delta, pos = _read_varint(batch, pos)
    _offset_delta, pos = _read_varint(batch, pos)
    key_length, pos = _read_varint(batch, pos)
    pos += max(key_length, 0)
    value_length, pos = _read_varint(batch, pos)
    return batch[pos:pos + value_length]


def tag_of(batch: bytes) -> int:
    """The tag ``sized_batch`` put in front of the first value."""
    return int(first_value(batch).split(b":", 1)[0])
