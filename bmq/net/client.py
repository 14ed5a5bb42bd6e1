"""The client side of the Kafka protocol: connections to brokers, for brokers (their peers) and
for BMQ's Kafka client layer (``bmq.client``).

A ``BrokerLink`` is one TCP connection with requests pipelined on it; responses come back in
request order (Kafka guarantees it), matched by correlation id all the same. Requests are either
message objects (encoded with the generated codec) or a client's request frame relayed as is,
with only its correlation id replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import ssl
import struct
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from bmq.protocol.headers import (
    RequestHeader,
    read_response_header,
    response_header_version,
    write_request_header,
)
from bmq.protocol.messages import RESPONSE_TYPES
from bmq.protocol.primitives import DecodeError, Reader, Writer

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_CORRELATION_AT = 4   # in a request frame: api_key int16, api_version int16, correlation_id
CONNECT_TIMEOUT_S = 5.0


class LinkError(ConnectionError):
    """The connection failed or closed; requests in flight on it fail with this."""


class LinkSecurity(Protocol):
    """How a link secures itself (bmq/security/link.py): TLS, then a login that exchanges
    requests on the new connection before it carries anything else."""

    @property
    def ssl(self) -> ssl.SSLContext | None: ...

    async def authenticate(self, exchange: Callable[[Any, int], Awaitable[Any]]) -> None: ...


class BrokerLink:
    def __init__(self, host: str, port: int, client_id: str = "bmq-proxy",
                 security: LinkSecurity | None = None) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self._security = security
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[memoryview]] = {}
        self._next_id = 0
        self._receiver: asyncio.Task[None] | None = None
        self.closed = False

    def __repr__(self) -> str:
        return f"BrokerLink({self.host}:{self.port})"

    def sibling(self) -> BrokerLink:
        """A new link to the same broker, with the same identity and security."""
        return BrokerLink(self.host, self.port, self.client_id, self._security)

    @property
    def connected(self) -> bool:
        return self._writer is not None

    async def connect(self) -> None:
        """Open the connection now (requests open it when needed); LinkError if it cannot."""
        await self._connect()

    async def _connect(self) -> None:
        if self._writer is not None:
            return
        if self._connecting is None:
            self._connecting = asyncio.get_running_loop().create_task(self._open())
            # Its waiters may all be gone (cancelled) when it fails: its error is theirs.
            self._connecting.add_done_callback(
                lambda task: task.cancelled() or task.exception())
        await asyncio.shield(self._connecting)

    async def _open(self) -> None:
        security = self._security
        context = None if security is None else security.ssl
        opened: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            opened = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, ssl=context,
                                        server_hostname=self.host if context else None),
                CONNECT_TIMEOUT_S)
            if security is not None:
                await asyncio.wait_for(
                    security.authenticate(functools.partial(self._exchange, *opened)),
                    CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, DecodeError) as error:
            self._connecting = None
            if opened is not None:
                opened[1].close()
            raise LinkError(f"cannot connect to {self.host}:{self.port}: {error}") from error
        reader, writer = opened
        if self.closed:         # closed while it was opening
            writer.close()
            raise LinkError(f"{self.host}:{self.port}: connection closed")
        # Connected only now: a request written during the login would have its answer read
        # as the login's (and would itself wait for ever).
        self._reader, self._writer = reader, writer
        self._receiver = asyncio.get_running_loop().create_task(self._receive())

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        message: Any, version: int) -> Any:
        """One request and its response on the link being opened (its login), before the
        receiver reads and before any other request may be sent."""
        parts, _ = self._encode(message, version)
        writer.writelines(parts)
        size = _SIZE.unpack(await reader.readexactly(4))[0]
        return self._decode(message.API_KEY, version, memoryview(await reader.readexactly(size)))

    async def _receive(self) -> None:
        reader = self._reader
        assert reader is not None
        error: BaseException = LinkError(f"{self.host}:{self.port} closed the connection")
        try:
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                frame = memoryview(await reader.readexactly(size))
                correlation_id = _SIZE.unpack_from(frame, 0)[0]
                future = self._pending.pop(correlation_id, None)
                if future is not None and not future.done():
                    future.set_result(frame)
        except (OSError, asyncio.IncompleteReadError) as exc:
            error = LinkError(f"{self.host}:{self.port}: {exc}")
        finally:
            self._fail(error)

    def _fail(self, error: BaseException) -> None:
        self.closed = True
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()
        if self._writer is not None:
            self._writer.close()

    def close(self) -> None:
        if self._receiver is not None:
            self._receiver.cancel()
        self._fail(LinkError("closed"))

    async def _send(self, parts: list[Any], correlation_id: int,
                    expect_response: bool) -> memoryview | None:
        await self._connect()
        if self.closed or self._writer is None:
            raise LinkError(f"{self.host}:{self.port}: connection closed")
        future: asyncio.Future[memoryview] | None = None
        if expect_response:
            future = asyncio.get_running_loop().create_future()
            self._pending[correlation_id] = future
        self._writer.writelines(parts)
        if future is None:
            await self._writer.drain()
            return None
        return await future

    def _correlation_id(self) -> int:
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        return self._next_id

    async def request(self, message: Any, version: int, expect_response: bool = True,
                      client_id: str | None = None) -> Any:
        """Send a request message; return the decoded response (None if none is expected).
        ``client_id``: the header's, when the link forwards a client's request (quotas and
        logs then name the client), else the link's own."""
        parts, correlation_id = self._encode(message, version, client_id)
        frame = await self._send(parts, correlation_id, expect_response)
        return None if frame is None else self._decode(message.API_KEY, version, frame)

    def _encode(self, message: Any, version: int, client_id: str | None = None
                ) -> tuple[list[Any], int]:
        correlation_id = self._correlation_id()
        w = Writer()
        write_request_header(w, RequestHeader(message.API_KEY, version, correlation_id,
                                              self.client_id if client_id is None else client_id))
        message.write(w, version)
        return [_SIZE.pack(w.size), *w.parts()], correlation_id

    @staticmethod
    def _decode(api_key: int, version: int, frame: memoryview) -> Any:
        r = Reader(frame)
        read_response_header(r, response_header_version(api_key, version))
        return RESPONSE_TYPES[api_key].read(r, version)

    async def relay(self, header: RequestHeader, frame: bytearray,
                    expect_response: bool = True) -> memoryview | None:
        """Send a client's request frame as it is; return the response body (after the header).

        Only the correlation id is replaced (the frame is the relaying role's own buffer)."""
        correlation_id = self._correlation_id()
        _SIZE.pack_into(frame, _CORRELATION_AT, correlation_id)
        response = await self._send([_SIZE.pack(len(frame)), frame], correlation_id,
                                    expect_response)
        if response is None:
            return None
        r = Reader(response)
        read_response_header(r, response_header_version(header.api_key, header.api_version))
        return response[r.pos:]


class LinkPool:
    """One link per broker address, reconnected on demand after a failure."""

    def __init__(self, client_id: str = "bmq-proxy", security: LinkSecurity | None = None
                 ) -> None:
        self._client_id = client_id
        self._security = security
        self._links: dict[tuple[str, int], BrokerLink] = {}

    def get(self, host: str, port: int) -> BrokerLink:
        link = self._links.get((host, port))
        if link is None or link.closed:
            link = self._links[(host, port)] = BrokerLink(host, port, self._client_id,
                                                          self._security)
        return link

    def close_except(self, live: set[tuple[str, int]]) -> None:
        """Close the links to addresses not in ``live``: requests in flight on them fail with
        LinkError now. A broker that left the cluster while frozen (SIGSTOP) never answers
        them; failing them lets the client be told to look for the partitions' new owners."""
        for address, link in list(self._links.items()):
            if address not in live:
                del self._links[address]
                link.close()

    def close(self) -> None:
        for link in self._links.values():
            with contextlib.suppress(Exception):
                link.close()
        self._links.clear()
