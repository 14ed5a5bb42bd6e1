"""Kafka wire primitives: a zero-copy :class:`Reader` and a part-list :class:`Writer`.

The generated message codecs in :mod:`bmq.protocol.messages` do not call the ``read_*`` /
``write_*`` methods below field by field; they inline ``struct`` calls on ``Reader.buf`` /
``Writer.buf`` and use the module-level helpers (``read_uvarint``, ``encode_uvarint``,
``skip_tagged_fields``, ``write_records``) for the rarer, variable-length cases.  The methods
exist for hand-written code (headers, tests, tools).

Conventions shared with the generated code:

* ``Reader.buf`` is a 1-D unsigned-byte ``memoryview`` over the whole input and ``Reader.pos``
  the next offset to read.  Slices handed out for ``records`` fields are views into it, never
  copies.
* ``Writer.buf`` is the current ``bytearray`` that small values are appended to.  Large
  buffers (records) are appended as their own part by :meth:`Writer.write_part`, which starts a
  fresh ``bytearray``; code holding a local alias of ``Writer.buf`` must re-read it after any
  call that may add a part.
* Truncated or malformed input raises :class:`DecodeError`.  Internally the generated code lets
  ``struct.error`` / ``IndexError`` / ``ValueError`` surface and converts everything listed in
  :data:`DECODE_ERRORS` at the public ``read`` boundary.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import TypeAlias

__all__ = [
    "DECODE_ERRORS",
    "FLOAT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "PART_THRESHOLD",
    "UINT16",
    "UINT32",
    "UUID_STRUCT",
    "ZERO_UUID",
    "Buffer",
    "DecodeError",
    "Reader",
    "RecordsInput",
    "UnsupportedVersionError",
    "Writer",
    "encode_uvarint",
    "encode_varint",
    "read_uuid",
    "read_uvarint",
    "records_length",
    "records_view",
    "skip_tagged_fields",
    "write_records",
]

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

# Buffers at least this large are appended to a Writer as their own part instead of copied.
PART_THRESHOLD = 4096


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


# --------------------------------------------------------------------------- helpers


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


def _read_uvarlong(buf: memoryview, pos: int) -> tuple[int, int]:
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


def _buffer_len(chunk: Buffer) -> int:
    return chunk.nbytes if isinstance(chunk, memoryview) else len(chunk)


def records_length(value: RecordsInput) -> int:
    """Total byte length of a records value (a buffer or a list of buffers); -1 for None."""
    if value is None:
        return -1
    if isinstance(value, list):
        return sum(_buffer_len(c) for c in value)
    return _buffer_len(value)


def records_view(value: RecordsInput) -> memoryview | None:
    """Narrow a ``records`` field value to ``memoryview | None``.

    Decoded messages already hold a memoryview (returned as is, no copy); bytes/bytearray are
    wrapped without copying; a list of buffers (only ever built for writing) is joined, which
    copies.
    """
    if value is None or isinstance(value, memoryview):
        return value
    if isinstance(value, list):
        return memoryview(b"".join(value))
    return memoryview(value)


def write_records(w: Writer, value: RecordsInput, compact: bool) -> None:
    """Write a (nullable) records field: length prefix, then the data without copying.

    A list of buffers is written as one field whose length is the sum of the parts.  Buffers of
    at least :data:`PART_THRESHOLD` bytes become their own Writer part.
    """
    buf = w.buf
    if value is None:
        if compact:
            buf.append(0)
        else:
            buf += b"\xff\xff\xff\xff"
        return
    chunks: Sequence[Buffer] = value if isinstance(value, list) else (value,)
    total = 0
    for c in chunks:
        total += _buffer_len(c)
    if compact:
        buf += encode_uvarint(total + 1)
    else:
        buf += INT32.pack(total)
    for c in chunks:
        if _buffer_len(c) >= PART_THRESHOLD:
            w.write_part(c)
        else:
            w.buf += c


# --------------------------------------------------------------------------- Reader


class Reader:
    """Sequential decoder over a byte buffer.  Never copies ``records`` / ``read_raw`` data."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: memoryview | bytes | bytearray, pos: int = 0) -> None:
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        if mv.ndim != 1 or mv.format != "B":
            mv = mv.cast("B")
        self.buf: memoryview = mv
        self.pos: int = pos

    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def _fixed(self, s: struct.Struct) -> int:
        try:
            (v,) = s.unpack_from(self.buf, self.pos)
        except struct.error:
            raise DecodeError(f"truncated input at offset {self.pos}") from None
        self.pos += s.size
        return int(v)

    def read_int8(self) -> int:
        return self._fixed(INT8)

    def read_int16(self) -> int:
        return self._fixed(INT16)

    def read_int32(self) -> int:
        return self._fixed(INT32)

    def read_int64(self) -> int:
        return self._fixed(INT64)

    def read_uint16(self) -> int:
        return self._fixed(UINT16)

    def read_uint32(self) -> int:
        return self._fixed(UINT32)

    def read_float64(self) -> float:
        try:
            (v,) = FLOAT64.unpack_from(self.buf, self.pos)
        except struct.error:
            raise DecodeError(f"truncated input at offset {self.pos}") from None
        self.pos += 8
        return float(v)

    def read_bool(self) -> bool:
        return self._fixed(INT8) != 0

    def read_uvarint(self) -> int:
        v, self.pos = read_uvarint(self.buf, self.pos)
        return v

    def read_varint(self) -> int:
        v, self.pos = read_uvarint(self.buf, self.pos)
        return (v >> 1) ^ -(v & 1)

    def read_uvarlong(self) -> int:
        v, self.pos = _read_uvarlong(self.buf, self.pos)
        return v

    def read_varlong(self) -> int:
        v, self.pos = _read_uvarlong(self.buf, self.pos)
        return (v >> 1) ^ -(v & 1)

    def read_uuid(self) -> uuid.UUID:
        try:
            v = read_uuid(self.buf, self.pos)
        except struct.error:
            raise DecodeError(f"truncated uuid at offset {self.pos}") from None
        self.pos += 16
        return v

    def read_raw(self, n: int) -> memoryview:
        """Return the next ``n`` bytes as a view (no copy)."""
        if n < 0:
            raise DecodeError(f"negative length {n}")
        end = self.pos + n
        if end > len(self.buf):
            raise DecodeError(f"truncated input: need {n} bytes at offset {self.pos}")
        v = self.buf[self.pos : end]
        self.pos = end
        return v

    def _length(self, compact: bool) -> int:
        """Length prefix: int16-style values are passed in already; -1 means null."""
        if compact:
            return self.read_uvarint() - 1
        return self.read_int16()

    def _text(self, n: int, nullable: bool) -> str | None:
        if n < 0:
            if nullable and n == -1:
                return None
            raise DecodeError(f"invalid string length {n}")
        try:
            return self.read_raw(n).tobytes().decode()
        except UnicodeDecodeError as e:
            raise DecodeError(f"invalid UTF-8 in string: {e}") from None

    def read_string(self) -> str:
        s = self._text(self.read_int16(), False)
        assert s is not None
        return s

    def read_nullable_string(self) -> str | None:
        return self._text(self.read_int16(), True)

    def read_compact_string(self) -> str:
        s = self._text(self.read_uvarint() - 1, False)
        assert s is not None
        return s

    def read_compact_nullable_string(self) -> str | None:
        return self._text(self.read_uvarint() - 1, True)

    def _blob(self, n: int, nullable: bool) -> memoryview | None:
        if n < 0:
            if nullable and n == -1:
                return None
            raise DecodeError(f"invalid bytes length {n}")
        return self.read_raw(n)

    def read_bytes(self) -> bytes:
        v = self._blob(self.read_int32(), False)
        assert v is not None
        return v.tobytes()

    def read_nullable_bytes(self) -> bytes | None:
        v = self._blob(self.read_int32(), True)
        return None if v is None else v.tobytes()

    def read_compact_bytes(self) -> bytes:
        v = self._blob(self.read_uvarint() - 1, False)
        assert v is not None
        return v.tobytes()

    def read_compact_nullable_bytes(self) -> bytes | None:
        v = self._blob(self.read_uvarint() - 1, True)
        return None if v is None else v.tobytes()

    def read_records(self) -> memoryview | None:
        """Nullable records with an int32 length; a view into the input (no copy)."""
        return self._blob(self.read_int32(), True)

    def read_compact_records(self) -> memoryview | None:
        return self._blob(self.read_uvarint() - 1, True)

    def read_array_length(self) -> int:
        """int32 array length; -1 means null.  Rejects lengths larger than the input left."""
        n = self.read_int32()
        if n < -1 or n > self.remaining():
            raise DecodeError(f"invalid array length {n}")
        return n

    def read_compact_array_length(self) -> int:
        n = self.read_uvarint() - 1
        if n > self.remaining():
            raise DecodeError(f"invalid array length {n}")
        return n

    def skip_tagged_fields(self) -> None:
        self.pos = skip_tagged_fields(self.buf, self.pos)

    def read_tagged_fields(self) -> dict[int, memoryview]:
        """Read a tagged-field section into ``{tag: raw value view}``."""
        out: dict[int, memoryview] = {}
        for _ in range(self.read_uvarint()):
            tag = self.read_uvarint()
            out[tag] = self.read_raw(self.read_uvarint())
        return out


