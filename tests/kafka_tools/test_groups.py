"""kafka-consumer-groups.sh and kafka-share-groups.sh (Kafka 4.4) against `bmq serve`: the groups
an operator lists and describes (members, committed offsets, lag, state), the offsets reset and
deleted, and the groups deleted."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition

from tests.conftest import BrokerFactory, make_topic_name
from tests.kafka_tools.conftest import TOOLS_ENV
from tests.kafka_tools.tools import KAFKA_SCRIPT, KafkaTools, rows


def produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for partition, count in per_partition.items():
        for i in range(count):
            producer.produce(topic, key=f"k{i}".encode(), value=b"v", partition=partition)
    assert producer.flush(30) == 0


def commit(bootstrap: str, group: str, topic: str, positions: dict[int, int]) -> None:
    """Commits offsets for the group without joining it, as a standalone consumer does."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in positions.items()],
                        asynchronous=False)
    finally:
        consumer.close()


def lag_table(text: str) -> dict[int, tuple[str, str, str]]:
    """kafka-consumer-groups --describe: partition -> (current offset, log end, lag)."""
    return {int(row[2]): (row[3], row[4], row[5]) for row in rows(text)}


def test_consumer_group_lag_reset_and_delete(kafka: KafkaTools) -> None:
    topic, group = make_topic_name("lag"), make_topic_name("billing")
    kafka("kafka-topics", "--create", "--topic", topic, "--partitions", "2")
    produce(kafka.bootstrap, topic, {0: 6, 1: 4})
    commit(kafka.bootstrap, group, topic, {0: 4, 1: 1})

    assert group in kafka("kafka-consumer-groups", "--list").out.split()
    described = kafka("kafka-consumer-groups", "--describe", "--group", group)
    assert f"Consumer group '{group}' has no active members." in described.err
    assert lag_table(described.out) == {0: ("4", "6", "2"), 1: ("1", "4", "3")}, described.out

    dry = kafka("kafka-consumer-groups", "--reset-offsets", "--group", group, "--topic",
                topic, "--to-latest", "--dry-run").out
    assert sorted(rows(dry)) == [[group, topic, "0", "6"], [group, topic, "1", "4"]]
    kafka("kafka-consumer-groups", "--reset-offsets", "--group", group, "--topic", f"{topic}:0",
          "--to-earliest", "--execute")
    assert lag_table(kafka("kafka-consumer-groups", "--describe", "--group", group).out) \
        == {0: ("0", "6", "6"), 1: ("1", "4", "3")}

    deleted = kafka("kafka-consumer-groups", "--delete", "--group", group).out
    assert f"Deletion of requested consumer groups ('{group}') was successful." in deleted
    assert group not in kafka("kafka-consumer-groups", "--list").out.split()


def test_share_group_start_is_set_then_listed_described_and_deleted(kafka: KafkaTools) -> None:
    topic, group = make_topic_name("share"), make_topic_name("workers")
    kafka("kafka-topics", "--create", "--topic", topic, "--partitions", "1")
    produce(kafka.bootstrap, topic, {0: 5})
    # A new group's start set before any member joins (share.auto.offset.reset is latest):
    # Kafka makes the group, listed and described as Empty.
    reset = kafka("kafka-share-groups", "--reset-offsets", "--group", group, "--topic", topic,
                  "--to-earliest", "--execute").out
    assert rows(reset) == [[group, topic, "0", "0"]], reset
    assert rows(kafka("kafka-share-groups", "--describe", "--group", group).out) \
        == [[group, topic, "0", "0", "5"]]
    assert [group, "Empty"] in rows(kafka("kafka-share-groups", "--list", "--state").out)

    consumer = ShareConsumer({"bootstrap.servers": kafka.bootstrap, "group.id": group})
    try:
        consumer.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 5 and time.monotonic() < deadline:
            seen += sum(1 for m in consumer.poll(0.5) if m.error() is None)
        assert seen == 5
        consumer.commit_sync()  # accepts the records polled (implicit acknowledgement)

        offsets = kafka("kafka-share-groups", "--describe", "--group", group).out
        assert rows(offsets) == [[group, topic, "0", "5", "0"]], offsets
        members = rows(kafka("kafka-share-groups", "--describe", "--group", group,
                             "--members").out)
        assert [(m[0], m[-1]) for m in members] == [(group, f"{topic}:0")], members
        busy = kafka("kafka-share-groups", "--delete", "--group", group).out
        assert "GroupNotEmptyException" in busy
    finally:
        consumer.close()
    deleted = kafka("kafka-share-groups", "--delete", "--group", group).out
    assert f"Deletion of requested share groups ('{group}') was successful." in deleted
    assert group not in kafka("kafka-share-groups", "--list").out.split()


