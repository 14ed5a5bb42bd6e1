"""Malformed and refused requests over raw sockets: the right error codes, nothing written,
clean disconnects, and a server that keeps serving normal clients afterwards."""

from __future__ import annotations

import os
import random
import struct

import pytest

from bmq.protocol.errors import ErrorCode

from . import kwire
from .helpers import consume, create_topic, produce_all, watermarks
from .kwire import KafkaWire, Record, build_record_batch

pytestmark = pytest.mark.timeout(60)

MESSAGE_MAX_BYTES = 100_000
SOCKET_REQUEST_MAX_BYTES = 1_000_000


@pytest.fixture(scope="module")
def server(module_broker_factory):
    return module_broker_factory(env={
        "BMQ_MESSAGE_MAX_BYTES": MESSAGE_MAX_BYTES,
        "BMQ_SOCKET_REQUEST_MAX_BYTES": SOCKET_REQUEST_MAX_BYTES,
    })


@pytest.fixture(scope="module")
def canary(server):
    """A topic written before any bad input; it must read back unchanged after each test."""
    name = "canary-" + os.urandom(4).hex()
    create_topic(server.bootstrap, name, partitions=1)
    items = [{"key": f"k{i}".encode(), "value": os.urandom(64) + bytes([i % 256]) * i,
              "headers": [("h", str(i).encode())]} for i in range(100)]
    produce_all(server.bootstrap, name, items, compression_type="lz4")
    return name, [(it["key"], it["value"]) for it in items]


def assert_healthy(server, canary):
    assert server.is_running(), f"broker process died:\n{server.log_tail()}"
    with KafkaWire(server.bootstrap) as wire:
        assert kwire.API_VERSIONS in wire.api_versions()
    name, expected = canary
    got = consume(server.bootstrap, name, [0], expected=len(expected), timeout=30)[0]
    assert [(m.key, m.value) for m in got] == expected, "canary topic changed"
    assert [m.offset for m in got] == list(range(len(expected)))


def simple_batch(n=3, size=10):
    return build_record_batch([Record(f"k{i}".encode(), os.urandom(size), [("x", b"y")])
                               for i in range(n)])


def test_produce_to_unknown_topic_or_partition(server, canary, unique_topic):
    missing = unique_topic("missing")
    with KafkaWire(server.bootstrap) as wire:
        result = wire.produce(missing, 0, simple_batch())
        assert result.error_code == kwire.UNKNOWN_TOPIC_OR_PARTITION
        # Produce never auto-creates a topic.
        topics = wire.metadata([missing], allow_auto_create=False)
        assert topics[missing][0] == kwire.UNKNOWN_TOPIC_OR_PARTITION

    existing = unique_topic("one-partition")
    create_topic(server.bootstrap, existing, partitions=1)
    with KafkaWire(server.bootstrap) as wire:
        result = wire.produce(existing, 7, simple_batch())
        assert result.error_code == kwire.UNKNOWN_TOPIC_OR_PARTITION
        ok = wire.produce(existing, 0, simple_batch())
        assert (ok.error_code, ok.base_offset) == (0, 0)
    assert_healthy(server, canary)


@pytest.mark.parametrize("where", ["records", "crc", "attributes", "last-byte"])
def test_corrupt_batch_is_rejected_and_not_written(server, canary, unique_topic, where):
    topic = unique_topic(where)
    create_topic(server.bootstrap, topic, partitions=1)
    good = build_record_batch([Record(b"good", b"first record")])
    with KafkaWire(server.bootstrap) as wire:
        assert wire.produce(topic, 0, good).error_code == 0
        bad = bytearray(simple_batch(n=5, size=50))
        position = {"records": 61 + 20, "crc": 17, "attributes": 22,
                    "last-byte": len(bad) - 1}[where]
        bad[position] ^= 0x10
        result = wire.produce(topic, 0, bytes(bad))
        assert result.error_code == kwire.CORRUPT_MESSAGE, \
            f"flipped byte at {position} ({where}): got error {result.error_code}"
        assert wire.list_offset(topic, 0, -1) == (0, 1), "end offset moved"
        fetched = wire.fetch(topic, 0, 0)
        assert fetched.error_code == 0
        assert fetched.high_watermark == 1
        batches = kwire.parse_record_batches(fetched.records or b"")
        assert len(batches) == 1 and batches[0].crc_ok()
        assert [(r.key, r.value) for _, r in batches[0].records] == [(b"good", b"first record")]
        # The connection is still usable and the next good batch gets offset 1.
        again = wire.produce(topic, 0, good)
        assert (again.error_code, again.base_offset) == (0, 1)
    assert watermarks(server.bootstrap, topic) == (0, 2)
    assert_healthy(server, canary)


