"""OffsetFetch: a group's committed offsets (v8+ for many groups at once, KIP-709).

``require_stable`` (v7+) answers UNSTABLE_OFFSET_COMMIT for a partition whose commit is still
being written, so a consumer never starts from an offset that is about to change.
"""

from __future__ import annotations

from collections.abc import Iterable

from bmq.broker.broker import Broker
from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.groups.offsets import FetchedOffset
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import OffsetFetchRequest, OffsetFetchResponse
from bmq.protocol.messages.offset_fetch_request import OffsetFetchRequestGroup
from bmq.protocol.messages.offset_fetch_response import (
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from bmq.protocol.primitives import ZERO_UUID

MULTI_GROUP_VERSION = 8
TOPIC_IDS_VERSION = 10


def _by_topic(fetched: Iterable[FetchedOffset]) -> dict[str, list[FetchedOffset]]:
    topics: dict[str, list[FetchedOffset]] = {}
    for f in fetched:
        topics.setdefault(f.topic, []).append(f)
    return topics


def _single_group(broker: Broker, request: OffsetFetchRequest,
                  version: int) -> OffsetFetchResponse:
    partitions = None if request.topics is None else [
        (t.name, p) for t in request.topics for p in t.partition_indexes]
    error, fetched = broker.groups.fetch_offsets(
        request.group_id, partitions, version >= 7 and request.require_stable)
    if error != ErrorCode.NONE:
        if version >= 2:
            return OffsetFetchResponse(error_code=error)
        # v1 has no group-level error: every asked partition carries it.
        fetched = [FetchedOffset(t, p, error=error) for t, p in partitions or []]
    return OffsetFetchResponse(error_code=ErrorCode.NONE, topics=[
        OffsetFetchResponseTopic(name=topic, partitions=[
            OffsetFetchResponsePartition(
                partition_index=f.partition, committed_offset=f.offset,
                committed_leader_epoch=f.leader_epoch, metadata=f.metadata, error_code=f.error)
            for f in offsets])
        for topic, offsets in _by_topic(fetched).items()])


def _group(broker: Broker, group: OffsetFetchRequestGroup, require_stable: bool,
           version: int) -> OffsetFetchResponseGroup:
    by_ids = version >= TOPIC_IDS_VERSION
    partitions: list[tuple[str, int]] | None = None
    unknown: list[OffsetFetchResponseTopics] = []
    if group.topics is not None:
        partitions = []
        for topic in group.topics:
            name = topic.name
            if by_ids:
                info = broker.topics.by_id(topic.topic_id)
                if info is None:
                    unknown.append(OffsetFetchResponseTopics(
                        topic_id=topic.topic_id, partitions=[
                            OffsetFetchResponsePartitions(
                                partition_index=p, committed_offset=-1, metadata="",
                                error_code=ErrorCode.UNKNOWN_TOPIC_ID)
                            for p in topic.partition_indexes]))
                    continue
                name = info.name
            partitions.extend((name, p) for p in topic.partition_indexes)
    error, fetched = broker.groups.fetch_offsets(group.group_id, partitions, require_stable)
    if error != ErrorCode.NONE:
        return OffsetFetchResponseGroup(group_id=group.group_id, error_code=error)
    topics = []
    for name, offsets in _by_topic(fetched).items():
        topic_id = ZERO_UUID
        if by_ids:
            info = broker.topics.get(name)
            if info is None:
                continue  # deleted since the commit: it has no id to name it by
            topic_id = info.topic_id
        topics.append(OffsetFetchResponseTopics(name=name, topic_id=topic_id, partitions=[
            OffsetFetchResponsePartitions(
                partition_index=f.partition, committed_offset=f.offset,
                committed_leader_epoch=f.leader_epoch, metadata=f.metadata, error_code=f.error)
            for f in offsets]))
    return OffsetFetchResponseGroup(group_id=group.group_id, topics=topics + unknown,
                                    error_code=ErrorCode.NONE)


async def handle_offset_fetch(ctx: RequestContext, request: OffsetFetchRequest,
                              version: int) -> OffsetFetchResponse:
    if version < MULTI_GROUP_VERSION:
        if not ctx.authorize(Operation.DESCRIBE, ResourceType.GROUP, request.group_id):
            return OffsetFetchResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        return _single_group(ctx.broker, request, version)
    return OffsetFetchResponse(groups=[
        _group(ctx.broker, group, request.require_stable, version)
        if ctx.authorize(Operation.DESCRIBE, ResourceType.GROUP, group.group_id)
        else OffsetFetchResponseGroup(group_id=group.group_id,
                                      error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        for group in request.groups])

