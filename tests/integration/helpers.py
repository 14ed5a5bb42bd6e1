"""Client-side helpers shared by the integration tests (real client libraries only)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic


@dataclass
class Msg:
    """A consumed record, detached from the client library."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] | None
    timestamp_type: int
    timestamp: int


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})


def create_topic(bootstrap: str, name: str, partitions: int = 1,
                 config: Mapping[str, str] | None = None, timeout: float = 15) -> None:
    client = admin(bootstrap)
    futures = client.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1,
                  config=dict(config or {}))],
        operation_timeout=timeout, request_timeout=timeout)
    futures[name].result(timeout)
    wait_for_topic(bootstrap, name, partitions, timeout)


def wait_for_topic(bootstrap: str, name: str, partitions: int, timeout: float = 15) -> None:
    client = admin(bootstrap)
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        md = client.list_topics(name, timeout=5)
        t = md.topics.get(name)
        last = t
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
                p.leader == 0 for p in t.partitions.values()):
            return
        time.sleep(0.1)
    raise AssertionError(f"topic {name} not ready with {partitions} partitions: {last}")


def topic_configs(bootstrap: str, name: str) -> dict[str, str]:
    client = admin(bootstrap)
    resource = ConfigResource("topic", name)
    result = client.describe_configs([resource])[resource].result(15)
    return {k: v.value for k, v in result.items()}


def producer(bootstrap: str, **conf: Any) -> Producer:
    base: dict[str, Any] = {"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                            "linger.ms": 5}
    base.update({k.replace("_", "."): v for k, v in conf.items()})
    return Producer(base)


def consumer(bootstrap: str, **conf: Any) -> Consumer:
    # confluent-kafka insists on a group.id; the broker has no group coordinator yet, so the
    # consumers here only ever use assign() and never commit.
    base: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "broker.address.family": "v4",
        "group.id": "bmq-it-" + uuid.uuid4().hex[:8],
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": True,
    }
    base.update({k.replace("_", "."): v for k, v in conf.items()})
    return Consumer(base)


class DeliveryLog:
    """Delivery-report callback that records successes and failures."""

    def __init__(self) -> None:
        self.ok: list[tuple[bytes | None, bytes | None, int, int]] = []
        self.errors: list[tuple[bytes | None, KafkaError]] = []

    def __call__(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.errors.append((msg.key(), err))
        else:
            self.ok.append((msg.key(), msg.value(), msg.partition(), msg.offset()))


def produce_all(bootstrap: str, topic: str, items: Iterable[Mapping[str, Any]],
                timeout: float = 60, **conf: Any) -> DeliveryLog:
    """Produce dicts of Producer.produce() keyword arguments; assert all were delivered."""
    log = DeliveryLog()
    p = producer(bootstrap, **conf)
    for count, item in enumerate(items):
        while True:
            try:
                p.produce(topic, on_delivery=log, **item)
                break
            except BufferError:
                p.poll(0.05)
        if count == 0:
            # librdkafka (without idempotence) numbers the records it holds before it knows the
            # topic's partitions after those produced once it does, so they could be appended
            # after later ones: records of a key would not be in produce order.
            p.flush(timeout)
        p.poll(0)
    remaining = p.flush(timeout)
    assert remaining == 0, f"{remaining} messages not delivered within {timeout}s"
    assert not log.errors, f"delivery errors: {log.errors[:5]} (total {len(log.errors)})"
    return log


def watermarks(bootstrap: str, topic: str, partition: int = 0,
               timeout: float = 10) -> tuple[int, int]:
    c = consumer(bootstrap)
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout,
                                         cached=False)
        return int(lo), int(hi)
    finally:
        c.close()


def consume(bootstrap: str, topic: str, partitions: Iterable[int] = (0,),
            start: int = OFFSET_BEGINNING, expected: int | None = None,
            timeout: float = 60, **conf: Any) -> dict[int, list[Msg]]:
    """Read every assigned partition up to its current high watermark.

    Returns {partition: [Msg, ...]} in offset order. ``expected`` (total count) is an extra
    stopping condition and is asserted.
    """
    partitions = list(partitions)
    c = consumer(bootstrap, **conf)
    out: dict[int, list[Msg]] = {p: [] for p in partitions}
    try:
        ends = {}
        done = set()
        for p in partitions:
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            ends[p] = hi
            first = lo if start == OFFSET_BEGINNING else start
            if first >= hi:
                done.add(p)
        c.assign([TopicPartition(topic, p, start) for p in partitions])
        total = 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(done) == len(partitions) and (expected is None or total >= expected):
                break
            batch = c.consume(num_messages=10000, timeout=0.5)
            for m in batch:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= ends.get(m.partition(), 0):
                            done.add(m.partition())
                        continue
                    raise AssertionError(f"consumer error: {err}")
                out[m.partition()].append(Msg(
                    m.topic(), m.partition(), m.offset(), m.key(), m.value(), m.headers(),
                    m.timestamp()[0], m.timestamp()[1]))
                total += 1
                if m.offset() + 1 >= ends[m.partition()]:
                    done.add(m.partition())
        else:
            raise AssertionError(
                f"timed out after {timeout}s consuming {topic}: got "
                f"{ {p: len(v) for p, v in out.items()} }, high watermarks {ends}")
        if expected is not None:
            assert total == expected, f"expected {expected} records, consumed {total}"
        return out
    finally:
        c.close()


def wait_until(predicate: Any, timeout: float, interval: float = 0.1, message: str = "") -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s: {message} (last={last!r})")


def round_trip_in_a_group(bootstrap: str, count: int, timeout: float = 60,
                          settings: Mapping[str, Any] | None = None) -> str:
    """Produce ``count`` values (acks=all) to a new topic, read them all back as a new consumer
    group (subscribe) and commit; returns the group. Asserts every value came back.
    ``settings``: more client settings (security) for the producer and the consumer."""
    topic, group = f"rt-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    sent = {f"m{i}".encode() for i in range(count)}
    extra = dict(settings or {})
    out = Producer({"bootstrap.servers": bootstrap, "acks": "all", **extra})
    for value in sorted(sent):
        out.produce(topic, value=value)
    assert out.flush(timeout) == 0
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra})
    member.subscribe([topic])
    received: set[bytes] = set()
    deadline = time.monotonic() + timeout
    try:
        while received != sent and time.monotonic() < deadline:
            message = member.poll(0.5)
            if message is not None and message.error() is None:
                received.add(message.value())
        member.commit(asynchronous=False)   # through the coordinator FindCoordinator named
    finally:
        member.close()
    assert received == sent
    return group
