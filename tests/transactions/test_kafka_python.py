"""kafka-python's transactional producer: a committed transaction is read by read_committed
consumers, an aborted one only by read_uncommitted ones."""

from __future__ import annotations

from kafka import KafkaProducer

from tests.integration.helpers import create_topic
from tests.transactions.helpers import read_values


def test_kafka_python_commit_and_abort(txn_broker):
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "txn-kp", partitions=2)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kafka-python")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(6):
            producer.send("txn-kp", f"kp-committed-{i}".encode(), partition=i % 2)
        producer.commit_transaction()
        producer.begin_transaction()
        for i in range(4):
            producer.send("txn-kp", f"kp-aborted-{i}".encode(), partition=i % 2)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close()
    committed = [f"kp-committed-{i}" for i in range(6)]
    assert sorted(read_values(bootstrap, "txn-kp", 2, "read_committed")) == sorted(committed)
    assert sorted(read_values(bootstrap, "txn-kp", 2, "read_uncommitted")) == sorted(
        committed + [f"kp-aborted-{i}" for i in range(4)])
