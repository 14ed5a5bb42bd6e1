"""SIGTERM while producers are busy: the broker drains, exits 0, loses nothing acknowledged."""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 4


def _produce_until(stop: threading.Event, bootstrap: str, topic: str, worker: int,
                   acked: list[bytes], failed: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                         "enable.idempotence": True, "message.timeout.ms": 8000,
                         "reconnect.backoff.max.ms": 200})

    def report(err: Any, msg: Any) -> None:
        (acked if err is None else failed).append(msg.value())

    seq = 0
    while not stop.is_set():
        try:
            producer.produce(topic, f"{worker}-{seq}".encode(), on_delivery=report)
            seq += 1
        except BufferError:
            producer.poll(0.01)
        if seq % 100 == 0:
            producer.poll(0.001)
    producer.flush(20)


def test_sigterm_under_load_loses_nothing_acknowledged(broker: Any, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    stop = threading.Event()
    acked: list[bytes] = []
    failed: list[bytes] = []
    threads = [threading.Thread(target=_produce_until,
                                args=(stop, broker.bootstrap, topic, w, acked, failed))
               for w in range(2)]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 30
        while len(acked) < 5000 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(acked) >= 5000, "producers did not get going"
        broker.stop()  # SIGTERM mid-stream; asserts exit code 0
        in_flight_at_stop = len(acked)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert "stopped cleanly" in broker.log_text()
    broker.start()

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic}-check",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    stored: set[bytes] = set()
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    while len(at_end) < PARTITIONS and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error() is None:
            stored.add(msg.value())
            at_end.discard(msg.partition())
        else:
            at_end.add(msg.partition())
    consumer.close()
    missing = set(acked) - stored
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged messages lost"
    assert len(acked) >= in_flight_at_stop
