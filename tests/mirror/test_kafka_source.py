"""Moving a Kafka cluster onto BMQ: a single-node Apache Kafka 4.4 (KRaft, from the Maven jars
scripts/kafka.sh resolves) is the source; its topic, with a committed and an aborted
transaction, is mirrored into a `bmq serve` at identical offsets, a consumer group's offsets
follow, and after `promote` the group reads the rest on BMQ exactly once (slow: run with
BMQ_SLOW_TESTS=1)."""

from __future__ import annotations

import functools
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.kafka_peer import KafkaPeer
from tests.conftest import BrokerFactory, BrokerProcess, bmq_command, make_topic_name
from tests.mirror.conftest import MirrorFactory, wait_until
from tests.mirror.helpers import (
    create,
    delete_records,
    mirrored,
    produce,
    records,
    topic_configs,
    watermarks,
)


@pytest.fixture
def kafka(tmp_path: Path) -> Iterator[KafkaPeer]:
    yield from _kafka(tmp_path, {})


@pytest.fixture
def compacting_kafka(tmp_path: Path) -> Iterator[KafkaPeer]:
    """A Kafka whose log cleaner looks for dirty logs every 100 ms."""
    yield from _kafka(tmp_path, {"log.cleaner.backoff.ms": "100"})


def _kafka(tmp_path: Path, settings: dict[str, str]) -> Iterator[KafkaPeer]:
    peer = KafkaPeer(tmp_path / "kafka", "Kafka",
                     {"group.initial.rebalance.delay.ms": "0", **settings})
    peer.launch()
    try:
        admin = AdminClient({"bootstrap.servers": peer.bootstrap})
        deadline = time.monotonic() + 90
        while True:
            try:
                admin.list_topics(timeout=5)
                break
            except KafkaException:
                if time.monotonic() > deadline or peer.proc is None or \
                        peer.proc.poll() is not None:
                    raise AssertionError(f"Kafka did not start:\n{peer.log_tail()}") from None
                time.sleep(0.5)
        yield peer
    finally:
        peer.stop(signal.SIGKILL)


