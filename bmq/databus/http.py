"""The agent's HTTP endpoint (aiohttp, on the agent's event loop): ``POST /streams/NAME``
with one message, on a TCP port and/or a Unix socket (``curl --unix-socket``).

The body is the message's value, its key in ``X-Key`` and headers in ``X-Header-NAME`` (the
record header ``name``, lowercase); or,
with ``Content-Type: application/json``, ``{"key": .., "value": .., "headers": {..}}`` (a
string value is taken as UTF-8 text, any other JSON value as its JSON text). ``?acks=cluster``
(the default) answers once the cluster took the message, with its topic, partition and offset;
``?acks=spooled`` once it is in the durable spool (topic and partition); ``?acks=none`` at
once. Errors are 4xx/5xx with a JSON reason and the Kafka error's name.

Bounded as the Kafka port is: a body over ``max_message_bytes`` is refused (413) before it is
read when its length is given; at most ``MAX_REQUESTS`` requests and ``MAX_BODY_BYTES`` of
their bodies are in progress (more: 503 with Retry-After, before the body is read); a body
that does not arrive within ``http_timeout_ms`` is answered 408 and its connection closed,
and a connection idle that long, or whose request line and headers take that long, is closed
(aiohttp's keep-alive timeout, which runs from the connection's start). A request line or
header over 8,190 bytes, more than 128 headers, or bytes that are not HTTP are answered 400 by
aiohttp's parser (its plain-text reason) and the connection closed; nothing is taken."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from bmq.databus.intake import ACKS_CLUSTER, ACKS_NONE, ACKS_SPOOLED, Intake, settle
from bmq.databus.workers import AgentSockets
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.record_codec import Record

ACKS = {"cluster": ACKS_CLUSTER, "all": ACKS_CLUSTER, "spooled": ACKS_SPOOLED,
        "none": ACKS_NONE}
TIMEOUT_MS = 30000
HEADER_PREFIX = "x-header-"
STATUS = {ErrorCode.INVALID_TOPIC_EXCEPTION: 400, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: 404,
          ErrorCode.MESSAGE_TOO_LARGE: 413, ErrorCode.KAFKA_STORAGE_ERROR: 503,
          ErrorCode.REQUEST_TIMED_OUT: 504}
# The HTTP requests in progress (read and not yet answered) and their bodies' bytes, at most
# (a Kafka port's bound is the same: bmq/databus/pressure.py, kafka_port.py).
MAX_REQUESTS = 1000
MAX_BODY_BYTES = 256 << 20
LINGER_S = 2.0
INTAKE: web.AppKey[Intake] = web.AppKey("intake", Intake)
AGENT_STATUS: web.AppKey[Callable[[], dict[str, Any]]] = web.AppKey("status")


def body_limit(max_message_bytes: int) -> int:
    """The largest body taken: a message's value, or its JSON with key and headers."""
    return max_message_bytes + 64 * 1024


