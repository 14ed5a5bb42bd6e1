"""OffsetCommit: store a group's consumed positions; answered once they are durable."""

from __future__ import annotations

from bmq.broker.broker import Broker
from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.groups.records import OffsetValue
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import OffsetCommitRequest, OffsetCommitResponse
from bmq.protocol.messages.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from bmq.protocol.messages.offset_commit_response import (
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from bmq.writepath.partitions import now_ms

TOPIC_IDS_VERSION = 10


def _topic(broker: Broker, topic: OffsetCommitRequestTopic,
           version: int) -> tuple[str, int, ErrorCode]:
    """The topic's name and partition count, or the error for all its partitions."""
    if version >= TOPIC_IDS_VERSION:
        info = broker.topics.by_id(topic.topic_id)
        if info is None:
            return "", 0, ErrorCode.UNKNOWN_TOPIC_ID
    else:
        info = broker.topics.get(topic.name)
        if info is None:
            return topic.name, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return info.name, info.partitions, ErrorCode.NONE


def _commit_timestamp(partition: OffsetCommitRequestPartition, version: int, now: int) -> int:
    """The offset's commit time, which its retention counts from: v1 lets the client set it
    per partition (-1: the broker's time). Kafka 2.8 keeps it as the commit timestamp
    (KafkaApis.handleOffsetCommitRequest: "case customTimestamp => customTimestamp"), so a
    standalone consumer's offset expires offsets.retention.minutes after the client's time
    (GroupMetadata.removeExpiredOffsets); Kafka 2.0 had the same effect through an expire
    timestamp of that time plus the retention."""
    if version == 1 and partition.commit_timestamp != -1:
        return partition.commit_timestamp
    return now


async def handle_offset_commit(ctx: RequestContext, request: OffsetCommitRequest,
                               version: int) -> OffsetCommitResponse:
    broker = ctx.broker
    now = now_ms()
    group_allowed = ctx.authorize(Operation.READ, ResourceType.GROUP, request.group_id)
    # Retention per request existed in v2-4 only; -1 means the broker's rules.
    retention = request.retention_time_ms if 2 <= version <= 4 else -1
    expire = now + retention if retention >= 0 else -1
    offsets: dict[tuple[str, int], OffsetValue] = {}
    answers: list[tuple[OffsetCommitResponsePartition, tuple[str, int]]] = []
    topics = []
    for topic in request.topics:
        name, count, topic_error = _topic(broker, topic, version)
        if not group_allowed:
            topic_error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif topic_error == ErrorCode.NONE and not ctx.authorize(Operation.READ,
                                                                 ResourceType.TOPIC, name):
            topic_error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        partitions = []
        for p in topic.partitions:
            result = OffsetCommitResponsePartition(partition_index=p.partition_index)
            partitions.append(result)
            if topic_error != ErrorCode.NONE:
                result.error_code = topic_error
            elif not 0 <= p.partition_index < count:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                tp = (name, p.partition_index)
                offsets[tp] = OffsetValue(
                    offset=p.committed_offset,
                    leader_epoch=p.committed_leader_epoch if version >= 6 else -1,
                    metadata=p.committed_metadata or "",
                    commit_timestamp=_commit_timestamp(p, version, now),
                    expire_timestamp=expire)
                answers.append((result, tp))
        topics.append(OffsetCommitResponseTopic(name=topic.name, topic_id=topic.topic_id,
                                                partitions=partitions))
    if offsets:
        errors = await broker.groups.commit_offsets(
            request.group_id, request.generation_id_or_member_epoch, request.member_id,
            request.group_instance_id if version >= 7 else None, offsets, version)
        for result, tp in answers:
            result.error_code = errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
    return OffsetCommitResponse(topics=topics)
