"""Index Query answers read_committed, as a Kafka consumer at isolation level 1: records of
a transaction that confluent-kafka's transactional producer aborted are never returned, nor
those of a transaction still open (past the last stable offset) until it commits."""

from __future__ import annotations

import json

from tests.conftest import BrokerFactory, free_port
from tests.index.helpers import order_value, query, wait_indexed
from tests.index.test_index_query import bmq
from tests.integration.helpers import create_topic
from tests.transactions.conftest import TXN_CONFIG
from tests.transactions.helpers import txn_producer


def test_aborted_and_open_transactions_are_not_answered(broker_factory: BrokerFactory,
                                                         topic: str) -> None:
    port = free_port()
    broker = broker_factory(config={**TXN_CONFIG, "metrics_port": port})
    create_topic(broker.bootstrap, topic, partitions=2)
    bmq("index", "create", topic, "--field", "order_id", "--field", "key",
        "-b", broker.bootstrap)
    producer = txn_producer(broker.bootstrap, "index-" + topic)
    producer.init_transactions(30)

    def send(numbers: range, key: str) -> None:
        producer.begin_transaction()
        for i in numbers:
            producer.produce(topic, key=key, value=order_value(i % 10), partition=i % 2)
        producer.flush(30)

    send(range(0, 40), "committed")         # order ids 0-9, 4 records each
    producer.commit_transaction(30)
    send(range(40, 100), "aborted")         # the same order ids, 6 records each
    producer.abort_transaction(30)
    send(range(100, 120), "open")           # 2 records each, not committed yet

    def answered(*where: str) -> list[str]:
        return sorted(r["key"] for r in query(port, topic, *where))

    # The open transaction holds the last stable offset: nothing after it is answered yet
    # (the scan of what the index has not reached), aborted records never.
    assert answered("order_id=7") == ["committed"] * 4
    assert answered("key=aborted") == []
    assert answered("key=open") == []
    producer.commit_transaction(30)
    # 40 + 60 + 20 records and three markers on each of two partitions.
    wait_indexed(port, topic, 126)
    assert answered("order_id=7") == ["committed"] * 4 + ["open"] * 2   # through the index
    assert answered("key=aborted") == []
    found = query(port, topic, "order_id=3", "key=committed")
    assert [json.loads(r["value"])["order_id"] for r in found] == [3] * 4
