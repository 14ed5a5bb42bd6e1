"""Compacted topics in cluster mode on S3 (SeaweedFS, the object layout) and HDFS
(MiniDFSCluster): the partition's owner cleans its log, and a kill -9 of the owner while it
cleans loses nothing: the next owner serves every last value and finishes the cleaning."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import NewTopic

from bmq.storage import PartitionLog
from bmq.storage.factory import open_log_storage
from tests.cluster.conftest import ClusterFactory, SharedStorage
from tests.conftest import make_topic_name
from tests.integration.compaction import COMPACTED, latest, offsets_grow, updates
from tests.integration.helpers import admin, consume, produce_all, wait_until
from tests.seaweedfs import SeaweedFS


def _compacted(bootstrap: str, topic: str, expected: dict[bytes, bytes | None]) -> bool:
    messages = consume(bootstrap, topic)[0]
    values, counts = latest(messages)
    assert offsets_grow(messages)
    live = {k: v for k, v in expected.items() if v is not None}
    return max(counts.values()) == 1 and \
        {k: v for k, v in values.items() if v is not None} == live


@pytest.mark.parametrize("shared_storage", ["s3", "hdfs"], indirect=True)
def test_owner_cleans_and_a_kill_9_loses_nothing(cluster_factory: ClusterFactory,
                                                 shared_storage: SharedStorage) -> None:
    cluster = cluster_factory(brokers=2, storage=shared_storage,
                              env={"BMQ_LOG_CLEANER_BACKOFF_MS": 200})
    topic = make_topic_name("compact")
    client = admin(cluster.bootstrap)
    client.create_topics([NewTopic(topic, 1, 1, config=COMPACTED)])[topic].result(30)
    cluster.wait_writable(topic)
    items, expected = updates(4000, keys=300, deleted=30, seed=5)
    produce_all(cluster.bootstrap, topic, items, linger_ms=5, batch_size=8192)
    wait_until(lambda: _compacted(cluster.bootstrap, topic, expected), 60, interval=0.5,
               message="the owner did not clean its log")

    # More updates, and the owner killed while it cleans them.
    more, more_expected = updates(4000, keys=300, deleted=60, seed=6)
    produce_all(cluster.bootstrap, topic, more, linger_ms=5, batch_size=8192)
    owner = cluster.owners(topic)[0]
    time.sleep(0.3)
    cluster.brokers[owner].kill()
    survivor = 3 - owner
    cluster.wait_writable(topic, owners={survivor}, timeout=30)
    expected.update(more_expected)
    wait_until(lambda: _compacted(cluster.bootstrap, topic, expected), 60, interval=0.5,
               message="the new owner did not clean the log")
    messages = consume(cluster.bootstrap, topic)[0]
    assert messages[-1].offset == len(items) + len(more) - 1


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_million_updates_on_s3(cluster_factory: ClusterFactory, seaweedfs: SeaweedFS) -> None:
    """Issue 19's scenario on S3: 1,000,000 updates over 10,000 keys, 1,000 of them deleted;
    the log shrinks to about the live set and the tombstones go after delete.retention.ms."""
    storage = SharedStorage(seaweedfs.url(f"c-{time.time_ns()}"), seaweedfs.storage_options())
    cluster = cluster_factory(brokers=2, storage=storage,
                              env={"BMQ_LOG_CLEANER_BACKOFF_MS": 500})
    topic = make_topic_name("million-s3")
    client = admin(cluster.bootstrap)
    client.create_topics([NewTopic(topic, 1, 1, config={
        **COMPACTED, "segment.bytes": str(1 << 20), "delete.retention.ms": "4000"})])[topic] \
        .result(30)
    cluster.wait_writable(topic)
    items, expected = updates(1_000_000, keys=10_000, deleted=1000, fillers=12_000)
    produce_all(cluster.bootstrap, topic, items, timeout=600, linger_ms=20)
    live = {k: v for k, v in expected.items() if v is not None}

    def compacted_without_tombstones() -> bool:
        messages = consume(cluster.bootstrap, topic)[0]
        assert offsets_grow(messages)
        values, counts = latest(messages)
        return max(counts.values()) == 1 and values == live
    wait_until(compacted_without_tombstones, 600, interval=2,
               message="not compacted to the live keys")
    reader = PartitionLog.open_reader(open_log_storage(storage.url, storage.options), topic, 0)
    try:
        live_bytes = sum(len(k) + len(v) for k, v in live.items())
        assert live_bytes <= reader.size_bytes < 3 * live_bytes + (2 << 20)
    finally:
        reader.close()
