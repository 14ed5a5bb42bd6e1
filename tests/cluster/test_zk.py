"""ZooKeeper-backed pieces on their own: topic registry, producer-id blocks, the ack lease."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from kazoo.client import KazooClient

from bmq.broker.membership.lease import Lease, LeaseKeeper
from bmq.metadata.topics import TopicInfo
from bmq.metadata.zookeeper.layout import Paths, ensure_cluster_id
from bmq.metadata.zookeeper.producer_ids import ZkProducerIdAllocator
from bmq.metadata.zookeeper.topics import ZkTopicRegistry
from bmq.protocol.errors import ErrorCode, KafkaError


def test_topic_registry_create_conflict_update_remove(zk: tuple[KazooClient, Paths]) -> None:
    client, paths = zk
    first, second = ZkTopicRegistry(client, paths), ZkTopicRegistry(client, paths)
    info = TopicInfo("t", uuid.uuid4(), 3, {"retention.ms": "1000"})
    first.save(info)
    with pytest.raises(KafkaError) as raised:
        second.save(TopicInfo("t", uuid.uuid4(), 1))
    assert raised.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert second.get("t") == info            # learnt the winner's topic
    info.partitions = 5
    first.save(info)
    second.load()
    assert second.get("t") is not None and second.get("t").partitions == 5  # type: ignore[union-attr]
    assert second.by_id(info.topic_id) is not None
    first.remove(info)
    second.load()
    assert second.all() == []


def test_lookup_finds_a_topic_the_cache_has_not_seen_yet(zk: tuple[KazooClient, Paths]) -> None:
    """Admin requests on one broker for a topic just created through another (no watch yet)."""
    client, paths = zk
    creator, other = ZkTopicRegistry(client, paths), ZkTopicRegistry(client, paths)
    other.load()
    info = TopicInfo("fresh", uuid.uuid4(), 2)
    creator.save(info)
    assert other.get("fresh") is None            # the cached view lags...
    found = other.lookup("fresh")                # ...ZooKeeper does not
    assert found is not None and (found.topic_id, found.partitions) == (info.topic_id, 2)
    assert other.get("fresh") is found and other.by_id(info.topic_id) is found
    assert other.lookup("never-created") is None


def test_producer_id_blocks_never_overlap(zk: tuple[KazooClient, Paths]) -> None:
    client, paths = zk
    allocators = [ZkProducerIdAllocator(client, paths, 10) for _ in range(3)]
    ids: list[int] = []
    lock = threading.Lock()

    def take(allocator: ZkProducerIdAllocator) -> None:
        for _ in range(35):
            pid = allocator.allocate()
            with lock:
                ids.append(pid)
    threads = [threading.Thread(target=take, args=(a,)) for a in allocators]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ids) == len(set(ids)) == 105


def test_cluster_id_is_made_once(zk: tuple[KazooClient, Paths]) -> None:
    client, paths = zk
    first = ensure_cluster_id(client, paths)
    assert ensure_cluster_id(client, paths) == first and len(first) == 22


def test_lease_runs_out_without_contact(zk: tuple[KazooClient, Paths]) -> None:
    client, paths = zk
    lease = Lease(session_timeout_ms=1000, margin_ms=500)
    assert not lease.valid()
    lease.bind(client.client_id, time.monotonic())
    assert lease.valid()
    time.sleep(0.6)
    assert not lease.valid()                   # nobody renewed it
    keeper = LeaseKeeper(client, lease, paths.brokers, 0.1)
    keeper.start()
    try:
        time.sleep(0.3)
        assert lease.valid()                   # renewed by answered requests
    finally:
        keeper.stop()
    time.sleep(0.3)                            # let a probe in flight finish
    lease.revoke()
    lease.confirm(time.monotonic(), ("another", "session"))   # another session: no renewal
    assert not lease.valid()
