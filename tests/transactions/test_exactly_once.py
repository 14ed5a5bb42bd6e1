"""Consume-transform-produce with send_offsets_to_transaction: a zombie processor is fenced
by a new instance with the same transactional id, and the output holds every input once."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaException

from tests.integration.helpers import create_topic, produce_all
from tests.transactions.helpers import read_values, txn_producer

INPUTS = 60
GROUP = "ctp-" + uuid.uuid4().hex[:6]


def _processor(bootstrap: str) -> tuple[Consumer, object]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                         "group.id": GROUP, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000})
    consumer.subscribe(["ctp-in"])
    producer = txn_producer(bootstrap, "ctp-processor")
    producer.init_transactions(30)
    return consumer, producer


def _process(consumer: Consumer, producer, count: int, commit: bool = True) -> int:
    """One transaction: up to ``count`` inputs transformed, offsets sent with the output."""
    producer.begin_transaction()
    done = 0
    for _ in range(100):
        if done >= count:
            break
        for message in consumer.consume(count - done, timeout=0.5):
            assert message.error() is None, message.error()
            producer.produce("ctp-out", message.value().upper(), partition=0)
            done += 1
    producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                         consumer.consumer_group_metadata(), 30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.flush(30)
    return done


def test_consume_transform_produce_exactly_once_with_zombie_fenced(txn_broker):
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "ctp-in", partitions=1)
    create_topic(bootstrap, "ctp-out", partitions=1)
    produce_all(bootstrap, "ctp-in", [{"value": f"in-{i}".encode()} for i in range(INPUTS)])

    zombie_consumer, zombie = _processor(bootstrap)
    assert _process(zombie_consumer, zombie, 20) == 20
    # The zombie's next transaction is on the broker but never committed (it hangs).
    assert _process(zombie_consumer, zombie, 10, commit=False) == 10
    zombie_consumer.close()   # its partitions go to the new instance

    consumer, fresh = _processor(bootstrap)   # same transactional id: aborts and fences
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(15)
    assert fenced.value.args[0].fatal() or "fenced" in str(fenced.value).lower(), fenced.value
    processed = 0
    while processed < INPUTS - 20:
        processed += _process(consumer, fresh, 20)
    consumer.close()

    out = read_values(bootstrap, "ctp-out", 1, "read_committed")
    assert sorted(out) == sorted(f"IN-{i}" for i in range(INPUTS)), "not exactly once"
