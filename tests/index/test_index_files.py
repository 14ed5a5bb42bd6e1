"""Field specs, the index chunk format and which chunks count: no broker needed."""

from __future__ import annotations

import pytest

from bmq.index import chunk
from bmq.index.extract import index_batches
from bmq.index.fields import FieldSpecError, parse_fields
from bmq.index.query import QueryError, parse_query
from bmq.index.store import ChunkFile, IndexStore, chain
from bmq.protocol.record_codec import Record, encode_batch
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


def test_chunk_lookup_and_merge() -> None:
    pairs = [(chunk.value_hash(str(i % 500).encode()), 1000 + i) for i in range(5000)]
    first = chunk.encode(1000, 3000, 2000, 3, chunk.pack_keys(pairs[:2000]))
    second = chunk.encode(3000, 6000, 3000, 0, chunk.pack_keys(pairs[2000:]))
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
