"""The share-partitions of a cluster broker: kept by the broker that leads each data partition
(the one share consumers fetch from), their state written through the share coordinator, the
owner of the key's ``__share_group_state`` partition, as Kafka's share partitions write theirs
with WriteShareGroupState.

A share-partition is read from its coordinator the first time this broker serves it as the
data partition's leader (a new leader continues from the durable state: records acquired by
the old leader's consumers come back, no acknowledged one does); each change is written there
before a consumer is answered. Reads and writes carry the data partition's leader epoch, so a
broker that lost the partition can no longer write. A write that fails drops the in-memory
share-partition: it is read again from its coordinator, so memory never runs ahead of what is
durable.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol

from bmq.coordinators.sharded import Appended, wait_durable
from bmq.coordinators.share.partition import SharePartition
from bmq.coordinators.share.records import StateKey, StateRecord
from bmq.coordinators.share.state import ShareStateCoordinator
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.writepath.partitions import Partition, PartitionManager

log = logging.getLogger(__name__)


class StateLink(Protocol):
    """How a leader reaches a share-partition's coordinator (bmq.broker.share_peers)."""

    def write(self, key: StateKey, leader_epoch: int, record: StateRecord) -> Appended:
        """Send a write now (writes of a key arrive in the order sent); done once durable,
        raising KafkaError if it failed."""

    def read(self, key: StateKey, leader_epoch: int
             ) -> Awaitable[tuple[ErrorCode, StateRecord | None]]:
        """The key's whole state (None: the group has none for the partition yet)."""

    def append_elsewhere(self, topic: str, index: int, batch: bytes) -> Awaitable[None]:
        """Append a record batch (dead letters) to a partition another broker owns, durably;
        raises KafkaError."""


@dataclass(slots=True)
class _Held:
    state: SharePartition
    partition: Partition      # the data partition as this broker opened it (a new one: re-read)
    # The copy's latest write: a persist with no change waits for it. A copy read again
    # starts with none (what was read is durable), not with its predecessor's failure.
    last: Appended = ErrorCode.NONE


