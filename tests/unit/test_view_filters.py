"""The filter language of views and its C evaluator, on real record batches: which records
each expression keeps (SQL's three-valued logic over headers), batches rewritten with the
source's offsets and a valid CRC whatever the codec, control batches kept whole, malformed
records never passed on, and malformed expressions refused saying where."""

from __future__ import annotations

import random

import pytest

from bmq.protocol.record_codec import GZIP, LZ4, SNAPPY, ZSTD, recompress_batch
from bmq.protocol.records import CONTROL_FLAG, crc_ok, iter_batches, read_header
from bmq.readpath.filters import FilterError, apply_filter, compile_filter
from tests.integration.kwire import Record, build_record_batch, parse_record_batches

# Record i of the batch: amount = 10 * i, region eu for odd i, bmq.tag as below, and a "note"
# header with a null value on record 0.
TAGS = [b"paid", b"new", b"refunded", None, b"paid", b"x'y", b"new", b"paid", None, b"refunded"]


def _records() -> list[Record]:
    records = []
    for i, tag in enumerate(TAGS):
        headers: list[tuple[str, bytes | None]] = [("amount", str(10 * i).encode()),
                                                   ("region", b"eu" if i % 2 else b"us")]
        if tag is not None:
            headers.append(("bmq.tag", tag))
        if i == 0:
            headers.append(("note", None))
        if i == 9:
            headers.append(("amount", b"999"))     # a repeated key: the first one counts
        records.append(Record(f"k{i}".encode(), f"v{i}".encode(), headers))
    return records


BATCH = build_record_batch(_records(), base_offset=500, producer_id=7, producer_epoch=1,
                           base_sequence=0)


def kept(expression: str, data: bytes = BATCH) -> list[int]:
    out = apply_filter(compile_filter(expression), data)
    (batch,) = parse_record_batches(out)
    assert batch.crc_ok() and batch.compression == 0
    assert (batch.base_offset, batch.last_offset_delta, batch.producer_id) == (500, 9, 7)
    assert batch.records is not None and batch.record_count == len(batch.records)
    return [offset - 500 for offset, _ in batch.records]


@pytest.mark.parametrize(("expression", "indexes"), [
    ("TAG = 'paid'", [0, 4, 7]),
    ("tag IN ('paid', 'refunded')", [0, 2, 4, 7, 9]),
    ("TAG NOT IN ('paid', 'refunded')", [1, 5, 6]),          # no tag: unknown, not kept
    ("TAG <> 'paid'", [1, 2, 5, 6, 9]),
    ("TAG IS NULL", [3, 8]),
    ("bmq.tag IS NOT NULL AND region = 'eu'", [1, 5, 7, 9]),
    ("TAG = 'x''y'", [5]),
    ("amount > 40", [5, 6, 7, 8, 9]),
    ("amount >= 40 AND amount < 60.5", [4, 5, 6]),
    ("amount <= 10 OR amount = 90", [0, 1, 9]),
    ("amount <> 30", [0, 1, 2, 4, 5, 6, 7, 8, 9]),
    ("amount BETWEEN 20 AND 40", [2, 3, 4]),
    ("amount NOT BETWEEN 20 AND 40", [0, 1, 5, 6, 7, 8, 9]),
    ("region > 1", []),                                      # not a number: unknown
    ("NOT (region > 1)", []),                                # NOT unknown is unknown
    ("NOT (TAG = 'paid') AND NOT region = 'us'", [1, 5, 9]),
    ("note IS NULL AND amount < 20", [0, 1]),                # a null value is NULL
    ("missing = 'a' OR TAG = 'new'", [1, 6]),                # unknown OR true is true
    ("TRUE", list(range(10))),
    ("NOT " * 64 + "TAG IS NULL", [3, 8]),
    ("FALSE OR amount > 1e9", []),
    ("(TAG = 'paid' OR TAG = 'new') AND (amount > 35 AND region = 'us')", [4, 6]),
])
def test_expressions_keep_exactly_the_matching_records(expression, indexes):
    assert kept(expression) == indexes


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_compressed_batches_are_filtered_and_served_uncompressed(codec):
    compressed = recompress_batch(BATCH, read_header(BATCH), codec)
    assert compressed != BATCH
    assert kept("TAG = 'refunded'", compressed) == [2, 9]


