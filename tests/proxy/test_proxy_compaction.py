"""A compacted topic read through `bmq proxy`: the proxy's view follows the owner's
checkpoints, so once the broker's cleaner swapped its cleaned segments in, consumers of the
proxy read the compacted log, never batches of the replaced segments from the proxy's cache."""

from __future__ import annotations

import time

from confluent_kafka.admin import NewTopic

from bmq.storage.factory import open_log_storage
from tests.cluster.conftest import ClusterFactory, SharedStorage
from tests.conftest import make_topic_name
from tests.integration.compaction import COMPACTED, latest, offsets_grow, updates
from tests.integration.helpers import admin, consume, produce_all, wait_until
from tests.proxy.conftest import Proxies
from tests.seaweedfs import SeaweedFS
from tests.transactions.helpers import abort_markers, committed_rounds, read_rounds, txn_rounds


def test_proxy_consumers_read_the_compacted_log(cluster_factory: ClusterFactory,
                                                proxies: Proxies) -> None:
    cluster = cluster_factory(brokers=1, env={"BMQ_LOG_CLEANER_BACKOFF_MS": 200})
    proxy = proxies(cluster)
    topic = make_topic_name("compact-proxy")
    client = admin(cluster.bootstrap)
    client.create_topics([NewTopic(topic, 1, 1, config={
        **COMPACTED, "min.compaction.lag.ms": "3000"})])[topic].result(30)
    cluster.wait_writable(topic)
    items, expected = updates(4000, keys=200, deleted=20, seed=9)
    produce_all(cluster.bootstrap, topic, items, linger_ms=5, batch_size=8192)
    # Read through the proxy before the cleaner may clean (min.compaction.lag.ms): the proxy
    # caches the uncompacted batches. The proxy sees what the owner's checkpoint has published,
    # which may lag the acknowledgements by a moment: read until every record is there.
    before = consume(proxy.bootstrap, topic, expected=len(items), timeout=30)[0]
    assert len(before) == len(items)
    live = {k: v for k, v in expected.items() if v is not None}

    def compacted() -> bool:
        messages = consume(proxy.bootstrap, topic)[0]
        assert offsets_grow(messages)
        values, counts = latest(messages)
        assert {k: v for k, v in values.items() if v is not None} == live
        return max(counts.values()) == 1
    wait_until(compacted, 60, interval=0.5, message="the proxy kept serving replaced batches")


def test_proxy_reads_committed_after_abort_markers_go_on_s3(cluster_factory: ClusterFactory,
                                                            proxies: Proxies,
                                                            seaweedfs: SeaweedFS) -> None:
    """A transactional producer's aborted transactions on a compacted topic on S3, read
    through a proxy before the owner's cleaner cleans them (``min.compaction.lag.ms``): once
    the cleaner removed the aborted records and then their ABORT markers (and the index
    entries, in the same manifest), the proxy's consumers read the compacted log with no new
    data written meanwhile (the owner's watch notices tell the proxy of each pass), and
    read_committed ones every committed record, the same producer's after its aborts too."""
    storage = SharedStorage(seaweedfs.url(f"txn-{time.time_ns()}"), seaweedfs.storage_options())
    cluster = cluster_factory(brokers=1, storage=storage, env={
        "BMQ_LOG_CLEANER_BACKOFF_MS": 200, "BMQ_TRANSACTION_STATE_LOG_NUM_PARTITIONS": 2})
    proxy = proxies(cluster)
    topic = make_topic_name("txn-compact-proxy")
    client = admin(cluster.bootstrap)
    client.create_topics([NewTopic(topic, 1, 1, config={
        **COMPACTED, "delete.retention.ms": "300", "min.compaction.lag.ms": "3000"})])[topic] \
        .result(30)
    cluster.wait_writable(topic)
    _producer, last = txn_rounds(cluster.bootstrap, topic)
    assert read_rounds(proxy.bootstrap, topic, "read_uncommitted")[0] != last   # not yet
    store = open_log_storage(storage.url, storage.options)
    wait_until(lambda: abort_markers(store, topic) == 0, 60, interval=0.5,
               message="ABORT markers outlived delete.retention.ms")
    wait_until(lambda: read_rounds(proxy.bootstrap, topic, "read_uncommitted")[0] == last, 30,
               interval=0.5, message="the proxy kept its view from before the cleaning")
    assert committed_rounds(proxy.bootstrap, topic) == last
    assert committed_rounds(cluster.bootstrap, topic) == last