class InProgress:
    """The requests in progress and their bodies' bytes (as announced, or the most one may
    have)."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0


IN_PROGRESS: web.AppKey[InProgress] = web.AppKey("in_progress", InProgress)


def _error(status: int, reason: str, code: ErrorCode | None = None) -> web.Response:
    body: dict[str, Any] = {"error": reason}
    if code is not None:
        body["kafka_error"] = code.name
    headers = {"Retry-After": "1"} if status == 503 else None
    return web.json_response(body, status=status, headers=headers)


def _message(request: web.Request, body: bytes) -> Record:
    """The record a request carries; ValueError says why it cannot be one."""
    now = int(time.time() * 1000)
    if request.content_type == "application/json":
        try:
            doc = json.loads(body)
        except ValueError as error:
            raise ValueError(f"malformed JSON: {error}") from error
        if not isinstance(doc, dict) or "value" not in doc:
            raise ValueError('a JSON body is {"key": .., "value": .., "headers": {..}}')
        unknown = sorted(set(doc) - {"key", "value", "headers"})
        if unknown:
            raise ValueError(f"unknown field(s): {', '.join(unknown)}")
        key, value, headers = doc.get("key"), doc["value"], doc.get("headers") or {}
        if key is not None and not isinstance(key, str):
            raise ValueError("key: a string or null")
        if not isinstance(headers, dict) or not all(
                isinstance(v, str) or v is None for v in headers.values()):
            raise ValueError("headers: an object of strings")
        encoded = (None if value is None else value.encode() if isinstance(value, str)
                   else json.dumps(value, separators=(",", ":")).encode())
        return Record(0, now, None if key is None else key.encode(), encoded,
                      [(name, None if v is None else v.encode()) for name, v in headers.items()])
    key_text = request.headers.get("X-Key")
    # HTTP header names are case-insensitive (HTTP/2 sends them lowercase, clients such as
    # urllib capitalize them): lowercase, whatever the client did.
    headers_in: list[tuple[str, bytes | None]] = [(name[len(HEADER_PREFIX):].lower(),
                                                   value.encode())
                  for name, value in request.headers.items()
                  if name.lower().startswith(HEADER_PREFIX)]
    return Record(0, now, None if key_text is None else key_text.encode(), body, headers_in)


async def post_stream(request: web.Request) -> web.Response:
    intake = request.app[INTAKE]
    most = body_limit(intake.settings.max_message_bytes)
    size = most if request.content_length is None else request.content_length
    counts = request.app[IN_PROGRESS]
    if size > most:
        refusal = _error(413, f"a message larger than {intake.settings.max_message_bytes} "
                              f"bytes", ErrorCode.MESSAGE_TOO_LARGE)
    elif counts.requests >= MAX_REQUESTS or (counts.requests
                                             and counts.bytes + size > MAX_BODY_BYTES):
        intake.stats.refused["HTTP_BUSY"] += 1
        refusal = _error(503, f"databus busy: {counts.requests} HTTP requests of "
                              f"{counts.bytes} bytes in progress")
    else:
        refusal = None
    if refusal is not None:
        # Answered before its body is read: the connection closes after the answer, rather
        # than read (up to aiohttp's lingering time) a body nobody takes.
        refusal.force_close()
        return refusal
    counts.requests += 1
    counts.bytes += size
    try:
        return await _post(request, intake)
    finally:
        counts.requests -= 1
        counts.bytes -= size


async def _post(request: web.Request, intake: Intake) -> web.Response:
    stream = request.match_info["name"]
    acks_name = request.query.get("acks", "cluster")
    if acks_name not in ACKS:
        return _error(400, f"acks: one of {', '.join(ACKS)}")
    try:
        timeout_ms = int(request.query.get("timeout_ms", TIMEOUT_MS))
        if timeout_ms < 1:
            raise ValueError
    except ValueError:
        return _error(400, "timeout_ms: a whole number of at least 1")
    timeout_s = intake.settings.http_timeout_ms / 1000
    try:
        async with asyncio.timeout(timeout_s):
            body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return _error(413, f"a message larger than {intake.settings.max_message_bytes} bytes",
                      ErrorCode.MESSAGE_TOO_LARGE)
    except TimeoutError:
        intake.refused(ErrorCode.REQUEST_TIMED_OUT, 1)
        late = _error(408, f"the body did not arrive within {timeout_s:g} s")
        late.force_close()
        return late
    try:
        record = _message(request, body)
    except ValueError as error:
        intake.refused(ErrorCode.INVALID_REQUEST, 1)
        return _error(400, str(error))
    acks = ACKS[acks_name]
    try:
        [placement] = await intake.put(stream, [record], "http")
        [where] = await settle([placement], acks, timeout_ms / 1000)
    except KafkaError as error:
        return _error(STATUS.get(error.code, 502), error.message or error.code.name,
                      error.code)
    answer: dict[str, Any] = {"stream": stream, "topic": placement.batch.topic,
                              "partition": placement.batch.partition}
    if where is not None:
        answer["offset"] = where.base_offset
    answer["acks"] = acks_name
    return web.json_response(answer)


async def get_status(request: web.Request) -> web.Response:
    return web.json_response(request.app[AGENT_STATUS]())


async def not_found(request: web.Request) -> web.Response:
    return _error(404, "POST /streams/NAME, GET /status")


async def start_http(intake: Intake, bound: AgentSockets,
                     status: Callable[[], dict[str, Any]]) -> web.AppRunner:
    """Serve the endpoint (and ``GET /status``) on the agent's HTTP and Unix sockets."""
    app = web.Application(client_max_size=body_limit(intake.settings.max_message_bytes))
    app[IN_PROGRESS] = InProgress()
    app[INTAKE] = intake
    app[AGENT_STATUS] = status
    app.router.add_post("/streams/{name}", post_stream)
    app.router.add_get("/status", get_status)
    app.router.add_route("*", "/{tail:.*}", not_found)
    # A refused request's unread body is read and dropped for at most LINGER_S before its
    # connection closes (closed at once, a client still sending might lose the answer).
    runner = web.AppRunner(app, access_log=None, lingering_time=LINGER_S,
                           keepalive_timeout=intake.settings.http_timeout_ms / 1000)
    await runner.setup()
    for sock in [*bound.http, *([bound.unix] if bound.unix else [])]:
        await web.SockSite(runner, sock).start()
    return runner
