"""A broker whose disk fills up under an acks=all load: the flush that meets ENOSPC fails, the
producer is answered KAFKA_STORAGE_ERROR (which it retries), the partition's log is reopened
with back-off (``bmq.writepath.partitions``) and, once there is room again, takes writes as
before: nothing acknowledged is lost, nothing is written twice, the broker kept running. Before
the reopening, the partition stayed unavailable until the broker restarted.

The disk is a real one (``tests.small_disk``)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests import small_disk
from tests.cluster.workload import SteadyProducer, verify
from tests.conftest import BrokerFactory, BrokerProcess, make_topic_name
from tests.small_disk import fill, wait_for_log

DISK_BYTES = 16 << 20
ROOM_LEFT = 64 << 10        # what the filler leaves: a few seconds of the load below
FULL_FOR_S = 5.0
REOPENED_WITHIN_S = 60.0


@pytest.fixture
def broker_on_small_disk(broker_factory: BrokerFactory) -> Iterator[BrokerProcess]:
    with small_disk.broker_on_small_disk(broker_factory, DISK_BYTES) as broker:
        yield broker


def test_a_full_disk_refuses_then_recovers(broker_on_small_disk: BrokerProcess) -> None:
    broker = broker_on_small_disk
    topic = make_topic_name("full-disk")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    filler = fill(broker, ROOM_LEFT)
    producer = SteadyProducer(broker.bootstrap, topic, 2, rate=400).start()
    try:
        wait_for_log(broker, "No space left on device", 60)
        full_at = producer.acked_count()
        time.sleep(FULL_FOR_S)
        filler.unlink()
        wait_for_log(broker, "reopened after a storage failure", REOPENED_WITHIN_S)
        time.sleep(3)
    finally:
        producer.stop()
    assert broker.proc is not None and broker.proc.poll() is None     # it kept running
    assert not producer.failed, producer.failed[:5]
    assert producer.acked_count() > full_at + 500
    assert verify(producer, broker.bootstrap) == producer.sent
