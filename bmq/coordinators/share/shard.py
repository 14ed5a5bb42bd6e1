"""One partition of ``__share_group_state`` and the share-partitions whose state it stores.

The log is kept small the way the offsets log is (``bmq.coordinators.snapshots``): after a
segment's worth of appends, every share-partition's whole state is appended again and the
records before it are deleted, so the log stays about as large as the live state and a replay
starts at the snapshots.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor

from bmq.coordinators.replay import batch_records, log_batches
from bmq.coordinators.sharded import append_records
from bmq.coordinators.share.partition import SharePartition
from bmq.coordinators.share.records import (
    StateKey,
    StateRecord,
    decode,
    decode_key,
    encode_key,
    encode_value,
)
from bmq.coordinators.snapshots import Snapshots
from bmq.coordinators.transactions.shard import coordinator_error
from bmq.protocol.primitives import DecodeError
from bmq.storage import PartitionLog
from bmq.writepath.partitions import Partition

log = logging.getLogger(__name__)

SNAPSHOT_BATCH = 200     # share-partitions per batch of a snapshot


def replay(log_: PartitionLog) -> tuple[dict[StateKey, SharePartition], dict[StateKey, int]]:
    """Every share-partition's state as the log leaves it, and the newest data leader epoch
    that read or wrote each key (on a worker thread)."""
    found: dict[StateKey, SharePartition] = {}
    epochs: dict[StateKey, int] = {}
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
            if state.leader_epoch >= 0:
                epochs[state.key] = max(state.leader_epoch, epochs.get(state.key, -1))
            current = found.get(state.key)
            if current is None and not state.snapshot and not state.runs:
                continue                          # a leader's read of a key with no state
            if state.snapshot or current is None:
                current = found[state.key] = SharePartition(state.start_offset)
            current.apply(state.start_offset, state.runs or [])
    return found, epochs


class ShareStateShard:
    """The share-partitions stored on one ``__share_group_state`` partition."""

    def __init__(self, index: int, partition: Partition, executor: Executor) -> None:
        self.index = index
        self.partition = partition
        self.states: dict[StateKey, SharePartition] = {}
        # Updates appended per key since its last snapshot, and the key's last append.
        self.updates: dict[StateKey, int] = {}
        self.appended: dict[StateKey, asyncio.Future[None]] = {}
        # Cluster mode: the newest leader epoch of each key's data partition that read or
        # wrote; each record appended carries it, so a replay restores it.
        self.leader_epochs: dict[StateKey, int] = {}
        # Keys an administrative write replaced since their leader last read them.
        self.stale: set[StateKey] = set()
        self._executor = executor
        self.snapshots = Snapshots[StateKey](
            f"share state partition {index}", partition, executor, lambda: list(self.states),
            self._append_snapshot, SNAPSHOT_BATCH)

    def __repr__(self) -> str:
        return f"<ShareStateShard {self.index} share-partitions={len(self.states)}>"

    async def load(self) -> None:
        loop = asyncio.get_running_loop()
        self.states, self.leader_epochs = await loop.run_in_executor(
            self._executor, replay, self.partition.log)
        for state in self.states.values():
            state.restarted()
        if self.states:
            log.info("loaded %d share-partitions from share state partition %d",
                     len(self.states), self.index)

    def close(self) -> None:
        self.snapshots.cancel()

    def write(self, entries: list[StateRecord]) -> asyncio.Future[None]:
        durable, size = self._append(entries)
        self.snapshots.appended(size)
        self.snapshots.start_if_due()
        return durable

    def _append(self, entries: list[StateRecord]) -> tuple[asyncio.Future[None], int]:
        return append_records(
            self.partition,
            [(encode_key(e.key, e.snapshot),
              None if e.runs is None
              else encode_value(e.start_offset, e.runs, self.leader_epochs.get(e.key, -1)))
             for e in entries], coordinator_error)

    def _append_snapshot(self, keys: list[StateKey]) -> asyncio.Future[None]:
        """Append the whole state of ``keys``; their next updates count from it."""
        wait = self._append([StateRecord(key, True, self.states[key].start_offset,
                                         list(self.states[key].runs)) for key in keys])[0]
        for key in keys:
            self.updates[key] = 0
            self.appended[key] = wait
        return wait
