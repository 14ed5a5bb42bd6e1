"""Old clients through a `bmq proxy` (issue #36): the proxy forwards their Produce v0-2 to the
partitions' owners and answers their Fetch v0-3 from storage, converted like a broker's."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.conftest import ClusterFactory
from tests.compat.test_legacy_clients import OLD_LIBRDKAFKA, _conf, _items
from tests.integration.helpers import consume, produce_all
from tests.proxy.conftest import Proxies, cluster_factory, proxies, shared_storage, zookeeper

__all__ = ["cluster_factory", "proxies", "shared_storage", "zookeeper"]


@pytest.mark.slow
@pytest.mark.parametrize("fallback", ["0.9.0", "0.10.0"])
def test_old_librdkafka_through_a_proxy(cluster_factory: ClusterFactory, proxies: Proxies,
                                        fallback: str) -> None:
    cluster = cluster_factory(brokers=1)
    proxy = proxies(cluster)
    topic = f"old-{fallback}"
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    cluster.wait_writable(topic)
    old: dict[str, Any] = _conf(OLD_LIBRDKAFKA[fallback])
    items = _items(200)
    produce_all(proxy.bootstrap, topic, items, compression_type="gzip", **old)
    expected = [(item["key"], item["value"]) for item in items]
    for reader in (old, {}):
        got = consume(proxy.bootstrap, topic, expected=len(items), **reader)[0]
        assert [(m.key, m.value or b"") for m in got] == expected
        assert [m.offset for m in got] == list(range(len(items)))
