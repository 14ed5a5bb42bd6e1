"""Kafka clients produce through the databus's Kafka port with nothing but bootstrap.servers;
what they wrote is read back from the cluster, each message once, keys in Kafka's partitions
and in order, merged into the agent's own compressed batches."""

from __future__ import annotations

import asyncio
import subprocess
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from bmq.client.requests import ask_once
from bmq.databus.streams import key_partition, murmur2
from bmq.protocol.messages import FetchRequest
from bmq.protocol.messages.fetch_request import FetchPartition, FetchTopic
from bmq.protocol.records import COMPRESSION_MASK, iter_batches
from tests.conftest import BrokerProcess, make_topic_name
from tests.databus.conftest import DatabusProcess, create_topic, read_all

LZ4 = 3


def produce(bootstrap: str, topic: str, messages: Sequence[tuple[bytes | None, bytes]],
            **config: Any) -> list[Any]:
    """Produce and flush; the delivery errors."""
    producer = Producer({"bootstrap.servers": bootstrap, **config})
    errors: list[Any] = []
    for key, value in messages:
        producer.produce(topic, key=key, value=value,
                         on_delivery=lambda error, _: errors.append(error) if error else None)
        producer.poll(0)
    assert producer.flush(30) == 0
    return errors


def stored_batches(cluster: BrokerProcess, topic: str, partition: int) -> list[Any]:
    """The headers of the batches the cluster stored for the partition."""
    async def fetch() -> Any:
        return await ask_once(("127.0.0.1", cluster.port), FetchRequest(
            max_wait_ms=0, topics=[FetchTopic(topic=topic, partitions=[FetchPartition(
                partition=partition, fetch_offset=0, partition_max_bytes=16 << 20)])]),
            12, 10, "test")

    response = asyncio.run(fetch())
    records = bytes(response.responses[0].partitions[0].records or b"")
    return [header for _, header in iter_batches(records)]


def test_murmur2_is_kafkas() -> None:
    for key in (b"", b"a", b"ab", b"abc", b"k1", b"orders-42", bytes(range(200))):
        # Java's is a signed int32, kafka-python's the same bits unsigned.
        assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)


@pytest.mark.parametrize("idempotent", [pytest.param(False, marks=pytest.mark.slow), True])
def test_confluent_kafka_through_the_agent(cluster: BrokerProcess, agent: DatabusProcess,
                                           idempotent: bool) -> None:
    topic = make_topic_name("orders")
    create_topic(cluster, topic, 3)
    messages = [(f"k{i % 7}".encode(), f"value-{i}".encode() * 3) for i in range(2000)]
    errors = produce(agent.bootstrap, topic, messages, acks="all",
                     **{"enable.idempotence": idempotent, "linger.ms": 0})
    assert errors == []
    seen = read_all(cluster, topic, 3, len(messages))
    assert sorted((key, value) for _, _, key, value, _ in seen) == sorted(messages)
    by_key: dict[bytes, list[bytes]] = defaultdict(list)
    for partition, _, key, value, _ in sorted(seen, key=lambda s: (s[0], s[1])):
        assert partition == key_partition(key, 3)      # where Kafka's Java producer puts it
        by_key[key].append(value)
    for key, values in by_key.items():
        assert values == [value for k, value in messages if k == key]
    # The agent merged the client's requests into its own lz4 batches.
    batches = [h for p in range(3) for h in stored_batches(cluster, topic, p)]
    assert all(h.attributes & COMPRESSION_MASK == LZ4 for h in batches)
    assert sum(h.record_count for h in batches) == len(messages)
    assert len(batches) < len(messages) / 20


@pytest.mark.slow
def test_headers_and_null_values_round_trip(cluster: BrokerProcess,
                                            agent: DatabusProcess) -> None:
    topic = make_topic_name("hdr")
    create_topic(cluster, topic, 1)
    producer = Producer({"bootstrap.servers": agent.bootstrap})
    producer.produce(topic, key=b"k", value=None, headers=[("h1", b"x"), ("h2", None)])
    producer.produce(topic, key=None, value=b"\x00\xff" * 100)
    assert producer.flush(30) == 0
    seen = read_all(cluster, topic, 1, 2)
    assert [(key, value, headers) for _, _, key, value, headers in seen] == [
        (b"k", None, [("h1", b"x"), ("h2", None)]), (None, b"\x00\xff" * 100, None)]


def test_unknown_stream_and_oversized_message_are_refused(cluster: BrokerProcess,
                                                          agent: DatabusProcess) -> None:
    errors = produce(agent.bootstrap, make_topic_name("nowhere"), [(None, b"x")],
                     **{"topic.metadata.propagation.max.ms": 1000,
                        "message.timeout.ms": 5000})
    assert [e.code() for e in errors] == [KafkaError.UNKNOWN_TOPIC_OR_PART]
    topic = make_topic_name("big")
    create_topic(cluster, topic, 1)
    errors = produce(agent.bootstrap, topic, [(None, b"small"), (None, b"x" * 1_100_000)],
                     **{"message.max.bytes": 5_000_000, "linger.ms": 0})
    assert [e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]
    assert [value for *_, value, _ in read_all(cluster, topic, 1, 1)] == [b"small"]


@pytest.mark.slow
def test_transactions_are_refused(agent: DatabusProcess, cluster: BrokerProcess) -> None:
    """librdkafka finds no transaction coordinator's API (FindCoordinator) and stops at once
    with a fatal error; a client that asks InitProducerId with a transactional id anyway gets
    INVALID_REQUEST."""
    producer = Producer({"bootstrap.servers": agent.bootstrap, "transactional.id": "t1"})
    with pytest.raises(Exception, match="_UNSUPPORTED_FEATURE"):
        producer.init_transactions(10)


@pytest.mark.slow
def test_kcat_through_the_agent(cluster: BrokerProcess, agent: DatabusProcess) -> None:
    topic = make_topic_name("kcat")
    create_topic(cluster, topic, 2)
    lines = "".join(f"key{i}:value {i}\n" for i in range(20))
    subprocess.run(["kcat", "-P", "-b", agent.bootstrap, "-t", topic, "-K:"], input=lines,
                   text=True, check=True, timeout=30)
    seen = read_all(cluster, topic, 2, 20)
    assert sorted((key, value) for _, _, key, value, _ in seen) == sorted(
        (f"key{i}".encode(), f"value {i}".encode()) for i in range(20))
