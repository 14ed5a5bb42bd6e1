"""APIs the proxy does not answer itself (topic administration, producer ids, consumer-group
calls sent to it): the request frame is relayed as is to a live broker, and the broker's answer
back to the client. So one bootstrap list of proxies serves admin clients too."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from bmq.client.liveness import Stalled, ask_while_alive
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
    the broker's response body. The lowest live broker is asked first; one that cannot be
    reached, fails while it has the request, or stalls (``bmq.client.liveness``: frozen or cut
    off, though still registered) is left for the next. So a client's FindCoordinator,
    InitProducerId or admin call neither fails nor waits while another broker is up, and
    neither do the answers the client's connection gets after it (its produces' too: a
    connection's answers go out in order). A broker that takes a request after it was given up
    on answers nobody; the calls relayed are ones a client may repeat (a producer id allocated
    twice, one of them unused; a topic created already)."""
    failed: Exception = LinkError("no broker is live")
    for node in await ctx.proxy.live_brokers():
        link = ctx.links.get(node.host, node.port)
        try:
            return await ask_while_alive(link, functools.partial(link.relay, ctx.header,
                                                                 ctx.frame))
        except (LinkError, OSError) as error:
            failed = error
        except Stalled:
            failed = LinkError(f"{node.host}:{node.port} does not answer")
    raise failed


async def relay_to_broker(ctx: ProxyContext, request: Any, version: int) -> RelayedResponse:
    # No broker answers: the LinkError closes the client's connection (these APIs have no
    # error field common to all), and the client retries, as after any broker failure.
    body = await relay(ctx)
    assert body is not None
    return RelayedResponse(body)
