"""The records of the ``__transaction_state`` log, in Kafka's format (TransactionLogKey and
TransactionLogValue version 0, so the bytes are what a Kafka broker writes), and the
transaction markers (control records: EndTransactionMarker) written into data partitions.

Key (version int16 = 0)::  transactional_id string
Value (version int16 = 0)::
    producer_id int64, producer_epoch int16, transaction_timeout_ms int32, status int8,
    partitions nullable array of (topic string, partition ids array of int32),
    last_update_timestamp_ms int64, start_timestamp_ms int64

Replaying the log and keeping the last value per transactional id rebuilds the coordinator.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field

from bmq.protocol.primitives import DecodeError, Reader, Writer
from bmq.protocol.record_codec import build_batch
from bmq.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, BatchHeader

KEY_VERSION = 0
VALUE_VERSION = 0
MARKER_VERSION = 0

TopicPartition = tuple[str, int]


class TxnState(enum.IntEnum):
    """Kafka's TransactionState ids (as stored in the log)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))


PREPARING = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    update_ms: int = -1
    start_ms: int = -1
    # In memory only: the epoch before the last bump (a retried InitProducerId gets the same
    # answer, KIP-360) and the lock that keeps one operation at a time on this transaction.
    last_epoch: int = -1
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)


def encode_key(transactional_id: str) -> bytes:
    w = Writer()
    w.write_int16(KEY_VERSION)
    w.write_string(transactional_id)
    return w.getvalue()


def encode_value(meta: TxnMetadata) -> bytes:
    w = Writer()
    w.write_int16(VALUE_VERSION)
    w.write_int64(meta.producer_id)
    w.write_int16(meta.producer_epoch)
    w.write_int32(meta.timeout_ms)
    w.write_int8(int(meta.state))
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(index)
    w.write_int32(len(by_topic))
    for topic, indexes in by_topic.items():
        w.write_string(topic)
        w.write_int32(len(indexes))
        for index in indexes:
            w.write_int32(index)
    w.write_int64(meta.update_ms)
    w.write_int64(meta.start_ms)
    return w.getvalue()


def decode_key(data: bytes) -> str | None:
    r = Reader(data)
    if r.read_int16() != KEY_VERSION:
        return None
    return r.read_string()


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    r = Reader(data)
    version = r.read_int16()
    if version != VALUE_VERSION:
        raise DecodeError(f"unknown TransactionLogValue version {version}")
    meta = TxnMetadata(transactional_id, producer_id=r.read_int64(),
                       producer_epoch=r.read_int16(), timeout_ms=r.read_int32(),
                       state=TxnState(r.read_int8()))
    topics = r.read_int32()
    for _ in range(max(topics, 0)):
        topic = r.read_string()
        for _ in range(r.read_int32()):
            meta.partitions.add((topic, r.read_int32()))
    meta.update_ms = r.read_int64()
    meta.start_ms = r.read_int64()
    return meta


def marker_batch(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                 timestamp: int, leader_epoch: int) -> tuple[bytearray, BatchHeader]:
    """A COMMIT or ABORT control batch of the producer (Kafka's EndTransactionMarker)."""
    key = Writer()
    key.write_int16(MARKER_VERSION)
    key.write_int16(CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = Writer()
    value.write_int16(MARKER_VERSION)
    value.write_int32(coordinator_epoch)
    return build_batch([(key.getvalue(), value.getvalue())], timestamp, leader_epoch,
                       (producer_id, producer_epoch), control=True)
