"""One client connection: size-prefixed frames in, responses out in request order.

Every role that serves Kafka clients (broker, proxy) runs this same connection; what differs is
the ``Service`` it dispatches to: its API table and the context each handler receives.

Small frames are parsed out of a scratch buffer; a large frame (a Produce request) is received
straight into a bytearray of its own, so its record batches are never copied again: handlers see
a writable memoryview and the broker rewrites offsets in place. Requests run concurrently, yet
responses leave in request order, as Kafka requires.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Protocol, cast

from bmq.net.api import ApiSpec, api_versions_error
from bmq.net.client import LinkError
from bmq.net.memory import RequestMemory
from bmq.protocol.headers import (
    API_VERSIONS_KEY,
    RequestHeader,
    read_request_header,
    response_header_version,
    write_response_header,
)
from bmq.protocol.legacy_errors import older_codes
from bmq.protocol.primitives import DecodeError, Reader, UnsupportedVersionError, Writer

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
SCRATCH_BYTES = 256 * 1024

Parts = list[bytes | bytearray | memoryview]


class Service(Protocol):
    """A role as one connection sees it: each connection gets its own ``Service`` object, so
    what belongs to one client connection lives there (the proxy's links to brokers) and is
    released by ``close``."""

    @property
    def handlers(self) -> Mapping[int, ApiSpec]: ...

    @property
    def max_frame_bytes(self) -> int:
        """Larger frames close the connection (socket.request.max.bytes)."""

    @property
    def max_inflight(self) -> int:
        """Requests of one connection in progress before it stops reading."""

    @property
    def request_memory(self) -> RequestMemory:
        """The role's memory for requests read and not yet answered (one pool a process)."""

    def context(self, header: RequestHeader, client_host: str, frame: bytearray) -> Any:
        """What the handler of this request receives as its first argument."""

    def close(self) -> None:
        """The connection closed: release what it held."""

    def observe(self, api_key: int, api_name: str, request: Any, response: Any,
                seconds: float) -> None:
        """A request was answered in ``seconds`` (the role counts it: metrics)."""


class Guard(Protocol):
    """What a connection asks of its role's security (bmq/security/ implements it): told of the
    new connection (its TLS session, to read a client certificate), asked whether each request
    may be served yet (before SASL authentication, only the handshake's), and whether the
    connection is to close once its last response is out (a failed authentication). ``admits``
    runs for every request: it must stay cheap."""

    def accepted(self, extra_info: Callable[[str], Any]) -> None: ...

    def admits(self, api_key: int) -> bool: ...

    def throttle(self, api_key: int, client_id: str, request: Any, response: Any,
                 seconds: float) -> int:
        """The quota's throttle time (ms) for an answered request: the response carries it
        and the connection is not read for that long (KIP-219). 0: not throttled."""

    @property
    def closing(self) -> bool: ...


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, service: Service, guard: Guard | None = None) -> None:
        self._service = service
        self._guard = guard
        self._handlers = service.handlers
        self._max_frame = service.max_frame_bytes
        self._max_inflight = service.max_inflight
        self._memory = service.request_memory
        self._held = 0                  # memory taken for the frame being received
        self._waiting_memory = False
        self._scratch = bytearray(SCRATCH_BYTES)
        self._scratch_view = memoryview(self._scratch)
        self._scratch_end = 0
        self._frame: bytearray | None = None
        self._frame_filled = 0
        # One future per request, in arrival order; tasks for handled requests.
        self._responses: deque[asyncio.Future[Parts | None]] = deque()
        self._transport: asyncio.Transport | None = None
        self._peer: Any = None
        self._client_host = ""
        self._muted_until = 0.0   # loop time until which a quota mutes this connection
        self._reading_paused = False
        self._writing_paused = False
        self._closed = False
        self._tls = False

    # asyncio.BufferedProtocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        self._peer = transport.get_extra_info("peername")
        self._tls = transport.get_extra_info("ssl_object") is not None
        self._client_host = f"/{self._peer[0]}" if self._peer else ""
        if self._guard is not None:
            self._guard.accepted(transport.get_extra_info)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._memory.forget(self._memory_freed)
        held, self._held = self._held, 0
        self._give_back(held)
        for task in self._responses:
            task.cancel()
        self._responses.clear()
        self._service.close()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._frame_filled:]
        if self._scratch_end == len(self._scratch):
            # Only reachable if a parse left a full scratch: parsing always makes room.
            raise RuntimeError("scratch buffer full")
        return self._scratch_view[self._scratch_end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._frame is not None:
            self._frame_filled += nbytes
            if self._frame_filled == len(self._frame):
                frame, self._frame = self._frame, None
                self._dispatch(frame)
            return
        self._scratch_end += nbytes
        if not self._waiting_memory:
            self._parse_scratch()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    # Framing ---------------------------------------------------------------------------------

    def _parse_scratch(self) -> None:
        pos = 0
        end = self._scratch_end
        scratch = self._scratch
        while end - pos >= 4 and not self._closed:
            size = _SIZE.unpack_from(scratch, pos)[0]
            if size <= 0 or size > self._max_frame:
                log.warning("closing %s: frame of %d bytes (limit %d)",
                            self._peer, size, self._max_frame)
                self._close()
                return
            if not self._held:
                if not self._memory.take(size):
                    self._waiting_memory = True
                    self._memory.wait(self._memory_freed)
                    self._update_reading()
                    break
                self._held = size
            available = end - pos - 4
            if available >= size:
                self._dispatch(bytearray(self._scratch_view[pos + 4 : pos + 4 + size]))
                pos += 4 + size
                continue
            if size + 4 > len(scratch):
                # Too large for the scratch buffer: receive the rest directly into its own buffer.
                frame = bytearray(size)
                frame[:available] = self._scratch_view[pos + 4 : end]
                self._frame, self._frame_filled = frame, available
                pos = end
            break
        if pos:
            remaining = end - pos
            scratch[:remaining] = self._scratch_view[pos:end]
            self._scratch_end = remaining

    # Requests -------------------------------------------------------------------------------

    def _memory_freed(self) -> None:
        """Memory was given back: read the frame that waited for it."""
        self._waiting_memory = False
        if not self._closed:
            self._update_reading()
            self._parse_scratch()

    def _give_back(self, size: int) -> None:
        if size:
            self._memory.give_back(size)

    def _dispatch(self, frame: bytearray) -> None:
        # The frame's memory goes back once its answer is done, or at once if no handler runs.
        held, self._held = self._held, 0
        task = None
        try:
            task = self._handle(frame)
        finally:
            if task is None:
                self._give_back(held)
            else:
                task.add_done_callback(lambda _: self._give_back(held))

    def _handle(self, frame: bytearray) -> asyncio.Task[Parts | None] | None:
        """Start the handler of a request; None if none runs (the connection closes, or the
        answer is ready at once)."""
        if self._closed:
            return None
        reader = Reader(memoryview(frame))
        try:
            header = read_request_header(reader)
        except DecodeError as error:
            log.warning("closing %s: bad request header: %s", self._peer, error)
            self._close()
            return None
        spec = self._handlers.get(header.api_key)
        version = header.api_version
        if self._guard is not None and not self._guard.admits(header.api_key):
            # Kafka's answer to a request before authentication, or after the session's end
            # without re-authentication (KIP-368): close the connection.
            log.warning("closing %s: api key %d before authentication or after the session "
                        "ended", self._peer, header.api_key)
            self._close()
            return None
        if spec is None:
            log.warning("closing %s: unknown api key %d", self._peer, header.api_key)
            self._close()
            return None
        if not spec.min_version <= version <= spec.max_version:
            if header.api_key == API_VERSIONS_KEY:
                # Kafka answers an ApiVersions it cannot parse with a v0 body listing what it does.
                self._enqueue_ready(self._encode(header.correlation_id, header.api_key, 0,
                                                 api_versions_error(self._handlers)))
                return None
            log.warning("closing %s: %s v%d not supported", self._peer, spec.name, version)
            self._close()
            return None
        try:
            request = spec.request_type.read(reader, version)
        except (DecodeError, UnsupportedVersionError) as error:
            log.warning("closing %s: malformed %s v%d: %s", self._peer, spec.name, version,
                        error)
            self._close()
            return None
        context = self._service.context(header, self._client_host, frame)
        # The handler's coroutine is made inside the task: made here, a task cancelled before
        # its first step (its connection closed) left it never awaited (a RuntimeWarning).
        task = asyncio.get_running_loop().create_task(
            self._run(spec.handler, context, header.correlation_id, header.api_key, version,
                      request, spec.name, header.client_id or ""))
        self._track(task)
        return task

    async def _run(self, handler: Any, context: Any, correlation_id: int, api_key: int,
                   version: int, request: Any, api_name: str, client_id: str) -> Parts | None:
        started = time.perf_counter()
        response = await handler(context, request, version)
        seconds = time.perf_counter() - started
        self._service.observe(api_key, api_name, request, response, seconds)
        if self._guard is not None:
            throttle_ms = self._guard.throttle(api_key, client_id, request, response, seconds)
            if throttle_ms > 0:
                if response is not None and hasattr(response, "throttle_time_ms"):
                    response.throttle_time_ms = max(response.throttle_time_ms, throttle_ms)
                self._mute(throttle_ms)
        if response is None:  # acks=0 Produce: Kafka sends nothing back
            return None
        return self._encode(correlation_id, api_key, version, response)

    @staticmethod
    def _encode(correlation_id: int, api_key: int, version: int, response: Any) -> Parts:
        writer = Writer()
        write_response_header(writer, correlation_id, response_header_version(api_key, version))
        with older_codes(api_key, version, response):
            response.write(writer, version)
        return [_SIZE.pack(writer.size), *writer.parts()]

    def _enqueue_ready(self, parts: Parts) -> None:
        future: asyncio.Future[Parts | None] = asyncio.get_running_loop().create_future()
        future.set_result(parts)
        self._track(future)

    def _track(self, task: asyncio.Future[Parts | None]) -> None:
        self._responses.append(task)
        task.add_done_callback(self._flush_responses)
        self._update_reading()

    def _flush_responses(self, _: object = None) -> None:
        # Every answer done by now leaves in one write: answers that wait for the same thing
        # (the databus's, for one batch) are done together, and a write each was a send(2)
        # each.
        transport = self._transport
        out: Parts = []
        while self._responses and self._responses[0].done():
            task = self._responses.popleft()
            if task.cancelled() or self._closed or transport is None:
                if not task.cancelled():
                    task.exception()    # retrieved: a closed connection's answers go nowhere
                continue
            error = task.exception()
            if error is not None:
                self._write(out)
                if isinstance(error, LinkError):
                    # A broker it needed is gone: the client retries as after a broker failure.
                    log.warning("closing %s: %s", self._peer, error)
                else:
                    log.error("closing %s: request failed", self._peer, exc_info=error)
                self._close()
                return
            parts = task.result()
            if parts is not None:
                out += parts
            if self._guard is not None and self._guard.closing:
                self._write(out)
                self._close()   # after the answer (a failed authentication's) is written
                return
        self._write(out)
        self._update_reading()

    def _write(self, parts: Parts) -> None:
        transport = self._transport
        if not parts or transport is None or self._closed:
            return
        if self._tls:
            _write_in_chunks(transport, parts)
        else:
            transport.writelines(parts)

    def _mute(self, throttle_ms: int) -> None:
        """Read nothing more from this client for ``throttle_ms`` (a quota's throttle)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + throttle_ms / 1000
        if until <= self._muted_until:
            return
        self._muted_until = until
        self._update_reading()
        loop.call_at(until, self._end_mute, until)

    def _end_mute(self, until: float) -> None:
        # The event loop may run a timer up to its clock resolution early, so the mute ends by
        # identity (no later mute replaced this one), not by comparing clocks: a comparison
        # left a throttled connection unread for good.
        if self._muted_until == until:
            self._muted_until = 0.0
            self._update_reading()

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or self._closed:
            return
        pause = (self._writing_paused or len(self._responses) >= self._max_inflight
                 or self._muted_until > 0 or self._waiting_memory)
        if pause and not self._reading_paused:
            transport.pause_reading()
            self._reading_paused = True
        elif not pause and self._reading_paused:
            transport.resume_reading()
            self._reading_paused = False

    def _close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._transport is not None:
                self._transport.close()


# A TLS transport encrypts everything one write hands it before it sends any of it: a multi-MB
# Fetch response was encrypted whole, then sent, then decrypted whole by the client. Handed
# over in pieces of about this size, the first ones are on their way (and being decrypted by
# the client) while the next are encrypted.
TLS_WRITE_CHUNK = 256 * 1024


def _write_in_chunks(transport: asyncio.Transport, parts: Parts) -> None:
    chunk: Parts = []
    size = 0
    for part in parts:
        chunk.append(part)
        size += len(part)
        if size >= TLS_WRITE_CHUNK:
            transport.writelines(chunk)
            chunk, size = [], 0
    if chunk:
        transport.writelines(chunk)
