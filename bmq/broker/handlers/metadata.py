"""Metadata: brokers, topics and partition leaders; creates topics clients name if allowed."""

from __future__ import annotations

from bmq.broker.broker import Broker
from bmq.broker.handlers.base import RequestContext
from bmq.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from bmq.metadata.topics import TopicInfo, asked_name, check_topic_name
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import MetadataRequest, MetadataResponse
from bmq.protocol.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from bmq.protocol.primitives import ZERO_UUID


def topic_metadata(broker: Broker, info: TopicInfo) -> MetadataResponseTopic:
    partitions = broker.leaders_cache.partitions(
        info, broker.leaders_token(info.name), lambda: _partitions(broker, info))
    return MetadataResponseTopic(error_code=ErrorCode.NONE, name=info.name,
                                 topic_id=info.topic_id, is_internal=info.internal,
                                 partitions=partitions)


def _partitions(broker: Broker, info: TopicInfo) -> list[MetadataResponsePartition]:
    partitions = []
    for index in range(info.partitions):
        # The leader is the broker that owns the partition (in cluster mode, per ZooKeeper).
        leader = broker.partition_leader(info.name, index)
        node, epoch = leader if leader is not None else (-1, -1)
        partitions.append(MetadataResponsePartition(
            error_code=ErrorCode.NONE if leader else ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=index,
            leader_id=node,
            leader_epoch=epoch,
            replica_nodes=[node] if leader else [],
            isr_nodes=[node] if leader else [],
            offline_replicas=[],
        ))
    return partitions


async def _requested_topic(ctx: RequestContext, name: str | None, topic_id: object,
                           auto_create: bool) -> MetadataResponseTopic:
    broker = ctx.broker
    name = asked_name(name, topic_id)  # type: ignore[arg-type]
    try:
        if name is None:
            info = broker.topics.by_id(topic_id)  # type: ignore[arg-type]
            if info is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID)
            ctx.require(Operation.DESCRIBE, ResourceType.TOPIC, info.name)
            return topic_metadata(broker, info)
        # A topic created through another broker a moment ago may not have reached this
        # broker's cached view yet: ZooKeeper has it. Answered unknown, a consumer group's
        # leader assigned it no partition and never rebalanced (the fault runs' scheduled
        # group that delivered nothing).
        info = broker.topics.get(name) or await broker.lookup_topic(name) \
            or await broker.lane(name)
        if info is None:
            check_topic_name(name)
            # Creating it takes CREATE on the cluster or on the topic (Kafka's rule).
            if not auto_create or not (
                    ctx.authorize(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME,
                                  audit=False)
                    or ctx.authorize(Operation.CREATE, ResourceType.TOPIC, name)):
                ctx.require(Operation.DESCRIBE, ResourceType.TOPIC, name)
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            info = await broker.auto_create(name)
        ctx.require(Operation.DESCRIBE, ResourceType.TOPIC, name)
        return topic_metadata(broker, info)
    except KafkaError as error:
        return MetadataResponseTopic(error_code=error.code, name=name,
                                     topic_id=topic_id if name is None else ZERO_UUID)  # type: ignore[arg-type]


async def handle_metadata(ctx: RequestContext, request: MetadataRequest,
                          version: int) -> MetadataResponse:
    broker = ctx.broker
    # v0 asks for all topics with an empty list; v1+ with null.
    if request.topics is None or (version == 0 and not request.topics):
        # Internal topics (__consumer_offsets) are only described when asked for by name.
        # Kafka lists internal topics too, flagged is_internal; clients filter them.
        # Topics the principal may not describe are left out, as Kafka does.
        every = broker.topics.all()
        broker.leaders_cache.keep_only({info.name for info in every})
        topics = [topic_metadata(broker, info) for info in every
                  if ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, info.name,
                                   audit=False)]
    else:
        auto_create = broker.config.auto_create_topics_enable and (
            version < 4 or request.allow_auto_topic_creation)
        topics = [await _requested_topic(ctx, t.name, t.topic_id, auto_create)
                  for t in request.topics]
    response = MetadataResponse(
        brokers=[MetadataResponseBroker(node_id=n.node_id, host=host, port=port, rack=n.rack)
                 for n in broker.metadata_nodes for host, port in [n.address(ctx.listener)]],
        cluster_id=broker.cluster_id,
        controller_id=broker.controller_id,
        topics=topics,
    )
    ctx.fill_metadata_operations(request, response)
    return response
