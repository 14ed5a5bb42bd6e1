"""Share consumers that know only a `bmq proxy` (confluent-kafka's ShareConsumer): the proxy
splits their ShareFetch and ShareAcknowledge over the partitions' owners, each with its own
share session, and merges the answers (bmq.proxy.share)."""

from __future__ import annotations

from collections import Counter

from confluent_kafka import Producer

from tests.cluster.conftest import ClusterFactory, cluster_factory, zookeeper
from tests.proxy.conftest import Proxies, proxies
from tests.share.helpers import (
    SHARE_ENV,
    ShareWorker,
    create_topic,
    set_group_configs,
    unique,
    wait_for,
)
from tests.share.test_clients import EARLIEST

__all__ = ["cluster_factory", "proxies", "zookeeper"]

PARTITIONS = 3
RECORDS = 300


def test_share_consumers_through_a_proxy(cluster_factory: ClusterFactory, proxies: Proxies,
                                         workers: list[ShareWorker]) -> None:
    """Three consumers of a three-partition topic whose partitions are on different brokers,
    all through one proxy: every record is processed exactly once."""
    cluster = cluster_factory(brokers=3, env=SHARE_ENV)
    proxy = proxies(cluster)
    topic, group = unique("pshare"), unique("g")
    create_topic(proxy.bootstrap, topic, PARTITIONS)
    cluster.wait_writable(topic)
    assert len(set(cluster.owners(topic).values())) > 1, "the partitions share one owner"
    set_group_configs(proxy.bootstrap, group, EARLIEST)
    producer = Producer({"bootstrap.servers": proxy.bootstrap, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    for _ in range(3):
        workers.append(ShareWorker(proxy.bootstrap, group, topic))
    wait_for(lambda: sum(len(w.acked) for w in workers) >= RECORDS, 90, "every record acked")
    got = Counter(offset for w in workers for offset, _, _ in w.got)
    # Offsets repeat over the partitions: each offset once per partition, none delivered twice.
    assert sum(got.values()) == RECORDS
    assert set(got.values()) == {PARTITIONS}
