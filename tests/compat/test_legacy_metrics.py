"""The per-topic ``messages_out`` counter counts what old clients fetch (issue #36): their
Fetch v0-3 responses hold v0/v1 messages converted from stored batches, whose count the
conversion reports (batch headers, which the counter reads for v2, are not in them)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.conftest import free_port
from tests.integration.helpers import create_topic, produce_all
from tests.metrics.scrape import scrape, value

MESSAGES = 300


@pytest.fixture
def metrics_broker(broker_factory: Any) -> Any:
    port = free_port()
    broker = broker_factory(extra_args=["--metrics-port", str(port)])
    broker.metrics_port = port
    return broker


def test_old_consumer_fetches_are_counted(metrics_broker: Any, topic: str) -> None:
    """kafka-python pinned to 0.10.1 (Fetch v3, magic 1) reads gzip batches written by
    today's producer (wrapper messages, whose inner messages count) and plain ones."""
    from kafka import KafkaConsumer, TopicPartition

    bootstrap = metrics_broker.bootstrap
    create_topic(bootstrap, topic)
    half = MESSAGES // 2
    produce_all(bootstrap, topic, [{"value": b"g%d" % i} for i in range(half)],
                compression_type="gzip", linger_ms=20)
    produce_all(bootstrap, topic, [{"value": b"p%d" % i} for i in range(half, MESSAGES)])
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=(0, 10, 1),
                             enable_auto_commit=False)
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek(partition, 0)
    got = 0
    deadline = time.monotonic() + 30
    while got < MESSAGES and time.monotonic() < deadline:
        got += sum(len(records) for records in consumer.poll(timeout_ms=500).values())
    consumer.close()
    assert got == MESSAGES
    samples = scrape(metrics_broker.metrics_port)
    assert value(samples, "bmq_messages_out_total", topic=topic) == MESSAGES
    assert value(samples, "bmq_bytes_out_total", topic=topic) > 0
