"""Scheduled delivery's longer scenarios (BMQ_SLOW_TESTS=1): records 5-30 s ahead from both
clients, and a graceful hand-over (SIGTERM drains the owner) in a cluster on a shared
directory, where the new owner resumes the timer from the state the old one wrote."""

from __future__ import annotations

import random
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

from tests.cluster.conftest import ClusterFactory, SharedStorage, cluster_factory, zookeeper
from tests.conftest import BrokerProcess
from tests.integration.helpers import create_topic
from tests.scheduled.helpers import (
    DELAY,
    DELIVER_AT,
    Watcher,
    confluent_schedule,
    delivered_early,
    lateness,
    now_ms,
)

__all__ = ["cluster_factory", "zookeeper"]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_records_up_to_30_s_ahead(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 2, {"bmq.delay.enable": "true"})
    watcher = Watcher(broker.bootstrap, topic, 2)
    rng = random.Random(11)
    try:
        confluent_schedule(broker.bootstrap, topic, [
            {"value": f"c{i}".encode(), "headers": [(DELAY, str(rng.randint(5_000, 30_000))
                                                     .encode())]} for i in range(40)])
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        base = now_ms()
        for i in range(40):
            producer.send(topic, f"k{i}".encode(), headers=[
                (DELIVER_AT, str(base + rng.randint(5_000, 30_000)).encode())])
        producer.flush(15)
        producer.close()
        arrived = watcher.wait_for(80, 45)
    finally:
        watcher.close()
    assert sorted(r.value for r in arrived) == sorted(
        [f"c{i}".encode() for i in range(40)] + [f"k{i}".encode() for i in range(40)])
    late = lateness(arrived)
    assert late[0] >= 0 and late[-1] < 1500, late


def test_graceful_handover_on_a_shared_directory(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=2, storage=SharedStorage(None, {}))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("later", 2, 1, config={
        "bmq.delay.enable": "true"})])["later"].result(30)
    cluster.wait_writable("later")
    base = now_ms()
    records = [{"value": f"r{i}".encode(), "partition": i % 2,
                "headers": [(DELIVER_AT, str(base + 1000 + 40 * i).encode())]}
               for i in range(150)]          # due 1 to 7 s from now
    confluent_schedule(cluster.bootstrap, "later", records, enable_idempotence=True)
    watcher = Watcher(cluster.bootstrap, "later", 2)
    try:
        time.sleep(2.5)
        leaving = cluster.owners("later")[0]
        cluster.brokers[leaving].stop()      # SIGTERM: drains, hands its partitions over
        cluster.wait_writable("later", owners={b for b in cluster.brokers if b != leaving})
        watcher.wait_for(len(records), 30)
        time.sleep(1.0)
        arrived = list(watcher.arrived)
    finally:
        watcher.close()
    values = sorted(r.value for r in arrived)
    assert values == sorted(r["value"] for r in records), \
        f"{len(values)} arrived, {len(set(values))} distinct"
    assert not delivered_early(arrived), delivered_early(arrived)
