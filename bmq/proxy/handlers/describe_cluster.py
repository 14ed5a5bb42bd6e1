"""DescribeCluster through a proxy: relayed to a broker, with the brokers' addresses given for the
listener the client connected on (the broker names them for the proxy's inter-broker listener)."""

from __future__ import annotations

from bmq.protocol.messages import DescribeClusterRequest, DescribeClusterResponse
from bmq.protocol.primitives import Reader
from bmq.proxy.handlers.base import ProxyContext
from bmq.proxy.handlers.forward import relay


async def handle_describe_cluster(ctx: ProxyContext, request: DescribeClusterRequest,
                                  version: int) -> DescribeClusterResponse:
    body = await relay(ctx)
    assert body is not None
    response = DescribeClusterResponse.read(Reader(body), version)
    for broker in response.brokers:
        broker.host, broker.port = ctx.address_of(broker.broker_id, broker.host, broker.port)
    return response
