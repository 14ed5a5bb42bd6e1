"""DescribeTopicPartitions (KIP-966): topics and their partitions a page at a time, which the
Java admin client (3.7+) and kafka-python's describe_topic_partitions use instead of Metadata.

Pages follow Kafka: topics in name order from the cursor's topic (its partitions from the
cursor's index), at most ``response_partition_limit`` partitions (capped at 2000, Kafka's
``max.request.partition.size.limit``), and a next cursor where the page stopped. Unknown
topics named by the client are answered UNKNOWN_TOPIC_OR_PARTITION; an empty topic list means
every topic. Authorized operations are always reported (no authorizer: all of them).
"""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.broker.handlers.metadata import topic_metadata
from bmq.metadata.acls import Operation, ResourceType
from bmq.metadata.topics import TopicInfo
from bmq.protocol.acl_operations import NOT_REQUESTED, TOPIC_OPERATIONS
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse
from bmq.protocol.messages.describe_topic_partitions_response import (
    Cursor,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from bmq.protocol.primitives import ZERO_UUID

MAX_PARTITIONS = 2000


def _described(info: TopicInfo, ctx: RequestContext, first: int,
               limit: int) -> DescribeTopicPartitionsResponseTopic:
    # The partitions as Metadata describes them (leaders, epochs, replicas), from `first` on.
    described = topic_metadata(ctx.broker, info)
    partitions = [
        DescribeTopicPartitionsResponsePartition(
            error_code=p.error_code, partition_index=p.partition_index, leader_id=p.leader_id,
            leader_epoch=p.leader_epoch, replica_nodes=p.replica_nodes, isr_nodes=p.isr_nodes,
            eligible_leader_replicas=[], last_known_elr=[], offline_replicas=p.offline_replicas)
        for p in described.partitions[first:first + limit]]
    return DescribeTopicPartitionsResponseTopic(
        error_code=ErrorCode.NONE, name=info.name, topic_id=info.topic_id,
        is_internal=info.internal, partitions=partitions,
        topic_authorized_operations=ctx.operations(TOPIC_OPERATIONS, ResourceType.TOPIC,
                                                   info.name))


def _unknown(name: str, error: ErrorCode) -> DescribeTopicPartitionsResponseTopic:
    return DescribeTopicPartitionsResponseTopic(
        error_code=error, name=name, topic_id=ZERO_UUID, partitions=[],
        topic_authorized_operations=NOT_REQUESTED)   # Kafka's default: no operations to tell


async def handle_describe_topic_partitions(ctx: RequestContext,
                                           request: DescribeTopicPartitionsRequest,
                                           version: int) -> DescribeTopicPartitionsResponse:
    registry = ctx.broker.topics
    every_topic = not request.topics
    names = sorted({info.name for info in registry.all()
                    if ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, info.name,
                                     audit=False)} if every_topic
                   else {t.name for t in request.topics})
    cursor = request.cursor
    if cursor is not None and (cursor.partition_index < 0
                               or (not every_topic and cursor.topic_name not in names)):
        # Kafka refuses the whole request: each topic asked for gets INVALID_REQUEST.
        return DescribeTopicPartitionsResponse(
            topics=[_unknown(t.name, ErrorCode.INVALID_REQUEST) for t in request.topics])
    if cursor is not None:
        names = [name for name in names if name >= cursor.topic_name]

    remaining = max(min(MAX_PARTITIONS, request.response_partition_limit), 1)
    topics: list[DescribeTopicPartitionsResponseTopic] = []
    next_cursor: Cursor | None = None
    for name in names:
        if remaining == 0:
            next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        # A topic the client names is read from the source of truth (ZooKeeper in a cluster):
        # this broker's view may not have caught up with a change made through another broker
        # a moment ago (a topic created, grown or deleted), which an admin describing it next
        # must see.
        info = registry.get(name) if every_topic else await ctx.broker.lookup_topic(name)
        if not every_topic and not ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, name):
            topics.append(_unknown(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        if info is None:
            if not every_topic:
                topics.append(_unknown(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        topic = _described(info, ctx, first, remaining)
        topics.append(topic)
        remaining -= len(topic.partitions)
        if first + len(topic.partitions) < info.partitions:
            next_cursor = Cursor(topic_name=name,
                                 partition_index=first + len(topic.partitions))
            break
    return DescribeTopicPartitionsResponse(topics=topics, next_cursor=next_cursor)
