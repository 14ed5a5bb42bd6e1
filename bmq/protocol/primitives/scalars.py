"""The wire's fixed-size and variable-length scalars: struct formats, varints, UUIDs, the
tagged-field skip, and the errors decoding raises."""

from __future__ import annotations

import struct
import uuid
from typing import TypeAlias

ZERO_UUID = uuid.UUID(int=0)

Buffer: TypeAlias = bytes | bytearray | memoryview
RecordsInput: TypeAlias = Buffer | list[Buffer] | None

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")
UUID_STRUCT = struct.Struct(">QQ")


class DecodeError(Exception):
    """Truncated or malformed input."""


class UnsupportedVersionError(Exception):
    """A message version outside the message's ``validVersions``."""


# Low-level exceptions that mean "bad input" while decoding; converted to DecodeError.
DECODE_ERRORS: tuple[type[Exception], ...] = (
    struct.error,
    IndexError,
    ValueError,  # includes UnicodeDecodeError
    OverflowError,
)



def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint (at most 5 bytes) at ``pos``; return ``(value, new_pos)``."""
    n = len(buf)
    value = 0
    shift = 0
    while True:
        if pos >= n:
            raise DecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift >= 35:
            raise DecodeError("varint is too long")


def read_uvarlong(buf: memoryview, pos: int) -> tuple[int, int]:
    n = len(buf)
    value = 0
    shift = 0
    while True:
        if pos >= n:
            raise DecodeError("truncated varlong")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise DecodeError("varlong is too long")


def encode_uvarint(value: int) -> bytes:
    """Encode a non-negative int as an unsigned varint."""
    if value < 0:
        raise ValueError(f"unsigned varint cannot be negative: {value}")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Encode a signed int as a zig-zag varint (64-bit zig-zag; fits varint and varlong)."""
    return encode_uvarint((value << 1) ^ (value >> 63))


def append_varint(buf: bytearray, value: int) -> None:
    """Append ``value`` to ``buf`` as a zig-zag varint: ``encode_varint`` without the bytes
    object and the second call, for the loops that frame records."""
    zigzag = (value << 1) ^ (value >> 63)
    while zigzag >= 0x80:
        buf.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    buf.append(zigzag)


def read_uuid(buf: memoryview, pos: int) -> uuid.UUID:
    hi, lo = UUID_STRUCT.unpack_from(buf, pos)
    if not hi and not lo:
        return ZERO_UUID
    return uuid.UUID(int=(hi << 64) | lo)


def skip_tagged_fields(buf: memoryview, pos: int) -> int:
    """Skip a tagged-field section starting at ``pos``; return the offset after it."""
    count, pos = read_uvarint(buf, pos)
    n = len(buf)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > n:
            raise DecodeError("truncated tagged field")
    return pos
