"""A request whose connection closes before its handler starts leaves nothing behind."""

from __future__ import annotations

import asyncio
import gc
import socket
import warnings
from typing import Any

from bmq.net.api import ApiSpec
from bmq.net.connection import KafkaConnection
from bmq.net.memory import RequestMemory
from bmq.protocol.headers import RequestHeader, write_request_header
from bmq.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from bmq.protocol.primitives import Writer


async def _answer(context: Any, request: Any, version: int) -> ApiVersionsResponse:
    return ApiVersionsResponse()


class _Service:
    max_frame_bytes = 1 << 20
    max_inflight = 10

    def __init__(self) -> None:
        self.handlers = {spec.api_key: spec for spec in [ApiSpec("ApiVersionsRequest", _answer)]}
        self.request_memory = RequestMemory(-1)

    def context(self, header: RequestHeader, client_host: str, frame: bytearray) -> None:
        return None

    def close(self) -> None:
        pass

    def observe(self, *args: Any) -> None:
        pass


def test_a_request_of_a_connection_closed_before_it_ran_leaves_no_coroutine_unawaited() -> None:
    async def main() -> list[warnings.WarningMessage]:
        ours, theirs = socket.socketpair()
        connection = KafkaConnection(_Service())
        transport, _ = await asyncio.get_running_loop().connect_accepted_socket(
            lambda: connection, ours)
        writer = Writer()
        write_request_header(writer, RequestHeader(18, 3, 7, "test"))
        ApiVersionsRequest(client_software_name="t", client_software_version="1").write(writer, 3)
        body = b"".join(writer.parts())
        frame = len(body).to_bytes(4, "big") + body
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            buffer = connection.get_buffer(len(frame))
            buffer[:len(frame)] = frame
            connection.buffer_updated(len(frame))      # the request is dispatched ...
            connection.connection_lost(None)           # ... and its connection lost at once
            await asyncio.sleep(0.05)
            gc.collect()
        transport.close()
        theirs.close()
        return caught

    caught = asyncio.run(main())
    assert not [w for w in caught if "never awaited" in str(w.message)], caught
