"""kafka-python's and aiokafka's transactional producers: a committed transaction is read by
read_committed consumers, an aborted one only by read_uncommitted ones."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaProducer
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


def test_aiokafka_commit_and_abort(txn_broker):
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "txn-aio", partitions=1)

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aiokafka")
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(3):
                    await producer.send_and_wait("txn-aio", f"aio-committed-{i}".encode())
            await producer.begin_transaction()
            await producer.send_and_wait("txn-aio", b"aio-aborted")
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())
    committed = [f"aio-committed-{i}" for i in range(3)]
    assert read_values(bootstrap, "txn-aio", 1, "read_committed") == committed
    assert read_values(bootstrap, "txn-aio", 1, "read_uncommitted") == [*committed, "aio-aborted"]