# Kafka: clients never write control batches (INVALID_RECORD); a transactional batch without a
# transactional id fails the transactional-id authorization (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
@pytest.mark.parametrize(("kind", "attributes", "error"), [
    ("control", 0x20, ErrorCode.INVALID_RECORD),
    ("transactional", 0x10, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)])
def test_control_and_transactional_batches_from_clients_are_refused(server, canary, unique_topic,
                                                                     kind, attributes, error):
    topic = unique_topic(kind)
    create_topic(server.bootstrap, topic, partitions=1)
    with KafkaWire(server.bootstrap) as wire:
        forged = build_record_batch([Record(b"k", b"v")], attributes=attributes,
                                    producer_id=7, producer_epoch=0, base_sequence=0)
        assert wire.produce(topic, 0, forged).error_code == error
        assert wire.list_offset(topic, 0, -1) == (0, 0), "end offset moved"
    assert_healthy(server, canary)


def test_batch_larger_than_max_message_bytes(server, canary, unique_topic):
    default_topic = unique_topic("default-limit")
    small_topic = unique_topic("small-limit")
    create_topic(server.bootstrap, default_topic, partitions=1)
    create_topic(server.bootstrap, small_topic, partitions=1,
                 config={"max.message.bytes": "10000"})
    with KafkaWire(server.bootstrap) as wire:
        # Broker-wide default (BMQ_MESSAGE_MAX_BYTES) applies to topics without an override.
        big = build_record_batch([Record(None, os.urandom(MESSAGE_MAX_BYTES + 1000))])
        assert wire.produce(default_topic, 0, big).error_code == kwire.MESSAGE_TOO_LARGE
        fits = build_record_batch([Record(None, os.urandom(MESSAGE_MAX_BYTES - 1000))])
        assert wire.produce(default_topic, 0, fits).error_code == 0
        # A topic override lowers the limit for that topic only.
        medium = build_record_batch([Record(None, os.urandom(20_000))])
        assert wire.produce(small_topic, 0, medium).error_code == kwire.MESSAGE_TOO_LARGE
        many_small = build_record_batch([Record(None, os.urandom(1000)) for _ in range(15)])
        assert wire.produce(small_topic, 0, many_small).error_code == kwire.MESSAGE_TOO_LARGE
        tiny = build_record_batch([Record(None, b"tiny")])
        assert wire.produce(small_topic, 0, tiny).error_code == 0
    assert watermarks(server.bootstrap, default_topic) == (0, 1)
    assert watermarks(server.bootstrap, small_topic) == (0, 1)
    assert_healthy(server, canary)


def test_create_topics_invalid_names(server, canary, unique_topic):
    good = unique_topic("good")
    bad_names = ["bad name", "bad/name", "bad!", ".", "..", "x" * 250, ""]
    with KafkaWire(server.bootstrap) as wire:
        result = wire.create_topics([(name, 1, 1) for name in bad_names] + [(good, 1, 1)])
        for name in bad_names:
            assert result[name][0] == kwire.INVALID_TOPIC_EXCEPTION, (name, result[name])
        assert result[good][0] == 0
        topics = wire.metadata(None)
    assert good in topics
    assert not set(bad_names) & set(topics)
    # Metadata with auto-creation on refuses invalid names instead of creating them.
    with KafkaWire(server.bootstrap) as wire:
        result = wire.metadata(["bad name", "x" * 250], allow_auto_create=True)
        assert result["bad name"][0] == kwire.INVALID_TOPIC_EXCEPTION
        assert result["x" * 250][0] == kwire.INVALID_TOPIC_EXCEPTION
        assert "bad name" not in wire.metadata(None)
    assert_healthy(server, canary)


def test_api_versions_with_too_high_version(server, canary):
    with KafkaWire(server.bootstrap) as wire:
        # Request header v2 (flexible) as a newer client would send it, v3-style body.
        header = (kwire.i16(kwire.API_VERSIONS) + kwire.i16(99) + kwire.i32(4242)
                  + kwire.string("future-client") + b"\x00")
        body = b"\x07future" + b"\x041.0" + b"\x00"
        payload = header + body
        wire.send_raw(kwire.i32(len(payload)) + payload)
        frame = wire.recv_frame()
        (correlation,) = struct.unpack_from(">i", frame)
        assert correlation == 4242
        # A v0 response body: error code, then the api key list.
        error, keys = kwire.parse_api_versions_response(frame[4:])
        assert error == kwire.UNSUPPORTED_VERSION
        assert {kwire.API_VERSIONS, kwire.PRODUCE, kwire.FETCH, kwire.METADATA} <= set(keys)
        assert keys[kwire.API_VERSIONS][0] == 0
        # The connection stays usable: the client retries with a version it can speak.
        error, again = kwire.parse_api_versions_response(
            wire.request(kwire.API_VERSIONS, 0, b""))
        assert error == 0 and again == keys
    assert_healthy(server, canary)


