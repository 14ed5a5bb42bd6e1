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

The package's face, over ``scalars`` (struct formats, varints, UUIDs, tagged fields, errors),
``records`` (records fields' length and view), ``reader`` and ``writer`` (with
``write_records``); the generated codecs import from here.
"""

from bmq.protocol.primitives.reader import Reader
from bmq.protocol.primitives.records import PART_THRESHOLD, records_length, records_view
from bmq.protocol.primitives.scalars import (
    DECODE_ERRORS,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    UINT16,
    UINT32,
    UUID_STRUCT,
    ZERO_UUID,
    Buffer,
    DecodeError,
    RecordsInput,
    UnsupportedVersionError,
    append_varint,
    encode_uvarint,
    encode_varint,
    read_uuid,
    read_uvarint,
    skip_tagged_fields,
)
from bmq.protocol.primitives.writer import Writer, write_records

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
    "append_varint",
    "encode_uvarint",
    "encode_varint",
    "read_uuid",
    "read_uvarint",
    "records_length",
    "records_view",
    "skip_tagged_fields",
    "write_records",
]
