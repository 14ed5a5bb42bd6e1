"""Helpers shared by the group tests: topics, messages, protocol metadata, polling."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bmq.protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from bmq.protocol.messages.consumer_protocol_assignment import TopicPartition as AssignedTopic
from bmq.protocol.primitives import Writer

T = TypeVar("T")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                        operation_timeout=15, request_timeout=15)[name].result(15)


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    """``per_partition`` messages into every partition; values are 'p:i'."""
    producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                         "linger.ms": 5})
    for i in range(per_partition):
        for p in range(partitions):
            producer.produce(topic, value=f"{p}:{i}".encode(), partition=p)
    assert producer.flush(30) == 0


def subscription(*topics: str, version: int = 0) -> bytes:
    """ConsumerProtocolSubscription bytes, as a consumer sends in JoinGroup."""
    w = Writer()
    w.write_int16(version)
    ConsumerProtocolSubscription(topics=list(topics)).write(w, version)
    return w.getvalue()


def assignment(topic: str, partitions: list[int]) -> bytes:
    w = Writer()
    w.write_int16(0)
    ConsumerProtocolAssignment(
        assigned_partitions=[AssignedTopic(topic=topic, partitions=partitions)]).write(w, 0)
    return w.getvalue()


def wait_for(condition: Callable[[], T | None], timeout: float, what: str,
             interval: float = 0.05) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
