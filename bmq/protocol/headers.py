"""Kafka request/response headers (hand-written; see RequestHeader.json / ResponseHeader.json).

Request header v1: api_key int16, api_version int16, correlation_id int32, client_id nullable
string (int16 length).  v2 adds a tagged-field section; client_id keeps the classic int16-length
encoding even then, so that any broker can parse the header of any ApiVersions request.

Response header v0: correlation_id int32.  v1 adds a tagged-field section.  ApiVersions responses
always use v0, because the client cannot know yet whether the broker speaks flexible versions.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from bmq.protocol.messages import REQUEST_FLEXIBLE_MIN_VERSIONS
from bmq.protocol.primitives import (
    DecodeError,
    Reader,
    Writer,
    skip_tagged_fields,
)

__all__ = [
    "API_VERSIONS_KEY",
    "RequestHeader",
    "read_request_header",
    "read_response_header",
    "request_header_version",
    "response_header_version",
    "write_request_header",
    "write_response_header",
]

API_VERSIONS_KEY = 18

_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_INT32 = struct.Struct(">i")

# api key -> first flexible version (None: never flexible)
_FLEXIBLE_MIN = REQUEST_FLEXIBLE_MIN_VERSIONS


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def _is_flexible(api_key: int, api_version: int) -> bool:
    first = _FLEXIBLE_MIN.get(api_key)
    return first is not None and api_version >= first


def request_header_version(api_key: int, api_version: int) -> int:
    """2 if that request version is flexible, else 1.  Unknown api keys: 1."""
    return 2 if _is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 if that response version is flexible, else 0.  ApiVersions is always 0."""
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if _is_flexible(api_key, api_version) else 0


def read_request_header(r: Reader) -> RequestHeader:
    """Decode a request header (v1 or v2, chosen from the api key and version it starts with).

    An unknown api key is decoded as v1 and returned; the caller decides how to answer.
    Raises :class:`DecodeError` on truncated/malformed input.
    """
    buf = r.buf
    pos = r.pos
    try:
        api_key, api_version, correlation_id, n = _FIXED.unpack_from(buf, pos)
    except struct.error:
        raise DecodeError("truncated request header") from None
    pos += 10
    client_id: str | None
    if n == -1:
        client_id = None
    else:
        m = buf[pos : pos + n]
        if len(m) != n:
            raise DecodeError("truncated or invalid client_id in request header")
        pos += n
        try:
            client_id = m.tobytes().decode()
        except UnicodeDecodeError as e:
            raise DecodeError(f"client_id is not valid UTF-8: {e}") from None
    if _is_flexible(api_key, api_version):
        if pos >= len(buf):
            raise DecodeError("truncated request header tagged fields")
        pos = pos + 1 if buf[pos] == 0 else skip_tagged_fields(buf, pos)
    r.pos = pos
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def write_request_header(w: Writer, header: RequestHeader) -> None:
    """Encode ``header`` as the version its api key/version calls for (client side)."""
    cid = header.client_id
    data = b"" if cid is None else cid.encode()
    w.buf += _FIXED.pack(
        header.api_key, header.api_version, header.correlation_id, -1 if cid is None else len(data)
    )
    w.buf += data
    if _is_flexible(header.api_key, header.api_version):
        w.buf.append(0)


def write_response_header(w: Writer, correlation_id: int, header_version: int) -> None:
    """Encode a response header of ``header_version`` (0 or 1)."""
    w.buf += _INT32.pack(correlation_id)
    if header_version >= 1:
        w.buf.append(0)


def read_response_header(r: Reader, header_version: int) -> int:
    """Decode a response header of ``header_version``; return the correlation id."""
    correlation_id = r.read_int32()
    if header_version >= 1:
        r.skip_tagged_fields()
    return correlation_id
