"""The data source's decoder (bmq.spark.decode over the C module bmq.spark.native._recdecode)
against the reference decoder record_codec.decode_batch, on batches built here byte by byte: every
codec, headers, null and empty keys and values, LogAppendTime, control batches, ranges that cut
batches; and malformed records, which must raise RecordDecodeError (never crash or read past
the buffers: a fuzz round mutates valid batches thousands of times)."""

from __future__ import annotations

import gzip
import random
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cramjam
import crc32c
import pytest

from bmq.protocol.record_codec import RecordDecodeError, decode_batch
from bmq.protocol.records import (
    CONTROL_FLAG,
    HEADER_SIZE,
    TIMESTAMP_TYPE_LOG_APPEND,
    read_header,
)
from bmq.spark.decode import ARROW_SCHEMA, ColumnBuilder, read_range
from bmq.spark.ranges import ReadRange
from bmq.storage import open_storage
from tests.spark.conftest import expected_headers, header_pairs

_HEADER = struct.Struct(">qiibIhiqqqhii")
Header = tuple[bytes, bytes | None]
COMPRESS = {  # codec id -> compressor, as producers frame them (lz4: the frame format)
    0: lambda b: b,
    1: gzip.compress,
    2: lambda b: bytes(cramjam.snappy.compress_raw(b)),
    3: lambda b: bytes(cramjam.lz4.compress(b)),
    4: lambda b: bytes(cramjam.zstd.compress(b)),
}


