"""Recovery's scan: which batches of a segment file are valid, checked as recovery checks them
(framing, increasing offsets, offsets a segment can index, CRC-32C). The owner recovering a
partition and the read-only Spark source use the same scan, so they agree on what is durable."""

from __future__ import annotations

from collections.abc import Iterator

from bmq.protocol.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    crc_ok,
    read_header,
)
from bmq.storage.base import Storage
from bmq.storage.log.config import SCAN_CHUNK
from bmq.storage.producer_state import ProducerStateTable, txn_kind
from bmq.storage.segment import MAX_POSITION, MAX_RELATIVE_OFFSET

_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
# Enough of a control batch's first record to read its key (length, deltas, key of 4 bytes).
CONTROL_PREFIX = 32


def record_producer_batch(storage: Storage, path: str, pos: int, h: BatchHeader,
                          producers: ProducerStateTable, now: int) -> None:
    """Add a scanned batch to ``producers`` (idempotence, open and aborted transactions)."""
    if h.producer_id < 0:
        return
    # A marker's type is in its record: one small read, for control batches only.
    body = storage.read_range(path, pos + HEADER_SIZE, CONTROL_PREFIX) if h.is_control else b""
    producers.record(h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence,
                     h.base_offset, h.last_offset, h.max_timestamp, now, txn_kind(h, body))


def valid_batches(storage: Storage, path: str, start: int, end: int, expected_offset: int,
                  segment_base: int) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each valid batch of ``path`` from ``start`` (where the batch of
    ``expected_offset``, or of a later one, must begin: offsets may skip, after the log
    cleaner or in a copied log) up to ``end`` bytes; stops at the first invalid one."""
    pos = start
    expected = expected_offset
    buf = b""
    buf_pos = pos
    while end - pos >= HEADER_SIZE:
        off = pos - buf_pos
        if off + HEADER_SIZE > len(buf):
            buf = storage.read_range(path, pos, min(SCAN_CHUNK, end - pos))
            buf_pos, off = pos, 0
            if len(buf) < HEADER_SIZE:
                return
        h = read_header(buf, off)
        if (h.magic != MAGIC_V2 or h.batch_length < _MIN_BATCH_LENGTH
                or pos + h.size > end
                or h.base_offset < expected
                or h.last_offset_delta < 0 or pos + h.size > MAX_POSITION
                or h.last_offset - segment_base > MAX_RELATIVE_OFFSET):
            return
        if off + h.size > len(buf):
            buf = storage.read_range(path, pos, min(max(SCAN_CHUNK, h.size), end - pos))
            buf_pos, off = pos, 0
            if len(buf) < h.size:
                return
        if not crc_ok(buf, off, h):
            return
        yield pos, h
        pos += h.size
        expected = h.next_offset


def visible_size(storage: Storage, path: str) -> int:
    """The file's readable length, past what ``size`` says on file systems where it lags for a
    file another client is still writing (HDFS)."""
    size = storage.size(path)
    if not storage.exact_size:
        while True:
            more = len(storage.read_range(path, size, SCAN_CHUNK))
            if not more:
                break
            size += more
    return size
