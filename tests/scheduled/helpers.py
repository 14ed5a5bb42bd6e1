"""What the scheduled delivery tests share: producing scheduled records with real clients and
a consumer that notes when each record reached it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

DELAY = "bmq.delay.ms"
DELIVER_AT = "bmq.deliver.at"
SCHEDULED_AT = "bmq.scheduled.at"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class Arrived:
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    seen_ms: int              # when the consumer got it

    def header(self, name: str) -> bytes | None:
        return next((v for k, v in self.headers if k == name), None)


class Watcher:
    """A confluent-kafka consumer on every partition of a topic, from the beginning, in a
    thread, noting when each record arrives (short fetch waits: the broker wakes long polls
    when data is durable)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int,
                 isolation: str = "read_uncommitted") -> None:
        self.arrived: list[Arrived] = []
        self._stop = threading.Event()
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watch",
                                   "broker.address.family": "v4", "enable.auto.commit": False,
                                   "fetch.wait.max.ms": 50, "isolation.level": isolation,
                                   "topic.metadata.refresh.interval.ms": 1000,
                                   "reconnect.backoff.max.ms": 200})
        self._consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for message in self._consumer.consume(1000, 0.05):
                if message.error() is not None:
                    continue
                seen = now_ms()
                value = message.value()
                assert value is not None
                self.arrived.append(Arrived(message.partition(), message.offset(),
                                            message.key(), value,
                                            tuple(message.headers() or ()), seen))

    def wait_for(self, count: int, timeout: float) -> list[Arrived]:
        deadline = time.monotonic() + timeout
        while len(self.arrived) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return list(self.arrived)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()


def settled_arrivals(bootstrap: str, topic: str, partitions: int, count: int,
                     isolation: str = "read_uncommitted") -> list[Arrived]:
    """What a watcher sees once ``count`` records arrived (within 60 s) and a second more,
    long enough for a record delivered twice to show."""
    watcher = Watcher(bootstrap, topic, partitions, isolation)
    try:
        watcher.wait_for(count, 60)
        time.sleep(1.0)
        return list(watcher.arrived)
    finally:
        watcher.close()


def confluent_schedule(bootstrap: str, topic: str, records: Iterable[dict[str, Any]],
                       **conf: Any) -> list[tuple[bytes, int]]:
    """Produce ``records`` (Producer.produce keyword arguments) with acks=all; returns each
    value with the offset its acknowledgement carried. Fails on any delivery error."""
    acked: list[tuple[bytes, int]] = []
    errors: list[KafkaError] = []

    def report(error: KafkaError | None, message: Any) -> None:
        if error is not None:
            errors.append(error)
        else:
            acked.append((message.value(), message.offset()))

    producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                         "acks": "all", "linger.ms": 5,
                         **{k.replace("_", "."): v for k, v in conf.items()}})
    for record in records:
        producer.produce(topic, on_delivery=report, **record)
    assert producer.flush(30) == 0
    assert not errors, errors[:3]
    return acked


def produce_errors(bootstrap: str, topic: str, headers: list[tuple[str, bytes]]) -> list[int]:
    """The error codes of one record produced alone with ``headers`` (no retries)."""
    codes: list[int] = []
    producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                         "acks": "all", "retries": 0, "enable.idempotence": False})
    producer.produce(topic, b"bad", headers=headers,
                     on_delivery=lambda e, _: codes.append(0 if e is None else e.code()))
    assert producer.flush(15) == 0
    return codes


def due_of(record: Arrived) -> int:
    """When ``record`` was due, from its headers (the broker's acceptance time for a delay)."""
    at = record.header(DELIVER_AT)
    if at is not None:
        return int(at)
    scheduled = record.header(SCHEDULED_AT)
    assert scheduled is not None, f"{record} has no {SCHEDULED_AT}"
    return int(scheduled) + int(record.header(DELAY) or b"0")


def lateness(records: Iterable[Arrived]) -> list[int]:
    """Per record, ms from its due time until the consumer had it (sorted)."""
    return sorted(r.seen_ms - due_of(r) for r in records)


def delivered_early(records: Iterable[Arrived]) -> list[str]:
    """The records the consumer had before they were due, each with how early (empty when
    none was)."""
    return [f"{r.value!r} at {r.partition}/{r.offset}: {due_of(r) - r.seen_ms} ms early"
            for r in records if r.seen_ms < due_of(r)]
