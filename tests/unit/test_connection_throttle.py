"""A quota's throttle mutes a connection for a while and then it is read again, every time.

The event loop may fire a timer up to its clock resolution early; the connection once compared
clocks when the timer fired, stayed muted for good, and a throttled producer's requests timed out
after 60 s (seen in CI). Hundreds of 1 ms throttles in a row on uvloop, as brokers run, make that
race certain to show if it comes back.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable, Mapping
from typing import Any

import uvloop

from bmq.net.api import ApiSpec, supported_versions
from bmq.net.connection import KafkaConnection
from bmq.net.memory import RequestMemory
from bmq.protocol.messages import ApiVersionsResponse

REQUESTS = 400


async def _answer_api_versions(context: Any, request: Any, version: int) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=0, api_keys=supported_versions(HANDLERS))


HANDLERS: dict[int, ApiSpec] = {18: ApiSpec("ApiVersionsRequest", _answer_api_versions)}


class _OneApi:
    handlers: Mapping[int, ApiSpec] = HANDLERS
    max_frame_bytes = 1 << 20
    max_inflight = 5
    request_memory = RequestMemory(-1)

    def context(self, header: Any, client_host: str, frame: bytearray) -> None:
        return None

    def close(self) -> None:
        pass

    def observe(self, api_key: int, api_name: str, request: Any, response: Any,
                seconds: float) -> None:
        pass


class _ThrottleEverything:
    """A guard whose quota is always exceeded by a hair: every answer throttles 1 ms."""

    closing = False

    def accepted(self, extra_info: Callable[[str], Any]) -> None:
        pass

    def admits(self, api_key: int) -> bool:
        return True

    def throttle(self, api_key: int, client_id: str, request: Any, response: Any,
                 seconds: float) -> int:
        return 1


def _api_versions_v0(correlation_id: int) -> bytes:
    client_id = b"t"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


async def _exchange() -> list[int]:
    server = await asyncio.get_running_loop().create_server(
        lambda: KafkaConnection(_OneApi(), _ThrottleEverything()), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answered = []
    try:
        for correlation_id in range(REQUESTS):
            writer.write(_api_versions_v0(correlation_id))
            size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))[0]
            frame = await asyncio.wait_for(reader.readexactly(size), 5)
            answered.append(struct.unpack_from(">i", frame)[0])
    finally:
        writer.close()
        server.close()
    return answered


def test_a_throttled_connection_is_read_again_after_every_throttle() -> None:
    assert uvloop.run(_exchange()) == list(range(REQUESTS))
