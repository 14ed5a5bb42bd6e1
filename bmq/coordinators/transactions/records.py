"""The records of the ``__transaction_state`` log, in Kafka's format (TransactionLogKey and
TransactionLogValue version 0, generated from Kafka's specs, so the bytes are what a Kafka
broker writes), and the transaction markers (control records: EndTransactionMarker) written
into data partitions.

Key (version int16 = 0)::  transactional_id string
Value (version int16 = 0)::
    producer_id int64, producer_epoch int16, transaction_timeout_ms int32, status int8,
    partitions nullable array of (topic string, partition ids array of int32),
    last_update_timestamp_ms int64, start_timestamp_ms int64

Replaying the log and keeping the last value per transactional id rebuilds the coordinator.
A marker's value is Kafka's EndTxnMarker (generated); its key (version int16 0, type int16)
is Kafka's control record key, which Kafka too writes by hand (it has no spec).
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field

from bmq.metadata.topics import TopicPartition
from bmq.protocol.coordinator_records import encode, read_prefix
from bmq.protocol.messages.end_txn_marker import EndTxnMarker
from bmq.protocol.messages.transaction_log_key import TransactionLogKey
from bmq.protocol.messages.transaction_log_value import PartitionsSchema, TransactionLogValue
from bmq.protocol.primitives import DecodeError, Writer
from bmq.protocol.record_codec import build_batch
from bmq.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, BatchHeader

KEY_VERSION = 0
VALUE_VERSION = 0
MARKER_VERSION = 0


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
    return encode(KEY_VERSION, TransactionLogKey(transactional_id), KEY_VERSION)


def encode_value(meta: TxnMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(index)
    return encode(VALUE_VERSION, TransactionLogValue(
        producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
        transaction_timeout_ms=meta.timeout_ms, transaction_status=int(meta.state),
        transaction_partitions=[PartitionsSchema(topic, indexes)
                                for topic, indexes in by_topic.items()],
        transaction_last_update_timestamp_ms=meta.update_ms,
        transaction_start_timestamp_ms=meta.start_ms), VALUE_VERSION)


def decode_key(data: bytes) -> str | None:
    version, r = read_prefix(data)
    if version != KEY_VERSION:
        return None
    return TransactionLogKey.read(r, KEY_VERSION).transactional_id


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    version, r = read_prefix(data)
    if version != VALUE_VERSION:
        raise DecodeError(f"unknown TransactionLogValue version {version}")
    value = TransactionLogValue.read(r, VALUE_VERSION)
    return TxnMetadata(
        transactional_id, producer_id=value.producer_id, producer_epoch=value.producer_epoch,
        timeout_ms=value.transaction_timeout_ms, state=TxnState(value.transaction_status),
        partitions={(p.topic, index) for p in value.transaction_partitions or ()
                    for index in p.partition_ids},
        update_ms=value.transaction_last_update_timestamp_ms,
        start_ms=value.transaction_start_timestamp_ms)


def marker_batch(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                 timestamp: int, leader_epoch: int) -> tuple[bytearray, BatchHeader]:
    """A COMMIT or ABORT control batch of the producer (Kafka's EndTransactionMarker)."""
    key = Writer()
    key.write_int16(MARKER_VERSION)
    key.write_int16(CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = encode(MARKER_VERSION, EndTxnMarker(coordinator_epoch), MARKER_VERSION)
    return build_batch([(key.getvalue(), value)], timestamp, leader_epoch,
                       (producer_id, producer_epoch), control=True)
