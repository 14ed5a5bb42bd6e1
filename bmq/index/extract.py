"""The CPU work of index building, run in a worker process (``bmq.index.builder``) so that
parsing every record's JSON never holds the broker's GIL: record batches in, chunk files out.

Everything here is a pure function of its arguments (picklable in and out)."""

from __future__ import annotations

from dataclasses import dataclass

from bmq.index import chunk
from bmq.index.fields import Field, MalformedValue, field_text, parse_value
from bmq.protocol.record_codec import RecordDecodeError, decode_batch
from bmq.protocol.records import iter_batches


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
    log covering ``[start, end)``). A record whose value is not JSON counts as malformed once
    and gets no JSON field entries (its key and headers are still indexed); a batch that cannot
    be decoded at all (not written by a Kafka client) counts all its records as malformed."""
    keys: list[list[int]] = [[] for _ in fields]
    wants_json = any(f.kind == "json" for f in fields)
    records = malformed = 0
    for piece in pieces:
        view = memoryview(piece)
        for pos, header in iter_batches(view):
            if header.is_control or header.next_offset <= start or header.base_offset >= end:
                continue
            try:
                decoded = decode_batch(view[pos:pos + header.size], header)
            except RecordDecodeError:
                records += header.record_count
                malformed += header.record_count
                continue
            base = header.base_offset
            for record in decoded:
                records += 1
                document: object = None
                if wants_json:
                    try:
                        document = parse_value(record.value)
                    except MalformedValue:
                        malformed += 1
                for field, out in zip(fields, keys, strict=True):
                    text = field_text(field, record, document)
                    if text is not None:
                        out.append((chunk.value_hash(text) << 64) | base)
    return Built(start, end, records, malformed,
                 [chunk.encode(start, end, records, malformed, k) for k in keys])


def merge_chunks(chunks: list[bytes]) -> bytes:
    return chunk.merge(chunks)