@pytest.fixture
def console_consumers() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait(10)


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_active_members_are_described(kafka: KafkaTools, protocol: str,
                                      console_consumers: list[subprocess.Popen[str]]) -> None:
    topic, group = make_topic_name("members"), make_topic_name(protocol)
    kafka("kafka-topics", "--create", "--topic", topic, "--partitions", "3")
    console_consumers.append(subprocess.Popen(
        [str(KAFKA_SCRIPT), "kafka-console-consumer", "--bootstrap-server", kafka.bootstrap,
         "--topic", topic, "--group", group, "--consumer-property", f"group.protocol={protocol}",
         "--consumer-property", "client.id=console-one"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True))
    deadline = time.monotonic() + 60
    while True:
        state = rows(kafka("kafka-consumer-groups", "--describe", "--group", group,
                           "--state").out)
        if state and state[0][-2] == "Stable":
            break
        assert time.monotonic() < deadline, state
        time.sleep(1)
    # The new protocol's groups are assigned by the broker ("uniform"); classic ones by the
    # consumer ("range", the Java consumer's first assignor).
    assert state[0][-3:] == ["uniform" if protocol == "consumer" else "range", "Stable", "1"]
    (member,) = rows(kafka("kafka-consumer-groups", "--describe", "--group", group,
                           "--members", "--verbose").out)
    assert member[0] == group and member[3] == "console-one" and member[4] == "3"
    assert f"{topic}:0,1,2" in member
    listed = rows(kafka("kafka-consumer-groups", "--list", "--type").out)
    assert [group, protocol.capitalize()] in listed
    busy = kafka("kafka-consumer-groups", "--delete", "--group", group, check=False)
    assert "The group is not empty" in busy.out + busy.err


@pytest.mark.slow
def test_offsets_are_shifted_set_by_time_and_deleted(kafka: KafkaTools) -> None:
    topic, group = make_topic_name("shift"), make_topic_name("g")
    kafka("kafka-topics", "--create", "--topic", topic, "--partitions", "2")
    produce(kafka.bootstrap, topic, {0: 5, 1: 5})
    commit(kafka.bootstrap, group, topic, {0: 5, 1: 5})
    shifted = kafka("kafka-consumer-groups", "--reset-offsets", "--group", group,
                    "--all-topics", "--shift-by", "-2", "--execute").out
    assert sorted(rows(shifted)) == [[group, topic, "0", "3"], [group, topic, "1", "3"]]
    kafka("kafka-consumer-groups", "--reset-offsets", "--group", group, "--topic", topic,
          "--to-offset", "1", "--execute")
    assert lag_table(kafka("kafka-consumer-groups", "--describe", "--group", group).out) \
        == {0: ("1", "5", "4"), 1: ("1", "5", "4")}
    # Every record is older than now: by time, the end of each partition.
    by_time = kafka("kafka-consumer-groups", "--reset-offsets", "--group", group, "--topic",
                    topic, "--to-datetime", "2100-01-01T00:00:00.000", "--execute").out
    assert sorted(rows(by_time)) == [[group, topic, "0", "5"], [group, topic, "1", "5"]]
    removed = kafka("kafka-consumer-groups", "--delete-offsets", "--group", group,
                    "--topic", f"{topic}:1").out
    assert rows(removed) == [[topic, "1", "Successful"]]
    assert set(lag_table(kafka("kafka-consumer-groups", "--describe", "--group",
                               group).out)) == {0}


@pytest.mark.slow
def test_share_group_offsets_are_set_and_deleted(kafka: KafkaTools) -> None:
    topic, group = make_topic_name("share-reset"), make_topic_name("workers")
    kafka("kafka-topics", "--create", "--topic", topic, "--partitions", "2")
    produce(kafka.bootstrap, topic, {0: 4, 1: 2})
    reset = kafka("kafka-share-groups", "--reset-offsets", "--group", group, "--topic", topic,
                  "--to-latest", "--execute").out
    assert sorted(rows(reset)) == [[group, topic, "0", "4"], [group, topic, "1", "2"]]
    kafka("kafka-share-groups", "--reset-offsets", "--group", group, "--topic", f"{topic}:0",
          "--to-offset", "1", "--execute")
    assert sorted(rows(kafka("kafka-share-groups", "--describe", "--group", group).out)) \
        == [[group, topic, "0", "1", "3"], [group, topic, "1", "2", "0"]]
    deleted = kafka("kafka-share-groups", "--delete-offsets", "--group", group,
                    "--topic", topic).out
    assert rows(deleted) == [[topic, "Successful"]]
    assert f"Share group '{group}' has no offset information." in \
        kafka("kafka-share-groups", "--describe", "--group", group).out


@pytest.mark.slow
def test_share_group_is_described_after_a_restart(kafka_jars: None,
                                                  broker_factory: BrokerFactory) -> None:
    """Its share-partitions are durable, its membership is not: after a restart the group is
    described (Empty, with its start offsets and lag) before any member joins again."""
    broker = broker_factory(env=TOOLS_ENV)
    kafka = KafkaTools(broker.bootstrap)
    topic, group = make_topic_name("restart"), make_topic_name("workers")
    kafka("kafka-topics", "--create", "--topic", topic, "--partitions", "1")
    produce(kafka.bootstrap, topic, {0: 3})
    kafka("kafka-share-groups", "--reset-offsets", "--group", group, "--topic", topic,
          "--to-offset", "1", "--execute")
    broker.restart()
    assert rows(kafka("kafka-share-groups", "--describe", "--group", group).out) \
        == [[group, topic, "0", "1", "2"]]
    state = rows(kafka("kafka-share-groups", "--describe", "--group", group, "--state").out)
    assert [(s[0], s[-2], s[-1]) for s in state] == [(group, "Empty", "0")]
