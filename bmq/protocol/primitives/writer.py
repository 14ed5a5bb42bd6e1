"""The part-list encoder, and the writing of records fields without copying."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from bmq.protocol.primitives import scalars
from bmq.protocol.primitives.records import PART_THRESHOLD, buffer_len
from bmq.protocol.primitives.scalars import Buffer, RecordsInput, encode_uvarint, encode_varint

# Bound by assignment, not imported by name: CPython 3.11 compiles ``NAME.pack(v)`` on a name a
# ``from ... import`` bound as a module attribute load (no LOAD_METHOD), 50% slower per call.
INT8, INT16, INT32, INT64 = scalars.INT8, scalars.INT16, scalars.INT32, scalars.INT64
UINT16, UINT32, FLOAT64 = scalars.UINT16, scalars.UINT32, scalars.FLOAT64


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
        self._done += buffer_len(data)

    def write_raw(self, data: Buffer) -> None:
        if buffer_len(data) >= PART_THRESHOLD:
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
        self.buf += INT32.pack(buffer_len(v))
        self.write_raw(v)

    def write_nullable_bytes(self, v: Buffer | None) -> None:
        if v is None:
            self.buf += b"\xff\xff\xff\xff"
        else:
            self.write_bytes(v)

    def write_compact_bytes(self, v: Buffer) -> None:
        self.buf += encode_uvarint(buffer_len(v) + 1)
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
        total += buffer_len(c)
    if compact:
        buf += encode_uvarint(total + 1)
    else:
        buf += INT32.pack(total)
    for c in chunks:
        if buffer_len(c) >= PART_THRESHOLD:
            w.write_part(c)
        else:
            w.buf += c
