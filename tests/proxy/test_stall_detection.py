"""A broker is *stalled* (``bmq.client.liveness``) only if it was silent while this process
ran. A proxy that does not run for a while (a machine short of CPU deschedules it) finds the
answers its brokers sent meanwhile waiting in its sockets; uvloop fires its timers before it
reads them, so a silence measured on the wall clock called those brokers stalled, and the
proxy answered their partitions REQUEST_TIMED_OUT (seen on the fault tests' 2-core hosts while
a frozen broker's partitions moved: healthy partitions paused 2-3 s)."""

from __future__ import annotations

import asyncio
import time

import uvloop

from bmq.client.liveness import STALL_S, ask_while_alive
from bmq.net.client import BrokerLink
from bmq.protocol.messages import ApiVersionsRequest
from tests.conftest import BrokerProcess

NOT_RUNNING_S = 3 * STALL_S


def test_answers_that_came_while_the_process_did_not_run_are_not_a_stall(
        broker: BrokerProcess) -> None:
    async def scenario() -> None:
        link = BrokerLink(broker.host, broker.port, "stall-test")
        try:
            await link.connect()
            for _ in range(3):      # links and the liveness probe's connection warmed up
                await ask_while_alive(link, lambda: link.request(ApiVersionsRequest(), 0))

            for _ in range(5):
                asked = asyncio.ensure_future(ask_while_alive(
                    link, lambda: link.request(ApiVersionsRequest(), 0)))
                for _ in range(3):          # the request is written, and waited for
                    await asyncio.sleep(0)
                assert not asked.done()
                # The event loop's thread does not run: the broker's answer arrives meanwhile.
                time.sleep(NOT_RUNNING_S)
                answer = await asked        # Stalled if the silence was misjudged
                assert answer.error_code == 0
        finally:
            link.close()

    uvloop.run(scenario())
