"""Cluster mode end to end: a controller and three or four brokers on a real ZooKeeper and one
shared storage, with idempotent acks=all producers writing through every failure we can cause.
The failure tests run on both backends: a shared directory and S3 (SeaweedFS)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bmq.coordinators.placement import partition_for
from bmq.metadata.topics import OFFSETS_TOPIC
from bmq.protocol.records import iter_batches
from bmq.storage import PartitionLog
from bmq.storage.factory import open_log_storage
from tests.cluster.conftest import SESSION_TIMEOUT_MS, Cluster, ClusterFactory, SharedStorage
from tests.cluster.workload import SteadyProducer, verify
from tests.conftest import bmq_command, make_topic_name

PARTITIONS = 6


def create_topic(cluster: Cluster, name: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # Metadata first: once librdkafka learns the brokers it drops its bootstrap connections,
    # failing a request already sent on one with _DESTROY_BROKER (CI, 2026-11-30: the
    # CreateTopics of a cluster just started); after it, CreateTopics goes to a learned broker.
    admin.list_topics(timeout=30)
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)
    cluster.wait_writable(name)


def batches_at(cluster: Cluster, topic: str) -> Callable[[int, list[int]], str]:
    """For a duplicate's report: the batches holding ``offsets`` as the storage has them
    (producer id, epoch and sequence say who wrote a record twice)."""
    def describe(partition: int, offsets: list[int]) -> str:
        storage = open_log_storage(cluster.storage, cluster.storage_options)
        reader = PartitionLog.open_reader(storage, topic, partition)
        try:
            data = reader.read(min(offsets), 1 << 16)
            return "; ".join(
                f"[{h.base_offset}-{h.next_offset - 1} pid {h.producer_id} epoch "
                f"{h.producer_epoch} seq {h.base_sequence}-{h.last_sequence}]"
                for _, h in iter_batches(data) if h.base_offset <= max(offsets))
        finally:
            reader.close()
    return describe


def owned_by(cluster: Cluster, topic: str, broker_id: int) -> list[int]:
    return [p for p, owner in cluster.owners(topic).items() if owner == broker_id]


# On HDFS in CI too: the new owner recovers the frozen owner's lease on its open segment, so
# the frozen process cannot append after it resumes (with the epoch fencing as elsewhere).
@pytest.mark.parametrize("shared_storage", ["file", "s3", "hdfs"], indirect=True)
def test_kill9_and_sigstop_lose_nothing(cluster_factory: ClusterFactory,
                                        shared_storage: SharedStorage) -> None:
    cluster = cluster_factory(brokers=3, storage=shared_storage)
    topic = make_topic_name("failover")
    create_topic(cluster, topic)
    assert {1, 2, 3} == set(cluster.owners(topic).values())
    producer = SteadyProducer(cluster.bootstrap, topic, PARTITIONS).start()
    try:
        time.sleep(1.5)
        # kill -9: its partitions move to the others once its session expires.
        cluster.brokers[1].kill()
        took = cluster.wait_writable(topic, owners={2, 3}, timeout=20)
        print(f"kill -9: partitions writable elsewhere {took:.2f}s after the kill")
        cluster.brokers[1].start()
        cluster.wait_for(lambda: bool(owned_by(cluster, topic, 1)), 20, "broker 1 back")
        cluster.wait_writable(topic)
        time.sleep(1)
        # SIGSTOP longer than the session timeout: the frozen broker must not ack late.
        frozen = cluster.brokers[2]
        frozen.pause()
        cluster.wait_writable(topic, owners={1, 3}, timeout=20)
        time.sleep(SESSION_TIMEOUT_MS / 1000)
        frozen.resume()
        cluster.wait_for(lambda: bool(owned_by(cluster, topic, 2)), 30, "broker 2 back")
        cluster.wait_writable(topic)
        time.sleep(1.5)
    finally:
        producer.stop()
    assert not producer.failed, producer.failed[:5]
    assert "session lost" in cluster.brokers[2].log_text()
    count = verify(producer, cluster.bootstrap, batches_at(cluster, topic))
    assert count == producer.sent
    assert count > 1000


def test_scale_out_drain_and_rolling_restart(cluster_factory: ClusterFactory,
                                             shared_storage: SharedStorage) -> None:
    cluster = cluster_factory(brokers=3, storage=shared_storage)
    topic = make_topic_name("scale")
    create_topic(cluster, topic, 8)
    producer = SteadyProducer(cluster.bootstrap, topic, 8).start()
    try:
        time.sleep(1)
        # Scale out: a fourth broker takes its share (two of eight), the rest stay put.
        before = cluster.owners(topic)
        cluster.add_broker(4)
        took = cluster.wait_for(lambda: len(owned_by(cluster, topic, 4)) == 2, 20,
                                "broker 4 serving its share")
        cluster.wait_writable(topic)
        after = cluster.owners(topic)
        moved = [p for p in before if before[p] != after[p]]
        assert len(moved) == 2, (before, after)
        print(f"scale-out: broker 4 owned its share {took:.2f}s after it accepted connections")
        # Scale in: SIGTERM drains broker 3 (exit code 0 checked by stop()).
        cluster.brokers[3].stop()
        assert owned_by(cluster, topic, 3) == []
        cluster.wait_writable(topic, owners={1, 2, 4})
        # Rolling restart of the remaining brokers under load.
        for broker_id in (1, 2, 4):
            cluster.brokers[broker_id].restart()
            cluster.wait_for(lambda b=broker_id: bool(owned_by(cluster, topic, b)), 20,
                             f"broker {broker_id} serving again")
            cluster.wait_writable(topic)
        time.sleep(1)
    finally:
        producer.stop()
    assert not producer.failed, producer.failed[:5]
    count = verify(producer, cluster.bootstrap, batches_at(cluster, topic))
    assert count == producer.sent


# The classic protocol, and KIP-848's (its group: epochs, assignment, moves with the
# coordinator too); the session timeout and heartbeat interval are the client's in the one and
# the broker's in the other.
COORDINATOR_MOVE_PROTOCOLS = {
    "classic": ({}, {"session.timeout.ms": 10000, "heartbeat.interval.ms": 500}, 30.0),
    "consumer": ({"BMQ_GROUP_CONSUMER_SESSION_TIMEOUT_MS": "10000",
                  "BMQ_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": "500"},
                 {"group.protocol": "consumer"}, 60.0),
}


@pytest.mark.parametrize("protocol", sorted(COORDINATOR_MOVE_PROTOCOLS))
def test_consumer_group_survives_coordinator_move(cluster_factory: ClusterFactory,
                                                  protocol: str) -> None:
    env, settings, consume_timeout = COORDINATOR_MOVE_PROTOCOLS[protocol]
    cluster = cluster_factory(brokers=3, env=env)
    topic = make_topic_name("group")
    create_topic(cluster, topic, 3)
    producer = SteadyProducer(cluster.bootstrap, topic, 3, rate=2000)
    for seq in range(600):
        producer.producer.produce(topic, value=f"{seq % 3}:{seq}".encode(), partition=seq % 3)
    producer.producer.flush(30)
    group = make_topic_name("g")
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         **settings})
    consumer.subscribe([topic])
    seen: list[bytes] = []

    def consume(n: int, timeout: float = consume_timeout) -> None:
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
        if protocol == "consumer":
            # The member kept its partitions across the move: still all three, no rejoin.
            assert len(consumer.assignment()) == 3
    finally:
        consumer.close()
    assert sorted(set(seen)) == sorted({f"{s % 3}:{s}".encode() for s in range(600)})
    # A new member of the group starts from the committed offsets: nothing left to read.
    fresh = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest"})
    try:
        committed = fresh.committed([TopicPartition(topic, p) for p in range(3)], timeout=20)
        assert [tp.offset for tp in committed] == [200, 200, 200]
    finally:
        fresh.close()


def test_admin_command_and_controller_failover(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=2)
    standby = cluster.start_controller()
    topic = make_topic_name("admin")
    create_topic(cluster, topic, 4)
    out = subprocess.run([*bmq_command(), "admin", "partitions", "--zookeeper",
                          cluster.zk_server.hosts, "--root", cluster.root, "--topic", topic],
                         capture_output=True, text=True, check=True, timeout=30).stdout
    lines = [line for line in out.splitlines() if line.startswith(topic)]
    assert len(lines) == 4 and all(line.split()[-1] == "writable" for line in lines), out
    assert "broker 1 127.0.0.1:" in out and "broker 2 127.0.0.1:" in out
    # kill -9 the active controller: the standby is elected and keeps placing partitions.
    active = cluster.controllers[0]
    assert standby.poll() is None
    active.kill()
    active.wait(10)
    second = make_topic_name("after-controller-failover")
    create_topic(cluster, second, 4)
    assert set(cluster.owners(second).values()) == {1, 2}


def test_admin_apis_on_any_broker(cluster_factory: ClusterFactory) -> None:
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
    )

    cluster = cluster_factory(brokers=2)
    one = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    two = AdminClient({"bootstrap.servers": cluster.brokers[2].bootstrap})
    topic = make_topic_name("admin-apis")
    for future in one.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(30)
    cluster.wait_writable(topic)
    # Partitions added through broker 2 are placed and opened.
    for future in two.create_partitions([NewPartitions(topic, 5)]).values():
        future.result(30)
    cluster.wait_for(lambda: len(cluster.owners(topic)) == 5, 20, "5 partitions")
    cluster.wait_writable(topic)
    # A config set through broker 2 is seen through broker 1.
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "123456",
                    incremental_operation=AlterConfigOpType.SET)])
    for future in two.incremental_alter_configs([resource]).values():
        future.result(30)

    def seen() -> bool:
        described = one.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
        configs = next(iter(described.values())).result(30)
        return bool(configs["retention.ms"].value == "123456")
    cluster.wait_for(seen, 20, "config visible on broker 1")
    # Deleted through broker 1: gone everywhere, and its data removed from shared storage.
    for future in one.delete_topics([topic]).values():
        future.result(30)
    shared = cluster.base / "shared" / "topics"
    cluster.wait_for(lambda: not (shared / topic).exists() or not any(
        (shared / topic).iterdir()), 20, "partition data deleted")
    # Another broker's Metadata follows ZooKeeper's watch, as a Kafka broker's follows the
    # controller's update: soon, not at once (asked at once, it failed under load twice).
    cluster.wait_for(lambda: topic not in two.list_topics(timeout=10).topics, 20,
                     "the topic gone from broker 2's Metadata")


def test_a_topic_deleted_before_its_moved_partitions_were_opened_leaves_no_data(
        cluster_factory: ClusterFactory) -> None:
    """A killed broker's partitions are taken by the others without being opened (opened on
    first use or in the background); the topic's deletion right after still removes every
    partition's files, the dead broker's included."""
    cluster = cluster_factory(brokers=2)
    topic = make_topic_name("deleted-moved")
    partitions = 200
    create_topic(cluster, topic, partitions)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 20})
    for partition in range(partitions):
        producer.produce(topic, b"x", partition=partition)
    assert producer.flush(60) == 0
    del producer    # its metadata refreshes would create the deleted topic again
    shared = cluster.base / "shared" / "topics" / topic
    assert len(list(shared.iterdir())) == partitions
    cluster.brokers[2].kill()
    cluster.wait_writable(topic, owners={1}, timeout=20)
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    cluster.wait_for(lambda: not shared.exists() or not any(shared.iterdir()), 30,
                     "every partition's data deleted")
