"""`bmq cluster drain BROKER`: a clean scale-in through ZooKeeper while an idempotent acks=all
producer writes, the request surviving a restart of the broker, and its cancellation."""

from __future__ import annotations

import json
import os
import subprocess
import time

from confluent_kafka.admin import AdminClient

from bmq.metadata.topics import OFFSETS_TOPIC
from bmq.metadata.zookeeper.layout import WRITABLE
from bmq.metadata.zookeeper.state import broker_list
from tests.cluster.conftest import Cluster, ClusterFactory
from tests.cluster.test_cluster import PARTITIONS, create_topic
from tests.cluster.workload import SteadyProducer, verify
from tests.conftest import bmq_command, make_topic_name


def bmq_cluster(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """`bmq cluster ARGS` as an operator runs it, pointed at the cluster's ZooKeeper."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BMQ_")}
    return subprocess.run(
        [*bmq_command(), "cluster", *args, "--zookeeper", cluster.zk_server.hosts,
         "--root", cluster.root], capture_output=True, text=True, env=env, timeout=120,
        check=False)


def leaders(bootstrap: str) -> dict[tuple[str, int], int]:
    """Every partition's leader as Metadata tells a client."""
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20)
    return {(t, p): part.leader for t, topic in meta.topics.items()
            for p, part in topic.partitions.items()}


def test_drain_moves_everything_off_a_broker_under_load(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=3)
    topic = make_topic_name("drain")
    create_topic(cluster, topic)
    on_3 = {(s.topic, s.partition) for s in cluster.states() if s.owner == 3}
    assert any(t == topic for t, _ in on_3) and any(t == OFFSETS_TOPIC for t, _ in on_3)
    assert 3 in leaders(cluster.brokers[3].bootstrap).values()  # (its Metadata, as cached)
    producer = SteadyProducer(cluster.bootstrap, topic, PARTITIONS).start()
    try:
        time.sleep(1)
        drained = bmq_cluster(cluster, "drain", "3", "-o", "json", "--timeout", "60")
        assert drained.returncode == 0, drained
        report = json.loads(drained.stdout)
        assert report["drained"] and report["remaining"] == []
        # Everything broker 3 owned moved (the controller may still have been placing
        # __consumer_offsets partitions on the new broker when on_3 was read: those moved too).
        assert on_3 <= {(m["topic"], m["partition"]) for m in report["moved"]}
        assert {m["to"] for m in report["moved"]} <= {1, 2}
        assert all(m["state"] == WRITABLE for m in report["moved"])
        assert "owns no partitions" in drained.stderr
        assert not [s for s in cluster.states() if s.owner == 3]
        # Clients are sent elsewhere: no partition names broker 3 as its leader.
        assert 3 not in leaders(cluster.brokers[3].bootstrap).values()
        time.sleep(1)
    finally:
        producer.stop()
    assert not producer.failed, producer.failed[:5]
    assert verify(producer, cluster.bootstrap) == producer.sent

    info = json.loads(bmq_cluster(cluster, "info", "-o", "json", "-b",
                                  cluster.bootstrap).stdout)["zookeeper"]
    assert info["drain_requests"] == [3]
    assert {b["id"]: (b["drain_requested"], b["partitions"]) for b in info["brokers"]}[3] == \
        (True, 0)
    text = bmq_cluster(cluster, "info", "-b", cluster.bootstrap).stdout
    assert "requested" in text and "Active controller:" in text and "writable" in text

    # The request outlives the broker: restarted, it still gets nothing.
    cluster.brokers[3].restart()
    cluster.wait_for(lambda: 3 in [b for b, *_ in broker_list(cluster.zk, cluster.paths)], 20,
                     "broker 3 registered again")
    time.sleep(2.5)     # a couple of controller passes (one a second)
    assert not [s for s in cluster.states() if s.owner == 3]

    # Cancelled, it takes its share again.
    cancelled = bmq_cluster(cluster, "drain", "3", "--cancel")
    assert cancelled.returncode == 0 and "cancelled" in cancelled.stderr, cancelled
    cluster.wait_for(lambda: any(s.owner == 3 for s in cluster.states(topic)), 20,
                     "broker 3 owning partitions again")
    cluster.wait_writable(topic)

    # Draining every broker but one leaves that one; the last is refused (exit 1).
    for broker in ("1", "3"):
        asked = bmq_cluster(cluster, "drain", broker, "--no-wait")
        assert asked.returncode == 0 and "asked the controller" in asked.stderr, asked
    refused = bmq_cluster(cluster, "drain", "2")
    assert refused.returncode == 1 and "nothing could take" in refused.stderr, refused
    # A broker id nobody registered is refused and leaves no request behind.
    unknown = bmq_cluster(cluster, "drain", "7", "--no-wait")
    assert unknown.returncode == 1, unknown
    assert "broker 7 is not registered (brokers: 1, 2, 3): nothing to drain" in unknown.stderr
    info = json.loads(bmq_cluster(cluster, "info", "-o", "json", "-b",
                                  cluster.bootstrap).stdout)["zookeeper"]
    assert info["drain_requests"] == [1, 3]
    cluster.wait_writable(topic, owners={2})
