"""The console's share group and dead-letter pages in Chromium: a share group's records in
flight while a real ShareConsumer (confluent-kafka 2.16) holds them, the records it rejected
in the group's dead-letter topic with their bmq.dlq.* reasons, redriven from the page to the
topic they came from and delivered to the share group again; bad input changes nothing. On a
2-broker cluster, every broker's share-partitions counted."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Consumer, Producer, TopicPartition
from playwright.sync_api import Page, expect

from tests.cluster.conftest import ClusterFactory, cluster_factory, zookeeper
from tests.cluster.test_cluster import create_topic as create_cluster_topic
from tests.cluster.test_cluster import owned_by
from tests.conftest import BrokerProcess
from tests.console.conftest import ConsoleProcess
from tests.share.helpers import create_topic, set_group_configs, unique
from tests.share.test_clients import share_consumer

__all__ = ["cluster_factory", "zookeeper"]

Screenshot = Callable[[str], Path]
RECORDS = 6
REJECTED = {1, 4}      # the jobs the consumer rejects (by number)


def _poll(consumer: Any, count: int, accept: bool = False) -> list[Any]:
    """``count`` records; with ``accept``, each poll's records accepted and committed (an
    explicit-mode consumer must acknowledge a poll's records before its next poll)."""
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        polled = [m for m in consumer.poll(0.5) if m.error() is None]
        if accept:
            for record in polled:
                consumer.acknowledge(record, AcknowledgeType.ACCEPT)
            consumer.commit_sync()
        got += polled
    assert len(got) == count, [m.offset() for m in got]
    return got


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("ends")})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)]
    finally:
        consumer.close()


def test_dead_letters_browsed_and_redriven(module_broker: BrokerProcess,
                                           console: ConsoleProcess, page: Page,
                                           screenshot: Screenshot) -> None:
    bootstrap = module_broker.bootstrap
    topic, group = unique("jobs"), unique("workers")
    dlq = f"dlq.{topic}"
    create_topic(bootstrap, topic, 2)
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest",
                                         "errors.deadletterqueue.topic.name": dlq})
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(RECORDS):
        producer.produce(topic, key=f"job-{n}", value=f"resize image {n}", partition=n % 2,
                         headers=[("trace", f"t{n}".encode())])
    assert producer.flush(10) == 0

    worker = share_consumer(bootstrap, group, topic)
    try:
        held = _poll(worker, RECORDS)
        # The records the worker holds, unacknowledged, are in flight on the group's page.
        page.goto(console.url("/groups"))
        page.get_by_role("link", name=group).click()
        expect(page.locator("#members")).to_contain_text(f"{topic}[0], {topic}[1]")
        expect(page.locator("#in-flight")).to_have_text(str(RECORDS))
        expect(page.locator(f'#share-partitions tr[data-topic="{topic}"] td.in-flight')
               ).to_have_text(["3", "3"])
        expect(page.locator("#lag-chart .uplot")).to_have_count(1)
        expect(page.locator("#lag-chart .u-legend")).to_contain_text(f"{topic}[1]")
        screenshot("share-group")
        for record in held:
            rejected = int(record.key().decode().split("-")[1]) in REJECTED
            worker.acknowledge(record, AcknowledgeType.REJECT if rejected
                               else AcknowledgeType.ACCEPT)
        worker.commit_sync()
        # The page follows live: nothing in flight, every record done with.
        expect(page.locator("#in-flight")).to_have_text("0", timeout=20_000)
        expect(page.locator("#total-lag")).to_have_text("0")
        screenshot("share-group-acknowledged")      # the chart: lag 3 per partition, then 0

        page.get_by_role("link", name=dlq).click()
        rows = page.locator("#dead-letters tr[data-offset]")
        expect(rows).to_have_count(len(REJECTED), timeout=20_000)
        # The dead-letter order is the order the partitions wrote them: compare as sets.
        reasons = ("topic", "partition", "offset", "group", "delivery.count", "reason")
        shown = {(*(row.locator(f'[data-reason="{name}"]').inner_text() for name in reasons),
                  row.locator("pre").nth(1).inner_text(), row.locator("code").first.inner_text())
                 for row in rows.all()}
        assert shown == {(topic, str(n % 2), str(n // 2), group, "1", "rejected",
                          f"resize image {n}", "trace") for n in REJECTED}
        screenshot("dead-letters")

        # Bad input: an empty range, no record selected, a topic that is no dead-letter topic,
        # an unknown share group.
        ends = _end_offsets(bootstrap, topic, 2)
        form = page.locator("#redrive-range")
        form.locator("input[name=to]").fill("0")
        form.get_by_role("button", name="Redrive range").click()
        expect(page.get_by_role("alert")).to_have_text(
            "the range 0 to 0 is empty: nothing was sent")
        page.locator("#redrive-selected").get_by_role("button").click()
        expect(page.get_by_role("alert")).to_have_text(
            "select the records to redrive: nothing was sent")
        page.goto(console.url(f"/dead-letters/{topic}"))
        expect(page.get_by_role("alert")).to_contain_text(
            f"{topic} is not a dead-letter topic")
        page.goto(console.url("/share-groups/no-such-group"))
        expect(page.get_by_role("alert")).to_have_text("no share group named 'no-such-group'")
        assert _end_offsets(bootstrap, topic, 2) == ends          # nothing sent

        page.goto(console.url(f"/dead-letters/{dlq}"))
        expect(page.locator("#redrive-position")).to_have_text("none")
        page.locator("#redrive-range").get_by_role("button", name="Redrive range").click()
        expect(page.get_by_role("status")).to_have_text(
            f"redrove 2 record(s) of {dlq}[0]: 1 to {topic}[0], 1 to {topic}[1]; "
            "redrive position now 2")
        expect(page.locator("#redrive-position")).to_have_text("2")
        expect(page.locator("#dead-letters tr[data-offset]").last).to_contain_text("redriven")
        screenshot("dead-letters-redriven")

        # The share group gets them again, as produced: key, value, own headers only.
        again = _poll(worker, len(REJECTED))
        assert sorted((m.key(), m.value(), m.headers()) for m in again) == [
            (f"job-{n}".encode(), f"resize image {n}".encode(), [("trace", f"t{n}".encode())])
            for n in sorted(REJECTED)]
        for record in again:
            worker.acknowledge(record, AcknowledgeType.ACCEPT)
        worker.commit_sync()
    finally:
        worker.close()


@pytest.mark.slow
def test_a_share_group_on_a_two_broker_cluster(cluster_factory: ClusterFactory,
                                               tmp_path: Path, page: Page) -> None:
    """Each broker counts the share-partitions it leads: the page asks both and shows every
    partition, with its start offset past the records the consumer accepted."""
    cluster = cluster_factory(brokers=2)
    topic, group = unique("jobs"), unique("workers")
    create_cluster_topic(cluster, topic, 4)
    assert owned_by(cluster, topic, 1) and owned_by(cluster, topic, 2)
    set_group_configs(cluster.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for n in range(8):
        producer.produce(topic, value=f"job {n}", partition=n % 4)
    assert producer.flush(10) == 0
    console = ConsoleProcess(tmp_path, cluster.bootstrap)
    worker = share_consumer(cluster.bootstrap, group, topic)
    try:
        _poll(worker, 8, accept=True)
        page.goto(console.url(f"/share-groups/{group}"))
        rows = page.locator(f'#share-partitions tr[data-topic="{topic}"]')
        expect(rows.locator("td.start")).to_have_text(["2", "2", "2", "2"])
        expect(page.locator("#total-lag")).to_have_text("0")
    finally:
        worker.close()
        console.stop()
