"""One partition of ``__share_group_state`` and the share-partitions whose state it stores.

The log is compacted the way the offsets log is (bmq.coordinators.groups.shard): after a
segment's worth of appends, every share-partition's whole state is appended again and the
records before it are deleted, so the log stays about as large as the live state and a replay
starts at the snapshots.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor

from bmq.coordinators.groups.records import build_batch
from bmq.coordinators.replay import batch_records, log_batches
from bmq.coordinators.share.partition import SharePartition
from bmq.coordinators.share.records import (
    StateKey,
    StateRecord,
    decode,
    decode_key,
    encode_key,
    encode_value,
)
from bmq.coordinators.transactions.shard import coordinator_error
from bmq.protocol.errors import KafkaError
from bmq.protocol.primitives import DecodeError
from bmq.storage import PartitionLog
from bmq.writepath.partitions import Partition, now_ms

log = logging.getLogger(__name__)

SNAPSHOT_BATCH = 200     # share-partitions per batch of a compaction's snapshots


def replay(log_: PartitionLog) -> dict[StateKey, SharePartition]:
    """Every share-partition's state as the log leaves it (on a worker thread)."""
    found: dict[StateKey, SharePartition] = {}
    for header, batch, start in log_batches(log_):
        if header.is_control:
            continue
        for record in batch_records(log_, header, batch, start):
            if record.key is None:
                continue
            try:
                if record.value is None:          # a tombstone: the share-partition is gone
                    gone = decode_key(record.key)
                    if gone is not None:
                        found.pop(gone, None)
                    continue
                state = decode(record.key, record.value)
            except (DecodeError, ValueError) as error:
                log.error("%s: record at offset %d skipped: %s", log_, record.offset, error)
                continue
            if state is None:
                continue
            current = found.get(state.key)
            if state.snapshot or current is None:
                current = found[state.key] = SharePartition(state.start_offset)
            current.apply(state.start_offset, state.runs or [])
    return found


class ShareStateShard:
    """The share-partitions stored on one ``__share_group_state`` partition."""

    def __init__(self, index: int, partition: Partition, executor: Executor) -> None:
        self.index = index
        self.partition = partition
        self.states: dict[StateKey, SharePartition] = {}
        # Updates appended per key since its last snapshot, and the key's last append.
        self.updates: dict[StateKey, int] = {}
        self.appended: dict[StateKey, asyncio.Future[None]] = {}
        # Cluster mode: the newest leader epoch of each key's data partition that read or wrote.
        self.leader_epochs: dict[StateKey, int] = {}
        # Keys an administrative write replaced since their leader last read them.
        self.stale: set[StateKey] = set()
        self._executor = executor
        self._bytes = 0         # appended since the last compaction
        self._compaction: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"<ShareStateShard {self.index} share-partitions={len(self.states)}>"

    async def load(self) -> None:
        loop = asyncio.get_running_loop()
        self.states = await loop.run_in_executor(self._executor, replay, self.partition.log)
        for state in self.states.values():
            state.restarted()
        if self.states:
            log.info("loaded %d share-partitions from share state partition %d",
                     len(self.states), self.index)

    def close(self) -> None:
        if self._compaction is not None:
            self._compaction.cancel()
            self._compaction = None

    def write(self, entries: list[StateRecord]) -> asyncio.Future[None]:
        partition = self.partition
        now = now_ms()
        batch, header = build_batch(
            [(encode_key(e.key, e.snapshot),
              None if e.runs is None else encode_value(e.start_offset, e.runs))
             for e in entries], now, partition.leader_epoch)
        try:
            durable = partition.append_batch(batch, header, now)
        except KafkaError as error:
            raise KafkaError(coordinator_error(error.code), error.message) from error
        self._bytes += len(batch)
        if self._bytes >= partition.log.config.segment_bytes and self._compaction is None:
            self._compaction = asyncio.get_running_loop().create_task(self.compact())
        return durable

    async def compact(self) -> None:
        """Append every share-partition's whole state, then drop everything before it."""
        try:
            log_ = self.partition.log
            start = log_.log_end_offset
            self._bytes = 0
            keys = list(self.states)
            waits = []
            # Appended now, back to back: the snapshots are contiguous in the log.
            for i in range(0, len(keys), SNAPSHOT_BATCH):
                chunk = keys[i:i + SNAPSHOT_BATCH]
                wait = self.write([StateRecord(key, True, self.states[key].start_offset,
                                               list(self.states[key].runs)) for key in chunk])
                waits.append(wait)
                for key in chunk:
                    self.updates[key] = 0
                    self.appended[key] = wait
            if not waits and start > 0:
                waits.append(self.partition.durable(start - 1))
            for wait in waits:
                await asyncio.shield(wait)
            loop = asyncio.get_running_loop()
            new_start = await loop.run_in_executor(self._executor, log_.delete_records, start)
            log.info("compacted share state partition %d: %d share-partitions, log starts at "
                     "%d", self.index, len(keys), new_start)
        except KafkaError as error:
            log.warning("compaction of share state partition %d failed: %s", self.index, error)
        finally:
            self._compaction = None
