"""Field specs, the index chunk format and which chunks count: no broker needed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bmq.field_index import chunk
from bmq.field_index.extract import index_batches
from bmq.field_index.fields import (
    FieldSpecError,
    MalformedValue,
    field_text,
    parse_fields,
    parse_value,
)
from bmq.field_index.query import QueryError, parse_query
from bmq.field_index.store import ChunkFile, IndexStore, chain
from bmq.protocol.record_codec import Record, decode_batch, encode_batch
from bmq.storage import open_storage


def test_field_specs() -> None:
    fields = parse_fields("order_id, order.id,key,header:trace id,value:key")
    assert [(f.name, f.kind, f.path) for f in fields] == [
        ("order_id", "json", ("order_id",)), ("order.id", "json", ("order", "id")),
        ("key", "key", ()), ("header:trace id", "header", ("trace id",)),
        ("value:key", "json", ("key",))]
    assert parse_fields("") == []
    for bad, why in [("order..id", "dot path"), ("a,a", "twice"), ("header:", "header:NAME"),
                     ("a b", "dot path"), (",".join(f"f{i}" for i in range(17)), "at most")]:
        with pytest.raises(FieldSpecError, match=why):
            parse_fields(bad)


def _entries(pairs: list[tuple[int, int]]) -> bytes:
    return b"".join(h.to_bytes(8, "little") + o.to_bytes(8, "little") for h, o in pairs)


def test_chunk_lookup_and_merge() -> None:
    pairs = [(chunk.value_hash(str(i % 500).encode()), 1000 + i) for i in range(5000)]
    first = chunk.encode(1000, 3000, 2000, 3, _entries(pairs[:2000] * 2))   # duplicates too
    second = chunk.encode(3000, 6000, 3000, 0, _entries(pairs[2000:]))
    merged = chunk.merge([first, second])
    header = chunk.ChunkHeader.decode(merged)
    assert (header.start, header.end, header.records, header.malformed, header.entries) == \
        (1000, 6000, 5000, 3, 5000)
    hashed = chunk.value_hash(b"42")
    lo, hi = chunk.bucket_range(merged[header.bucket_position(hashed):][:8])
    found = chunk.offsets_with(merged[header.entry_position(lo):header.entry_position(hi)],
                               hashed)
    assert sorted(found) == [1000 + i for i in range(5000) if i % 500 == 42]
    with pytest.raises(chunk.ChunkError):
        chunk.ChunkHeader.decode(b"garbage" * 10)


# Values whose JSON the C scanner and Python's json module must read alike.
TRICKY = [b'{"id": 42}', b'{"id": "42"}', b'{"id": 4.20e1}', b'{"id": -0}', b'{"id": true}',
          b'{"id": null}', b'{"id": {"x": 1}}', b'{"id": [1]}', b'{"id": 1, "id": "last"}',
          b'{"id": "caf\\u00e9 \\ud83d\\ude00 \\"q\\" \\ud800"}',
          '{"id": "café"}'.encode(), b'{"a": {"id": 7}, "id": 8}', b' {"id" : 9 } ',
          b'[{"id": 1}]', b'"id"', b'{"id": 01}', b'{"id": NaN}', b'{"id": 1,}', b'{"id": "\x01"}',
          b'{"id": "\xff"}', b'{"id": 1} x', b"", b"{", b'{"id": .5}', b'{"id": "a\\x"}',
          b'{"x": [[[[{"id": 1}]]]], "id": [2]}', b'\xef\xbb\xbf{"id": 1}', None]


def test_c_scanner_reads_fields_as_queries_do() -> None:
    fields = parse_fields("id,a.id,key,header:h")
    records = [Record(i, 0, None if i % 5 == 0 else f"k{i}".encode(), value,
                      [("h", b"x"), ("h", b"second")] if i % 2 else [])
               for i, value in enumerate(TRICKY)]
    batches = []
    for record in records:           # a batch each: an entry names its record's batch
        batch, header = encode_batch([record])
        batch[:8] = record.offset.to_bytes(8, "big")
        batches.append((batch, replace(header, base_offset=record.offset)))
    built = index_batches([b"".join(bytes(b) for b, _ in batches)], fields, 0, len(TRICKY))
    expected_malformed = 0
    for record in (r for b, h in batches for r in decode_batch(b, h)):
        try:
            document = parse_value(record.value)
        except MalformedValue:
            document, expected_malformed = None, expected_malformed + 1
        for field, data in zip(fields, built.chunks, strict=True):
            text = field_text(field, record, document)
            hashed = chunk.value_hash(text) if text is not None else None
            head = chunk.ChunkHeader.decode(data)
            flat = data[head.entry_position(0):]
            present = hashed is not None and record.offset in chunk.offsets_with(flat, hashed)
            assert present == (text is not None), (field.name, record.value, text)
    assert built.malformed == expected_malformed == 11


def test_chain_prefers_the_widest_chunk() -> None:
    files = [ChunkFile.named(0, 10), ChunkFile.named(10, 20), ChunkFile.named(0, 20),
             ChunkFile.named(20, 25), ChunkFile.named(15, 30), ChunkFile.named(40, 50)]
    # the merge [0, 20) replaces its parts; [15, 30) reaches further than [20, 25); [40, 50)
    # is past a gap (never indexed in one run): the chain stops at the gap.
    assert [(f.start, f.end) for f in chain(files)] == [(0, 20), (15, 30)]
    assert ChunkFile.parse("x.fidx.tmp.1.2") is None and chain([]) == []


def test_extract_and_lookup_on_storage(tmp_path: object) -> None:
    fields = parse_fields("order_id,key,header:trace")
    records = [Record(i, 1_000 + i, f"k{i % 3}".encode(),
                      b"{oops" if i == 5 else f'{{"order_id": {i}}}'.encode(),
                      [("trace", f"t{i}".encode())]) for i in range(10)]
    batch, _ = encode_batch(records[:6])
    batch2, _ = encode_batch(records[6:])
    batch2[:8] = (6).to_bytes(8, "big")     # the second batch's base offset
    built = index_batches([bytes(batch) + bytes(batch2)], fields, 0, 10)
    assert (built.records, built.malformed) == (10, 1)
    store = IndexStore(open_storage(str(tmp_path)))
    files = [store.write("t", 0, f, 0, 10, data) for f, data in zip(fields, built.chunks,
                                                                      strict=True)]
    assert store.lookup("t", 0, fields[0], [files[0]], b"7") == {6}
    assert store.lookup("t", 0, fields[0], [files[0]], b"5") == set()   # malformed value
    assert store.lookup("t", 0, fields[1], [files[1]], b"k1") == {0, 6}
    assert store.lookup("t", 0, fields[2], [files[2]], b"t2") == {0}
    assert store.totals("t", 0, fields[0], [files[0]]) == (10, 1)


def test_malformed_queries() -> None:
    fields = parse_fields("order_id")
    for where, extra, why in [([], {}, "at least one"), (["order_id"], {}, "FIELD=VALUE"),
                              (["user=1"], {}, "not an indexed field"),
                              (["order_id=1"], {"limit": "0"}, "limit"),
                              (["order_id=1"], {"start": "yesterday"}, "ISO-8601"),
                              (["order_id=1"], {"start": "20", "end": "10"}, "before")]:
        with pytest.raises(QueryError, match=why):
            parse_query(fields, where, **extra)
    query = parse_query(fields, ["order_id=42"], "2026-11-28T00:00:00Z", None, "5")
    assert query.start_ms == 1795824000000 and query.limit == 5
