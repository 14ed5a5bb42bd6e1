"""Many large Produce requests at once, more than the broker's memory holds: the broker reads
no more than ``queued.max.request.bytes`` of requests at a time (bmq/net/memory.py), the other
clients wait, and every record is acknowledged and stored once. The broker runs under a real
limit of memory (``prlimit --data``, as ``ulimit -d``): without the pool it allocated every
request it was sent, met MemoryError, and dropped connections and requests."""

from __future__ import annotations

import threading
import zlib

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.conftest import BrokerFactory
from tests.integration.helpers import create_topic, watermarks

PRODUCERS = 16
RECORD_BYTES = 40 << 20
MEMORY_LIMIT = 640 << 20        # the broker's data segment: about 200 MiB idle
REQUEST_MEMORY = 96 << 20       # queued.max.request.bytes: two such requests at a time


def record(n: int) -> bytes:
    """``RECORD_BYTES`` of bytes no compression shrinks, distinct per producer."""
    seed = n.to_bytes(4, "big") * 16
    block = b"".join(zlib.crc32(seed + i.to_bytes(4, "big")).to_bytes(4, "big")
                     for i in range(16_384))
    return (block * (RECORD_BYTES // len(block) + 1))[:RECORD_BYTES]


def test_large_requests_beyond_memory_wait_and_are_all_stored(
        broker_factory: BrokerFactory) -> None:
    broker = broker_factory(env={"BMQ_QUEUED_MAX_REQUEST_BYTES": REQUEST_MEMORY},
                            limits={"data": MEMORY_LIMIT})
    topic = "large-records"
    create_topic(broker.bootstrap, topic, partitions=1,
                 config={"max.message.bytes": str(RECORD_BYTES + (1 << 20))})
    outcomes: list[tuple[int, str | None, int]] = []
    start = threading.Barrier(PRODUCERS)

    def produce(n: int) -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                             "message.max.bytes": RECORD_BYTES + (1 << 20),
                             "enable.idempotence": True, "message.timeout.ms": 120_000})
        value = record(n)
        start.wait()
        producer.produce(topic, value, key=str(n).encode(), partition=0, on_delivery=lambda e, m:
                         outcomes.append((n, e and str(e), m.offset())))
        producer.flush(150)

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(PRODUCERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    assert sorted(n for n, error, _ in outcomes if error is None) == list(range(PRODUCERS)), \
        (outcomes, broker.log_text()[-3000:])
    assert sorted(offset for _, _, offset in outcomes) == list(range(PRODUCERS))
    assert watermarks(broker.bootstrap, topic) == (0, PRODUCERS)
    assert "MemoryError" not in broker.log_text()
    assert broker.is_running()

    # The bytes round-trip: the first and the last record read back whole.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                         "fetch.max.bytes": RECORD_BYTES + (2 << 20),
                         "max.partition.fetch.bytes": RECORD_BYTES + (2 << 20),
                         "receive.message.max.bytes": RECORD_BYTES + (4 << 20)})
    try:
        offsets = {offset: n for n, _, offset in outcomes}
        for offset in (0, PRODUCERS - 1):
            consumer.assign([TopicPartition(topic, 0, offset)])
            message = consumer.poll(60)
            assert message is not None and message.error() is None, message and message.error()
            assert (message.offset(), message.key()) == (offset, str(offsets[offset]).encode())
            assert message.value() == record(offsets[offset])
    finally:
        consumer.close()
