"""The share-group state coordinator: every share-partition's state, sharded over
``__share_group_state`` (Kafka's share coordinator), written before a share consumer is
answered so that acquisitions, acknowledgements and delivery counts survive a crash.

A share-partition's key (``group:topicId:partition``) places it on a partition of the topic as
Kafka places it. The topic is created on first use, as Kafka creates it: a broker whose
clients never use share groups keeps no partitions for them.
"""

from __future__ import annotations

import logging
from concurrent.futures import Executor
from typing import Protocol

from bmq.coordinators.base import CoordinatorHost
from bmq.coordinators.sharded import Appended, ShardedCoordinator
from bmq.coordinators.share.partition import Run, SharePartition
from bmq.coordinators.share.records import StateKey, StateRecord
from bmq.coordinators.share.shard import ShareStateShard
from bmq.coordinators.transactions.shard import coordinator_error
from bmq.metadata.topics import SHARE_STATE_TOPIC
from bmq.protocol.errors import ErrorCode
from bmq.writepath.partitions import Partition

log = logging.getLogger(__name__)

# A key's whole state is written again after this many updates (Kafka's
# share.coordinator.snapshot.update.records.per.snapshot), so a replay reads few records per key.
UPDATES_PER_SNAPSHOT = 500


class ShareStateStore(Protocol):
    """Where the share-partitions of the partitions this broker leads are kept and written:
    the state log itself on `bmq serve` (``ShareStateCoordinator``), its coordinators
    elsewhere in a cluster (``LeaderShareState``)."""

    async def ensure_started(self) -> bool: ...
    async def prepare(self, key: StateKey, partition: Partition) -> ErrorCode: ...
    def state(self, key: StateKey) -> SharePartition | None: ...
    def all_states(self) -> list[tuple[StateKey, SharePartition]]: ...
    def create(self, key: StateKey, start_offset: int, partition: Partition
               ) -> tuple[SharePartition, Appended]: ...
    def persist(self, key: StateKey, state: SharePartition,
                snapshot: bool = False) -> Appended: ...
    async def durable(self, appended: Appended) -> ErrorCode: ...


