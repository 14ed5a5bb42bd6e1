"""APIs the proxy does not answer itself (topic administration, producer ids, consumer-group
calls sent to it): the request frame is relayed as is to a live broker, and the broker's answer
back to the client. So one bootstrap list of proxies serves admin clients too."""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass
from typing import Any

from bmq.client.liveness import PROBE_S, Outstanding
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
    """The request frame relayed as is to a live broker, on the client connection's own link:
    the broker's response body. The lowest live broker is asked first; when it cannot be
    reached or fails, or stalls (``bmq.client.liveness``: frozen or cut off, though still
    registered), the next one is asked too, and the first answer is the client's. So a
    client's FindCoordinator, InitProducerId or admin call neither fails nor waits while
    another broker is up, and neither do the answers its connection gets after it (its
    produces' too: a connection's answers go out in order). A stalled broker is still waited
    for (under load every broker can be slow to answer at once). An answer that comes after
    another's goes nowhere: the calls relayed are ones a client may repeat (a producer id
    allocated twice, one of them unused; a topic created already)."""
    brokers = iter(await ctx.proxy.live_brokers())
    asked: list[Outstanding[memoryview | None]] = []
    failed: Exception = LinkError("no broker is live")
    more = True
    while True:
        if more and (not asked or asked[-1].stalled()):
            node = next(brokers, None)
            more = node is not None
            if node is not None:
                link = ctx.links.get(node.host, node.port)
                # A frame of its own: the link writes its correlation id into it.
                asked.append(Outstanding(link, functools.partial(
                    link.relay, ctx.header, bytearray(ctx.frame))))
        if not asked:
            raise failed
        await asyncio.wait([a.request for a in asked], timeout=PROBE_S,
                           return_when=asyncio.FIRST_COMPLETED)
        for answered in [a for a in asked if a.request.done()]:
            asked.remove(answered)
            try:
                return answered.request.result()
            except (LinkError, OSError) as error:
                failed = error


async def relay_to_broker(ctx: ProxyContext, request: Any, version: int) -> RelayedResponse:
    # No broker answers: the LinkError closes the client's connection (these APIs have no
    # error field common to all), and the client retries, as after any broker failure.
    body = await relay(ctx)
    assert body is not None
    return RelayedResponse(body)
