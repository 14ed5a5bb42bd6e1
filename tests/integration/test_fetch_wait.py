"""Fetch long-polling: prompt wake-up on produce, and no busy-looping while idle."""

from __future__ import annotations

import statistics
import time

import pytest
from confluent_kafka import OFFSET_END, TopicPartition

from .helpers import consumer, create_topic, producer

pytestmark = pytest.mark.timeout(90)


def test_long_poll_returns_promptly_after_produce(broker, topic):
    create_topic(broker.bootstrap, topic, partitions=1)
    c = consumer(broker.bootstrap, fetch_wait_max_ms=5000, enable_partition_eof=False)
    p = producer(broker.bootstrap, linger_ms=0, acks="all")
    latencies = []
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_END)])
        # Let the consumer settle into long-polling on the empty partition.
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            assert c.poll(0.2) is None
        for i in range(3):
            value = f"wake-{i}".encode()
            sent_at = time.monotonic()
            p.produce(topic, value=value)
            assert p.flush(5) == 0
            msg = c.poll(6)
            received_at = time.monotonic()
            assert msg is not None, "message not delivered within 6 s"
            assert msg.error() is None, msg.error()
            assert msg.value() == value
            latencies.append(received_at - sent_at)
            # Idle again for a while so the next fetch is a fresh long poll.
            idle_until = time.monotonic() + 1.5
            while time.monotonic() < idle_until:
                assert c.poll(0.2) is None
    finally:
        c.close()
    print(f"produce->consume latencies: {[round(x, 3) for x in latencies]}")
    assert max(latencies) < 1.5, f"long-poll fetch did not wake up promptly: {latencies}"
    assert statistics.median(latencies) < 1.0


def test_idle_fetches_do_not_busy_loop(broker, topic):
    create_topic(broker.bootstrap, topic, partitions=4)
    consumers = []
    try:
        for i in range(20):
            c = consumer(broker.bootstrap, fetch_wait_max_ms=500, enable_partition_eof=False)
            c.assign([TopicPartition(topic, i % 4, OFFSET_END)])
            consumers.append(c)
        # Warm up: connections established, fetch loops running.
        warm_until = time.monotonic() + 2.5
        while time.monotonic() < warm_until:
            for c in consumers:
                assert c.poll(0) is None
            time.sleep(0.1)
        cpu_before = broker.cpu_seconds()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3.0:
            for c in consumers:
                assert c.poll(0) is None
            time.sleep(0.1)
        cpu_used = broker.cpu_seconds() - cpu_before
        wall = time.monotonic() - t0
    finally:
        for c in consumers:
            c.close()
    print(f"broker CPU over {wall:.1f}s with 20 idle consumers: {cpu_used:.3f}s")
    assert cpu_used < 0.3, f"broker used {cpu_used:.2f}s CPU in {wall:.1f}s while idle"
