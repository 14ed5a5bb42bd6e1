"""The index chunk file: for one field of one partition, which batches hold which values, over
an offset range ``[start, end)`` of the log. Immutable once written (whole, in one atomic write).

Layout (integers little-endian)::

    header   magic "BMQFIDX1", start, end, records, malformed, entries (int64 each), bits (u32)
    buckets  2**bits + 1 uint32: entry index where each bucket starts (the last: entries)
    entries  entries x (uint64 value hash, uint64 batch base offset), sorted

A value's bucket is the top ``bits`` of its hash, so a lookup reads 8 bytes of the bucket table
and then only that bucket's entries (about ``BUCKET_TARGET``). Hashes are 64-bit BLAKE2b of the
field's text: a collision only makes a query read one more batch, whose records it checks anyway.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from hashlib import blake2b

MAGIC = b"BMQFIDX1"
_HEADER = struct.Struct("<8sqqqqqI")
HEADER_SIZE = _HEADER.size
_BUCKET = struct.Struct("<II")
ENTRY_SIZE = 16
BUCKET_TARGET = 8
MAX_BITS = 22
_MASK64 = (1 << 64) - 1


def value_hash(text: bytes) -> int:
    return int.from_bytes(blake2b(text, digest_size=8).digest(), "little")


def _u64s(data: bytes) -> array[int]:
    values = array("Q")
    values.frombytes(data)
    if sys.byteorder == "big":
        values.byteswap()
    return values


def _le_bytes(values: array[int]) -> bytes:
    if sys.byteorder == "big":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


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
        magic, start, end, records, malformed, entries, bits = _HEADER.unpack_from(data)
        if magic != MAGIC or bits > MAX_BITS or end < start:
            raise ChunkError("not an index chunk")
        return cls(start, end, records, malformed, entries, bits)


def pack_keys(pairs: Iterable[tuple[int, int]]) -> list[int]:
    """(hash, batch offset) pairs as sortable ints (hash in the high 64 bits)."""
    return [(h << 64) | offset for h, offset in pairs]


def encode(start: int, end: int, records: int, malformed: int, keys: list[int]) -> bytes:
    """A chunk from ``pack_keys`` keys (any order, duplicates allowed)."""
    unique = sorted(set(keys))
    count = len(unique)
    bits = 0
    while bits < MAX_BITS and (count >> bits) > BUCKET_TARGET:
        bits += 1
    flat = array("Q", bytes(16 * count))
    flat[0::2] = array("Q", [k >> 64 for k in unique])
    flat[1::2] = array("Q", [k & _MASK64 for k in unique])
    buckets = array("I", bytes(4 * ((1 << bits) + 1)))
    shift = 64 - bits
    index = 0
    hashes = flat[0::2]
    for bucket in range(1 << bits):
        buckets[bucket] = index
        while index < count and (hashes[index] >> shift if bits else 0) == bucket:
            index += 1
    buckets[1 << bits] = count
    if sys.byteorder == "big":
        buckets.byteswap()
    header = _HEADER.pack(MAGIC, start, end, records, malformed, count, bits)
    return header + buckets.tobytes() + _le_bytes(flat)


def keys_of(data: bytes) -> tuple[ChunkHeader, list[int]]:
    """A whole chunk's header and its keys (for merging)."""
    header = ChunkHeader.decode(data)
    body = data[header.entry_position(0):header.entry_position(header.entries)]
    if len(body) != header.entries * ENTRY_SIZE:
        raise ChunkError("truncated chunk")
    flat = _u64s(body)
    return header, [(h << 64) | o for h, o in zip(flat[0::2], flat[1::2], strict=True)]


def merge(chunks: list[bytes]) -> bytes:
    """One chunk covering consecutive chunks ``chunks`` (in offset order)."""
    keys: list[int] = []
    headers = []
    for data in chunks:
        header, more = keys_of(data)
        headers.append(header)
        keys.extend(more)
    return encode(headers[0].start, headers[-1].end, sum(h.records for h in headers),
                  sum(h.malformed for h in headers), keys)


def bucket_range(data: bytes) -> tuple[int, int]:
    return _BUCKET.unpack(data)


def offsets_with(entries: bytes, hashed: int) -> list[int]:
    """Batch offsets of the entries (a bucket's bytes) whose hash is ``hashed``."""
    flat = _u64s(entries)
    return [o for h, o in zip(flat[0::2], flat[1::2], strict=True) if h == hashed]
