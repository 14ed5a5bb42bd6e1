"""confluent-kafka (librdkafka) producing to and consuming from a real `bmq serve`."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TopicPartition,
)

from . import kwire
from .helpers import consume, consumer, create_topic, produce_all

pytestmark = pytest.mark.timeout(120)

CODEC_IDS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def test_round_trip_keys_values_headers_timestamps(module_broker, topic):
    # Old explicit timestamps below: keep time-based retention out of the picture.
    create_topic(module_broker.bootstrap, topic, partitions=1, config={"retention.ms": "-1"})
    binary = bytes(range(256))
    explicit_ts = 1_600_000_000_123
    items = [
        {"key": b"k1", "value": b"plain value"},
        {"key": None, "value": b"value without a key"},
        {"key": b"tombstone", "value": None},
        {"key": None, "value": None},
        {"key": b"hdrs", "value": b"with headers",
         "headers": [("dup", b"first"), ("dup", b"second"), ("bin", binary),
                     ("empty", b""), ("unicode-\u00e9", "v\u00e9".encode())]},
        {"key": binary, "value": b"\x00\x01\x00" + binary},
        {"key": b"ts", "value": b"explicit timestamp", "timestamp": explicit_ts},
        {"key": b"ts-old", "value": b"old timestamp", "timestamp": 1000},
    ]
    before = int(time.time() * 1000)
    log = produce_all(module_broker.bootstrap, topic, items, linger_ms=0)
    after = int(time.time() * 1000)
    assert sorted(offset for *_, offset in log.ok) == list(range(len(items)))

    got = consume(module_broker.bootstrap, topic, [0], expected=len(items))[0]
    assert [m.offset for m in got] == list(range(len(items)))
    for item, m in zip(items, got, strict=True):
        assert m.key == item["key"], m
        assert m.value == item["value"], m
        assert m.timestamp_type == TIMESTAMP_CREATE_TIME
        if "timestamp" in item:
            assert m.timestamp == item["timestamp"]
        else:
            assert before - 1000 <= m.timestamp <= after + 1000
    headers = got[4].headers
    assert headers == [("dup", b"first"), ("dup", b"second"), ("bin", binary),
                       ("empty", b""), ("unicode-\u00e9", "v\u00e9".encode())]
    assert got[0].headers is None


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_round_trip_byte_exact(module_broker, topic, codec):
    create_topic(module_broker.bootstrap, topic, partitions=1)
    values = []
    for i in range(300):
        if i % 3 == 0:
            values.append(os.urandom(1 + i * 7))  # incompressible
        elif i % 3 == 1:
            values.append((f"record {i} " * (i % 50 + 1)).encode())  # very compressible
        else:
            values.append(b"")
    items = [{"key": f"k{i}".encode(), "value": v,
              "headers": [("i", str(i).encode())]} for i, v in enumerate(values)]
    produce_all(module_broker.bootstrap, topic, items, compression_type=codec,
                linger_ms=50, batch_num_messages=100)

    got = consume(module_broker.bootstrap, topic, [0], expected=len(items))[0]
    assert [m.offset for m in got] == list(range(len(items)))
    for i, m in enumerate(got):
        assert m.key == f"k{i}".encode()
        # librdkafka hands back an empty value as b"" or None; the bytes must match otherwise.
        assert (m.value or b"") == values[i], f"record {i} differs after {codec}"
        assert m.headers == [("i", str(i).encode())]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_requested_codec_is_used_and_kept(module_broker, topic, codec):
    """librdkafka compresses with the requested codec, and with compression.type=producer the
    broker serves the batches in that codec (what a user sees as on-disk/network savings).

    Note: librdkafka decides whether the broker "supports" lz4 from ApiVersions: its LZ4
    feature depends on FindCoordinator (api key 10) being advertised; without it librdkafka
    silently sends lz4 batches uncompressed.
    """
    create_topic(module_broker.bootstrap, topic, partitions=1)
    produce_all(module_broker.bootstrap, topic,
                [{"value": f"compressible record {i} ".encode() * 20} for i in range(50)],
                compression_type=codec, linger_ms=50)
    with kwire.KafkaWire(module_broker.bootstrap) as wire:
        fetched = wire.fetch(topic, 0, 0)
        assert fetched.error_code == 0
        batches = kwire.parse_record_batches(fetched.records or b"")
    assert batches, "raw fetch returned no batches"
    assert all(b.crc_ok() for b in batches)
    stored = {b.compression for b in batches}
    assert stored == {CODEC_IDS[codec]}, (
        f"batches produced with compression.type={codec} are served with codec ids {stored} "
        f"(expected {CODEC_IDS[codec]}); ApiVersions advertises "
        f"{sorted(wire_versions(module_broker))}")


def wire_versions(broker):
    with kwire.KafkaWire(broker.bootstrap) as wire:
        return wire.api_versions()


def test_one_megabyte_messages(module_broker, topic):
    create_topic(module_broker.bootstrap, topic, partitions=1)
    values = [os.urandom(1_000_000) for _ in range(5)]
    produce_all(module_broker.bootstrap, topic, [{"key": str(i).encode(), "value": v}
                                                  for i, v in enumerate(values)],
                message_max_bytes=1_048_576, linger_ms=0)
    got = consume(module_broker.bootstrap, topic, [0], expected=len(values))[0]
    assert [m.value for m in got] == values
    assert [m.offset for m in got] == list(range(5))


def test_two_mebibyte_messages_with_topic_max_message_bytes(module_broker, topic):
    """A topic-level max.message.bytes above the default admits bigger batches, and a consumer
    with the default max.partition.fetch.bytes (1 MiB) still receives them (KIP-74)."""
    create_topic(module_broker.bootstrap, topic, partitions=1,
                 config={"max.message.bytes": "5000000"})
    values = [os.urandom(2 * 1024 * 1024) for _ in range(3)]
    produce_all(module_broker.bootstrap, topic, [{"value": v} for v in values],
                message_max_bytes=4_000_000, batch_size=4_000_000, linger_ms=0)
    got = consume(module_broker.bootstrap, topic, [0], expected=len(values))[0]
    assert [m.value for m in got] == values


@pytest.mark.timeout(180)
def test_100k_messages_over_8_partitions(module_broker, topic):
    n = 100_000
    create_topic(module_broker.bootstrap, topic, partitions=8)
    items = ({"key": f"key-{i}".encode(), "value": f"{i:08d}".encode()} for i in range(n))
    log = produce_all(module_broker.bootstrap, topic, items, timeout=120, linger_ms=20,
                      batch_num_messages=5000, queue_buffering_max_messages=200_000)
    assert len(log.ok) == n
    acked = {value: (partition, offset) for _, value, partition, offset in log.ok}
    assert len(acked) == n
    used_partitions = {p for p, _ in acked.values()}
    assert len(used_partitions) == 8, f"keys landed in only {sorted(used_partitions)}"

    got = consume(module_broker.bootstrap, topic, range(8), expected=n, timeout=120)
    counts = Counter()
    for partition, msgs in got.items():
        assert [m.offset for m in msgs] == list(range(len(msgs))), \
            f"partition {partition}: offsets not contiguous from 0"
        seqs = [int(m.value) for m in msgs]
        assert seqs == sorted(seqs), f"partition {partition}: producer order not preserved"
        for m in msgs:
            counts[m.value] += 1
            assert acked[m.value] == (partition, m.offset), \
                f"{m.value!r} acknowledged at {acked[m.value]}, read at {(partition, m.offset)}"
    assert len(counts) == n
    assert set(counts.values()) == {1}


def test_log_append_time_topic(module_broker, topic):
    """message.timestamp.type=LogAppendTime: the broker stamps records with its own clock."""
    create_topic(module_broker.bootstrap, topic, partitions=1,
                 config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    produce_all(module_broker.bootstrap, topic,
                [{"value": f"v{i}".encode(), "timestamp": 1_000_000 + i} for i in range(10)])
    after = int(time.time() * 1000)
    got = consume(module_broker.bootstrap, topic, [0], expected=10)[0]
    assert [m.value for m in got] == [f"v{i}".encode() for i in range(10)]
    for m in got:
        assert m.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
        assert before - 1000 <= m.timestamp <= after + 1000, m.timestamp


def test_concurrent_producers_share_partitions(module_broker, topic):
    """Several independent producers appending to the same partitions at once: every record is
    stored once, offsets are unique and contiguous, each producer's order is kept."""
    create_topic(module_broker.bootstrap, topic, partitions=2)
    producers, per_producer = 6, 5000
    logs = [None] * producers

    def run(pid):
        logs[pid] = produce_all(
            module_broker.bootstrap, topic,
            ({"key": f"p{pid}".encode(), "value": f"{pid}:{i:06d}".encode(), "partition": i % 2}
             for i in range(per_producer)),
            linger_ms=1, batch_num_messages=50, acks="all")

    threads = [threading.Thread(target=run, args=(pid,)) for pid in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert all(log is not None and len(log.ok) == per_producer for log in logs)
    acked = {value: (p, o) for log in logs for _, value, p, o in log.ok}
    assert len(set(acked.values())) == producers * per_producer, "offsets handed out twice"

    got = consume(module_broker.bootstrap, topic, [0, 1], expected=producers * per_producer)
    for partition, msgs in got.items():
        assert [m.offset for m in msgs] == list(range(len(msgs)))
        last = {}
        for m in msgs:
            assert acked[m.value] == (partition, m.offset)
            pid, seq = m.value.decode().split(":")
            assert int(seq) > last.get(pid, -1), "a producer's records were reordered"
            last[pid] = int(seq)


def test_consumer_tailing_a_partition_while_producing(module_broker, topic):
    """A consumer reading while records are appended never sees gaps, duplicates or records
    out of order, and ends with everything."""
    create_topic(module_broker.bootstrap, topic, partitions=1)
    total = 30_000
    seen = []
    stop = threading.Event()

    def tail():
        c = consumer(module_broker.bootstrap, enable_partition_eof=False, fetch_wait_max_ms=100)
        try:
            c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            while not stop.is_set() and len(seen) < total:
                for m in c.consume(num_messages=1000, timeout=0.2):
                    assert m.error() is None, m.error()
                    seen.append((m.offset(), m.value()))
        finally:
            c.close()

    reader = threading.Thread(target=tail)
    reader.start()
    try:
        produce_all(module_broker.bootstrap, topic,
                    ({"value": f"{i:06d}".encode()} for i in range(total)),
                    linger_ms=2, batch_num_messages=200, compression_type="zstd")
        reader.join(60)
    finally:
        stop.set()
        reader.join(10)
    assert len(seen) == total
    assert [o for o, _ in seen] == list(range(total))
    assert [v for _, v in seen] == [f"{i:06d}".encode() for i in range(total)]
