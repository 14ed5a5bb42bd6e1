"""The records of scheduled delivery: what a producer's headers ask for, how a held record is
kept in the timer log, and the batches that deliver held records to their partition.

A record in the timer log is a wrapper: its key is the due time (8 bytes, big-endian ms since
the epoch, after the broker's adjustments, so replaying the log orders records exactly as they
were ordered when they were accepted), its value the delivered record's fields (key, value and
headers with ``bmq.scheduled.at`` added, as the record format encodes them) and its timestamp
the producer's. A delivered record is those fields framed anew: nothing is decoded again. The
per-record loops are C (``_timerrec.c``).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from bmq.coordinators.timers._timerrec import frame_records, hold_records
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.record_codec import (
    CODEC_IDS,
    NONE,
    RecordDecodeError,
    compress,
    decode_batch,
    decompress,
    frame_batch,
)
from bmq.protocol.records import HEADER_SIZE, TRANSACTIONAL_FLAG, BatchHeader
from bmq.storage import LogConfig

# The headers (bmq.deliver.at, bmq.delay.ms, bmq.scheduled.at) are read and written in C.
MAX_DELAY_MS = 40 * 24 * 3600 * 1000
SEQUENCE_MASK = 0x7FFFFFFF

# Either header name in a batch's bytes: uncompressed batches without it go the normal way.
_SCHEDULE_MARK = re.compile(rb"bmq\.de(?:liver\.at|lay\.ms)")
_DUE = struct.Struct(">q")


@dataclass(slots=True)
class Held:
    """One record held for later: when it is due, the producer's timestamp, the fields the
    delivered record carries (None when not kept in memory: read back from the timer log
    when they come due), and its offset in the timer log (once appended there)."""

    due: int
    timestamp: int
    fields: bytes | None
    offset: int = -1


def mentions_schedule(records: memoryview, headers: list[BatchHeader]) -> bool:
    """Whether a produce's batches may carry a schedule header (compressed ones always may)."""
    return any(h.compression for h in headers) or _SCHEDULE_MARK.search(records) is not None


def hold_batch(batch: memoryview, header: BatchHeader, accepted: int, floor: int,
               keep_until: int) -> tuple[bytearray, BatchHeader, list[Held]]:
    """One produced batch as the timer log's batch (one wrapper per record, with the produced
    batch's producer id, epoch, sequence and transactional flag, so that the timer log drops a
    retried batch as the partition would) and its held records, none due before ``floor``.
    A record is due at its ``bmq.deliver.at``, else ``accepted`` plus its ``bmq.delay.ms``,
    else at ``accepted``. Only records due before ``keep_until`` keep their fields in memory.
    Raises INVALID_RECORD for a malformed record or schedule header, or
    a time more than 40 days ahead."""
    records: bytes | memoryview = batch[HEADER_SIZE:header.size]
    try:
        if header.compression:
            records = decompress(header.compression, bytes(records))
        wrappers, held = hold_records(records, header.record_count, header.base_timestamp,
                                      accepted, floor, MAX_DELAY_MS, keep_until)
    except (ValueError, RecordDecodeError) as error:
        raise KafkaError(ErrorCode.INVALID_RECORD, str(error)) from error
    timer_batch, timer_header = frame_batch(
        wrappers, header.record_count, header.base_timestamp, header.max_timestamp,
        producer_id=header.producer_id, producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence, attributes=header.attributes & TRANSACTIONAL_FLAG)
    return timer_batch, timer_header, [Held(due, ts, fields) for due, ts, fields in held]


def read_held(batch: memoryview, header: BatchHeader) -> list[Held]:
    """The held records of one timer log batch (not a control batch)."""
    return [Held(_DUE.unpack(r.key or b"")[0], r.timestamp, r.value or b"", r.offset)
            for r in decode_batch(batch, header)]


def delivery_batch(held: list[Held], producer_id: int, sequence: int, leader_epoch: int,
                   config: LogConfig) -> tuple[bytearray, BatchHeader]:
    """The batch that appends ``held`` to their partition, as the timer's idempotent producer
    (``producer_id``, epoch 0, first sequence ``sequence``), compressed with the topic's
    ``compression.type``; uncompressed for ``producer`` (it mixes many producers' records)."""
    payload, first, last = frame_records([(h.timestamp, h.fields or b"") for h in held])
    codec = CODEC_IDS.get(config.compression_type, NONE)
    return frame_batch(compress(codec, payload, config.compression_level), len(held), first,
                       last, leader_epoch=leader_epoch, producer_id=producer_id,
                       producer_epoch=0, base_sequence=sequence & SEQUENCE_MASK,
                       attributes=codec)
