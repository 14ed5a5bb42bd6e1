"""Record decoding against batches built by an independent encoder (kafka-python's)."""

import pytest
from kafka.codec import snappy_encode
from kafka.record.default_records import DefaultRecordBatchBuilder

from bmq.protocol.record_codec import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    RecordDecodeError,
    decompress,
    iter_records,
)
from bmq.protocol.records import read_header, set_base_offset

RECORDS = [
    (1_700_000_000_000 + i, None if i % 5 == 0 else f"k{i}".encode(),
     None if i % 7 == 0 else (f"value {i} " * (i % 13)).encode(),
     [("h", b"x"), ("h", None)] if i % 3 == 0 else [])
    for i in range(200)
]


def build(codec: int, base_offset: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 24)
    for i, (ts, key, value, headers) in enumerate(RECORDS):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    batch = bytearray(builder.build())
    set_base_offset(batch, 0, base_offset)
    return bytes(batch)


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_decodes_every_field_for_every_codec(codec: int) -> None:
    batch = build(codec, base_offset=1000)
    assert read_header(batch).compression == codec
    records = list(iter_records(batch))
    assert [r.offset for r in records] == list(range(1000, 1200))
    for record, (ts, key, value, headers) in zip(records, RECORDS, strict=True):
        assert (record.timestamp, record.key, record.value) == (ts, key, value)
        assert record.headers == headers


def test_xerial_and_raw_snappy_both_decode() -> None:
    payload = b"abc" * 50_000  # several xerial blocks
    assert decompress(SNAPPY, snappy_encode(payload, xerial_compatible=True)) == payload
    assert decompress(SNAPPY, snappy_encode(payload, xerial_compatible=False)) == payload


def test_batches_back_to_back_and_partial_tail() -> None:
    data = build(NONE, 0) + build(GZIP, 200)
    assert [r.offset for r in iter_records(data)] == list(range(400))
    # A torn second batch is not yielded: readers only see complete batches.
    assert [r.offset for r in iter_records(data[:-10])] == list(range(200))


def test_corrupt_compressed_payload_is_a_decode_error() -> None:
    batch = bytearray(build(GZIP))
    batch[80:90] = b"\x00" * 10
    with pytest.raises(RecordDecodeError):
        list(iter_records(bytes(batch)))