class LeaderShareState:
    """The share-partitions of the data partitions this broker leads (cluster mode); the
    same interface as ``ShareStateCoordinator``, which is the store of ``bmq serve``."""

    def __init__(self, log_: ShareStateCoordinator, link: StateLink,
                 partitions: PartitionManager) -> None:
        self._log = log_
        self._partitions = partitions
        self._link = link
        self._held: dict[StateKey, _Held] = {}
        # The read under way of each key, and the opening of the partition it is for.
        self._reading: dict[StateKey, tuple[Partition, asyncio.Future[ErrorCode]]] = {}

    async def ensure_started(self) -> bool:
        return await self._log.ensure_started()

    # ------------------------------------------------------------------ holding
    async def prepare(self, key: StateKey, partition: Partition) -> ErrorCode:
        while True:
            held = self._held.get(key)
            if held is not None and held.partition is partition:
                return ErrorCode.NONE
            reading = self._reading.get(key)
            if reading is None:     # concurrent fetches of a new share-partition read it once
                reading = self._start_read(key, partition)
            read_for, read = reading
            if read_for is partition:
                return await asyncio.shield(read)
            if self._partitions.get(partition.topic, partition.index) is not partition:
                # This fetch's opening of the partition is over; the read is for the new one.
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            # A read for an older opening of the partition (its leadership ended since): what
            # it holds is that opening's; this one waits for it, then reads for itself.
            await asyncio.wait([read])

    def _start_read(self, key: StateKey, partition: Partition
                    ) -> tuple[Partition, asyncio.Future[ErrorCode]]:
        reading = self._reading[key] = (partition, asyncio.ensure_future(
            self._read(key, partition)))

        def ended(_: asyncio.Future[ErrorCode]) -> None:
            if self._reading.get(key) is reading:
                del self._reading[key]

        reading[1].add_done_callback(ended)
        return reading

    async def _read(self, key: StateKey, partition: Partition) -> ErrorCode:
        held = self._held.get(key)
        if held is not None and held.partition is not partition:
            del self._held[key]       # a copy from before the partition was opened again
        error, record = await self._link.read(key, partition.leader_epoch)
        if error != ErrorCode.NONE:
            return error
        held = self._held.get(key)
        if held is not None and held.partition is partition:
            # Made meanwhile (a read that found nothing was answered, and its fetch created
            # the share-partition while this read was under way) or read by an earlier read:
            # it is the one this broker's consumers hold records of, and is at least as new as
            # what was read. Replacing it (or dropping it) would hand out its acquired records
            # again with the same delivery count.
            return ErrorCode.NONE
        self._held.pop(key, None)     # (a copy of an older opening, held meanwhile)
        if record is not None:
            state = SharePartition(record.start_offset)
            state.apply(record.start_offset, record.runs or [])
            state.restarted()         # the old leader's locks ended with its sessions
            self._held[key] = _Held(state, partition)
            log.info("share-partition %s continues from its durable state (start offset %d)",
                     key.placement(), state.start_offset)
        return ErrorCode.NONE

    def forget(self, key: StateKey) -> None:
        """The group's coordinator rewrote the state: read it again before its next use."""
        self._held.pop(key, None)

    async def reload(self, key: StateKey, topic: str) -> None:
        """Read the state the group's coordinator rewrote now, if this broker leads the
        partition: DescribeShareGroupOffsets describes the share-partitions leaders hold, and
        must show altered offsets before any member fetches again (as Kafka describes the
        stored state). A failed read leaves it to the next fetch."""
        partition = self._partitions.get(topic, key.partition)
        if partition is not None:
            await self.prepare(key, partition)

    def state(self, key: StateKey) -> SharePartition | None:
        held = self._held.get(key)
        return None if held is None else held.state

    def all_states(self) -> list[tuple[StateKey, SharePartition]]:
        """The share-partitions of data partitions this broker still leads (the others are
        forgotten: if the partition comes back, they are read again)."""
        for key, held in list(self._held.items()):
            partition = held.partition
            if self._partitions.get(partition.topic, partition.index) is not partition:
                del self._held[key]
        return [(key, held.state) for key, held in self._held.items()]

    # ------------------------------------------------------------------ writing
    def create(self, key: StateKey, start_offset: int, partition: Partition
               ) -> tuple[SharePartition, Appended]:
        state = SharePartition(start_offset)
        self._held[key] = _Held(state, partition)
        return state, self.persist(key, state, snapshot=True)

    def persist(self, key: StateKey, state: SharePartition, snapshot: bool = False) -> Appended:
        held = self._held.get(key)
        if held is None or held.state is not state:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER      # dropped meanwhile: not ours now
        changes = state.take_changes()
        if not snapshot and not changes:
            return held.last
        record = StateRecord(key, snapshot, state.start_offset,
                             list(state.runs) if snapshot else changes)
        appended = self._link.write(key, held.partition.leader_epoch, record)
        if isinstance(appended, ErrorCode):
            self._drop(key, held, appended)
        else:
            appended.add_done_callback(lambda done: self._written(key, held, done))
        held.last = appended
        return appended

    def _written(self, key: StateKey, held: _Held, done: asyncio.Future[None]) -> None:
        if done.cancelled():
            self._drop(key, held, ErrorCode.REQUEST_TIMED_OUT)
        elif isinstance(done.exception(), KafkaError):
            error = done.exception()
            assert isinstance(error, KafkaError)
            self._drop(key, held, error.code)

    def _drop(self, key: StateKey, held: _Held, error: ErrorCode) -> None:
        """A write failed: forget the share-partition (it is read again before its next use)."""
        if self._held.get(key) is held:
            del self._held[key]
            log.warning("share state of %s not written (%s): read again before its next use",
                        key.placement(), error.name)

    async def durable(self, appended: Appended) -> ErrorCode:
        return await wait_durable(appended)
