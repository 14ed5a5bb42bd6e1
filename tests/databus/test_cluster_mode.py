"""The databus in front of a cluster of `bmq broker`s under ZooKeeper (tests/cluster): its
batches are routed to each partition's owner; the stream mappings are a znode the brokers
serve: a `map` through a broker lands in ZooKeeper, one written to ZooKeeper directly (`map
--zookeeper`, refused for a root that holds no cluster) reaches the agents through the brokers'
watch, an agent in front of a proxy follows them too, and they survive a restart of every
broker."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from confluent_kafka import Producer

from tests.cluster.conftest import ClusterFactory, cluster_factory, zookeeper
from tests.conftest import bmq_command, make_topic_name
from tests.databus.conftest import DatabusFactory, DatabusProcess, create_topic, read_all
from tests.databus.mappings import described
from tests.proxy.conftest import Proxies, proxies

__all__ = ["cluster_factory", "proxies", "zookeeper"]


def databus_map(*args: str) -> None:
    done = subprocess.run([*bmq_command(), "databus", "map", *args], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def wait_routed(agents: list[DatabusProcess], stream: str, topic: str) -> None:
    """Each agent sends ``stream`` to ``topic`` within 5 s."""
    deadline = time.monotonic() + 5
    for agent in agents:
        while (answer := agent.post(stream, b"probe")[1]).get("topic") != topic:
            assert time.monotonic() < deadline, f"mapping not applied within 5 s: {answer}"
            time.sleep(0.1)


@pytest.mark.slow          # ZooKeeper, two brokers (started twice), a proxy: 11 s
def test_through_a_cluster_of_brokers(cluster_factory: ClusterFactory, proxies: Proxies,
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

    # Through a broker: stored in ZooKeeper, applied by the agent.
    databus_map(topic, "--topic", moved, "--compression", "gzip", "-b", cluster.bootstrap)
    znode, _ = cluster.zk.get(cluster.paths.security_document("databus_streams.json"))
    assert json.loads(znode)["streams"] == {topic: {"topic": moved, "partitioner": "key",
                                                    "compression": "gzip"}}
    wait_routed([agent], topic, moved)

    # In ZooKeeper directly: the brokers' watch serves it; an agent in front of a proxy too.
    proxy = proxies(cluster)
    behind_proxy = databus_factory(proxy)
    wait_routed([behind_proxy], topic, moved)
    databus_map(topic, "--remove", "--zookeeper", cluster.zk_server.hosts,
                "--root", cluster.root)
    elsewhere = subprocess.run([*bmq_command(), "databus", "map", topic, "--remove",
                                "--zookeeper", cluster.zk_server.hosts, "--root", "/no-cluster"],
                               capture_output=True, text=True, timeout=30)
    assert elsewhere.returncode == 2 and "no BMQ cluster" in elsewhere.stderr, elsewhere.stderr
    assert cluster.zk.exists("/no-cluster") is None
    wait_routed([agent, behind_proxy], topic, topic)
    databus_map(topic, "--topic", moved, "-b", proxy.bootstrap)     # relayed by the proxy
    wait_routed([agent, behind_proxy], topic, moved)

    version, streams = described(cluster)
    for broker in cluster.brokers.values():
        broker.kill()
    for broker in cluster.brokers.values():
        broker.start()
    assert described(cluster) == (version, streams)
    assert streams[topic][0] == moved
    assert agent.post(topic, b"after the restart")[1]["topic"] == moved
