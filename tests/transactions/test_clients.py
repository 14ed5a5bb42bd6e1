"""Transactions with confluent-kafka (librdkafka) against `bmq serve`: commit, abort,
read_committed, the last stable offset, and a transaction left open by a vanished producer."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException

from tests.integration.helpers import create_topic, produce_all
from tests.transactions.helpers import read_values, txn_producer


def test_committed_visible_aborted_only_to_read_uncommitted(txn_broker):
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "txn-basic", partitions=2)
    producer = txn_producer(bootstrap, "basic")
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce("txn-basic", f"committed-{i}".encode(), partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(6):
        producer.produce("txn-basic", f"aborted-{i}".encode(), partition=i % 2)
    producer.flush(30)     # on the broker before the abort (else the client just drops them)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce("txn-basic", b"committed-last", partition=0)
    producer.commit_transaction(30)

    committed = sorted(read_values(bootstrap, "txn-basic", 2, "read_committed"))
    assert committed == sorted([f"committed-{i}" for i in range(10)] + ["committed-last"])
    everything = sorted(read_values(bootstrap, "txn-basic", 2, "read_uncommitted"))
    assert everything == sorted(committed + [f"aborted-{i}" for i in range(6)])


def test_read_committed_stops_at_an_open_transaction(txn_broker):
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "txn-lso", partitions=1)
    produce_all(bootstrap, "txn-lso", [{"value": b"before"}])
    producer = txn_producer(bootstrap, "lso")
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("txn-lso", b"in-txn", partition=0)
    producer.flush(30)
    produce_all(bootstrap, "txn-lso", [{"value": b"after"}])   # behind the open transaction
    assert read_values(bootstrap, "txn-lso", 1, "read_committed") == ["before"]
    assert read_values(bootstrap, "txn-lso", 1, "read_uncommitted") == [
        "before", "in-txn", "after"]
    producer.commit_transaction(30)
    assert read_values(bootstrap, "txn-lso", 1, "read_committed") == ["before", "in-txn",
                                                                      "after"]


def test_vanished_producers_transaction_aborts_at_its_timeout(txn_broker):
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "txn-timeout", partitions=1)
    producer = txn_producer(bootstrap, "vanishing", transaction_timeout_ms=1500)
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("txn-timeout", b"never-committed", partition=0)
    producer.flush(30)
    produce_all(bootstrap, "txn-timeout", [{"value": b"plain"}])
    started = time.monotonic()
    # The producer is gone (never ends its transaction): the coordinator aborts it at its
    # timeout, the LSO moves past it and the plain record behind it becomes readable.
    assert read_values(bootstrap, "txn-timeout", 1, "read_committed", timeout=20,
                       until=1) == ["plain"]
    assert 1.0 < time.monotonic() - started < 10
    # Aborted with a bumped epoch: the old instance is fenced.
    producer.produce("txn-timeout", b"zombie", partition=0)
    with pytest.raises(KafkaException) as refused:
        producer.commit_transaction(10)
    assert any(word in str(refused.value).lower() for word in ("fenced", "abort", "epoch")), \
        refused.value
    assert "zombie" not in read_values(bootstrap, "txn-timeout", 1, "read_committed")
