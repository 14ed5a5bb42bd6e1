"""ListOffsets over a log: what Kafka answers for a timestamp or one of its special values.

Shared by the roles that answer ListOffsets: brokers over the log they write, proxies over a
read-only view (``LogReader``), which offer the same read methods.
"""

from __future__ import annotations

from typing import Protocol

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.record_codec import RecordDecodeError, iter_records

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
NO_TIMESTAMP = -1


class ReadableLog(Protocol):
    @property
    def high_watermark(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    def read(self, offset: int, max_bytes: int) -> bytes | memoryview: ...

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None: ...

    def max_timestamp(self) -> tuple[int, int] | None: ...


def list_offset(log: ReadableLog, timestamp: int) -> tuple[int, int]:
    """(offset, timestamp) for a ListOffsets query; (-1, -1) when no record matches."""
    if timestamp == LATEST:
        return log.high_watermark, NO_TIMESTAMP
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return log.log_start_offset, NO_TIMESTAMP
    if timestamp == LATEST_TIERED:
        return -1, NO_TIMESTAMP     # no tiered storage: nothing is "tiered"
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp()
        return (-1, NO_TIMESTAMP) if found is None else _exact_record(log, found, None)
    if timestamp >= 0:
        found = log.offset_for_timestamp(timestamp)
        return (-1, NO_TIMESTAMP) if found is None else _exact_record(log, found, timestamp)
    raise KafkaError(ErrorCode.INVALID_REQUEST)


def _exact_record(log: ReadableLog, found: tuple[int, int],
                  target: int | None) -> tuple[int, int]:
    """Narrow the storage's batch-level answer to the record Kafka names.

    ``found`` is (offset, max timestamp) of the batch the indexes point at; Kafka answers with the
    first record whose timestamp is >= target (or, for the max timestamp, equals it).
    """
    offset, batch_max = found
    want = batch_max if target is None else target
    try:
        for record in iter_records(log.read(offset, 1)):
            if record.offset >= offset and (record.timestamp >= want if target is not None
                                            else record.timestamp == want):
                return record.offset, record.timestamp
    except RecordDecodeError as error:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(error)) from error
    return found
