"""Spark fixtures: one local[2] SparkSession for the whole test session, and topics written by
real clients (confluent-kafka) to a `bmq serve` subprocess, with what was produced."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import BrokerFactory, BrokerProcess, make_topic_name

SEGMENT_BYTES = 64 * 1024
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from bmq.spark import BMQDataSource

    session = (SparkSession.builder.master("local[2]").appName("bmq-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "1g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(BMQDataSource)
    try:
        yield session
    finally:
        session.stop()


@dataclass
class Produced:
    """What was produced to one topic: (partition, offset) -> (key, value, headers, ts ms)."""

    topic: str
    partitions: int
    records: dict[tuple[int, int], tuple[bytes | None, bytes | None,
                                         list[tuple[str, bytes | None]], int]] = \
        field(default_factory=dict)

    def ends(self) -> dict[int, int]:
        ends = dict.fromkeys(range(self.partitions), 0)
        for p, o in self.records:
            ends[p] = max(ends[p], o + 1)
        return ends


def header_pairs(headers: list[Any] | None) -> list[tuple[str, bytes | None]] | None:
    """A headers cell (Spark rows or pyarrow dicts) as (key, value) pairs; None stays None."""
    return None if headers is None else [(h["key"], h["value"]) for h in headers]


def expected_headers(sent: list[tuple[str, bytes | None]]) -> list[tuple[str, bytes | None]] | None:
    """What Spark's Kafka source shows for these produced headers: null when there are none."""
    return sent or None


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(15)


def produce(bootstrap: str, produced: Produced, messages: list[tuple[int, bytes | None,
            bytes | None, list[tuple[str, bytes | None]] | None]], compression: str = "none",
            **config: Any) -> None:
    """Produce (partition, key, value, headers) with acks=all; record offsets as delivered."""
    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
            "compression.type": compression, "enable.idempotence": True}
    conf.update(config)
    producer = Producer(conf)
    errors: list[Any] = []

    def delivered(headers: list[tuple[str, bytes | None]] | None) -> Any:
        # The delivery report's own headers are not reliable: keep what was sent.
        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)
                return
            produced.records[(msg.partition(), msg.offset())] = (
                msg.key(), msg.value(), list(headers or []), msg.timestamp()[1])
        return on_delivery

    for partition, key, value, headers in messages:
        while True:
            try:
                producer.produce(produced.topic, key=key, value=value, headers=headers,
                                 partition=partition, on_delivery=delivered(headers))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors


def mixed_messages(n: int, partitions: int, tag: str) -> list[tuple[int, bytes | None,
                                                                  bytes | None, Any]]:
    """Keys repeat (for compaction), some keys and values are null, some records carry
    headers (one with a null value)."""
    out = []
    for i in range(n):
        key = None if i % 13 == 0 else f"key-{i % 37}".encode()
        value = None if i % 17 == 5 else f"{tag}-{i}-".encode() * (1 + i % 40)
        headers = [("trace", f"t{i}".encode()), ("empty", None)] if i % 6 == 0 else None
        out.append((i % partitions, key, value, headers))
    return out


@pytest.fixture(scope="module")
def spark_broker(module_broker_factory: BrokerFactory) -> BrokerProcess:
    """A broker with small segments so topics span many segment files."""
    return module_broker_factory(config={"log_segment_bytes": SEGMENT_BYTES})


def storage_url(broker: BrokerProcess) -> str:
    return f"file://{broker.data_dir}/topics"


@pytest.fixture(scope="module")
def mixed_topic(spark_broker: BrokerProcess) -> Produced:
    """3 partitions; every codec (each codec a separate producer); headers, null keys/values."""
    topic = make_topic_name("spark-mixed")
    create_topic(spark_broker.bootstrap, topic, 3)
    produced = Produced(topic, 3)
    for codec in CODECS:
        produce(spark_broker.bootstrap, produced, mixed_messages(900, 3, codec), codec)
    return produced
