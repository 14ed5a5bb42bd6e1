"""One partition of ``__consumer_offsets`` and the groups whose state it stores.

The coordinator is split by offsets partition, as in Kafka: every group lives on exactly one
partition (see ``placement.py``), its records are appended to that partition's log, and loading or
unloading a partition loads or drops all of its groups at once. The embedded broker leads every
partition; a cluster mode can move single partitions between coordinators.

Writes go through the partition's group-commit writer: ``write`` appends one record batch in
memory and returns the future of its durability, so many commits share one flush and fsync.

Snapshots. Instead of Kafka's log cleaner, a shard keeps the latest value of every live key in
memory and appends all of them again now and then (``bmq.coordinators.snapshots``).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor

from bmq.coordinators.groups.consumer_group import ConsumerGroup
from bmq.coordinators.groups.group import Group
from bmq.coordinators.groups.records import (
    ConsumerGroupKey,
    ConsumerGroupValue,
    GroupKey,
    GroupValue,
    Key,
    OffsetKey,
    OffsetValue,
    Value,
    decode_record,
    encode_key,
    encode_value,
)
from bmq.coordinators.replay import batch_records, log_batches
from bmq.coordinators.sharded import append_records
from bmq.coordinators.snapshots import Snapshots
from bmq.metadata.topics import TopicPartition
from bmq.protocol.errors import ErrorCode
from bmq.protocol.primitives import DecodeError
from bmq.protocol.records import CONTROL_COMMIT, HEADER_SIZE, TRANSACTIONAL_FLAG, control_type
from bmq.storage import PartitionLog
from bmq.writepath.partitions import Partition, now_ms

log = logging.getLogger(__name__)

SNAPSHOT_BATCH_RECORDS = 2000

Entry = tuple[Key, Value | None]
# A transactional producer's pending offset commits: group id -> partition -> offset.
TxnOffsets = dict[str, dict[TopicPartition, OffsetValue]]


class LoadedState:
    """What replaying one offsets partition yields: last value per key."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[TopicPartition, OffsetValue]] = {}
        self.groups: dict[str, GroupValue | None] = {}
        self.consumer_groups: dict[str, ConsumerGroupValue | None] = {}
        self.records = 0
        self.skipped = 0
        # Producer id -> its open transaction's offset records (no marker yet).
        self.pending_txn: dict[int, list[tuple[Key, Value | None]]] = {}

    def apply(self, key: Key, value: Value | None) -> None:
        self.records += 1
        if isinstance(key, OffsetKey):
            tp = (key.topic, key.partition)
            if value is None:
                group_offsets = self.offsets.get(key.group_id)
                if group_offsets is not None:
                    group_offsets.pop(tp, None)
            elif isinstance(value, OffsetValue):
                self.offsets.setdefault(key.group_id, {})[tp] = value
        elif isinstance(key, ConsumerGroupKey):
            if value is None or isinstance(value, ConsumerGroupValue):
                self.consumer_groups[key.group_id] = value
        elif value is None or isinstance(value, GroupValue):
            self.groups[key.group_id] = value

    def latest(self) -> dict[Key, Value]:
        live: dict[Key, Value] = {}
        for group_id, offsets in self.offsets.items():
            for (topic, partition), offset in offsets.items():
                live[OffsetKey(group_id, topic, partition)] = offset
        for group_id, value in self.groups.items():
            if value is not None:
                live[GroupKey(group_id)] = value
        for group_id, consumer in self.consumer_groups.items():
            if consumer is not None:
                live[ConsumerGroupKey(group_id)] = consumer
        return live

    def group_ids(self) -> set[str]:
        ids = {g for g, offsets in self.offsets.items() if offsets}
        ids.update(g for g, value in self.groups.items() if value is not None)
        ids.update(g for g, value in self.consumer_groups.items() if value is not None)
        return ids


def replay(log_: PartitionLog) -> LoadedState:
    """Read a whole offsets partition (on a worker thread) and keep the last value per key.

    Transactional offset commits (TxnOffsetCommit) count once their producer's COMMIT marker
    follows; an ABORT marker drops them; those still open at the end stay pending."""
    state = LoadedState()
    for header, batch, start in log_batches(log_):
        pid = header.producer_id
        if header.is_control:
            pending = state.pending_txn.pop(pid, [])
            if control_type(batch[HEADER_SIZE:]) == CONTROL_COMMIT:
                for key, value in pending:
                    state.apply(key, value)
            continue
        transactional = bool(header.attributes & TRANSACTIONAL_FLAG)
        for record in batch_records(log_, header, batch, start):
            try:
                decoded = decode_record(record.key, record.value)
            except DecodeError as error:
                log.error("%s: record at offset %d skipped: %s", log_, record.offset, error)
                state.skipped += 1
                continue
            if decoded is None:
                state.skipped += 1
            elif transactional:
                state.pending_txn.setdefault(pid, []).append(decoded)
            else:
                state.apply(*decoded)
    return state


