"""Scheduled delivery through a full disk: the flushes of the timer log and of deliveries fail
(ENOSPC), the partition and its timer log reopen in place once there is room, and the timer is
started again from its durable state: every acknowledged record is delivered, once. Before,
the timer stopped at the first failed delivery and waited for a next owner; with the broker
still the owner, the partition went on acknowledging scheduled records and never delivered
them (the fault runs' scheduled ``lost`` under broker-cut: S3 out of reach)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests import small_disk
from tests.conftest import BrokerFactory, BrokerProcess, make_topic_name
from tests.scheduled.helpers import DELAY, Watcher
from tests.small_disk import fill, wait_for_log

DISK_BYTES = 16 << 20
ROOM_LEFT = 64 << 10
FULL_FOR_S = 5.0


@pytest.fixture
def broker_on_small_disk(broker_factory: BrokerFactory) -> Iterator[BrokerProcess]:
    with small_disk.broker_on_small_disk(broker_factory, DISK_BYTES) as broker:
        yield broker


class ScheduledProducer:
    """An idempotent producer sending numbered records due 300 ms after they are taken, a few
    hundred a second, in a thread; notes what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.acked: list[bytes] = []
        self.failed: list[KafkaError] = []
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                   "enable.idempotence": True, "linger.ms": 5,
                                   "broker.address.family": "v4"})
        self._topic = topic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _report(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.failed.append(error)
        else:
            value = message.value()
            assert value is not None
            self.acked.append(value)

    def _run(self) -> None:
        sent = 0
        while not self._stop.is_set():
            self._producer.produce(self._topic, str(sent).encode(), partition=0,
                                   headers=[(DELAY, b"300")], on_delivery=self._report)
            sent += 1
            self._producer.poll(0.003)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self._producer.flush(120) == 0


def test_a_timer_delivers_on_after_its_disk_was_full(
        broker_on_small_disk: BrokerProcess) -> None:
    broker = broker_on_small_disk
    topic = make_topic_name("sched-full")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"bmq.delay.enable": "true"})]
                        )[topic].result(30)
    watcher = Watcher(broker.bootstrap, topic, 1)
    producer = ScheduledProducer(broker.bootstrap, topic)
    try:
        time.sleep(1)
        filler = fill(broker, ROOM_LEFT)
        wait_for_log(broker, "No space left on device", 60)
        time.sleep(FULL_FOR_S)
        filler.unlink()
        time.sleep(5)
    finally:
        producer.stop()
    try:
        assert not producer.failed, producer.failed[:3]
        arrived = watcher.wait_for(len(producer.acked), 60)
    finally:
        watcher.close()
    delivered = [record.value for record in arrived]
    missing = set(producer.acked) - set(delivered)
    assert not missing, (f"{len(missing)} of {len(producer.acked)} acknowledged records never "
                         f"delivered, e.g. {sorted(missing, key=int)[:5]}")
    assert len(delivered) == len(set(delivered)), "a record delivered twice"
    assert len(producer.acked) > 1000
