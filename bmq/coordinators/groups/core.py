"""The part of the group coordinator every group request uses: the shards of
``__consumer_offsets`` (``sharded``), looking groups up, and members' session timers.

Everything runs on the broker's event loop, so group state needs no locks. Timers
(``loop.call_later``) drive session expiry, the rebalance timeout, the initial rebalance delay
and the pending-sync timeout. Nothing polls.
"""

from __future__ import annotations

import asyncio
import logging
from abc import abstractmethod
from concurrent.futures import Executor

from bmq.coordinators.base import CoordinatorHost
from bmq.coordinators.groups.group import (
    Group,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
    answer_join,
    answer_sync,
)
from bmq.coordinators.groups.records import ConsumerGroupKey
from bmq.coordinators.groups.shard import Entry, OffsetsShard, coordinator_error
from bmq.coordinators.sharded import ShardedCoordinator
from bmq.metadata.topics import OFFSETS_TOPIC
from bmq.protocol.errors import ErrorCode
from bmq.writepath.partitions import Partition, now_ms

log = logging.getLogger(__name__)

PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
EMPTY = GroupState.EMPTY
DEAD = GroupState.DEAD


class GroupCoordinatorCore(ShardedCoordinator[OffsetsShard, Entry]):
    """The consumer groups of the ``__consumer_offsets`` partitions this broker owns."""

    topic = OFFSETS_TOPIC

    def __init__(self, host: CoordinatorHost, executor: Executor) -> None:
        super().__init__(host, executor, host.config.offsets_topic_num_partitions)

    def _segment_bytes(self) -> int:
        return self.config.offsets_topic_segment_bytes

    def _open_shard(self, index: int, partition: Partition) -> OffsetsShard:
        return OffsetsShard(index, partition, self._executor)

    def _write_error(self, code: ErrorCode) -> ErrorCode:
        return coordinator_error(code)

    def _shard_loaded(self, shard: OffsetsShard) -> None:
        for group in shard.groups.values():
            for member in group.members.values():
                self._schedule_expiry(group, member, member.session_timeout_ms)
        self._consumer_shard_loaded(shard)

    def _shard_unloaded(self, shard: OffsetsShard) -> None:
        """Waiting members must move to the new coordinator."""
        for group in shard.groups.values():
            self._cancel_timers(group)
            for member in group.members.values():
                member.cancel_expiry()
                answer_join(member, JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
                answer_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))
            for handle in group.pending_members.values():
                if handle is not None:
                    handle.cancel()
            if group.consumer is not None:
                for consumer_member in group.consumer.members.values():
                    consumer_member.cancel_timers()
        shard.groups.clear()

    @abstractmethod
    def _on_member_expired(self, group: Group, member: Member) -> None:
        """A member's session (or its join) timed out."""

    @abstractmethod
    def _consumer_shard_loaded(self, shard: OffsetsShard) -> None:
        """Start the timers of the shard's KIP-848 members."""

    def _forget_consumer_group(self, group: Group) -> None:
        """An empty KIP-848 group becomes a classic one (its offsets stay)."""
        if group.consumer is not None:
            group.consumer = None
            log.info("group %s now uses the classic protocol", group.group_id)
            self._append(group.group_id, [(ConsumerGroupKey(group.group_id), None)])

    def coordinator_error(self, group_id: str | None, allow_empty: bool = False) -> ErrorCode:
        """Kafka's validateGroupStatus: NONE if this broker can serve the group now."""
        if group_id is None or (not allow_empty and group_id == ""):
            return ErrorCode.INVALID_GROUP_ID
        return self.shard_error(group_id)

    def _shard(self, group_id: str) -> OffsetsShard:
        return self.shards[self.partition_for(group_id)]

    def group(self, group_id: str) -> Group | None:
        shard = self.shards.get(self.partition_for(group_id))
        return None if shard is None else shard.groups.get(group_id)

    def _get_or_create(self, group_id: str) -> Group:
        shard = self._shard(group_id)
        group = shard.groups.get(group_id)
        if group is None:
            group = shard.groups[group_id] = Group(group_id, now_ms())
        return group

    def _schedule_expiry(self, group: Group, member: Member, timeout_ms: int) -> None:
        member.cancel_expiry()
        member.expiry = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, self._on_member_expired, group, member)

    def _cancel_timers(self, group: Group) -> None:
        for handle in (group.join_timer, group.sync_timer):
            if handle is not None:
                handle.cancel()
        group.join_timer = group.sync_timer = None
        group.initial_delay = False
