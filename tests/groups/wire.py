"""A minimal blocking Kafka client built on BMQ's own codec, for exact group requests."""

from __future__ import annotations

import socket
import struct
from typing import Any

from bmq.protocol.headers import (
    RequestHeader,
    read_response_header,
    response_header_version,
    write_request_header,
)
from bmq.protocol.messages import RESPONSE_TYPES
from bmq.protocol.primitives import Reader, Writer

_SIZE = struct.Struct(">i")


class RawClient:
    """One connection; ``call`` sends a request of a given version and decodes the answer."""

    def __init__(self, bootstrap: str, client_id: str = "raw-test", timeout: float = 30) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.client_id = client_id
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, request: Any, version: int) -> int:
        self._correlation += 1
        w = Writer()
        write_request_header(w, RequestHeader(request.API_KEY, version, self._correlation,
                                              self.client_id))
        request.write(w, version)
        data = w.getvalue()
        self.sock.sendall(_SIZE.pack(len(data)) + data)
        return self._correlation

    def receive(self, api_key: int, version: int, correlation: int) -> Any:
        size = _SIZE.unpack(self._recv(4))[0]
        r = Reader(self._recv(size))
        got = read_response_header(r, response_header_version(api_key, version))
        assert got == correlation, (got, correlation)
        response = RESPONSE_TYPES[api_key].read(r, version)
        assert r.remaining() == 0, f"{r.remaining()} bytes left after the response"
        return response

    def call(self, request: Any, version: int) -> Any:
        correlation = self.send(request, version)
        return self.receive(request.API_KEY, version, correlation)

    def _recv(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)