def varint(n: int) -> bytes:
    u = (n << 1) ^ (n >> 63)   # zig-zag
    out = bytearray()
    while u >= 0x80:
        out.append(u & 0x7F | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def field(b: bytes | None) -> bytes:
    return varint(-1) if b is None else varint(len(b)) + b


def record(offset_delta: int, key: bytes | None, value: bytes | None,
           headers: Sequence[Header] = (), ts_delta: int = 0) -> bytes:
    body = (b"\0" + varint(ts_delta) + varint(offset_delta) + field(key) + field(value)
            + varint(len(headers)) + b"".join(field(k) + field(v) for k, v in headers))
    return varint(len(body)) + body


def batch(body: bytes, count: int, base_offset: int = 0, *, codec: int = 0,
          attributes: int = 0, base_ts: int = 1_700_000_000_000, max_ts: int | None = None,
          last_delta: int | None = None) -> bytes:
    records = COMPRESS[codec](body)
    buf = bytearray(HEADER_SIZE + len(records))
    _HEADER.pack_into(buf, 0, base_offset, len(buf) - 12, 0, 2, 0, attributes | codec,
                      count - 1 if last_delta is None else last_delta, base_ts,
                      base_ts + count if max_ts is None else max_ts, -1, -1, -1, count)
    buf[HEADER_SIZE:] = records
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


def sample_batch(base_offset: int, n: int, rnd: random.Random, **kw: Any) -> bytes:
    """n records: null/empty/long keys and values, 0-3 headers (null and empty values)."""
    parts = []
    for i in range(n):
        key = (None, b"", b"k%d" % i, rnd.randbytes(200))[i % 4]
        value = (b"v" * (i % 30), None, b"", rnd.randbytes(9000 if i % 7 == 3 else 70))[i % 4]
        headers = [(f"h{j}-é".encode(), (None, b"", rnd.randbytes(j + 1))[(i + j) % 3])
                   for j in range(i % 4)]
        parts.append(record(i, key, value, headers, ts_delta=i * 3 - 5))
    return batch(b"".join(parts), n, base_offset, **kw)


def reference(batches: list[bytes], start: int = 0, end: int = 1 << 62) -> list[tuple[Any, ...]]:
    out = []
    for d in batches:
        h = read_header(d)
        if h.is_control:
            continue
        log_append = int(bool(h.attributes & TIMESTAMP_TYPE_LOG_APPEND))
        out += [(r.offset, r.timestamp, log_append, r.key, r.value, expected_headers(r.headers))
                for r in decode_batch(d, h) if start <= r.offset < end]
    return out


def rows(batches: Any, headers: bool = True) -> list[tuple[Any, ...]]:
    out = []
    for b in batches:
        b.validate(full=True)
        assert b.schema.names == ARROW_SCHEMA.names[:len(b.schema.names)]
        d = b.to_pydict()
        ts = b.column("timestamp").cast("int64").to_pylist()
        out += [(d["offset"][i], ts[i] // 1000, d["timestampType"][i], d["key"][i],
                 d["value"][i], header_pairs(d["headers"][i]) if headers else None)
                for i in range(b.num_rows)]
    return out


def decode(batches: list[bytes], start: int = 0, end: int = 1 << 62,
           headers: bool = True) -> list[tuple[Any, ...]]:
    cols = ColumnBuilder("t", 0, start, end, headers)
    for d in batches:
        cols.add(d, 0, read_header(d))
    out = cols.build()
    return [] if out is None else rows([out], headers)


@pytest.mark.parametrize("codec", sorted(COMPRESS), ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_matches_reference_every_codec(codec: int) -> None:
    rnd = random.Random(codec)
    batches = [sample_batch(0, 40, rnd, codec=codec),
               sample_batch(40, 1, rnd, codec=codec),
               sample_batch(41, 25, rnd, codec=codec, attributes=TIMESTAMP_TYPE_LOG_APPEND,
                            max_ts=1_800_000_000_000)]
    ref = reference(batches)
    assert len(ref) == 66 and any(r[5] for r in ref) and any(r[3] is None for r in ref)
    assert decode(batches) == ref
    for start, end in ((0, 66), (3, 41), (39, 42), (40, 41), (50, 51), (66, 70)):
        assert decode(batches, start, end) == reference(batches, start, end)
    no_headers = [(*r[:5], None) for r in ref]
    assert decode(batches, headers=False) == no_headers


def test_read_range_skips_control_batches_and_trims_straddling_ones(tmp_path: Path) -> None:
    """A segment file with a control batch and compressed batches; ranges whose ends fall
    inside batches; one Arrow batch per record batch and one for all."""
    rnd = random.Random(7)
    control = batch(record(0, b"\0\0\0\0", b"\0\0\0\0\0\0"), 1, 12, attributes=CONTROL_FLAG)
    batches = [sample_batch(0, 12, rnd), control, sample_batch(13, 9, rnd, codec=1),
               sample_batch(22, 5, rnd, codec=4), sample_batch(27, 30, rnd)]
    seg = tmp_path / "t" / "0" / f"{0:020d}.log"
    seg.parent.mkdir(parents=True)
    seg.write_bytes(b"".join(batches))
    size = seg.stat().st_size
    storage = open_storage(str(tmp_path))
    for start, end in ((0, 57), (5, 20), (12, 13), (11, 14), (25, 56)):
        rng = ReadRange("t", 0, 0, start, end, 0, size, 0, size)
        expected = reference(batches, start, end)
        assert 12 not in [r[0] for r in expected]
        for chunk_bytes in (1, 1 << 20):
            assert rows(read_range(storage, rng, chunk_bytes=chunk_bytes)) == expected


def test_only_headers_without_keys_or_values() -> None:
    batches = [batch(b"".join(record(i, None, None, [(b"a", None)] * (i % 3))
                              for i in range(10)), 10)]
    assert decode(batches) == reference(batches)


# ------------------------------------------------------------------------------ malformed
GOOD = record(0, b"key", b"value", [(b"h", b"v")])
BODY = GOOD[1:]   # the record without its length varint


def with_length(body: bytes) -> bytes:
    return varint(len(body)) + body


MALFORMED = {
    "varint longer than 10 bytes": (b"\xff" * 11 + b"\x01", 1),
    "truncated varint": (b"\x80", 1),
    "truncated varint ": (with_length(b"\0\x80"), 1),               # inside the record
    "bad record length": (varint(0), 1),
    "bad record length ": (varint(-4) + b"\0" * 10, 1),
    "record runs past the batch": (varint(500) + BODY, 1),
    "fewer records than the batch header counts": (GOOD, 2),
    "records do not fill the batch": (GOOD + b"\0", 1),
    "record field runs past the record": (with_length(b"\0\0\0" + varint(50) + b"k"), 1),
    "record field runs past the record ": (with_length(b"\0\0\0\0" + varint(9) + b"v"), 1),
    "negative key length": (with_length(b"\0\0\0" + varint(-2)), 1),
    "negative value length": (with_length(b"\0\0\0\0" + varint(-3) + b"\0"), 1),
    "bad header count": (with_length(b"\0\0\0\0\0" + varint(-1)), 1),
    "bad header count ": (with_length(b"\0\0\0\0\0" + varint(3) + b"\0\0"), 1),
    "null header key": (with_length(b"\0\0\0\0\0" + varint(1) + varint(-1) + b"\0"), 1),
    "negative header value length": (with_length(b"\0\0\0\0\0\x02\x02a" + varint(-2)), 1),
    "record length does not match its fields": (with_length(BODY + b"\0\0"), 1),
}


@pytest.mark.parametrize("message", sorted(MALFORMED))
def test_malformed_records_raise(message: str) -> None:
    body, count = MALFORMED[message]
    good = batch(GOOD, 1, 0)
    bad = batch(body, count, 1)
    for headers in (True, False):
        cols = ColumnBuilder("t", 0, 0, 100, headers)
        cols.add(good, 0, read_header(good))
        cols.add(bad, 0, read_header(bad))
        with pytest.raises(RecordDecodeError, match=message.strip()) as err:
            cols.build()
        assert "batch at offset 1" in str(err.value)
        assert cols.build() is None   # the failed chunk is dropped, the builder reusable


def test_reference_decoder_rejects_a_null_header_key_too() -> None:
    bad = batch(MALFORMED["null header key"][0], 1)
    with pytest.raises(RecordDecodeError, match="null header key"):
        reference([bad])


def test_truncated_batch_body_raises() -> None:
    whole = sample_batch(0, 5, random.Random(1))
    for cut in (1, 10, 300, len(whole) - HEADER_SIZE - 1):
        body = whole[HEADER_SIZE:HEADER_SIZE + cut]
        with pytest.raises(RecordDecodeError):
            decode([batch(body, 5)])


def test_fuzzed_batches_decode_as_the_reference_or_raise() -> None:
    """Random byte changes, cuts and insertions in valid bodies: the decoder either agrees with
    the reference decoder or raises RecordDecodeError."""
    rnd = random.Random(2026)
    seeds = [sample_batch(0, 6, random.Random(s))[HEADER_SIZE:] for s in range(4)]
    outcomes = {"ok": 0, "error": 0}
    for _ in range(3000):
        body = bytearray(rnd.choice(seeds))
        for _ in range(rnd.randint(1, 3)):
            op = rnd.random()
            at = rnd.randrange(len(body))
            if op < 0.6:
                body[at] = rnd.choice((0x00, 0x01, 0x7F, 0x80, 0xFF, rnd.randrange(256)))
            elif op < 0.8:
                del body[at:at + rnd.randint(1, 20)]
            else:
                body[at:at] = rnd.randbytes(rnd.randint(1, 5))
        d = batch(bytes(body), 6)
        try:
            ours = decode([d])
        except RecordDecodeError:
            outcomes["error"] += 1
            continue
        outcomes["ok"] += 1
        assert [r[:1] + r[3:] for r in ours] == [r[:1] + r[3:] for r in reference([d])]
    assert outcomes["ok"] > 100 and outcomes["error"] > 1000, outcomes
