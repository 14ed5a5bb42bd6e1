"""Scheduled delivery in cluster mode, with the paths clients take there: records produced
through a `bmq proxy` are held and delivered at their time, and scheduled records of Kafka
transactions (the coordinator on any broker of two) are delivered only if they commit, at
their time."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from tests.cluster.conftest import ClusterFactory, cluster_factory, zookeeper
from tests.integration.helpers import admin, watermarks
from tests.proxy.conftest import Proxies, proxies
from tests.scheduled.helpers import (
    DELAY,
    confluent_schedule,
    delivered_early,
    now_ms,
    settled_arrivals,
)

__all__ = ["cluster_factory", "proxies", "zookeeper"]

pytestmark = pytest.mark.timeout(240)


def test_through_a_proxy_and_in_transactions(cluster_factory: ClusterFactory,
                                             proxies: Proxies) -> None:
    cluster = cluster_factory(brokers=2)
    proxy = proxies(cluster)
    topic = "later"
    client = admin(cluster.bootstrap)
    client.create_topics([NewTopic(topic, 2, 1, config={
        "bmq.delay.enable": "true"})])[topic].result(30)
    cluster.wait_writable(topic)

    # Through the proxy: acknowledged as held (nothing in the partitions yet), then delivered.
    sent = now_ms()
    confluent_schedule(proxy.bootstrap, topic, [
        {"key": f"k{i}".encode(), "value": f"proxied-{i}".encode(), "partition": i % 2,
         "headers": [(DELAY, b"3000")]} for i in range(40)], enable_idempotence=True)
    if now_ms() - sent < 2500:
        assert sum(watermarks(cluster.bootstrap, topic, p)[1] for p in (0, 1)) == 0

    # Transactions: three on each partition, the middle one aborted.
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "broker.address.family": "v4",
                         "transactional.id": "scheduled-txn"})
    producer.init_transactions(30)
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(6):
            producer.produce(topic, f"{outcome}-{i}".encode(), partition=i % 2,
                             headers=[(DELAY, b"1500")])
        producer.flush(30)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    expected = sorted([f"proxied-{i}".encode() for i in range(40)]
                      + [f"commit-{i}".encode() for i in range(6)] * 2)
    arrived = settled_arrivals(proxy.bootstrap, topic, 2, len(expected), "read_committed")
    assert sorted(r.value for r in arrived) == expected, cluster.logs()
    assert not delivered_early(arrived), delivered_early(arrived)
