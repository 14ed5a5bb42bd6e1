"""What the mirror tests read of a cluster, through confluent-kafka."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from bmq.client.requests import ask_once
from bmq.protocol.messages import FetchRequest
from bmq.protocol.messages.fetch_request import FetchPartition, FetchTopic
from bmq.protocol.records import iter_batches

Record = tuple[int, int, bytes | None, bytes | None, Any, int]


def records(bootstrap: str, topic: str, partitions: int,
            isolation: str = "read_uncommitted", **settings: str) -> list[Record]:
    """Every record of ``topic``: (partition, offset, key, value, headers, timestamp).
    ``settings``: more client settings (security)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirror-test-reader",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         **settings})
    found: list[Record] = []
    try:
        # (A partition with nothing from its log start on has no position to wait for.)
        ends = {p: end for p, (start, end) in enumerate(
            consumer.get_watermark_offsets(TopicPartition(topic, p), 10)
            for p in range(partitions)) if start < end}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + 20
        while any(position.offset < ends[position.partition] for position in consumer.position(
                [TopicPartition(topic, p) for p in ends])):
            assert time.monotonic() < deadline, f"{topic} not read up to {ends}"
            for message in consumer.consume(1000, 0.2):
                if not message.error():
                    found.append((message.partition(), message.offset(), message.key(),
                                  message.value(), message.headers(), message.timestamp()[1]))
    finally:
        consumer.close()
    return sorted(found, key=lambda record: record[:2])


def watermarks(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int]] | None:
    """(log start, end offset) of each partition (None while the cluster lacks one)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirror-test-reader"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), 10)
                for p in range(partitions)]
    except KafkaException:
        return None
    finally:
        consumer.close()


def delete_records(bootstrap: str, topic: str, before: dict[int, int]) -> None:
    """DeleteRecords: each partition's records before the offset."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    asked = [TopicPartition(topic, p, offset) for p, offset in before.items()]
    for future in admin.delete_records(asked).values():
        future.result(10)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirror-test-reader"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
                for p in range(partitions)]
    finally:
        consumer.close()


def topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    described = admin.describe_configs([resource])[resource].result(10)
    return {name: entry.value for name, entry in described.items()}


def partition_count(bootstrap: str, topic: str) -> int:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    info = metadata.topics.get(topic)
    return 0 if info is None or info.error is not None else len(info.partitions)


def samples(port: int, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of one of the mirror's metrics, by their labels (none if it does not
    answer yet)."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                      timeout=5).read().decode()
    except OSError:
        return {}
    found = {}
    for line in text.splitlines():
        sample, _, value = line.rpartition(" ")
        metric_name, _, labels = sample.partition("{")
        if metric_name == name:
            found[_labels(labels.rstrip("}"))] = float(value)
    return found


def _labels(text: str) -> tuple[tuple[str, str], ...]:
    """``topic="t",partition="0"`` -> (("partition", "0"), ("topic", "t"))."""
    pairs = []
    for pair in text.split(","):
        if pair:
            key, _, value = pair.partition("=")
            pairs.append((key, value.strip('"')))
    return tuple(sorted(pairs))


def metric(port: int, name: str, **labels: str) -> float | None:
    """One sample of the mirror's metrics (None if it has none, or does not answer yet)."""
    return samples(port, name).get(tuple(sorted(labels.items())))


def mirrored_partitions(port: int) -> set[tuple[str, int]]:
    """The partitions a mirror process copies now (it reports the lag of each)."""
    found = set()
    for labels in samples(port, "bmq_mirror_lag_records"):
        named = dict(labels)
        found.add((named["topic"], int(named["partition"])))
    return found


def create(bootstrap: str, topic: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs)])[topic].result(10)


def produce(bootstrap: str, topic: str, count: int, partitions: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(topic, key=f"k{i}".encode(), value=f"value {i}".encode(),
                         partition=i % partitions, headers=[("n", str(i).encode())],
                         timestamp=1_700_000_000_000 + i)
    assert producer.flush(20) == 0


def mirrored(source: str, target: str, topic: str, partitions: int) -> bool:
    """Whether the target has the topic's partitions up to the source's end offsets (False
    while a cluster does not know every partition yet)."""
    try:
        ends = end_offsets(source, topic, partitions)
        return partition_count(target, topic) == partitions and \
            end_offsets(target, topic, partitions) == ends
    except KafkaException:
        return False


def ask(bootstrap: str, request: Any, version: int) -> Any:
    """One request to a broker (BMQ's own client), its decoded response."""
    host, port = bootstrap.split(":")
    return asyncio.run(ask_once((host, int(port)), request, version, 10, "mirror-test"))


def raw_batches(bootstrap: str, topic: str, partition: int) -> bytes:
    """The partition's record batches from offset 0, as Fetch answers them (up to 1 MiB)."""
    fetched = ask(bootstrap, FetchRequest(max_wait_ms=0, topics=[FetchTopic(
        topic=topic, partitions=[FetchPartition(partition=partition, fetch_offset=0,
                                                partition_max_bytes=1 << 20)])]), 12)
    return bytes(fetched.responses[0].partitions[0].records or b"")


def producer_ids(bootstrap: str, topic: str, partition: int) -> list[int]:
    """The producer id of each batch of the partition, in offset order."""
    return [header.producer_id
            for _, header in iter_batches(raw_batches(bootstrap, topic, partition))]
