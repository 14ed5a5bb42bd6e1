"""The console's Cluster page in Chromium: the live part, refreshed by htmx without reloading
the page, shows a new topic's partitions, and a killed broker's partitions moving to the other
broker of a 2-broker cluster; a cluster's proxies are listed apart from its brokers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from playwright.sync_api import Page, expect

from tests.cluster.conftest import ClusterFactory, cluster_factory, zookeeper
from tests.cluster.test_cluster import create_topic, owned_by
from tests.conftest import BrokerProcess
from tests.console.conftest import ConsoleProcess
from tests.proxy.conftest import Proxies, proxies

__all__ = ["cluster_factory", "proxies", "zookeeper"]

Screenshot = Callable[[str], Path]
# The page polls every 2 s; a partition's move takes a few seconds more in cluster mode.
LIVE_TIMEOUT_MS = 30_000


def _owner_cells(page: Page, topic: str) -> list[str]:
    cells = page.locator(f'#owners .cell[data-topic="{topic}"]')
    return [cells.nth(i).get_attribute("data-owner") or "" for i in range(cells.count())]


@pytest.mark.slow
def test_the_cluster_page_follows_new_topics(module_broker: BrokerProcess,
                                             console: ConsoleProcess, page: Page, topic: str,
                                             screenshot: Screenshot) -> None:
    page.goto(console.url("/"))
    expect(page.locator("#brokers tr[data-broker]")).to_have_count(1)
    expect(page.locator("#brokers")).to_contain_text(module_broker.bootstrap)
    expect(page.locator("#control")).to_contain_text("embedded: this bmq serve is its own")
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3)])[topic].result(10)
    # No reload: the live part picks it up on its next poll.
    expect(page.locator(f'#owners .cell[data-topic="{topic}"]')).to_have_count(
        3, timeout=LIVE_TIMEOUT_MS)
    assert page.locator("#owner-chart canvas").count() == 1
    screenshot("cluster")


@pytest.mark.slow
def test_a_killed_brokers_partitions_move_on_the_page(
        cluster_factory: ClusterFactory, tmp_path: Path, page: Page, topic: str,
        screenshot: Screenshot) -> None:
    cluster = cluster_factory(brokers=2)
    create_topic(cluster, topic, 6)
    moving = owned_by(cluster, topic, 1)
    assert moving, "broker 1 owns none of the topic's partitions"
    console = ConsoleProcess(tmp_path, cluster.bootstrap)
    try:
        page.goto(console.url("/cluster"))
        expect(page.locator("#brokers tr[data-broker]")).to_have_count(2)
        # The `bmq controller` process, which Metadata cannot name (no Kafka listener).
        expect(page.locator("#control")).to_contain_text(
            "bmq controller, liveness channel 127.0.0.1:")
        owners = _owner_cells(page, topic)
        assert sorted({*owners}) == ["1", "2"]
        screenshot("cluster-two-brokers")

        cluster.brokers[1].kill()
        expect(page.locator('#brokers tr[data-broker="1"]')).to_have_count(
            0, timeout=LIVE_TIMEOUT_MS)
        for partition in moving:
            expect(page.locator(f'#owners .cell[data-topic="{topic}"]'
                                f'[data-partition="{partition}"]')).to_have_attribute(
                "data-owner", "2", timeout=LIVE_TIMEOUT_MS)
        assert _owner_cells(page, topic) == ["2"] * 6
        screenshot("cluster-broker-killed")
    finally:
        console.stop()


@pytest.mark.slow
def test_proxies_are_listed_apart(cluster_factory: ClusterFactory, proxies: Proxies,
                                  tmp_path: Path, page: Page, screenshot: Screenshot) -> None:
    cluster = cluster_factory(brokers=1)
    proxy = proxies(cluster)
    console = ConsoleProcess(tmp_path, proxy.bootstrap)     # a proxy as the bootstrap
    try:
        page.goto(console.url("/cluster"))
        expect(page.locator("#brokers tr[data-broker]")).to_have_count(1)
        expect(page.locator("#brokers")).to_contain_text(cluster.brokers[1].bootstrap)
        expect(page.locator("#proxies")).to_contain_text(proxy.bootstrap)
        screenshot("cluster-with-proxy")
    finally:
        console.stop()
