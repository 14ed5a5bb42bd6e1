"""Index entries from record batches: the Python side of the C module ``_fieldindex`` (batch
headers, decompression) and the chunks built from its entries; and, for queries, the records of
a batch whose fields hash as asked, found without decoding the others."""

from __future__ import annotations

from dataclasses import dataclass

from bmq.field_index import chunk
from bmq.field_index.fields import Field
from bmq.protocol.record_codec import (
    NONE,
    Record,
    RecordDecodeError,
    decode_record_at,
    decompress,
)
from bmq.protocol.records import HEADER_SIZE, BatchHeader, iter_batches


@dataclass(frozen=True, slots=True)
class Built:
    """Chunks (one per field, in the fields' order) covering ``[start, end)``."""

    start: int
    end: int
    records: int
    malformed: int
    chunks: list[bytes]


def index_batches(pieces: list[bytes], fields: list[Field], start: int, end: int) -> Built:
    """Index chunks of ``fields`` over the whole batches in ``pieces`` (consecutive reads of a
    log covering ``[start, end)``). A record whose value is not JSON counts as malformed (when
    a JSON field is indexed) and gets no JSON field entries (its key and headers are still
    indexed); a batch whose records cannot be decoded counts all its records as malformed.
    The records are parsed without the GIL."""
    from bmq.field_index import _fieldindex

    specs = tuple(f.scan_spec for f in fields)
    entries: list[list[bytes]] = [[] for _ in fields]
    records = malformed = 0
    for piece in pieces:
        view = memoryview(piece)
        for pos, header in iter_batches(view):
            if header.is_control or header.next_offset <= start or header.base_offset >= end:
                continue
            records += header.record_count
            body = view[pos + HEADER_SIZE:pos + header.size]
            try:
                payload = body if header.compression == NONE else decompress(
                    header.compression, bytes(body))
                bad, found = _fieldindex.scan(payload, header.base_offset,
                                              header.record_count, specs)
            except (RecordDecodeError, ValueError):
                malformed += header.record_count
                continue
            malformed += bad
            for out, more in zip(entries, found, strict=True):
                out.append(more)
    return Built(start, end, records, malformed,
                 [chunk.encode(start, end, records, malformed, b"".join(parts))
                  for parts in entries])


def records_hashing_to(batch: memoryview, header: BatchHeader, fields: list[Field],
                       hashes: list[int]) -> list[Record]:
    """The records of one whole batch whose ``fields`` have texts hashing to ``hashes`` (the
    caller checks the texts themselves); only those records are decoded. Raises
    ``RecordDecodeError`` or ``ValueError`` for a batch whose records do not parse."""
    from bmq.field_index import _fieldindex

    body = batch[HEADER_SIZE:header.size]
    payload = bytes(body) if header.compression == NONE else decompress(header.compression,
                                                                        bytes(body))
    _, found = _fieldindex.scan(payload, 0, header.record_count,
                                tuple(f.scan_spec for f in fields), True)
    positions: set[int] | None = None
    for entries, hashed in zip(found, hashes, strict=True):
        here = set(chunk.offsets_with(entries, hashed))
        positions = here if positions is None else positions & here
    return [decode_record_at(payload, position, header) for position in sorted(positions or ())]
