"""Metadata from a proxy: each partition is led by the proxy rendezvous hashing picks
(bmq.metadata.routing), with the owner's leader epoch, so clients fetch and produce through
proxies. Topics a client names that do not exist are created through a broker when
auto-creation is allowed."""

from __future__ import annotations

import asyncio

from bmq.metadata.acls import Operation, ResourceType
from bmq.metadata.topics import TopicInfo, asked_name, check_topic_name
from bmq.metadata.views import lane_view
from bmq.net.client import LinkError
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import MetadataRequest, MetadataResponse
from bmq.protocol.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from bmq.protocol.primitives import ZERO_UUID
from bmq.proxy.handlers.base import ProxyContext
from bmq.proxy.handlers.forward import relay
from bmq.proxy.proxy import Proxy


def _topic(proxy: Proxy, info: TopicInfo) -> MetadataResponseTopic:
    partitions = []
    for index in range(info.partitions):
        leader = proxy.leader(info.name, index)
        partitions.append(MetadataResponsePartition(
            error_code=ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=index, leader_id=leader,
            leader_epoch=proxy.epoch(info.name, index),
            replica_nodes=[leader], isr_nodes=[leader], offline_replicas=[]))
    return MetadataResponseTopic(error_code=ErrorCode.NONE, name=info.name,
                                 topic_id=info.topic_id, is_internal=info.internal,
                                 partitions=partitions)


async def _lookup(proxy: Proxy, name: str) -> TopicInfo | None:
    """The topic as ZooKeeper has it (the cached view may not have caught up yet)."""
    return await asyncio.get_running_loop().run_in_executor(
        None, proxy.cluster.topics.lookup, name)


async def _create_through_broker(ctx: ProxyContext, proxy: Proxy, name: str) -> TopicInfo | None:
    """Let a broker auto-create the topic (it answers Metadata so), then read it from ZooKeeper."""
    try:
        await relay(ctx)
    except (LinkError, OSError):
        return None
    return await _lookup(proxy, name)


async def handle_metadata(ctx: ProxyContext, request: MetadataRequest,
                          version: int) -> MetadataResponse:
    proxy = ctx.proxy
    topics = []
    if request.topics is None or (version == 0 and not request.topics):
        # Topics the principal may not describe are left out, as brokers (and Kafka) do.
        topics = [_topic(proxy, info) for info in proxy.cluster.topics.all()
                  if ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, info.name,
                                   audit=False)]
    else:
        auto_create = proxy.config.auto_create_topics_enable and (
            version < 4 or request.allow_auto_topic_creation)
        for asked in request.topics:
            name = asked_name(asked.name, asked.topic_id)
            try:
                if name is None:
                    info = proxy.cluster.topics.by_id(asked.topic_id)
                    if info is None:
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID)
                else:
                    # Created a moment ago, it may be in ZooKeeper and not yet in the cached
                    # view (see the broker's Metadata).
                    info = proxy.cluster.topics.get(name) or await _lookup(
                        proxy, name)
                    if info is None:
                        check_topic_name(name)
                        # A lane's view is made on first use, by a broker, like a topic.
                        lane = lane_view(proxy.cluster.topics, name) is not None
                        if auto_create or lane:   # the broker decides who may CREATE
                            info = await _create_through_broker(ctx, proxy, name)
                        if info is None:
                            ctx.require(Operation.DESCRIBE, ResourceType.TOPIC, name)
                            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                ctx.require(Operation.DESCRIBE, ResourceType.TOPIC, info.name)
                topics.append(_topic(proxy, info))
            except KafkaError as error:
                topics.append(MetadataResponseTopic(
                    error_code=error.code, name=name,
                    topic_id=asked.topic_id if name is None else ZERO_UUID))
    # The brokers are listed too: clients reach group coordinators (named by FindCoordinator)
    # there, and librdkafka drops connections to nodes a Metadata response does not list.
    nodes = {**proxy.cluster.brokers, **proxy.cluster.proxies, proxy.node.node_id: proxy.node}
    response = MetadataResponse(
        brokers=[MetadataResponseBroker(node_id=n.node_id, host=host, port=port, rack=None)
                 for _, n in sorted(nodes.items()) for host, port in [n.address(ctx.listener)]],
        cluster_id=proxy.cluster.cluster_id,
        # As brokers answer (every node must agree): admin clients go to that broker; admin
        # requests sent to a proxy anyway are relayed.
        controller_id=min(proxy.cluster.brokers, default=proxy.node.node_id),
        topics=topics)
    ctx.fill_metadata_operations(request, response)
    return response
