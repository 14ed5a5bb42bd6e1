"""Throw a few thousand random and mutated frames at a running broker; it must survive with
its data intact. Bounded in count and time; the RNG seed is printed for reproduction."""

from __future__ import annotations

import os
import random
import socket
import struct
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from . import kwire
from .helpers import consume, create_topic, produce_all, watermarks
from .kwire import KafkaWire, Record, build_record_batch

pytestmark = pytest.mark.timeout(150)

MAX_FRAMES = 6000
TIME_BUDGET_S = 40.0
CONNECTIONS = 1500
WORKERS = 16
IDLE_READ_S = 0.15


def _seed_frames(wire: KafkaWire, target: str) -> list[bytes]:
    """Valid request frames (several versions) to mutate."""
    versions = wire.api_versions()
    frames: list[bytes] = []
    cid = 1000

    def usable(api: int) -> list[int]:
        lo, hi = versions[api]
        top = min(hi, kwire.NON_FLEXIBLE_MAX[api])
        return sorted({v for v in (lo, (lo + top) // 2, top) if lo <= v <= top})

    batch_plain = build_record_batch([Record(b"key", b"value" * 20, [("h", b"v")]),
                                      Record(None, b"x", [])])
    batch_many = build_record_batch([Record(str(i).encode(), os.urandom(30), [])
                                     for i in range(20)])
    for v in usable(kwire.PRODUCE):
        for batch in (batch_plain, batch_many):
            frames.append(kwire.request_frame(kwire.PRODUCE, v, cid,
                                              kwire.produce_body(v, target, 0, batch)))
            cid += 1
    for v in usable(kwire.FETCH):
        frames.append(kwire.request_frame(kwire.FETCH, v, cid,
                                          kwire.fetch_body(v, target, 0, 0, max_wait_ms=10)))
        cid += 1
    for v in usable(kwire.METADATA):
        frames.append(kwire.request_frame(kwire.METADATA, v, cid,
                                          kwire.metadata_body(v, [target])))
        cid += 1
    for v in usable(kwire.LIST_OFFSETS):
        frames.append(kwire.request_frame(kwire.LIST_OFFSETS, v, cid,
                                          kwire.list_offsets_body(v, target, 0, -1)))
        cid += 1
    frames.append(kwire.request_frame(kwire.API_VERSIONS, 0, cid, b""))
    return frames


INTERESTING_INT32 = [0, 1, -1, 0x7FFFFFFF, -0x80000000, 0x10000, 255, 65535, 61, 12]


def mutate(rng: random.Random, frame: bytes, seeds: list[bytes]) -> bytes:
    data = bytearray(frame)
    kind = rng.randrange(10)
    if kind == 0:  # flip a few bits anywhere after the size prefix
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(4, len(data))
            data[i] ^= 1 << rng.randrange(8)
    elif kind == 1:  # overwrite bytes with boundary values
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(4, len(data))
            data[i] = rng.choice([0x00, 0xFF, 0x7F, 0x80, 0x01])
    elif kind == 2:  # truncate, keep the size prefix consistent
        cut = rng.randrange(4, len(data))
        data = data[:cut]
        data[0:4] = struct.pack(">i", len(data) - 4)
    elif kind == 3:  # truncate, leave the size prefix claiming the original length
        data = data[:rng.randrange(4, len(data))]
    elif kind == 4:  # change the size prefix
        delta = rng.choice([-100, -5, -1, 1, 3, 100, 10_000])
        data[0:4] = struct.pack(">i", max(-(2**31), min(2**31 - 1, len(data) - 4 + delta)))
    elif kind == 5:  # overwrite an int32 somewhere (length fields, counts, offsets)
        i = rng.randrange(4, max(5, len(data) - 4))
        data[i:i + 4] = struct.pack(">i", rng.choice(INTERESTING_INT32))
    elif kind == 6:  # overwrite an int16 (string lengths, api key/version, error codes)
        i = rng.randrange(4, max(5, len(data) - 2))
        data[i:i + 2] = struct.pack(">h", rng.choice([0, -1, 1, 0x7FFF, -0x8000, 2, 255]))
    elif kind == 7:  # insert or delete a chunk, keep the prefix consistent
        i = rng.randrange(4, len(data))
        if rng.random() < 0.5:
            data[i:i] = rng.randbytes(rng.randint(1, 32))
        else:
            del data[i:i + rng.randint(1, 32)]
        data[0:4] = struct.pack(">i", len(data) - 4)
    elif kind == 8:  # splice two frames
        other = rng.choice(seeds)
        i = rng.randrange(4, len(data))
        j = rng.randrange(4, len(other))
        data = data[:i] + bytearray(other[j:])
        data[0:4] = struct.pack(">i", len(data) - 4)
    else:  # entirely random body behind a plausible size prefix
        body = rng.randbytes(rng.randint(0, 300))
        if rng.random() < 0.5 and len(body) >= 4:  # make the api key/version plausible
            body = struct.pack(">hh", rng.randrange(0, 70), rng.randrange(0, 15)) + body[4:]
        data = bytearray(struct.pack(">i", len(body)) + body)
    return bytes(data)


def _one_connection(bootstrap: str, frames: list[bytes]) -> tuple[int, int]:
    """Send frames pipelined on one connection, read whatever comes back until the server
    closes or stays quiet for a moment. Returns (frames sent, response bytes received)."""
    host, port = bootstrap.rsplit(":", 1)
    sent = received = 0
    try:
        with socket.create_connection((host, int(port)), timeout=2) as sock:
            sock.settimeout(1.0)
            for frame in frames:
                try:
                    sock.sendall(frame)
                    sent += 1
                except OSError:
                    break
            sock.settimeout(IDLE_READ_S)
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:
                try:
                    chunk = sock.recv(65536)
                except (TimeoutError, OSError):
                    break
                if not chunk:
                    break
                received += len(chunk)
    except OSError:
        pass
    return sent, received


def test_fuzz_survives_and_keeps_data(broker, unique_topic):
    seed = int(os.environ.get("BMQ_FUZZ_SEED", random.randrange(1 << 30)))
    print(f"fuzz seed: {seed} (set BMQ_FUZZ_SEED to reproduce)")
    rng = random.Random(seed)

    precious = unique_topic("precious")
    target = unique_topic("target")
    create_topic(broker.bootstrap, precious, partitions=2)
    create_topic(broker.bootstrap, target, partitions=1)
    items = [{"key": f"key-{i}".encode(), "value": rng.randbytes(rng.randint(0, 2000)),
              "partition": i % 2, "headers": [("n", str(i).encode())]} for i in range(400)]
    produce_all(broker.bootstrap, precious, items[:200], compression_type="gzip")
    produce_all(broker.bootstrap, precious, items[200:])
    marks_before = [watermarks(broker.bootstrap, precious, p) for p in range(2)]

    with KafkaWire(broker.bootstrap) as wire:
        seeds = _seed_frames(wire, target)
        # Every seed is valid: it gets a response.
        for frame in seeds:
            wire.send_raw(frame)
            wire.recv_frame()

    # Plan the work up front (deterministic for a given seed).
    plans: list[list[bytes]] = []
    total = 0
    while total < MAX_FRAMES and len(plans) < CONNECTIONS:
        frames = []
        # Mostly short connections: the broker drops a connection at the first bad frame, so
        # frames behind it on the same connection are never parsed.
        for _ in range(rng.choice([1, 1, 2, 3, 5, 10])):
            base = rng.choice(seeds)
            frames.append(base if rng.random() < 0.15 else mutate(rng, base, seeds))
        plans.append(frames)
        total += len(frames)

    start = time.monotonic()
    sent_total = received_total = answered = 0
    with ThreadPoolExecutor(WORKERS) as pool:
        futures = []
        for frames in plans:
            futures.append(pool.submit(
                lambda fr=frames: _one_connection(broker.bootstrap, fr)
                if time.monotonic() - start < TIME_BUDGET_S else (0, 0)))
        for future in futures:
            sent, received = future.result()
            sent_total += sent
            received_total += received
            answered += received > 0
    elapsed = time.monotonic() - start
    print(f"fuzz: {len(plans)} connections, {sent_total}/{total} frames sent in {elapsed:.1f}s; "
          f"{answered} connections got {received_total} response bytes")
    assert elapsed < 60
    assert sent_total >= 1000, "too few frames reached the broker to call this a fuzz run"

    # The broker is alive and answers.
    assert broker.is_running(), f"broker died during fuzzing (seed {seed})\n{broker.log_tail()}"
    with KafkaWire(broker.bootstrap) as wire:
        assert kwire.PRODUCE in wire.api_versions()
        # Whatever was accepted into the target topic is well-formed.
        offset, hw = 0, wire.list_offset(target, 0, -1)[1]
        while offset < hw:
            fetched = wire.fetch(target, 0, offset)
            assert fetched.error_code == 0
            batches = kwire.parse_record_batches(fetched.records or b"")
            assert batches, f"no batch at offset {offset} below high watermark {hw}"
            for b in batches:
                assert b.magic == 2 and b.crc_ok(), f"stored batch at {b.base_offset} is corrupt"
            offset = batches[-1].base_offset + batches[-1].last_offset_delta + 1

    # The topic written before fuzzing reads back byte-exact.
    assert [watermarks(broker.bootstrap, precious, p) for p in range(2)] == marks_before
    got = consume(broker.bootstrap, precious, [0, 1], expected=400)
    for p in range(2):
        expected = [(it["key"], it["value"], it["headers"]) for it in items[p::2]]
        actual = [(m.key, m.value or b"", m.headers) for m in got[p]]
        assert actual == expected, f"partition {p} of the pre-fuzz topic changed"

    # And new traffic works.
    fresh = unique_topic("after")
    create_topic(broker.bootstrap, fresh, partitions=1)
    produce_all(broker.bootstrap, fresh, [{"value": f"after-{i}".encode()} for i in range(50)])
    got = consume(broker.bootstrap, fresh, [0], expected=50)[0]
    assert [m.value for m in got] == [f"after-{i}".encode() for i in range(50)]
    assert broker.is_running()
    # Bad input is logged and refused, never an unhandled exception.
    log_text = broker.log_text()
    assert "Traceback" not in log_text, \
        log_text[max(0, log_text.index("Traceback") - 500):][:4000]
