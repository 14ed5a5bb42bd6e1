"""bmq.net.client.BrokerLink against a real broker: a link's login is the first thing on its
connection, whatever else is asked meanwhile."""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from bmq.net.client import BrokerLink, LinkError
from bmq.protocol.messages import ApiVersionsRequest, MetadataRequest
from tests.conftest import BrokerProcess


class SlowLogin:
    """A login of two exchanges with a pause between them (a SASL exchange with a slow peer,
    or an ActAs behind a busy event loop)."""

    ssl: ssl.SSLContext | None = None

    def __init__(self) -> None:
        self.answers: list[Any] = []

    async def authenticate(self, exchange: Callable[[Any, int], Awaitable[Any]]) -> None:
        self.answers.append(await exchange(ApiVersionsRequest(), 0))
        await asyncio.sleep(0.3)
        self.answers.append(await exchange(ApiVersionsRequest(), 0))


class OneExchangeLogin:
    ssl: ssl.SSLContext | None = None

    async def authenticate(self, exchange: Callable[[Any, int], Awaitable[Any]]) -> None:
        await exchange(ApiVersionsRequest(), 0)


def test_requests_asked_during_the_login_wait_for_it(broker: BrokerProcess) -> None:
    async def scenario() -> None:
        login = SlowLogin()
        link = BrokerLink(broker.host, broker.port, security=login)
        try:
            first = asyncio.ensure_future(link.request(MetadataRequest(topics=[]), 12))
            await asyncio.sleep(0.1)        # the login is under way: this one must wait
            second = await asyncio.wait_for(link.request(MetadataRequest(topics=[]), 12), 5)
            assert [b.node_id for b in second.brokers] == [b.node_id for b in
                                                            (await first).brokers]
            assert second.brokers and second.brokers[0].port == broker.port
            assert all(answer.error_code == 0 and answer.api_keys for answer in login.answers)
        finally:
            link.close()

    asyncio.run(scenario())


def test_a_login_answer_it_cannot_read_fails_the_opening_not_the_link() -> None:
    """A peer that answers the login with bytes that do not decode: LinkError (as for a
    refused connection), and the next request tries a new connection instead of failing with
    the first opening's error for ever."""
    async def scenario() -> None:
        connections = 0

        async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal connections
            connections += 1
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            request = await reader.readexactly(size)
            # correlation id, then an ApiVersions v0 body cut short
            writer.write(struct.pack(">i", 6) + request[4:8] + b"\x00\x00")
            await writer.drain()

        server = await asyncio.start_server(garbage, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        link = BrokerLink("127.0.0.1", port, security=OneExchangeLogin())
        try:
            for attempt in (1, 2):
                with pytest.raises(LinkError, match="cannot connect"):
                    await asyncio.wait_for(link.request(ApiVersionsRequest(), 0), 5)
                assert connections == attempt
        finally:
            link.close()
            server.close()

    asyncio.run(scenario())