def test_records_are_kept_byte_for_byte_and_empty_batches_keep_their_offsets():
    second = build_record_batch(_records()[:3], base_offset=510)
    out = apply_filter(compile_filter("amount = 70"), BATCH + second + second[:30])
    first, empty = parse_record_batches(out)
    assert first.records is not None and len(first.records) == 1
    offset, record = first.records[0]
    assert (offset, record.key, record.value) == (507, b"k7", b"v7")
    assert ("bmq.tag", b"paid") in record.headers
    # None of the second batch matches: it stays, empty, so consumers move past 510-512.
    assert (empty.base_offset, empty.last_offset_delta, empty.record_count) == (510, 2, 0)
    assert empty.crc_ok() and len(empty.raw) == 61
    assert len(out) == len(first.raw) + 61     # the torn third batch is left out


def test_control_batches_are_kept_whole():
    control = bytearray(build_record_batch([Record(b"\x00\x00\x00\x01", b"\x00" * 6)],
                                           attributes=CONTROL_FLAG | 0x10, base_offset=520))
    assert apply_filter(compile_filter("TAG = 'nothing'"), bytes(control)) == bytes(control)


def test_a_malformed_record_is_never_passed_on():
    broken = bytearray(BATCH)
    broken[61 + 4] = 0x7F            # the first record's key length: -64
    (batch,) = parse_record_batches(apply_filter(compile_filter("TRUE"), bytes(broken)))
    assert batch.record_count == 0 and batch.crc_ok()


@pytest.mark.parametrize(("expression", "message"), [
    ("", "empty filter"),
    ("TAG IN ('a',)", "expected a string in single quotes at position 13, found ')'"),
    ("TAG = 'open", "unterminated string at position 7"),
    ("amount > 'x'", "expected a number at position 10"),
    ("amount BETWEEN 1 OR 2", "expected AND at position 18"),
    ("TAG = 'a' TAG = 'b'", "expected AND, OR or the end at position 11"),
    ("NOT", "expected a header name, NOT, TRUE, FALSE or '(' at position 4, found the end"),
    ("amount NOT > 3", "expected BETWEEN or IN after NOT at position 12"),
    ("amount IS 3", "expected NULL at position 11"),
    ("(TAG = 'a'", "expected ')' at position 11, found the end"),
    ("TAG == 'a'", "expected a number at position 6, found '='"),
    ("amount > 3 # 4", "unexpected '#' at position 12"),
    ("NOT " * 65 + "TAG IS NULL", "nested more than 64 deep at position 257"),
    ("(" * 70 + "TAG IS NULL" + ")" * 70, "nested more than 64 deep at position 65"),
])
def test_malformed_expressions_say_where(expression, message):
    with pytest.raises(FilterError) as raised:
        compile_filter(expression)
    assert message in str(raised.value)


def test_fuzzed_batches_never_crash_and_stay_well_formed():
    """Thousands of mutated batches: the filter never reads past its input, and what it
    returns is the one batch, whole, with a valid CRC and at most the input's records."""
    rnd = random.Random(18)
    compiled = compile_filter("TAG IN ('paid', 'new') OR amount BETWEEN 10 AND 50")
    for _ in range(3000):
        data = bytearray(BATCH)
        for _ in range(rnd.randint(1, 6)):
            data[rnd.randrange(61, len(data))] = rnd.randrange(256)
        out = apply_filter(compiled, bytes(data))
        ((pos, header),) = list(iter_batches(out))
        assert pos == 0 and header.size == len(out) and crc_ok(out, 0, header)
        assert header.base_offset == 500 and 0 <= header.record_count <= len(TAGS)
        assert apply_filter(compiled, BATCH[:rnd.randrange(len(BATCH))]) == b""