# --------------------------------------------------------------------------- Writer


class Writer:
    """Encoder that collects output as a list of parts.

    Small values are appended to the current ``bytearray`` (``buf``).  Large buffers passed to
    :meth:`write_part` (records) are kept as their own part, so the encoding can be sent with
    ``writelines``/``sendmsg`` without copying record data.
    """

    __slots__ = ("_done", "_parts", "buf")

    def __init__(self) -> None:
        self.buf: bytearray = bytearray()
        self._parts: list[Buffer] = []
        self._done = 0  # bytes in _parts

    @property
    def size(self) -> int:
        return self._done + len(self.buf)

    def parts(self) -> list[bytes | bytearray | memoryview]:
        if self.buf:
            return [*self._parts, self.buf]
        return list(self._parts)

    def getvalue(self) -> bytes:
        if not self._parts:
            return bytes(self.buf)
        return b"".join(self.parts())

    def write_part(self, data: Buffer) -> None:
        """Append ``data`` as its own part (zero-copy); later writes go to a new ``buf``."""
        if self.buf:
            self._parts.append(self.buf)
            self._done += len(self.buf)
            self.buf = bytearray()
        self._parts.append(data)
        self._done += _buffer_len(data)

    def write_raw(self, data: Buffer) -> None:
        if _buffer_len(data) >= PART_THRESHOLD:
            self.write_part(data)
        else:
            self.buf += data

    def write_int8(self, v: int) -> None:
        self.buf += INT8.pack(v)

    def write_int16(self, v: int) -> None:
        self.buf += INT16.pack(v)

    def write_int32(self, v: int) -> None:
        self.buf += INT32.pack(v)

    def write_int64(self, v: int) -> None:
        self.buf += INT64.pack(v)

    def write_uint16(self, v: int) -> None:
        self.buf += UINT16.pack(v)

    def write_uint32(self, v: int) -> None:
        self.buf += UINT32.pack(v)

    def write_float64(self, v: float) -> None:
        self.buf += FLOAT64.pack(v)

    def write_bool(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def write_uvarint(self, v: int) -> None:
        self.buf += encode_uvarint(v)

    def write_varint(self, v: int) -> None:
        self.buf += encode_varint(v)

    def write_uvarlong(self, v: int) -> None:
        self.buf += encode_uvarint(v)

    def write_varlong(self, v: int) -> None:
        self.buf += encode_varint(v)

    def write_uuid(self, v: uuid.UUID) -> None:
        self.buf += v.bytes

    def write_string(self, v: str) -> None:
        data = v.encode()
        self.buf += INT16.pack(len(data))
        self.buf += data

    def write_nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf += b"\xff\xff"
        else:
            self.write_string(v)

    def write_compact_string(self, v: str) -> None:
        data = v.encode()
        self.buf += encode_uvarint(len(data) + 1)
        self.buf += data

    def write_compact_nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.write_compact_string(v)

    def write_bytes(self, v: Buffer) -> None:
        self.buf += INT32.pack(_buffer_len(v))
        self.write_raw(v)

    def write_nullable_bytes(self, v: Buffer | None) -> None:
        if v is None:
            self.buf += b"\xff\xff\xff\xff"
        else:
            self.write_bytes(v)

    def write_compact_bytes(self, v: Buffer) -> None:
        self.buf += encode_uvarint(_buffer_len(v) + 1)
        self.write_raw(v)

    def write_compact_nullable_bytes(self, v: Buffer | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.write_compact_bytes(v)

    def write_records(self, v: RecordsInput) -> None:
        write_records(self, v, False)

    def write_compact_records(self, v: RecordsInput) -> None:
        write_records(self, v, True)

    def write_array_length(self, n: int | None) -> None:
        self.buf += INT32.pack(-1 if n is None else n)

    def write_compact_array_length(self, n: int | None) -> None:
        self.buf += encode_uvarint(0 if n is None else n + 1)