class OffsetsShard:
    """The groups stored on one ``__consumer_offsets`` partition."""

    def __init__(self, index: int, partition: Partition, executor: Executor) -> None:
        self.index = index
        self.partition = partition
        self.groups: dict[str, Group] = {}
        self._executor = executor
        # What the log says once replayed: the last value appended for every live key.
        self.latest: dict[Key, Value] = {}
        self.snapshots = Snapshots[Entry](
            f"offsets partition {index}", partition, executor, lambda: list(self.latest.items()),
            lambda live: self._append(live)[0], SNAPSHOT_BATCH_RECORDS)
        # Producer id -> offsets committed in its open transaction (visible once it commits).
        self.txn_offsets: dict[int, TxnOffsets] = {}

    def __repr__(self) -> str:
        return f"<OffsetsShard {self.index} groups={len(self.groups)}>"

    async def load(self) -> None:
        loop = asyncio.get_running_loop()
        state = await loop.run_in_executor(self._executor, replay, self.partition.log)
        self.latest = state.latest()
        for pid, entries in state.pending_txn.items():
            for key, value in entries:
                if isinstance(key, OffsetKey) and isinstance(value, OffsetValue):
                    self.txn_offsets.setdefault(pid, {}).setdefault(key.group_id, {})[
                        (key.topic, key.partition)] = value
        now = now_ms()
        for group_id in state.group_ids():
            group = self.groups[group_id] = Group.from_value(
                group_id, state.groups.get(group_id), state.offsets.get(group_id, {}), now)
            consumer = state.consumer_groups.get(group_id)
            if consumer is not None:
                group.consumer = ConsumerGroup.from_value(group_id, consumer)
        # Offsets of transactions still open are pending in their groups (require_stable).
        for by_group in self.txn_offsets.values():
            for group_id, offsets in by_group.items():
                pending_in = self.groups.get(group_id)
                if pending_in is not None:
                    pending_in.pending_commits.update(offsets.keys())
        if state.records:
            log.info("loaded %d groups from %d records of offsets partition %d (%d skipped)",
                     len(self.groups), state.records, self.index, state.skipped)

    def write(self, entries: list[Entry],
              producer: tuple[int, int] | None = None) -> asyncio.Future[None]:
        """Append these records; the returned future is done once they are durable. With
        ``producer`` (id, epoch) they form a transactional batch of that producer, which
        ``latest`` takes in only when the transaction commits.

        Raises KafkaError (already mapped to a coordinator error) if the log cannot take them.
        """
        durable, size = self._append(entries, producer)
        self.snapshots.appended(size)
        if producer is not None:
            return durable
        for key, value in entries:
            if value is None:
                self.latest.pop(key, None)
            else:
                self.latest[key] = value
        self.snapshots.start_if_due()
        return durable

    def _append(self, entries: list[Entry],
                producer: tuple[int, int] | None = None) -> tuple[asyncio.Future[None], int]:
        return append_records(self.partition,
                              [(encode_key(k), encode_value(v)) for k, v in entries],
                              coordinator_error, producer)

    def close(self) -> None:
        self.snapshots.cancel()


def coordinator_error(code: ErrorCode) -> ErrorCode:
    """How a failed write to the offsets log is reported to group clients (Kafka's mapping)."""
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR,
                ErrorCode.NOT_COORDINATOR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.REQUEST_TIMED_OUT, ErrorCode.COORDINATOR_NOT_AVAILABLE):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return code


def offset_entries(group_id: str, offsets: dict[TopicPartition, OffsetValue]) -> list[Entry]:
    return [(OffsetKey(group_id, topic, partition), value)
            for (topic, partition), value in offsets.items()]


def tombstones(group_id: str, partitions: list[TopicPartition],
               group_too: bool = False) -> list[Entry]:
    entries: list[Entry] = [(OffsetKey(group_id, t, p), None) for t, p in partitions]
    if group_too:
        entries.append((GroupKey(group_id), None))
        entries.append((ConsumerGroupKey(group_id), None))
    return entries
