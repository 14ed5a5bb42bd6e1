"""The zero-copy sequential decoder."""

from __future__ import annotations

import struct
import uuid

from bmq.protocol.primitives import scalars
from bmq.protocol.primitives.scalars import (
    INT8,
    INT16,
    INT32,
    INT64,
    UINT16,
    UINT32,
    DecodeError,
    read_uuid,
    read_uvarint,
    read_uvarlong,
    skip_tagged_fields,
)

# Bound by assignment, not imported by name: CPython 3.11 compiles ``NAME.unpack_from(...)`` on
# a name a ``from ... import`` bound as a module attribute load (no LOAD_METHOD), slower per call.
FLOAT64 = scalars.FLOAT64


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
        v, self.pos = read_uvarlong(self.buf, self.pos)
        return v

    def read_varlong(self) -> int:
        v, self.pos = read_uvarlong(self.buf, self.pos)
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

