"""Mirroring between two cluster-mode BMQs (BMQ_SLOW_TESTS=1): the source on a shared
directory, the target on S3 (SeaweedFS), each with a ZooKeeper-elected controller and two
brokers; the target's partitions are spread over its brokers, and each append goes to its
partition's owner."""

from __future__ import annotations

import pytest

from tests.cluster.conftest import ClusterFactory, SharedStorage, cluster_factory, zookeeper
from tests.conftest import make_topic_name
from tests.mirror.conftest import MirrorFactory, wait_until
from tests.mirror.helpers import create, mirrored, produce, records
from tests.seaweedfs import SeaweedFS

__all__ = ["cluster_factory", "zookeeper"]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_a_cluster_on_a_directory_mirrored_into_a_cluster_on_s3(
        cluster_factory: ClusterFactory, seaweedfs: SeaweedFS,
        mirror_factory: MirrorFactory) -> None:
    source = cluster_factory(brokers=2, storage=SharedStorage(None, {}))
    target = cluster_factory(brokers=2, storage=SharedStorage(
        seaweedfs.url(make_topic_name("mirror")), seaweedfs.storage_options()),
        env={"BMQ_AUTO_CREATE_TOPICS_ENABLE": "false"})
    topic = make_topic_name("m-cluster")
    create(source.bootstrap, topic, 4)
    source.wait_writable(topic)
    produce(source.bootstrap, topic, 400, 4)
    mirror = mirror_factory(source, target, "--topic-regex", "m-.*")
    target.wait_for(lambda: len(set(target.owners(topic).values())) == 2, 60,
                    f"{topic}'s partitions on both target brokers")
    produce(source.bootstrap, topic, 400, 4, start=400)
    wait_until(lambda: mirrored(source.bootstrap, target.bootstrap, topic, 4), 60,
               "the source cluster's topic is mirrored", mirror.log_text)
    assert records(target.bootstrap, topic, 4) == records(source.bootstrap, topic, 4)
