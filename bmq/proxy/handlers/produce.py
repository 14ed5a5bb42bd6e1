"""Produce sent to a proxy: routed by BMQ's Kafka client layer (``bmq.client.produce``) to the
brokers that own the partitions, on the client connection's own links, with the client's
version and client id; batches whose partition moves are held there until it has a writable
owner. The proxy tells the router what its cluster view knows of topics and owners."""

from __future__ import annotations

import uuid

from bmq.client.produce import route_produce
from bmq.client.requests import Address
from bmq.metadata.views import refuse_view
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import ProduceRequest, ProduceResponse
from bmq.proxy.cluster_view import ClusterView
from bmq.proxy.handlers.base import ProxyContext


class ClusterTargets:
    """The produce targets of a proxy's cluster view (``bmq.client.produce.ProduceTargets``)."""

    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster

    def topic_name(self, topic_id: uuid.UUID) -> str:
        info = self.cluster.topics.by_id(topic_id)
        return info.name if info is not None else ""

    def check(self, topic: str, index: int) -> None:
        info = self.cluster.topics.get(topic)
        if info is None or not 0 <= index < info.partitions:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        refuse_view(self.cluster.topics, topic)

    def owner(self, topic: str, index: int) -> Address | None:
        owner = self.cluster.owner(topic, index)
        return None if owner is None else (owner.node.host, owner.node.port)

    def moved(self, topic: str, index: int) -> None:
        """Nothing to look up: ZooKeeper pushes the owners' changes to the view."""


async def handle_produce(ctx: ProxyContext, request: ProduceRequest,
                         version: int) -> ProduceResponse | None:
    return await route_produce(ctx.links, ClusterTargets(ctx.proxy.cluster), request, version,
                               client_id=ctx.header.client_id)
