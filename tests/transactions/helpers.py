"""What the transaction tests share: transactional producers and reading what a consumer of
each isolation level sees."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition


def txn_producer(bootstrap: str, transactional_id: str, **conf: Any) -> Producer:
    base: dict[str, Any] = {"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                            "transactional.id": transactional_id, "linger.ms": 5}
    base.update({k.replace("_", "."): v for k, v in conf.items()})
    return Producer(base)


def read_values(bootstrap: str, topic: str, partitions: int, isolation: str,
                timeout: float = 30, until: int | None = None) -> list[str]:
    """Every value a consumer of ``isolation`` sees from the start up to the end it reports
    (the LSO for read_committed); with ``until``, keep polling until that many are seen."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "broker.address.family": "v4",
        "group.id": "txn-read-" + uuid.uuid4().hex[:8], "isolation.level": isolation,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[str] = []
        at_eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(at_eof) == partitions and (until is None or len(values) >= until):
                break
            message = consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                at_eof.add(message.partition())
                continue
            at_eof.discard(message.partition())
            values.append(message.value().decode())
        else:
            raise AssertionError(f"{isolation} read of {topic} timed out with {len(values)}")
        return values
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str, partition: int, isolation: str) -> int:
    """The end offset a consumer of ``isolation`` is told (ListOffsets latest)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-end",
                         "isolation.level": isolation})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10,
                                                  cached=False)[1])
    finally:
        consumer.close()
