"""A proxy on HDFS reads what a broker is still writing. hdfs-native's reader leaves out the
block a writer has open, so a segment of a few megabytes looked empty to every process but its
writer; the proxy now reads that block through WebHDFS (``HdfsStorage.read_open_block``: the
DataNode serves it as far as the writer hsynced), given the NameNode's web address as the
``dfs.namenode.http-address`` storage option."""

from __future__ import annotations

import os
import time

from tests.cluster.conftest import ClusterFactory, SharedStorage
from tests.cluster.test_hdfs import cluster_with_topic, consume_all, produce_acked
from tests.hdfs import MiniHdfs
from tests.proxy.conftest import Proxies


def test_a_proxy_reads_segments_still_being_written(cluster_factory: ClusterFactory,
                                                     proxies: Proxies,
                                                     mini_hdfs: MiniHdfs) -> None:
    storage = SharedStorage(mini_hdfs.url(f"bmq-proxy-{time.time_ns()}"),
                            mini_hdfs.storage_options())
    cluster, topic = cluster_with_topic(cluster_factory, storage, "hdfs-proxy")
    proxy = proxies(cluster)
    # Far less than a block (16 MiB): every byte is in the block each segment's writer has open.
    values = [i.to_bytes(4, "big") + os.urandom(n)
              for i, n in enumerate([0, 10, 1000, 20_000] * 25)]
    placed = produce_acked(proxy.bootstrap, topic, values)
    assert consume_all(proxy.bootstrap, topic) == placed
