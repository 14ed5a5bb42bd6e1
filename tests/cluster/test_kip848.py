"""A KIP-848 consumer group (group.protocol=consumer) in cluster mode: its coordinator is the
owner of its __consumer_offsets partition, and the group (epochs, assignment) moves with it."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from bmq.coordinators.placement import partition_for
from bmq.metadata.topics import OFFSETS_TOPIC
from tests.cluster.conftest import ClusterFactory
from tests.cluster.test_cluster import create_topic
from tests.conftest import make_topic_name

KIP848_ENV = {"BMQ_GROUP_CONSUMER_SESSION_TIMEOUT_MS": "10000",
              "BMQ_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": "500"}


def test_kip848_group_survives_coordinator_move(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=3, env=KIP848_ENV)
    topic = make_topic_name("kip848")
    create_topic(cluster, topic, 3)
    group = make_topic_name("g848")
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "group.protocol": "consumer", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for seq in range(600):
        producer.produce(topic, value=f"{seq % 3}:{seq}".encode(), partition=seq % 3)
    assert producer.flush(30) == 0
    consumer.subscribe([topic])
    seen: list[bytes] = []

    def consume(n: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while len(seen) < n and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.append(message.value())
        assert len(seen) >= n, f"consumed {len(seen)} of {n}"

    try:
        consume(300)
        consumer.commit(asynchronous=False)
        coordinator = cluster.owners(OFFSETS_TOPIC)[partition_for(group, 6)]
        cluster.brokers[coordinator].stop()          # drain: the offsets partition moves
        cluster.wait_writable(OFFSETS_TOPIC, owners=set(cluster.brokers) - {coordinator})
        consume(600)
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=20)
        assert sum(tp.offset for tp in committed) == 600
        # The member kept its partitions across the move: still all three, no rejoin needed.
        assert len(consumer.assignment()) == 3
    finally:
        consumer.close()
    assert sorted(set(seen)) == sorted({f"{s % 3}:{s}".encode() for s in range(600)})
