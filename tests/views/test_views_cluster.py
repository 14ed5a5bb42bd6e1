"""Views and lanes in cluster mode: three `bmq broker`s on S3 (the session's SeaweedFS) and a
`bmq proxy`. A view's partitions are served by its source's owners (and proxies), so a group
on a view, straight to the brokers, and a group on a lane, through the proxy, each get exactly
their records; produce to a view through the proxy is refused."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.conftest import ClusterFactory, SharedStorage, cluster_factory, zookeeper
from tests.proxy.conftest import Proxies, proxies
from tests.seaweedfs import SeaweedFS
from tests.views.helpers import group_read, new_group, produce_with_headers, seen

__all__ = ["cluster_factory", "proxies", "zookeeper"]

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 6


def test_view_and_lane_on_s3_through_brokers_and_a_proxy(
        cluster_factory: ClusterFactory, proxies: Proxies, seaweedfs: SeaweedFS) -> None:
    storage = SharedStorage(seaweedfs.url(f"views-{time.time_ns()}"),
                            seaweedfs.storage_options())
    cluster = cluster_factory(brokers=3, storage=storage)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic("orders", PARTITIONS, 1, config={
            "bmq.lanes.enable": "true"})]).values():
        future.result(30)
    cluster.wait_writable("orders")
    for future in admin.create_topics([NewTopic("paid", -1, config={
            "bmq.view.source": "orders", "bmq.view.filter": "TAG = 'paid'"})]).values():
        future.result(30)
    assert len(cluster.owners("orders")) == PARTITIONS and not cluster.owners("paid")
    records = [[("bmq.tag", b"paid" if i % 4 == 0 else b"new")]
               + ([("bmq.lane", b"blue")] if i % 5 == 0 else []) for i in range(120)]
    sent = produce_with_headers(cluster.bootstrap, "orders", records, PARTITIONS)
    proxy = proxies(cluster)

    paid = seen(sent, lambda s: s.header("bmq.tag") == b"paid")
    assert group_read(cluster.bootstrap, "paid", new_group(), len(paid)) == paid
    blue = seen(sent, lambda s: s.header("bmq.lane") == b"blue")
    assert group_read(proxy.bootstrap, "orders.lane.blue", new_group(), len(blue)) == blue
    trunk = seen(sent, lambda s: s.header("bmq.lane") is None)
    assert group_read(proxy.bootstrap, "orders", new_group(), len(trunk)) == trunk

    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": proxy.bootstrap, "message.timeout.ms": 10000})
    producer.produce("paid", b"refused", partition=0, on_delivery=lambda e, _: errors.append(e))
    assert producer.flush(15) == 0
    assert [e.code() for e in errors] == [KafkaError.TOPIC_EXCEPTION]
