"""The records of scheduled delivery: what a producer's headers ask for, how a held record is
kept in the timer log, and the batches that deliver held records to their partition.

A record in the timer log is a wrapper: its key is the due time (8 bytes, big-endian ms since
the epoch, after the broker's adjustments, so replaying the log orders records exactly as they
were ordered when they were accepted), its value the delivered record's fields (key, value and
headers with ``bmq.scheduled.at`` added, as the record format encodes them) and its timestamp
the producer's. A delivered record is those fields framed anew: nothing is decoded again.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.record_codec import (
    Record,
    RecordDecodeError,
    decode_batch,
    encode_record_fields,
    frame_batch,
    frame_record,
)
from bmq.protocol.records import TRANSACTIONAL_FLAG, BatchHeader

DELIVER_AT = "bmq.deliver.at"
DELAY_MS = "bmq.delay.ms"
SCHEDULED_AT = "bmq.scheduled.at"
MAX_DELAY_MS = 40 * 24 * 3600 * 1000
SEQUENCE_MASK = 0x7FFFFFFF

# Either header name in a batch's bytes: uncompressed batches without it go the normal way.
_SCHEDULE_MARK = re.compile(rb"bmq\.de(?:liver\.at|lay\.ms)")
_DECIMAL = re.compile(rb"[0-9]{1,19}")
_DUE = struct.Struct(">q")


@dataclass(slots=True)
class Held:
    """One record held for later: when it is due, the producer's timestamp, the fields the
    delivered record carries, and its offset in the timer log (once appended there)."""

    due: int
    timestamp: int
    fields: bytes
    offset: int = -1


def mentions_schedule(records: memoryview, headers: list[BatchHeader]) -> bool:
    """Whether a produce's batches may carry a schedule header (compressed ones always may)."""
    return any(h.compression for h in headers) or _SCHEDULE_MARK.search(records) is not None


def _decimal(name: str, value: bytes | None) -> int:
    if value is None or _DECIMAL.fullmatch(value) is None:
        raise KafkaError(ErrorCode.INVALID_RECORD,
                         f"header {name} must be an ASCII decimal number, not {value!r}")
    return int(value)


def due_time(record: Record, accepted: int) -> int:
    """When ``record`` is due: its ``bmq.deliver.at``, else ``accepted`` plus its
    ``bmq.delay.ms``, else ``accepted``. Raises INVALID_RECORD for a malformed value or a time
    more than 40 days ahead."""
    for name, value in record.headers:
        if name == DELIVER_AT:
            due = _decimal(name, value)
            break
        if name == DELAY_MS:
            due = accepted + _decimal(name, value)
            break
    else:
        return accepted
    if due > accepted + MAX_DELAY_MS:
        raise KafkaError(ErrorCode.INVALID_RECORD,
                         f"a record may be scheduled at most {MAX_DELAY_MS} ms ahead")
    return due


def hold_batch(batch: memoryview, header: BatchHeader, accepted: int, floor: int) -> list[Held]:
    """The records of one produced batch as held records; none is due before ``floor``."""
    try:
        records = decode_batch(batch, header)
    except RecordDecodeError as error:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"undecodable records: {error}") from error
    stamp = (SCHEDULED_AT, str(accepted).encode())
    return [Held(max(due_time(r, accepted), floor), r.timestamp,
                 bytes(encode_record_fields(r.key, r.value, [*r.headers, stamp])))
            for r in records]


def timer_batch(held: list[Held], header: BatchHeader) -> tuple[bytearray, BatchHeader]:
    """The timer log's batch for one produced batch: one wrapper per record, with the produced
    batch's producer id, epoch, sequence and transactional flag, so that the timer log drops a
    retried batch as the partition would."""
    first = min(h.timestamp for h in held)
    payload = b"".join(frame_record(i, h.timestamp - first, encode_record_fields(
        _DUE.pack(h.due), h.fields, [])) for i, h in enumerate(held))
    return frame_batch(payload, len(held), first, max(h.timestamp for h in held),
                       producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                       base_sequence=header.base_sequence,
                       attributes=header.attributes & TRANSACTIONAL_FLAG)


def read_held(batch: memoryview, header: BatchHeader) -> list[Held]:
    """The held records of one timer log batch (not a control batch)."""
    return [Held(_DUE.unpack(r.key or b"")[0], r.timestamp, r.value or b"", r.offset)
            for r in decode_batch(batch, header)]


def delivery_batch(held: list[Held], producer_id: int, sequence: int,
                   leader_epoch: int) -> tuple[bytearray, BatchHeader]:
    """The batch that appends ``held`` to their partition, as the timer's idempotent producer
    (``producer_id``, epoch 0, first sequence ``sequence``)."""
    first = min(h.timestamp for h in held)
    payload = b"".join(frame_record(i, h.timestamp - first, h.fields)
                       for i, h in enumerate(held))
    return frame_batch(payload, len(held), first, max(h.timestamp for h in held),
                       leader_epoch=leader_epoch, producer_id=producer_id, producer_epoch=0,
                       base_sequence=sequence & SEQUENCE_MASK)
