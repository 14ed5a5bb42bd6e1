"""Record decoding against batches built by an independent encoder (kafka-python's)."""

import lz4.frame
import pytest
from kafka.codec import snappy_encode
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from bmq.protocol.record_codec import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    RecordDecodeError,
    compress,
    decompress,
    iter_records,
    recompress_batch,
)
from bmq.protocol.records import crc_ok, read_header, set_base_offset

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


@pytest.mark.parametrize("source", [NONE, GZIP, LZ4])
@pytest.mark.parametrize(("target", "level"), [(NONE, None), (GZIP, 9), (SNAPPY, None),
                                               (LZ4, None), (LZ4, 12), (ZSTD, None), (ZSTD, 1)])
def test_recompressed_batches_read_back_by_an_independent_decoder(
        source: int, target: int, level: int | None) -> None:
    original = build(source, base_offset=500)
    header = read_header(original)
    batch = recompress_batch(original, header, target, level)
    new = read_header(batch)
    assert new.compression == target and crc_ok(batch, 0, new)
    # Everything but the length, the codec bits and the CRC is the producer's.
    assert (new.base_offset, new.base_timestamp, new.max_timestamp, new.producer_id,
            new.base_sequence, new.record_count, new.last_offset_delta) == (
        header.base_offset, header.base_timestamp, header.max_timestamp, header.producer_id,
        header.base_sequence, header.record_count, header.last_offset_delta)
    # kafka-python decodes with its own codecs (python-snappy's xerial reader, lz4.frame).
    reader = DefaultRecordBatch(bytearray(batch))
    assert reader.validate_crc() and reader.compression_type == target
    got = [(r.timestamp, r.key, r.value, list(r.headers)) for r in reader]
    assert got == [(ts, k, v, list(h)) for ts, k, v, h in RECORDS]


def test_lz4_frames_use_independent_blocks_as_kafka_writes_them() -> None:
    payload = b"kafka lz4 " * 30_000  # several 64 KiB blocks
    framed = compress(LZ4, payload)
    assert framed[4] == 0x60  # FLG: version 1, independent blocks, no checksums or size
    assert lz4.frame.decompress(framed) == payload
    assert decompress(LZ4, framed) == payload