def test_unknown_api_key_disconnects(server, canary):
    with KafkaWire(server.bootstrap) as wire:
        wire.send_raw(kwire.request_frame(1000, 0, 1, b""))
        assert wire.wait_disconnect(5) == b"", "server answered an unknown api key"
    with KafkaWire(server.bootstrap) as wire:
        # An api key the broker does not advertise (JoinGroup) is not answered either.
        versions = wire.api_versions()
        unused = next(k for k in range(0, 80) if k not in versions)
        wire.send_raw(kwire.request_frame(unused, 0, 2, b"\x00" * 16))
        assert wire.wait_disconnect(5) == b""
    with KafkaWire(server.bootstrap) as wire:
        # A served api at a version nobody supports: no answer either, the connection closes.
        wire.send_raw(kwire.request_frame(kwire.METADATA, 999, 3, kwire.metadata_body(1, None)))
        assert wire.wait_disconnect(5) == b""
    assert_healthy(server, canary)


def test_frame_over_socket_request_max_bytes_disconnects(server, canary):
    with KafkaWire(server.bootstrap) as wire:
        wire.send_raw(kwire.i32(SOCKET_REQUEST_MAX_BYTES + 1) + b"\x00\x12\x00\x00")
        assert wire.wait_disconnect(5) == b""
    with KafkaWire(server.bootstrap) as wire:
        wire.send_raw(kwire.i32(-5))
        assert wire.wait_disconnect(5) == b""
    # A frame just under the limit is read and answered normally (a big Metadata request).
    with KafkaWire(server.bootstrap) as wire:
        names = [f"no-such-topic-{i:06d}" for i in range(20_000)]
        topics = wire.metadata(names)
        assert len(topics) == len(names)
        assert {err for err, _ in topics.values()} == {kwire.UNKNOWN_TOPIC_OR_PARTITION}
    assert_healthy(server, canary)


_RNG = random.Random(20240601)


@pytest.mark.parametrize("payload", [
    b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
    b"\xff\xff\xff\xff" + _RNG.randbytes(100),
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + _RNG.randbytes(64),  # TLS ClientHello
    b"\x00\x00\x00\x20\x7f\x7f" + _RNG.randbytes(30),  # api key 32639: unknown
], ids=["http", "negative-size", "tls-hello", "random-body"])
def test_garbage_disconnects(server, canary, payload):
    with KafkaWire(server.bootstrap) as wire:
        wire.send_raw(payload)
        response = wire.wait_disconnect(5)
        assert response == b"", f"server answered garbage with {response[:40]!r}"
    assert_healthy(server, canary)


def test_malformed_produce_body_disconnects(server, canary, unique_topic):
    topic = unique_topic("malformed")
    create_topic(server.bootstrap, topic, partitions=1)
    with KafkaWire(server.bootstrap) as wire:
        v = wire.version_for(kwire.PRODUCE)
        body = kwire.produce_body(v, topic, 0, simple_batch())
        # Cut inside the topic array; the frame length matches the shortened request.
        wire.send_raw(kwire.request_frame(kwire.PRODUCE, v, 7, body[:15]))
        assert wire.wait_disconnect(5) == b""
    assert watermarks(server.bootstrap, topic) == (0, 0)
    assert_healthy(server, canary)


def test_pipelined_requests_answered_in_order(server, canary, unique_topic):
    """Several requests written at once come back in order with matching correlation ids."""
    topic = unique_topic("pipelined")
    create_topic(server.bootstrap, topic, partitions=1)
    with KafkaWire(server.bootstrap) as wire:
        pv = wire.version_for(kwire.PRODUCE)
        mv = wire.version_for(kwire.METADATA)
        frames = []
        for cid in range(1, 31):
            if cid % 3 == 0:
                frames.append(kwire.request_frame(kwire.METADATA, mv, cid,
                                                  kwire.metadata_body(mv, [topic])))
            else:
                frames.append(kwire.request_frame(
                    kwire.PRODUCE, pv, cid,
                    kwire.produce_body(pv, topic, 0, simple_batch(n=1))))
        wire.send_raw(b"".join(frames))
        offsets = []
        for cid in range(1, 31):
            frame = wire.recv_frame()
            assert struct.unpack_from(">i", frame)[0] == cid
            if cid % 3:
                res = kwire.parse_produce_response(pv, frame[4:])[(topic, 0)]
                assert res.error_code == 0
                offsets.append(res.base_offset)
        assert offsets == list(range(20))
    assert_healthy(server, canary)
