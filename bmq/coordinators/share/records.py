"""The records of the ``__share_group_state`` log: one share-partition's state per key.

Key::   Kafka's ShareSnapshotKey (type 0) or ShareUpdateKey (type 1), generated from Kafka's
        specs: int16 type, group id string, topic id uuid, partition int32
Value:: int16 version 2, start offset int64, run count int32, per run: first int64,
        last int64, state int8, delivery count int16, deliverable-from timestamp int64 (ms),
        dead-letter reason int8 (an index of ``DEAD_LETTER_REASONS``; version 0 had none);
        then the data partition's leader epoch int32 (-1: none; versions 0 and 1 had none)

A snapshot is the whole state; an update the start offset and the runs that changed since the
previous record of the key; a null value (a tombstone) deletes the key. A replay applies them
in log order. The values are BMQ's own, written here by hand: Kafka's ShareSnapshotValue and
ShareUpdateValue carry snapshot, state and leader epochs and no deliverable-from time or
dead-letter reason, which BMQ's runs need. The leader epoch is the newest one that read or
wrote the key: kept in the log, as Kafka's records keep theirs, so that a coordinator that
loads the partition still refuses an older leader's writes (an update with no runs records a
read).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from bmq.coordinators.share.partition import DEAD_LETTER_REASONS, RecordState, Run
from bmq.protocol.coordinator_records import encode, read_prefix
from bmq.protocol.messages.share_snapshot_key import ShareSnapshotKey
from bmq.protocol.messages.share_update_key import ShareUpdateKey
from bmq.protocol.primitives import DecodeError, Reader, Writer

SNAPSHOT = ShareSnapshotKey.API_KEY
UPDATE = ShareUpdateKey.API_KEY
VALUE_VERSION = 2


@dataclass(frozen=True, slots=True)
class StateKey:
    """A share-partition: a group's view of one topic partition."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    def placement(self) -> str:
        """The string that places the key on a partition of the log (Kafka's share
        coordinator key, ``group:topicId:partition``)."""
        return f"{self.group_id}:{self.topic_id}:{self.partition}"


@dataclass(slots=True)
class StateRecord:
    key: StateKey
    snapshot: bool
    start_offset: int
    runs: list[Run] | None       # None: a tombstone
    leader_epoch: int = -1       # the newest data leader's epoch when written (-1: none)


def encode_key(key: StateKey, snapshot: bool) -> bytes:
    kind = ShareSnapshotKey if snapshot else ShareUpdateKey
    return encode(kind.API_KEY, kind(key.group_id, key.topic_id, key.partition))


def encode_value(start_offset: int, runs: list[Run], leader_epoch: int = -1) -> bytes:
    w = Writer()
    w.write_int16(VALUE_VERSION)
    w.write_int64(start_offset)
    w.write_int32(len(runs))
    for run in runs:
        w.write_int64(run.first)
        w.write_int64(run.last)
        w.write_int8(int(run.state))
        w.write_int16(min(run.count, 0x7FFF))
        w.write_int64(run.available_at)
        w.write_int8(DEAD_LETTER_REASONS.index(run.reason))
    w.write_int32(leader_epoch)
    return w.getvalue()


def decode_key(key_data: bytes) -> StateKey | None:
    """The key of a record, or None for a key type this version does not know."""
    key_type, r = read_prefix(key_data)
    if key_type not in (SNAPSHOT, UPDATE):
        return None
    key = ShareSnapshotKey.read(r, 0) if key_type == SNAPSHOT else ShareUpdateKey.read(r, 0)
    return StateKey(key.group_id, key.topic_id, key.partition)


def decode_value(value_data: bytes) -> tuple[int, list[Run], int]:
    """(start offset, runs, leader epoch) of a state value."""
    v = Reader(value_data)
    version = v.read_int16()
    if version not in (0, 1, VALUE_VERSION):
        raise DecodeError(f"unknown share state value version {version}")
    start = v.read_int64()
    runs = []
    for _ in range(v.read_int32()):
        first, last = v.read_int64(), v.read_int64()
        state = RecordState(v.read_int8())
        run = Run(first, last, state, v.read_int16(), available_at=v.read_int64())
        if version > 0:
            code = v.read_int8()
            if not 0 <= code < len(DEAD_LETTER_REASONS):
                raise DecodeError(f"unknown dead-letter reason {code}")
            run.reason = DEAD_LETTER_REASONS[code]
        runs.append(run)
    return start, runs, v.read_int32() if version > 1 else -1


def decode(key_data: bytes, value_data: bytes) -> StateRecord | None:
    """A record of the log, or None for a key type this version does not know."""
    key = decode_key(key_data)
    if key is None:
        return None
    snapshot = read_prefix(key_data)[0] == SNAPSHOT
    return StateRecord(key, snapshot, *decode_value(value_data))
