"""Share consumers that know only a `bmq proxy` (confluent-kafka's ShareConsumer): the proxy
splits their ShareFetch and ShareAcknowledge over the partitions' owners, each with its own
share session, and merges the answers (bmq.proxy.share)."""

from __future__ import annotations

from collections import Counter

import pytest
from confluent_kafka import Producer

from tests.cluster.conftest import ClusterFactory, cluster_factory, zookeeper
from tests.proxy.conftest import Proxies, proxies
from tests.share.helpers import (
    SHARE_ENV,
    ShareWorker,
    create_topic,
    produce,
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


@pytest.mark.slow
def test_a_share_consumer_behind_a_proxy_survives_the_kill_of_the_owner(
        cluster_factory: ClusterFactory, proxies: Proxies, workers: list[ShareWorker]) -> None:
    """kill -9 of the partition's owner while a share consumer reads through a proxy: the
    proxy opens a session at the new owner, which continues from the durable state; the
    consumer keeps running, and no record whose acknowledgement was answered comes back."""
    cluster = cluster_factory(brokers=3, env=SHARE_ENV)
    proxy = proxies(cluster)
    topic, group = unique("pkill"), unique("g")
    create_topic(proxy.bootstrap, topic, 1)
    cluster.wait_writable(topic)
    set_group_configs(proxy.bootstrap, group, EARLIEST)
    produce(proxy.bootstrap, topic, 100)
    worker = ShareWorker(proxy.bootstrap, group, topic)
    workers.append(worker)
    wait_for(lambda: len(worker.acked) == 100, 60, "100 acknowledged")
    acked_before, seen_before = set(worker.acked), len(worker.got)
    owner = cluster.owners(topic)[0]
    cluster.brokers[owner].kill()
    cluster.wait_writable(topic, owners=set(cluster.brokers) - {owner})
    produce(proxy.bootstrap, topic, 100, start=100)
    wait_for(lambda: set(worker.acked) == set(range(200)), 90, "every record acknowledged")
    assert not acked_before & {o for o, _, _ in worker.got[seen_before:]}
