"""`bmq dlq redrive`: a share group's dead letters go back to their source topic (by their
provenance headers) and are delivered to the group again; a second run sends nothing."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import AcknowledgeType, Producer

from tests.cli.conftest import Bmq
from tests.share.helpers import create_topic, set_group_configs, unique
from tests.share.test_clients import EARLIEST, _dead_letters, share_consumer


def test_dead_letters_are_redriven_to_their_source_topic(share_broker: Any) -> None:
    bootstrap = share_broker.bootstrap
    topic, group = unique("redrive"), unique("g")
    dlq = f"dlq.{topic}"
    create_topic(bootstrap, topic, 1)
    set_group_configs(bootstrap, group, {**EARLIEST, "errors.deadletterqueue.topic.name": dlq})
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0,
                         headers=[("trace", f"t{i}".encode())])
    assert producer.flush(10) == 0
    consumer = share_consumer(bootstrap, group, topic)
    try:
        # Offsets 0 and 2 rejected (dead letters), 1 accepted.
        _drain(consumer, 3, lambda offset: AcknowledgeType.ACCEPT if offset == 1
               else AcknowledgeType.REJECT)
        assert len(_dead_letters(bootstrap, dlq, 2)) == 2
        bmq = Bmq(bootstrap)
        assert f"would re-drive 2 records to {topic}" in bmq("dlq", "redrive", dlq,
                                                             "--dry-run").err
        assert f"re-drove 2 records to {topic}" in bmq("dlq", "redrive", dlq).err
        again = _drain(consumer, 2, lambda offset: AcknowledgeType.ACCEPT)
        assert [(m.offset(), m.key(), m.value(), m.headers()) for m in again] == [
            (3, b"k0", b"v0", [("trace", b"t0")]), (4, b"k2", b"v2", [("trace", b"t2")])]
        assert "nothing to re-drive" in bmq("dlq", "redrive", dlq).err
    finally:
        consumer.close()


def _drain(consumer: Any, count: int, ack: Any) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        for m in consumer.poll(0.3):
            got.append(m)
            consumer.acknowledge(m, ack(m.offset()))
        consumer.commit_sync()
    assert len(got) == count, [m.offset() for m in got]
    return got
