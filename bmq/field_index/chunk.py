"""The index chunk file: for one field of one partition, which batches hold which values, over
an offset range ``[start, end)`` of the log. Immutable once written (whole, in one atomic write).

Layout (integers little-endian)::

    header   magic "BMQFIDX1", start, end, records, malformed, entries (int64 each),
             bits, 0 (uint32 each)
    buckets  2**bits + 1 uint32: entry index where each bucket starts (the last: entries)
    entries  entries x (uint64 value hash, uint64 batch base offset), sorted

A value's bucket is the top ``bits`` of its hash, so a lookup reads 8 bytes of the bucket table
and then only that bucket's entries (about ``BUCKET_TARGET``). Chunks are built (sorted, with
their bucket table) by the C module ``_fieldindex``, which also hashes: a collision only makes a
query read one more batch, whose records it checks anyway.
"""

from __future__ import annotations

import struct
import sys
from array import array
from dataclasses import dataclass

MAGIC = b"BMQFIDX1"
_HEADER = struct.Struct("<8sqqqqqII")
HEADER_SIZE = _HEADER.size
_BUCKET = struct.Struct("<II")
ENTRY_SIZE = 16
BUCKET_TARGET = 8
MAX_BITS = 22



def value_hash(text: bytes) -> int:
    # The C module is imported when first used (also in extract.py): a broker whose tree was
    # not rebuilt since it appeared (setup.py build_ext) still serves all but Index Query.
    from bmq.field_index import _fieldindex

    return _fieldindex.hash(text)


def _u64s(data: bytes) -> array[int]:
    values = array("Q")
    values.frombytes(data)
    if sys.byteorder == "big":
        values.byteswap()
    return values


class ChunkError(ValueError):
    """A file that is not a whole chunk (never written by the builder: chunks are atomic)."""


@dataclass(frozen=True, slots=True)
class ChunkHeader:
    start: int
    end: int
    records: int
    malformed: int
    entries: int
    bits: int

    @property
    def buckets_size(self) -> int:
        return ((1 << self.bits) + 1) * 4

    def bucket_position(self, hashed: int) -> int:
        """Where the bucket table's pair (start, end) for ``hashed`` is in the file."""
        return HEADER_SIZE + (hashed >> (64 - self.bits) if self.bits else 0) * 4

    def entry_position(self, index: int) -> int:
        return HEADER_SIZE + self.buckets_size + index * ENTRY_SIZE

    @classmethod
    def decode(cls, data: bytes) -> ChunkHeader:
        if len(data) < HEADER_SIZE:
            raise ChunkError("short chunk header")
        magic, start, end, records, malformed, entries, bits, _ = _HEADER.unpack_from(data)
        if magic != MAGIC or bits > MAX_BITS or end < start:
            raise ChunkError("not an index chunk")
        return cls(start, end, records, malformed, entries, bits)


def encode(start: int, end: int, records: int, malformed: int, entries: bytes) -> bytes:
    """A chunk from entries as ``_fieldindex.scan`` returns them (any order, duplicates)."""
    from bmq.field_index import _fieldindex

    return _fieldindex.build(entries, start, end, records, malformed, MAX_BITS, BUCKET_TARGET)


def entries_of(data: bytes) -> tuple[ChunkHeader, bytes]:
    """A whole chunk's header and its entries (for merging)."""
    header = ChunkHeader.decode(data)
    body = data[header.entry_position(0):header.entry_position(header.entries)]
    if len(body) != header.entries * ENTRY_SIZE:
        raise ChunkError("truncated chunk")
    return header, body


def merge(chunks: list[bytes]) -> bytes:
    """One chunk covering consecutive chunks ``chunks`` (in offset order)."""
    parts = [entries_of(data) for data in chunks]
    headers = [header for header, _ in parts]
    return encode(headers[0].start, headers[-1].end, sum(h.records for h in headers),
                  sum(h.malformed for h in headers), b"".join(body for _, body in parts))


def bucket_range(data: bytes) -> tuple[int, int]:
    return _BUCKET.unpack(data)


def offsets_with(entries: bytes, hashed: int) -> list[int]:
    """Batch offsets of the entries (a bucket's bytes) whose hash is ``hashed``."""
    flat = _u64s(entries)
    return [o for h, o in zip(flat[0::2], flat[1::2], strict=True) if h == hashed]
