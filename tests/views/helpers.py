"""What the view and lane tests share: records produced with headers (and where each landed),
and a consumer group reading a topic with real clients until it has what it expects."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer

from tests.integration.helpers import produce_all

Header = tuple[str, bytes]


@dataclass(frozen=True, slots=True)
class Sent:
    partition: int
    offset: int
    value: bytes
    headers: tuple[Header, ...]

    def header(self, key: str) -> bytes | None:
        return next((v for k, v in self.headers if k == key), None)


Seen = tuple[int, int, bytes]     # partition, offset, value


def produce_with_headers(bootstrap: str, topic: str, records: Sequence[Sequence[Header]],
                         partitions: int, **conf: Any) -> list[Sent]:
    """Record i (value ``v<i>``, with headers ``records[i]``) goes to partition i % partitions;
    returns each with the offset it was given."""
    items = [{"value": f"v{i}".encode(), "partition": i % partitions, "headers": list(headers)}
             for i, headers in enumerate(records)]
    log = produce_all(bootstrap, topic, items, acks="all", **conf)
    headers_of = {f"v{i}".encode(): tuple(h) for i, h in enumerate(records)}
    return [Sent(p, offset, value, headers_of[value]) for _, value, p, offset in log.ok]


def seen(sent: Iterable[Sent], keep: Callable[[Sent], bool] = lambda s: True) -> list[Seen]:
    return sorted((s.partition, s.offset, s.value) for s in sent if keep(s))


def group_read(bootstrap: str, topic: str, group: str, count: int,
               timeout: float = 60, settle: float = 2.0, **conf: str) -> list[Seen]:
    """A confluent-kafka member of ``group`` subscribed to ``topic``: reads until it has
    ``count`` records and ``settle`` seconds bring no more, commits, leaves. ``conf``: more
    consumer settings (dots as underscores)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                         "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False,
                         **{k.replace("_", "."): v for k, v in conf.items()}})
    consumer.subscribe([topic])
    got: list[Seen] = []
    deadline = time.monotonic() + timeout
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                if len(got) >= count:
                    quiet_until = quiet_until or time.monotonic() + settle
                    if time.monotonic() >= quiet_until:
                        break
                continue
            assert msg.error() is None, msg.error()
            assert msg.topic() == topic
            got.append((msg.partition(), msg.offset(), msg.value()))
            quiet_until = None
        consumer.commit(asynchronous=False) if got else None
        return sorted(got)
    finally:
        consumer.close()


def committed(bootstrap: str, topic: str, group: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        offsets = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 15)
        return {tp.partition: tp.offset for tp in offsets}
    finally:
        consumer.close()


def kafka_python_group_read(bootstrap: str, topic: str, group: str, count: int,
                            timeout: float = 60) -> list[Seen]:
    """The same with a kafka-python member (auto commit on close)."""
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=True,
                             consumer_timeout_ms=3000)
    got: list[Seen] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            for record in consumer:
                got.append((record.partition, record.offset, record.value))
        # A little more: nothing beyond ``count`` may come.
        for record in consumer:
            got.append((record.partition, record.offset, record.value))
        consumer.commit()
        return sorted(got)
    finally:
        consumer.close()


def new_group() -> str:
    return "g-" + uuid.uuid4().hex[:8]
