"""Reading an internal log back, batch by batch: what every coordinator's shard does on load."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.record_codec import Record, RecordDecodeError, decode_batch
from bmq.protocol.records import BatchHeader, iter_batches
from bmq.storage import PartitionLog

log = logging.getLogger(__name__)

READ_CHUNK = 4 << 20


def log_batches(log_: PartitionLog) -> Iterator[tuple[BatchHeader, memoryview, int]]:
    """(header, the whole batch, the first offset to use) of every batch from the log start to
    the high watermark; the first batch may begin before the log start (delete_records)."""
    position = log_.log_start_offset
    end = log_.high_watermark
    while position < end:
        data = log_.read(position, READ_CHUNK)
        advanced = False
        view = memoryview(data)
        for pos, header in iter_batches(data):
            if header.next_offset <= position:
                continue
            advanced = True
            yield header, view[pos : pos + header.size], position
            position = header.next_offset
        if not advanced:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"{log_}: no complete batch at offset {position}")


def batch_records(log_: PartitionLog, header: BatchHeader, batch: memoryview,
                  start: int) -> list[Record]:
    """The records of a data batch at or after ``start``; an undecodable batch is logged and
    skipped (a replay goes on with what it can read)."""
    try:
        records = decode_batch(batch, header)
    except RecordDecodeError as error:
        log.error("%s: undecodable batch at offset %d skipped: %s", log_, header.base_offset,
                  error)
        return []
    return [r for r in records if r.offset >= start]
