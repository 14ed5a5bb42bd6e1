"""The HTTP endpoint is bounded: an oversized body is refused before it is read, slow and idle
clients are cut off after http_timeout_ms, too many bodies in progress get 503, malformed
HTTP gets 400; each with a clear answer, and nothing is taken from any of them."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import BrokerProcess, make_topic_name
from tests.databus.conftest import (
    DatabusFactory,
    DatabusProcess,
    create_topic,
    read_all,
    wait_until,
)

TIMEOUT_MS = 3000
BODY_BYTES_IN_PROGRESS = 256 << 20      # bmq.databus.http.MAX_BODY_BYTES


def _connect(agent: DatabusProcess, request: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", agent.http_port), timeout=10)
    sock.sendall(request)
    return sock


def _headers(topic: str, length: int) -> bytes:
    return (f"POST /streams/{topic}?acks=spooled HTTP/1.1\r\nHost: databus\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


def _answer(sock: socket.socket) -> tuple[int, bytes]:
    """The status and body of the answer on ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed without an answer: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    fields = dict(line.split(b": ", 1) for line in head.split(b"\r\n")[1:])
    while len(body) < int(fields.get(b"Content-Length", b"0")):
        body += sock.recv(65536)
    return int(head.split()[1]), body


def test_oversized_bodies_too_many_in_progress_and_malformed_http_are_refused(
        cluster: BrokerProcess, agent: DatabusProcess, tmp_path: Path) -> None:
    topic = make_topic_name("bounds")
    create_topic(cluster, topic, 1)
    # A body announced larger than a message may be: 413 at once, before it is sent.
    with _connect(agent, _headers(topic, 5_000_000)) as too_large:
        status, body = _answer(too_large)
    assert (status, json.loads(body)["kafka_error"]) == (413, "MESSAGE_TOO_LARGE")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 2_000_000)
    done = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", "--data-binary", f"@{big}",
                           agent.url(f"/streams/{topic}")], capture_output=True, timeout=30)
    body, _, code = done.stdout.rpartition(b"\n")
    assert (code, json.loads(body)["kafka_error"]) == (b"413", "MESSAGE_TOO_LARGE")
    # Bodies in progress: as many as fit in the bound, announced and not sent; the next
    # request is refused until they are gone.
    fits = BODY_BYTES_IN_PROGRESS // 1_048_000
    waiting = [_connect(agent, _headers(topic, 1_048_000)) for _ in range(fits)]
    time.sleep(0.5)
    with _connect(agent, _headers(topic, 1_048_000)) as busy:
        status, body = _answer(busy)
    assert status == 503 and "databus busy" in json.loads(body)["error"], body
    for sock in waiting:
        sock.close()
    # Malformed HTTP: a header over 8,190 bytes, and not HTTP at all: 400, connection closed.
    for request in (f"POST /streams/{topic} HTTP/1.1\r\nX-Key: {'k' * 9000}\r\n"
                    f"Content-Length: 1\r\n\r\nx".encode(), b"\x16\x03\x01garbage\r\n\r\n"):
        with _connect(agent, request) as sock:
            assert _answer(sock)[0] == 400
    assert wait_until(lambda: agent.post(topic, b"after")[0] == 200, 10,
                      "the bodies in progress gone")
    assert [s[3] for s in read_all(cluster, topic, 1, 1)] == [b"after"]   # nothing else


@pytest.mark.slow          # the agent's timeout, 3 s, waited for
def test_slow_and_idle_clients_are_cut_off(cluster: BrokerProcess,
                                          databus_factory: DatabusFactory) -> None:
    topic = make_topic_name("slow")
    create_topic(cluster, topic, 1)
    agent = databus_factory(cluster, http_timeout_ms=TIMEOUT_MS)
    started = time.monotonic()
    slow_body = _connect(agent, _headers(topic, 100) + b"only ten b")
    slow_headers = _connect(agent, f"POST /streams/{topic} HTTP/1.1\r\nHost: a\r\n".encode())
    idle = _connect(agent, b"")
    status, body = _answer(slow_body)
    assert (status, json.loads(body)["error"]) == (408, "the body did not arrive within 3 s")
    assert _closed(slow_body) == b""
    assert _closed(slow_headers) == b"" and _closed(idle) == b""
    assert TIMEOUT_MS / 1000 <= time.monotonic() - started < TIMEOUT_MS / 1000 + 5
    for sock in (slow_body, slow_headers, idle):
        sock.close()
    assert agent.post(topic, b"after")[0] == 200
    assert [s[3] for s in read_all(cluster, topic, 1, 1)] == [b"after"]   # nothing else


def _closed(sock: socket.socket) -> bytes:
    """What more the agent sent on ``sock`` before it closed it."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data
