"""Index Query in cluster mode on S3 (SeaweedFS): the partitions' owners build the indexes
beside the segment objects, and every broker and proxy answers queries from the shared storage,
also after the owner of a partition is killed (kill -9, while it indexes) and another takes
over."""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.conftest import ClusterFactory, SharedStorage
from tests.index.helpers import positions, produce_orders, query, wait_indexed
from tests.proxy.conftest import Proxies
from tests.seaweedfs import SeaweedFS


def test_every_broker_and_proxy_answers_from_s3(cluster_factory: ClusterFactory,
                                                proxies: Proxies, seaweedfs: SeaweedFS) -> None:
    storage = SharedStorage(seaweedfs.url(f"idx-{time.time_ns()}"), seaweedfs.storage_options())
    cluster = cluster_factory(brokers=2, storage=storage, metrics=True)
    proxy = proxies(cluster)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("orders", 4, config={
        "bmq.index.fields": "order_id,header:trace,key"})])["orders"].result(30)
    cluster.wait_writable("orders")
    sent = produce_orders(cluster.bootstrap, "orders", range(2000), malformed=2)
    ports = [b.metrics_port for b in cluster.brokers.values()] + [proxy.metrics_port]
    parts = wait_indexed(proxy.metrics_port, "orders", len(sent), timeout=90)
    assert sum(p["malformed_values"] for p in parts) == 2

    def check(numbers: range, port: int) -> None:
        for i in (numbers[0], numbers[-1]):
            expected = {(sent[i].partition, sent[i].offset)}
            assert positions(query(port, "orders", f"order_id={i}")) == expected
            assert positions(query(port, "orders", f"header:trace=t{i}")) == expected
        keyed = {(s.partition, s.offset) for s in sent.values()
                 if s.number >= 0 and s.number % 50 == 9}
        assert positions(query(port, "orders", "key=k9")) == keyed

    for port in ports:               # owners, a broker owning other partitions, the proxy
        check(range(2000), port)

    # kill -9 an owner while it indexes what was just produced: the survivor resumes from
    # the chunks on S3, without wrong or missing answers
    sent.update(produce_orders(cluster.bootstrap, "orders", range(2000, 12_000)))
    victim = cluster.owners("orders")[0]
    cluster.brokers[victim].kill()
    survivor = next(b for b in cluster.brokers.values() if b.broker_id != victim)
    cluster.wait_writable("orders", owners={survivor.broker_id}, timeout=60)
    sent.update(produce_orders(survivor.bootstrap, "orders", range(12_000, 12_300)))
    wait_indexed(survivor.metrics_port, "orders", len(sent), timeout=90)
    for port in (survivor.metrics_port, proxy.metrics_port):
        check(range(2000), port)
        check(range(2000, 12_000), port)
        check(range(12_000, 12_300), port)
