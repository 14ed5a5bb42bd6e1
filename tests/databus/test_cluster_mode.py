"""The databus in front of a cluster of `bmq broker`s under ZooKeeper (tests/cluster): its
batches are routed to each partition's owner, and the stream mappings, kept on the cluster's
compacted topic, are written and read through the brokers like any topic."""

from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka import Producer

from tests.cluster.conftest import ClusterFactory, cluster_factory, zookeeper
from tests.conftest import bmq_command, make_topic_name
from tests.databus.conftest import DatabusFactory, create_topic, read_all

__all__ = ["cluster_factory", "zookeeper"]


@pytest.mark.slow          # ZooKeeper and two brokers: 11 s
def test_through_a_cluster_of_brokers(cluster_factory: ClusterFactory,
                                      databus_factory: DatabusFactory) -> None:
    cluster = cluster_factory(brokers=2)
    topic, moved = make_topic_name("orders"), make_topic_name("orders-v2")
    for name in (topic, moved):
        create_topic(cluster, name, 4)
        cluster.wait_writable(name)
    assert len(set(cluster.owners(topic).values())) == 2, "one owner for every partition"
    agent = databus_factory(cluster)
    producer = Producer({"bootstrap.servers": agent.bootstrap, "enable.idempotence": True})
    messages = [(f"k{i % 9}".encode(), f"v{i}".encode()) for i in range(500)]
    for key, value in messages:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0
    seen = read_all(cluster, topic, 4, len(messages))
    assert sorted((key, value) for _, _, key, value, _ in seen) == sorted(messages)
    done = subprocess.run([*bmq_command(), "databus", "map", topic, "--topic", moved, "-b",
                           cluster.bootstrap], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 5
    while agent.post(topic, b"probe")[1].get("topic") != moved:
        assert time.monotonic() < deadline, "mapping not applied within 5 s"
        time.sleep(0.1)
