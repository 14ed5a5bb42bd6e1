"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, and their expiry.

Offset commits are appended to the group's ``__consumer_offsets`` partition; OffsetCommit is
answered once its batch is flushed, and commits become visible to OffsetFetch at that moment
too, in log order.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from bmq.coordinators.groups.core import COMPLETING, DEAD, EMPTY, GroupCoordinatorCore
from bmq.coordinators.groups.group import CONSUMER_PROTOCOL_TYPE, Group
from bmq.coordinators.groups.records import OffsetValue
from bmq.coordinators.groups.shard import Entry, offset_entries, tombstones
from bmq.coordinators.sharded import Appended
from bmq.metadata.topics import OFFSETS_TOPIC, TopicPartition
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.writepath.partitions import now_ms

log = logging.getLogger(__name__)


@dataclass(slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str | None = ""
    error: ErrorCode = ErrorCode.NONE



class OffsetStore(GroupCoordinatorCore):
    def _started(self) -> None:
        interval = self.config.offsets_retention_check_interval_ms
        if interval > 0:
            self.tasks.every(interval / 1000, self.expire_offsets)

    def _validate_commit(self, group: Group, generation_id: int, member_id: str,
                         group_instance_id: str | None, api_version: int = 8,
                         transactional: bool = False) -> ErrorCode:
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.consumer is not None:
            return self._validate_consumer_commit(group, generation_id, member_id,
                                                  api_version, transactional)
        if generation_id >= 0 or member_id != "" or group_instance_id is not None:
            if group.is_static_member_fenced(group_instance_id, member_id):
                return ErrorCode.FENCED_INSTANCE_ID
            if member_id not in group.members:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if generation_id != group.generation:
                return ErrorCode.ILLEGAL_GENERATION
        elif not group.is_(EMPTY):
            # Only members may commit for a group that has members.
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(COMPLETING):
            # Its generation is current, so it got the JoinGroup response: sync, then commit.
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    @staticmethod
    def _validate_consumer_commit(group: Group, member_epoch: int, member_id: str,
                                  api_version: int, transactional: bool) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetCommit: a KIP-848 member commits with its
        current member epoch (OffsetCommit v9+)."""
        consumer = group.consumer
        assert consumer is not None
        if member_epoch < 0 and not consumer.members:
            return ErrorCode.NONE      # admin tools, or a consumer outside the group
        member = consumer.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    async def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                             group_instance_id: str | None,
                             offsets: dict[TopicPartition, OffsetValue],
                             api_version: int = 8) -> dict[TopicPartition, ErrorCode]:
        """Store committed offsets once durable; an error code per partition."""
        error = self.coordinator_error(group_id, allow_empty=True)
        group: Group | None = None
        if error == ErrorCode.NONE:
            group = self.group(group_id)
            if group is None:
                if generation_id < 0:
                    # A consumer or tool that uses Kafka only to store offsets.
                    group = self._get_or_create(group_id)
                else:
                    error = (ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 9
                             else ErrorCode.ILLEGAL_GENERATION)
            if group is not None and api_version > 0:
                # OffsetCommit v0 carries no member: Kafka 2.x stored its offsets (in
                # ZooKeeper) whatever the group's members, and so does BMQ (in the group).
                error = self._validate_commit(group, generation_id, member_id,
                                              group_instance_id, api_version)
        if error != ErrorCode.NONE or group is None:
            return dict.fromkeys(offsets, error)
        member = group.members.get(member_id)
        if member is not None:
            self._schedule_expiry(group, member, member.session_timeout_ms)
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetValue] = {}
        limit = self.config.offset_metadata_max_bytes
        for tp, value in offsets.items():
            if len(value.metadata.encode()) > limit:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[tp] = value
        if not accepted:
            return results
        durable = self._append(group_id, offset_entries(group_id, accepted))
        if isinstance(durable, ErrorCode):
            results.update(dict.fromkeys(accepted, durable))
            return results
        tokens = {tp: group.offset_token(tp) for tp in accepted}
        for tp in accepted:
            group.pending_commits[tp] += 1
        durable.add_done_callback(
            lambda future: self._commit_done(group, accepted, tokens, future))
        results.update(dict.fromkeys(accepted, await self.durable(durable)))
        return results

    @staticmethod
    def _commit_done(group: Group, accepted: dict[TopicPartition, OffsetValue],
                     tokens: dict[TopicPartition, int], future: asyncio.Future[None]) -> None:
        ok = not future.cancelled() and future.exception() is None
        for tp, value in accepted.items():
            group.pending_commits[tp] -= 1
            if group.pending_commits[tp] <= 0:
                del group.pending_commits[tp]
            # Skip offsets deleted (OffsetDelete, DeleteGroups, expiry) after this commit.
            if ok and group.offset_token(tp) == tokens[tp]:
                group.offsets[tp] = value

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                      require_stable: bool = False
                      ) -> tuple[ErrorCode, list[FetchedOffset]]:
        """Committed offsets of these partitions (None: every partition the group has)."""
        error = self.coordinator_error(group_id, allow_empty=True)
        if error != ErrorCode.NONE:
            return error, []
        group = self.group(group_id)
        if group is None or group.is_(DEAD):
            return ErrorCode.NONE, [FetchedOffset(t, p) for t, p in partitions or []]
        if partitions is None:
            partitions = sorted(group.offsets)
        results = []
        for topic, partition in partitions:
            if require_stable and group.pending_commits[(topic, partition)] > 0:
                results.append(FetchedOffset(topic, partition,
                                             error=ErrorCode.UNSTABLE_OFFSET_COMMIT))
                continue
            value = group.offsets.get((topic, partition))
            if value is None:
                results.append(FetchedOffset(topic, partition))
            else:
                results.append(FetchedOffset(topic, partition, value.offset, value.leader_epoch,
                                             value.metadata))
        return ErrorCode.NONE, results

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                             ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: drop committed offsets of topics the group no longer consumes."""
        error = self.coordinator_error(group_id)
        if error != ErrorCode.NONE:
            return error, {}
        group = self.group(group_id)
        if group is None or group.is_(DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        results: dict[TopicPartition, ErrorCode] = {}
        if group.is_empty():
            eligible = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE or group.consumer is not None:
            eligible = []
            for tp in partitions:
                if group.is_subscribed_to(tp[0]):
                    results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        if eligible:
            code = await self._remove_offsets(group, eligible)
            results.update(dict.fromkeys(eligible, code))
        return ErrorCode.NONE, results

    async def _remove_offsets(self, group: Group, partitions: list[TopicPartition]) -> ErrorCode:
        removed = group.remove_offsets(partitions)
        dead = self._maybe_retire(group)
        if not removed and not dead:
            return ErrorCode.NONE
        return await self.durable(
            self._append(group.group_id, tombstones(group.group_id, removed, dead)))

    def _maybe_retire(self, group: Group) -> bool:
        """An empty group without offsets is gone (Kafka: Empty -> Dead, tombstone)."""
        if not group.is_empty() or group.has_offsets():
            return False
        group.transition_to(DEAD, now_ms())
        self._cancel_timers(group)
        shard = self.shards.get(self.partition_for(group.group_id))
        if shard is not None and shard.groups.get(group.group_id) is group:
            del shard.groups[group.group_id]
        return True

    async def expire_offsets(self, now: int | None = None) -> int:
        """Delete expired offsets and groups left empty without offsets; returns how many."""
        now = now_ms() if now is None else now
        retention_ms = self.config.offsets_retention_minutes * 60_000
        removed_total = 0
        writes: list[Appended] = []
        for shard in list(self.shards.values()):
            entries: list[Entry] = []
            for group in list(shard.groups.values()):
                expired = group.expired_offsets(now, retention_ms)
                removed = group.remove_offsets(expired)
                dead = self._maybe_retire(group)
                if removed or dead:
                    entries.extend(tombstones(group.group_id, removed, dead))
                    removed_total += len(removed)
                    log.info("group %s: %d offsets expired%s", group.group_id, len(removed),
                             "; group removed" if dead else "")
            if entries:
                try:
                    writes.append(shard.write(entries))
                except KafkaError as failure:
                    log.warning("could not write %d tombstones to %s-%d: %s", len(entries),
                                OFFSETS_TOPIC, shard.index, failure)
        for appended in writes:
            code = await self.durable(appended)
            if code != ErrorCode.NONE:
                log.warning("tombstones not durable: %s", code.name)
        return removed_total