class ShareStateCoordinator(ShardedCoordinator[ShareStateShard, StateRecord]):
    topic = SHARE_STATE_TOPIC

    def __init__(self, host: CoordinatorHost, executor: Executor) -> None:
        super().__init__(host, executor, host.config.share_coordinator_state_topic_num_partitions)
        # Placing a key hashes its string form: done once per share-partition, not per fetch.
        self._placed: dict[StateKey, int] = {}

    def _segment_bytes(self) -> int:
        return self.config.share_coordinator_state_topic_segment_bytes

    def _open_shard(self, index: int, partition: Partition) -> ShareStateShard:
        return ShareStateShard(index, partition, self._executor)

    def _write_error(self, code: ErrorCode) -> ErrorCode:
        return coordinator_error(code)

    # ------------------------------------------------------------------ share-partitions
    def index_of(self, key: StateKey) -> int:
        index = self._placed.get(key)
        if index is None:
            index = self._placed[key] = self.partition_for(key.placement())
        return index

    def key_error(self, key: StateKey) -> ErrorCode:
        """NONE if this broker serves ``key``'s state now, else the error to answer."""
        if self._active and self.index_of(key) in self.shards:
            return ErrorCode.NONE
        return self.shard_error(key.placement())

    async def prepare(self, key: StateKey, partition: Partition) -> ErrorCode:
        """NONE once ``key``'s state (None if it has none yet) is here to use: this broker
        owns the key's shard (``bmq serve`` owns them all)."""
        return self.key_error(key)

    def state(self, key: StateKey) -> SharePartition | None:
        shard = self.shards.get(self.index_of(key))
        return None if shard is None else shard.states.get(key)

    def all_states(self) -> list[tuple[StateKey, SharePartition]]:
        return [item for shard in self.shards.values() for item in shard.states.items()]

    def create(self, key: StateKey, start_offset: int, partition: Partition | None = None
               ) -> tuple[SharePartition, Appended]:
        """A share-partition starting at ``start_offset``, written at once (so a restart keeps
        the start ``share.auto.offset.reset`` chose)."""
        shard = self.shards[self.index_of(key)]
        state = shard.states[key] = SharePartition(start_offset)
        return state, self.persist(key, state, snapshot=True)

    def persist(self, key: StateKey, state: SharePartition, snapshot: bool = False) -> Appended:
        """Append what changed in ``state`` (the whole state now and then, or when asked);
        returns the append's durability. Nothing changed: the durability of the key's last
        append (another request may have written this request's changes with its own)."""
        shard = self.shards.get(self.index_of(key))
        if shard is None:
            return ErrorCode.NOT_COORDINATOR
        return self._append_state(shard, key, state, state.take_changes(), snapshot)

    def _append_state(self, shard: ShareStateShard, key: StateKey, state: SharePartition,
                      changes: list[Run], snapshot: bool) -> Appended:
        count = shard.updates.get(key, UPDATES_PER_SNAPSHOT)
        if snapshot or count >= UPDATES_PER_SNAPSHOT:
            record = StateRecord(key, True, state.start_offset, list(state.runs))
            shard.updates[key] = 0
        elif changes:
            record = StateRecord(key, False, state.start_offset, changes)
            shard.updates[key] = count + 1
        else:
            return shard.appended.get(key, ErrorCode.NONE)
        return self._append_key(shard, key, record)

    def _append_key(self, shard: ShareStateShard, key: StateKey, record: StateRecord
                    ) -> Appended:
        """Append one record of ``key``; it is the key's last append from now on."""
        appended = self._append_to(shard, [record])
        if not isinstance(appended, ErrorCode):
            shard.appended[key] = appended
        return appended

    # ------------------------------------------------------------------ for data leaders
    # In cluster mode the broker that leads a data partition keeps its share-partitions and
    # reads and writes their state here, at the owner of the key's partition of the log
    # (bmq.coordinators.share.leader); the shard keeps a copy, for reads and snapshots.
    def _fence(self, key: StateKey, leader_epoch: int) -> tuple[ErrorCode, ShareStateShard | None]:
        error = self.key_error(key)
        if error != ErrorCode.NONE:
            return error, None
        shard = self.shards[self.index_of(key)]
        if leader_epoch < shard.leader_epochs.get(key, -1) or key in shard.stale:
            return ErrorCode.FENCED_LEADER_EPOCH, None
        shard.leader_epochs[key] = leader_epoch
        return ErrorCode.NONE, shard

    def read_for_leader(self, key: StateKey, leader_epoch: int
                        ) -> tuple[Appended, SharePartition | None]:
        """The key's state for the data partition's leader at ``leader_epoch``, and when it
        may be used: from then on writes of older leaders are refused, also by a coordinator
        that loads the key's partition later (a newer epoch is written to the log first, as
        Kafka's share coordinator does on a read)."""
        shard = self.shards.get(self.index_of(key))
        if shard is not None:
            shard.stale.discard(key)
        known = -1 if shard is None else shard.leader_epochs.get(key, -1)
        error, shard = self._fence(key, leader_epoch)
        if shard is None:
            return error, None
        state = shard.states.get(key)
        if leader_epoch <= known:
            return shard.appended.get(key, ErrorCode.NONE), state
        record = StateRecord(key, False, -1 if state is None else state.start_offset, [])
        return self._append_key(shard, key, record), state

    def admin_write(self, key: StateKey, start_offset: int | None) -> Appended:
        """Replace the key's state for the group's coordinator (offsets altered or deleted,
        the group deleted); the leader's copy is stale: its next write is refused, and it
        reads the state again."""
        error = self.key_error(key)
        if error != ErrorCode.NONE:
            return error
        self.shards[self.index_of(key)].stale.add(key)
        return self.replace(key, start_offset)

    def write_for_leader(self, key: StateKey, leader_epoch: int, record: StateRecord
                         ) -> Appended:
        """Apply a leader's write to the copy and append it (in the order they come)."""
        error, shard = self._fence(key, leader_epoch)
        if shard is None:
            return error
        if record.runs is None:
            return self.replace(key, None)
        state = shard.states.get(key)
        if record.snapshot or state is None:
            state = shard.states[key] = SharePartition(record.start_offset)
        state.apply(record.start_offset, record.runs)
        return self._append_state(shard, key, state, record.runs, record.snapshot)

    def replace(self, key: StateKey, start_offset: int | None) -> Appended:
        """Start the share-partition afresh at ``start_offset`` (its records' states
        forgotten), or forget it (None: its next fetch starts it by share.auto.offset.reset);
        written at once."""
        shard = self.shards.get(self.index_of(key))
        if shard is None:
            return ErrorCode.NOT_COORDINATOR
        if start_offset is not None:
            shard.states.pop(key, None)
            return self.create(key, start_offset)[1]
        if shard.states.pop(key, None) is None:
            return ErrorCode.NONE
        shard.updates.pop(key, None)
        return self._append_key(shard, key, StateRecord(key, True, -1, None))
