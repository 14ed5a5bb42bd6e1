"""APIs the proxy does not answer itself (topic administration, producer ids, consumer-group
calls sent to it): the request frame is relayed as is to a live broker, and the broker's answer
back to the client. So one bootstrap list of proxies serves admin clients too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bmq.net.client import LinkError
from bmq.protocol.primitives import Writer
from bmq.proxy.handlers.base import ProxyContext


@dataclass(frozen=True, slots=True)
class RelayedResponse:
    """A broker's response body, written back unchanged (same API, same version)."""

    body: memoryview

    def write(self, w: Writer, version: int) -> None:
        w.write_raw(self.body)


async def relay(ctx: ProxyContext) -> memoryview | None:
    """The request frame relayed as is to the lowest live broker that takes the connection, on
    the client connection's own link: the broker's response body. A broker still registered
    but gone (killed, its session not yet expired) refuses the connection: the next is asked,
    so a client's FindCoordinator or admin call does not fail while another broker is up."""
    failed: LinkError | None = None
    for node in await ctx.proxy.live_brokers():
        link = ctx.links.get(node.host, node.port)
        try:
            await link.connect()
        except LinkError as error:
            failed = error
            continue
        return await link.relay(ctx.header, ctx.frame)
    assert failed is not None
    raise failed


async def relay_to_broker(ctx: ProxyContext, request: Any, version: int) -> RelayedResponse:
    # No broker reachable: the LinkError closes the client's connection (these APIs have no
    # error field common to all), and the client retries, as after any broker failure.
    body = await relay(ctx)
    assert body is not None
    return RelayedResponse(body)
