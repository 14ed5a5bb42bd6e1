"""Produce v0-2: decoded and answered rather than disconnected.

Kafka 4 removed them from the spec but lists Produce v0 in ApiVersions for librdkafka
(KAFKA-18659); BMQ serves them to old clients (issue #36). kio follows the spec, so these wire
layouts are checked by hand here (and against kafka-python in test_legacy_versions.py).
"""

import struct

from bmq.protocol.messages import ProduceRequest, ProduceResponse
from bmq.protocol.messages.produce_response import PartitionProduceResponse, TopicProduceResponse
from bmq.protocol.primitives import Reader, Writer


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def test_v0_request_has_no_transactional_id() -> None:
    records = b"\x00" * 70
    body = (struct.pack(">hi", 1, 1500) + struct.pack(">i", 1) + _string("orders")
            + struct.pack(">i", 1) + struct.pack(">i", 4)
            + struct.pack(">i", len(records)) + records)
    for version in (0, 1, 2):
        request = ProduceRequest.read(Reader(bytearray(body)), version)
        assert (request.acks, request.timeout_ms, request.transactional_id) == (1, 1500, None)
        [topic] = request.topic_data
        assert topic.name == "orders"
        assert topic.partition_data[0].index == 4
        assert bytes(topic.partition_data[0].records or b"") == records


def test_response_layouts_v0_to_v2() -> None:
    response = ProduceResponse(throttle_time_ms=7, responses=[TopicProduceResponse(
        name="orders", partition_responses=[PartitionProduceResponse(
            index=4, error_code=35, base_offset=-1, log_append_time_ms=-1)])])
    v0 = (struct.pack(">i", 1) + _string("orders") + struct.pack(">i", 1)
          + struct.pack(">ihq", 4, 35, -1))
    expected = {0: v0, 1: v0 + struct.pack(">i", 7),
                2: v0 + struct.pack(">q", -1) + struct.pack(">i", 7)}
    for version, wire in expected.items():
        writer = Writer()
        response.write(writer, version)
        assert writer.getvalue() == wire, version
