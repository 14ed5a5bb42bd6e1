"""The share group offsets admin APIs (KIP-932): DescribeShareGroupOffsets (start offsets, and
the lag, KIP-1226), AlterShareGroupOffsets (new start offsets) and DeleteShareGroupOffsets
(forget share-partitions), what ``kafka-share-groups.sh --describe --offsets``,
``--reset-offsets`` and ``--delete-offsets`` send. Altering and deleting need a group without
members (NON_EMPTY_GROUP otherwise), as in Kafka, and are written before they are answered."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from bmq.coordinators.share.partition import RecordState
from bmq.coordinators.share.partition_manager import SharePartitionManager
from bmq.coordinators.share.records import StateKey
from bmq.protocol.errors import ErrorCode


@dataclass(slots=True)
class PartitionOffset:
    partition: int
    start_offset: int = -1
    leader_epoch: int = -1
    lag: int = -1
    error: ErrorCode = ErrorCode.NONE


@dataclass(slots=True)
class TopicOffsets:
    name: str
    topic_id: uuid.UUID
    error: ErrorCode = ErrorCode.NONE
    partitions: list[PartitionOffset] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ShareSummary:
    """One share-partition as the leader of its partition sees it."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int
    high_watermark: int
    counts: dict[RecordState, int]
    lag: int


def summaries(share: SharePartitionManager, group_id: str) -> list[ShareSummary]:
    """The group's share-partitions of the partitions this broker leads."""
    host = share.host
    found = []
    for key, state in share.state.all_states():
        info = host.topics.by_id(key.topic_id)
        partition = None if info is None else host.partitions.get(info.name, key.partition)
        if key.group_id != group_id or info is None or partition is None:
            continue
        high_watermark = partition.log.high_watermark
        found.append(ShareSummary(info.name, key.partition, state.start_offset,
                                  state.end_offset, high_watermark, state.counts(),
                                  state.lag(high_watermark)))
    return sorted(found, key=lambda s: (s.topic, s.partition))


def describe_offsets(share: SharePartitionManager, group_id: str,
                     topics: list[tuple[str, list[int]]] | None, found: list[ShareSummary],
                     leader_epoch: Callable[[str, int], int]
                     ) -> tuple[ErrorCode, list[TopicOffsets]]:
    """The start offset and lag of each asked partition (``topics`` None: every partition
    the group has a share-partition of), from the share-partitions ``found`` at their leaders;
    -1 where the group has not fetched it yet."""
    states = {(s.topic, s.partition): s for s in found}
    if not states and group_id not in share.groups.groups:
        return ErrorCode.GROUP_ID_NOT_FOUND, []
    host = share.host
    if topics is None:
        by_name: dict[str, list[int]] = {}
        for name, index in sorted(states):
            by_name.setdefault(name, []).append(index)
        topics = list(by_name.items())
    described = []
    for name, indexes in topics:
        info = host.topics.get(name)
        if info is None:
            described.append(TopicOffsets(name, uuid.UUID(int=0), partitions=[
                PartitionOffset(i, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                for i in indexes]))
            continue
        topic = TopicOffsets(name, info.topic_id)
        described.append(topic)
        for index in indexes:
            state = states.get((name, index))
            if not 0 <= index < info.partitions:
                topic.partitions.append(PartitionOffset(
                    index, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            elif state is None:
                topic.partitions.append(PartitionOffset(index))
            else:
                topic.partitions.append(PartitionOffset(
                    index, state.start_offset, leader_epoch(name, index), state.lag))
    return ErrorCode.NONE, described


class StateAdmin(Protocol):
    """How the group's coordinator finds and rewrites a group's share-partitions: on `bmq
    serve` in its own state log (``LocalStateAdmin``); in a cluster at the partitions' leaders
    and through their share coordinators (bmq.broker.share_peers)."""

    async def keys(self, group_id: str) -> list[StateKey]:
        """The group's share-partitions."""

    async def write(self, key: StateKey, start_offset: int | None) -> ErrorCode:
        """Start the share-partition afresh at ``start_offset``, or forget it (None)."""


class LocalStateAdmin:
    """`bmq serve`'s: its state log holds every share-partition."""

    def __init__(self, share: SharePartitionManager) -> None:
        self._share = share

    async def keys(self, group_id: str) -> list[StateKey]:
        return [key for key, _ in self._share.state_log.all_states()
                if key.group_id == group_id]

    async def write(self, key: StateKey, start_offset: int | None) -> ErrorCode:
        state = self._share.state_log
        error = state.key_error(key)
        if error != ErrorCode.NONE:
            return error
        return await state.durable(state.replace(key, start_offset))


async def alter_offsets(share: SharePartitionManager, admin: StateAdmin, group_id: str,
                        topics: list[tuple[str, list[tuple[int, int]]]]
                        ) -> tuple[ErrorCode, list[TopicOffsets]]:
    """Start each named share-partition afresh at its new start offset."""
    if share.groups.has_members(group_id):
        return ErrorCode.NON_EMPTY_GROUP, []
    if not await share.state.ensure_started():
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
    share.groups.get_or_create(group_id)
    altered = []
    for name, partitions in topics:
        info = share.host.topics.get(name)
        topic = TopicOffsets(name, info.topic_id if info else uuid.UUID(int=0))
        altered.append(topic)
        for index, start in partitions:
            result = PartitionOffset(index, start)
            topic.partitions.append(result)
            if info is None or not 0 <= index < info.partitions:
                result.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif start < 0:
                result.error = ErrorCode.INVALID_REQUEST
            else:
                result.error = await admin.write(StateKey(group_id, info.topic_id, index),
                                                 start)
    return ErrorCode.NONE, altered


async def delete_offsets(share: SharePartitionManager, admin: StateAdmin, group_id: str,
                         names: list[str]) -> tuple[ErrorCode, list[TopicOffsets]]:
    """Forget the group's share-partitions of ``names`` (its next fetch of them starts by
    share.auto.offset.reset)."""
    if share.groups.has_members(group_id):
        return ErrorCode.NON_EMPTY_GROUP, []
    keys = await admin.keys(group_id)
    if not keys and group_id not in share.groups.groups:
        return ErrorCode.GROUP_ID_NOT_FOUND, []
    deleted = []
    for name in names:
        info = share.host.topics.get(name)
        if info is None:
            deleted.append(TopicOffsets(name, uuid.UUID(int=0),
                                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        topic = TopicOffsets(name, info.topic_id)
        deleted.append(topic)
        for key in keys:
            if key.topic_id == info.topic_id:
                code = await admin.write(key, None)
                if code != ErrorCode.NONE:
                    topic.error = code
    return ErrorCode.NONE, deleted


async def delete_group(share: SharePartitionManager, admin: StateAdmin,
                       group_id: str) -> ErrorCode | None:
    """DeleteGroups of a share group: without members, its share-partitions are forgotten
    (tombstones in the state log) and the group is gone; None if ``group_id`` is no share
    group here."""
    keys = await admin.keys(group_id)
    if not keys and group_id not in share.groups.groups:
        return None
    if share.groups.has_members(group_id):
        return ErrorCode.NON_EMPTY_GROUP
    for key in keys:
        code = await admin.write(key, None)
        if code != ErrorCode.NONE:
            return code
    share.groups.groups.pop(group_id, None)
    return ErrorCode.NONE