def consume(bootstrap: str, group: str, topic: str, count: int, last: bool = False
            ) -> list[bytes]:
    """Up to ``count`` values from the group's committed offsets on, committed after;
    ``last``: and nothing after them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    # Kafka answers NOT_COORDINATOR while it creates __consumer_offsets, which an assign()
    # that reads the committed offsets does not retry: they are read first, until answered.
    deadline = time.monotonic() + 30
    while True:
        try:
            committed = consumer.committed([TopicPartition(topic, p) for p in range(2)], 5)
            break
        except KafkaException:
            assert time.monotonic() < deadline, "the group's coordinator never answered"
            time.sleep(0.5)
    consumer.assign([TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0
                                    else OFFSET_BEGINNING) for tp in committed])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < count and time.monotonic() < deadline:
        for message in consumer.consume(count - len(values), 0.5):
            if not message.error():
                values.append(message.value())
    if values:
        consumer.commit(asynchronous=False)
    extra = [m for m in consumer.consume(10, 1.0) if not m.error()] if last else []
    consumer.close()
    assert not extra, "more records than expected"
    return values


@pytest.mark.slow
def test_a_kafka_topic_and_its_group_move_to_bmq(
        kafka: KafkaPeer, broker_factory: BrokerFactory, mirror_factory: MirrorFactory) -> None:
    target: BrokerProcess = broker_factory(config={"auto_create_topics_enable": False})
    topic, group = make_topic_name("m-kafka"), make_topic_name("g-kafka")
    create(kafka.bootstrap, topic, 2, **{"retention.ms": "-1"})  # (old timestamps)
    produce(kafka.bootstrap, topic, 200, 2)
    transactional = Producer({"bootstrap.servers": kafka.bootstrap,
                              "transactional.id": make_topic_name("txn")})
    transactional.init_transactions(30)
    for commit in (True, False):
        transactional.begin_transaction()
        for value in range(5):
            transactional.produce(topic, value=f"txn {commit} {value}".encode(),
                                  partition=value % 2)
        transactional.flush(10)
        if commit:
            transactional.commit_transaction(30)
        else:
            transactional.abort_transaction(30)
    produce(kafka.bootstrap, topic, 100, 2, start=200)
    first_half = consume(kafka.bootstrap, group, topic, 150)
    assert len(first_half) == 150

    mirror = mirror_factory(kafka, target, "--topic-regex", "m-.*", "--group", group)
    wait_until(lambda: mirrored(kafka.bootstrap, target.bootstrap, topic, 2), 60,
               "Kafka's topic is mirrored", mirror.log_text)
    assert records(target.bootstrap, topic, 2) == records(kafka.bootstrap, topic, 2)
    assert topic_configs(target.bootstrap, topic)["retention.ms"] == "-1"
    assert records(target.bootstrap, topic, 2, "read_committed") == \
        records(kafka.bootstrap, topic, 2, "read_committed")

    def offsets(bootstrap: str) -> list[int]:
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            return [tp.offset for tp in reader.committed(
                [TopicPartition(topic, p) for p in range(2)], 10)]
        finally:
            reader.close()

    wait_until(lambda: offsets(target.bootstrap) == offsets(kafka.bootstrap), 30,
               "the group's offsets are copied", mirror.log_text)
    promoted = subprocess.run([*bmq_command(), "mirror", "promote", topic, "-b",
                               target.bootstrap], capture_output=True, text=True, timeout=30)
    assert promoted.returncode == 0, promoted.stderr
    rest = consume(target.bootstrap, group, topic, 160, last=True)
    everything = {value for *_, value, _, _ in records(kafka.bootstrap, topic, 2,
                                                       "read_committed")}
    assert len(first_half) + len(rest) == len(everything) == 305
    assert set(first_half) | set(rest) == everything



@pytest.mark.slow
def test_a_compacted_and_a_trimmed_kafka_topic_are_mirrored_at_their_offsets(
        compacting_kafka: KafkaPeer, broker_factory: BrokerFactory,
        mirror_factory: MirrorFactory) -> None:
    """Kafka's cleaner leaves gaps (and, for idempotent producers, batches of no records); a
    DeleteRecords moves a log start into a batch and one to the end: the target has the same
    log starts, ends and records."""
    kafka = compacting_kafka
    target = broker_factory(config={"auto_create_topics_enable": False})
    compacted, trimmed = make_topic_name("m-kcompacted"), make_topic_name("m-ktrimmed")
    create(kafka.bootstrap, compacted, 1, **{
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"})
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    for round_ in range(6):     # each round in a segment of its own (rolled by segment.ms)
        for i in range(50):
            producer.produce(compacted, key=b"k%d" % (i % 10), value=b"%d-%d" % (round_, i),
                             headers=[("round", b"%d" % round_)])
        assert producer.flush(10) == 0
        time.sleep(0.3)

    def cleaned() -> bool:
        (start, end), = watermarks(kafka.bootstrap, compacted, 1) or [(0, 0)]
        return len(records(kafka.bootstrap, compacted, 1)) < (end - start) / 2

    wait_until(cleaned, 60, "Kafka's cleaner compacted the topic")
    create(kafka.bootstrap, trimmed, 2, **{"retention.ms": "-1"})   # (old timestamps)
    produce(kafka.bootstrap, trimmed, 100, 2)
    delete_records(kafka.bootstrap, trimmed, {0: 25, 1: 50})
    mirror = mirror_factory(kafka, target, "--topic-regex", "m-k.*")

    def same_ends(topic: str, partitions: int) -> bool:
        return watermarks(target.bootstrap, topic, partitions) == \
            watermarks(kafka.bootstrap, topic, partitions)

    for topic, partitions in ((compacted, 1), (trimmed, 2)):
        wait_until(functools.partial(same_ends, topic, partitions), 60,
                   f"{topic}'s log starts and ends are Kafka's", mirror.log_text)
        assert records(target.bootstrap, topic, partitions) == \
            records(kafka.bootstrap, topic, partitions)
