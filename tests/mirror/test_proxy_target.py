"""A target reached through its proxy tier (BMQ_SLOW_TESTS=1): `bmq mirror --target` names a
`bmq proxy` of a cluster-mode BMQ of two brokers; the proxy splits each BmqMirrorAppend over
the partitions' owners (Metadata names the proxy as every partition's leader), and the
target's log starts follow the source's through it too."""

from __future__ import annotations

import pytest

from tests.cluster.conftest import ClusterFactory
from tests.conftest import BrokerFactory, make_topic_name
from tests.mirror.conftest import MirrorFactory, wait_until
from tests.mirror.helpers import create, delete_records, produce, records, watermarks
from tests.proxy.conftest import Proxies, cluster_factory, proxies, zookeeper

__all__ = ["cluster_factory", "proxies", "zookeeper"]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_a_cluster_behind_its_proxy_is_mirrored_into(
        broker_factory: BrokerFactory, cluster_factory: ClusterFactory, proxies: Proxies,
        mirror_factory: MirrorFactory) -> None:
    source = broker_factory()
    cluster = cluster_factory(brokers=2, env={"BMQ_AUTO_CREATE_TOPICS_ENABLE": "false"})
    proxy = proxies(cluster)
    topic = make_topic_name("m-proxied")
    create(source.bootstrap, topic, 4)
    produce(source.bootstrap, topic, 400, 4)
    delete_records(source.bootstrap, topic, {0: 40})
    mirror = mirror_factory(source, proxy, "--topic", topic)
    cluster.wait_for(lambda: len(set(cluster.owners(topic).values())) == 2, 60,
                     f"{topic}'s partitions on both target brokers")
    produce(source.bootstrap, topic, 400, 4, start=400)
    wait_until(lambda: watermarks(proxy.bootstrap, topic, 4)
               == watermarks(source.bootstrap, topic, 4), 60,
               "the target's log starts and ends are the source's", mirror.log_text)
    assert watermarks(proxy.bootstrap, topic, 4)[0] == (40, 200)   # type: ignore[index]
    assert records(proxy.bootstrap, topic, 4) == records(source.bootstrap, topic, 4)
