"""FindCoordinator through a proxy: relayed to a broker, which knows the coordinators, and the
coordinators' addresses given for the listener the client connected on (the broker names them
for the proxy's own, inter-broker, listener)."""

from __future__ import annotations

from bmq.protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse
from bmq.protocol.primitives import Reader
from bmq.proxy.handlers.base import ProxyContext
from bmq.proxy.handlers.forward import relay


async def handle_find_coordinator(ctx: ProxyContext, request: FindCoordinatorRequest,
                                  version: int) -> FindCoordinatorResponse:
    body = await relay(ctx)
    assert body is not None
    response = FindCoordinatorResponse.read(Reader(body), version)
    if version >= 4:
        for coordinator in response.coordinators:
            if coordinator.node_id >= 0:
                coordinator.host, coordinator.port = ctx.address_of(
                    coordinator.node_id, coordinator.host, coordinator.port)
    elif response.node_id >= 0:
        response.host, response.port = ctx.address_of(response.node_id, response.host,
                                                       response.port)
    return response
