"""kafka-transactions.sh (Kafka 4.4's TransactionsCommand) against `bmq serve`: the transactions
and producers an operator lists and describes, hanging transactions looked for, and one
aborted by hand."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from tests.conftest import make_topic_name
from tests.kafka_tools.tools import KafkaTools, rows


def transactional(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 300000})
    producer.init_transactions(30)
    return producer


def write(producer: Producer, topic: str, count: int) -> None:
    producer.begin_transaction()
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0


@pytest.fixture
def open_transaction(kafka: KafkaTools) -> Iterator[tuple[str, str]]:
    """A topic whose partition 0 has a committed transaction (3 records) and, after it, one
    left open (2 records); the open one is aborted when the test ends."""
    topic = make_topic_name("ledger")
    kafka("kafka-topics", "--create", "--topic", topic, "--partitions", "1")
    done = transactional(kafka.bootstrap, f"{topic}-done")
    write(done, topic, 3)
    done.commit_transaction(30)
    pending = transactional(kafka.bootstrap, f"{topic}-open")
    write(pending, topic, 2)
    yield topic, f"{topic}-open"
    pending.abort_transaction(30)


def test_transactions_and_producers_are_listed_and_described(
        kafka: KafkaTools, open_transaction: tuple[str, str]) -> None:
    topic, open_id = open_transaction
    listed = {row[0]: row for row in rows(kafka("kafka-transactions", "list").out)}
    assert listed[f"{topic}-done"][3] == "CompleteCommit"
    assert listed[open_id][3] == "Ongoing"
    open_pid = listed[open_id][2]

    (described,) = rows(kafka("kafka-transactions", "describe", "--transactional-id",
                              open_id).out)
    # CoordinatorId, TransactionalId, ProducerId, ProducerEpoch, TransactionState,
    # TransactionTimeoutMs, CurrentTransactionStartTimeMs, TransactionDurationMs, TopicPartitions
    assert described[1:3] == [open_id, open_pid]
    assert described[4:6] == ["Ongoing", "300000"]
    assert described[8] == f"{topic}-0"

    producers = {row[0]: row for row in rows(kafka(
        "kafka-transactions", "describe-producers", "--topic", topic, "--partition", "0").out)}
    # ProducerId, ProducerEpoch, LatestCoordinatorEpoch, LastSequence, LastTimestamp,
    # CurrentTransactionStartOffset: the open transaction began after the 3 records and the
    # commit marker of the other one.
    assert set(producers) == {listed[f"{topic}-done"][2], open_pid}
    assert producers[open_pid][3] == "1" and producers[open_pid][5] == "4"
    assert producers[listed[f"{topic}-done"][2]][5] == "None"

    # The coordinator knows the open transaction: it is not hanging.
    assert rows(kafka("kafka-transactions", "find-hanging", "--broker-id", "0").out) == []


@pytest.mark.slow
def test_a_transaction_is_aborted_by_hand(kafka: KafkaTools,
                                          open_transaction: tuple[str, str]) -> None:
    topic, open_id = open_transaction
    kafka("kafka-transactions", "abort", "--topic", topic, "--partition", "0",
          "--start-offset", "4")
    producers = rows(kafka("kafka-transactions", "describe-producers", "--topic", topic,
                           "--partition", "0").out)
    assert len(producers) == 2 and [p[5] for p in producers] == ["None", "None"]
    # The abort marker ends the partition's open transaction: read_committed reads to the end.
    committed = kafka("kafka-console-consumer", "--topic", topic, "--from-beginning",
                      "--isolation-level", "read_committed", "--max-messages", "3",
                      "--timeout-ms", "30000").out
    assert committed.split() == ["v0", "v1", "v2"]
    assert "Ongoing" in kafka("kafka-transactions", "describe", "--transactional-id",
                              open_id).out
