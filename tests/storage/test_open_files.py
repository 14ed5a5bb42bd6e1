"""A partition keeps no file open while idle: a broker serves more partitions than its limit of
open files allows descriptors (one per partition ran out at ~20,000 under the machine's limit:
``OSError: [Errno 24] Too many open files`` in CreateTopics, topics left half made)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bmq.storage.handles import HandlePool
from tests.conftest import BrokerFactory, make_topic_name

OPEN_FILES = 256
TOPICS = 5
PARTITIONS = 100        # 500 partitions in all, twice the limit


def test_a_broker_serves_twice_as_many_partitions_as_it_may_open_files(
        broker_factory: BrokerFactory) -> None:
    broker = broker_factory(limits={"nofile": OPEN_FILES})
    topics = [make_topic_name(f"fd{n}") for n in range(TOPICS)]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics]).values():
        future.result(60)
    failed: list[str] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    for topic in topics:
        for partition in range(PARTITIONS):
            producer.produce(topic, value=f"{topic}/{partition}".encode(), partition=partition,
                             on_delivery=lambda error, _: failed.append(str(error))
                             if error else None)
            producer.poll(0)
    assert producer.flush(60) == 0
    assert failed == []

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "fd",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(t, p, 0) for t in topics for p in range(PARTITIONS)])
    seen: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
    try:
        while len(seen) < TOPICS * PARTITIONS:
            message = consumer.poll(30)
            assert message is not None, f"{len(seen)} partitions read"
            assert message.error() is None, message.error()
            seen.setdefault((message.topic(), message.partition()), []).append(
                (message.offset(), message.value()))
    finally:
        consumer.close()
    assert seen == {(t, p): [(0, f"{t}/{p}".encode())] for t in topics
                    for p in range(PARTITIONS)}
    assert len(os.listdir(f"/proc/{broker.pid}/fd")) < OPEN_FILES
    log = broker.log_text()
    assert (f"open files: soft limit {OPEN_FILES}, hard limit {OPEN_FILES}; partitions keep "
            f"at most {OPEN_FILES // 2} open") in log


def test_the_pool_closes_the_least_recently_used_and_the_idle_but_never_a_busy_one() -> None:
    pool = HandlePool(limit=2)
    closed: list[str] = []
    busy = {"a"}

    def closer(name: str) -> bool:
        if name in busy:
            return False
        closed.append(name)
        return True

    for name in ("a", "b", "c"):            # past the limit: "a" is busy, kept
        pool.used(name, lambda name=name: closer(name))  # type: ignore[misc]
    assert closed == [] and len(pool) == 3
    pool.used("d", lambda: closer("d"))     # "a" still busy, "b" next
    assert closed == ["b"] and len(pool) == 3
    busy.clear()
    pool.used("c", lambda: closer("c"))     # used again: the most recent now
    pool.used("e", lambda: closer("e"))
    assert closed == ["b", "a", "d"] and len(pool) == 2
    assert pool.close_idle(idle_s=3600) == 0
    assert pool.close_idle(idle_s=0) == 2
    assert closed == ["b", "a", "d", "c", "e"] and len(pool) == 0


def test_out_of_file_descriptors_a_topic_is_refused_whole_and_the_broker_serves_on(
        broker_factory: BrokerFactory) -> None:
    broker = broker_factory(limits={"nofile": OPEN_FILES})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # CreateTopics goes to the controller over a connection of its own (librdkafka's broker "/0",
    # not the bootstrap one); made now, or the hogs would leave it waiting in the listen backlog
    warm = make_topic_name("warm")
    admin.create_topics([NewTopic(warm, 1, 1)])[warm].result(30)
    hogs = []       # connections that take every descriptor the broker has left
    try:
        for _ in range(OPEN_FILES):
            hogs.append(socket.create_connection((broker.host, broker.port), timeout=5))
        time.sleep(1)
        topic = make_topic_name("nofd")
        future = admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic]
        with pytest.raises(KafkaException) as refused:
            future.result(60)
        assert refused.value.args[0].code() == KafkaError.KAFKA_STORAGE_ERROR
    finally:
        for hog in hogs:
            hog.close()
    time.sleep(1)
    assert topic not in admin.list_topics(timeout=30).topics     # absent, not half made
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, b"after", partition=PARTITIONS - 1)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "nofd"})
    consumer.assign([TopicPartition(topic, PARTITIONS - 1, 0)])
    try:
        message = consumer.poll(30)
        assert message is not None and message.error() is None
        assert (message.offset(), message.value()) == (0, b"after")
    finally:
        consumer.close()


def test_a_server_raises_its_soft_limit_of_open_files_to_the_hard_one() -> None:
    shown = subprocess.run(
        ["prlimit", "--nofile=256:1024", "--", sys.executable, "-c",
         "import resource; from bmq.limits import raise_open_files_limit, report; "
         "print(raise_open_files_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0]); "
         "print(report())"], capture_output=True, text=True, check=True).stdout.splitlines()
    assert shown == ["1024 1024", "open files: soft limit raised from 256 to 1024 (hard limit "
                                  "1024); partitions keep at most 512 open"]
