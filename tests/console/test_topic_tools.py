"""The console's topic tools in Chromium against a `bmq serve`: topic configs (created with,
shown, altered), producing a record, the message browser's view filter, the Cluster page's
throughput and latency charts from the broker's metrics, storage and sizes (DescribeLogDirs),
and Index Query. What the page shows is checked against confluent-kafka's own view of the
cluster; bad input is a message on the page and changes nothing."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from playwright.sync_api import Page, expect

from bmq.console import log_dirs
from bmq.console.admin import ClusterAdmin
from tests.conftest import BrokerFactory, BrokerProcess, free_port
from tests.console.conftest import ConsoleProcess
from tests.security.conftest import PASSWORD, USER, Certificates, certificates, secure_broker

__all__ = ["certificates"]

Screenshot = Callable[[str], Path]


def _configs(bootstrap: str, topic: str) -> dict[str, str | None]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = admin.describe_configs([resource])[resource].result(10)
    return {name: entry.value for name, entry in entries.items()}


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "console-test-offsets"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)]
    finally:
        consumer.close()


def _read_one(bootstrap: str, topic: str, partition: int, offset: int) -> object:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "console-test-read"})
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        record = consumer.poll(10)
        assert record is not None and record.error() is None
        return record
    finally:
        consumer.close()


def test_topic_configs_produce_and_filter(module_broker: BrokerProcess, console: ConsoleProcess,
                                          page: Page, topic: str,
                                          screenshot: Screenshot) -> None:
    """Created with configs (a malformed value and an unknown name refused first, nothing
    created), the configs shown and altered (a bad value refuses the whole change), a record
    produced from the page read back by confluent-kafka (an oversized one refused, nothing
    written), and the browser keeping the records a view filter keeps (a malformed filter
    said where)."""
    bootstrap = module_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    page.goto(console.url("/topics"))
    page.fill("#create-topic input[name=name]", topic)
    page.fill("#create-topic input[name=partitions]", "2")
    page.select_option("#create-topic select[name='cleanup.policy']", "delete")
    page.fill("input[name=config-value-0]", "2000")
    for retention_ms, other, refused in (
            ("soon", "max.message.bytes", "Invalid value soon for config retention.ms"),
            ("86400000", "max.message.byte", "Unknown topic config name: max.message.byte")):
        page.fill("#create-topic input[name='retention.ms']", retention_ms)
        page.fill("input[name=config-name-0]", other)
        page.get_by_role("button", name="Create topic").click()
        expect(page.get_by_role("alert")).to_contain_text(refused)
    assert topic not in admin.list_topics(timeout=10).topics     # neither created it

    page.fill("input[name=config-name-0]", "max.message.bytes")
    page.get_by_role("button", name="Create topic").click()
    expect(page.get_by_role("status")).to_have_text(f"created topic {topic}")
    retention = page.locator('#configs tr[data-config="retention.ms"]')
    expect(retention.locator("input.value")).to_have_value("86400000")
    expect(retention.locator("td.source")).to_have_text("topic")
    expect(page.locator('#configs tr[data-config="max.message.bytes"] input.value')
           ).to_have_value("2000")

    # One IncrementalAlterConfigs: a malformed value refuses the good one beside it too.
    retention.locator("input.value").fill("abc")
    page.locator('#configs tr[data-config="max.message.bytes"] input.value').fill("5000")
    page.get_by_role("button", name="Save configs").click()
    expect(page.get_by_role("alert")).to_contain_text("Invalid value abc for config retention.ms")
    screenshot("topic-configs-error")
    configs = _configs(bootstrap, topic)
    assert (configs["retention.ms"], configs["max.message.bytes"]) == ("86400000", "2000")
    # Another client changes a config the page shows: saving this form does not undo it.
    segment_ms = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("segment.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([segment_ms])[segment_ms].result(10)
    page.locator('#configs tr[data-config="retention.ms"] input.value').fill("3600000")
    page.locator('#configs tr[data-config="max.message.bytes"] input.value').fill("2000")
    page.get_by_role("button", name="Save configs").click()
    expect(page.get_by_role("status")).to_have_text("changed retention.ms=3600000")
    configs = _configs(bootstrap, topic)
    assert (configs["retention.ms"], configs["segment.ms"]) == ("3600000", "7200000")
    expect(page.locator('#configs tr[data-config="retention.ms"] input.value')
           ).to_have_value("3600000")
    screenshot("topic-configs")
    page.get_by_label("reset segment.ms").check()
    page.get_by_role("button", name="Save configs").click()
    expect(page.get_by_role("status")).to_have_text("changed segment.ms=(default)")
    expect(page.locator('#configs tr[data-config="segment.ms"] td.source')).to_have_text("default")
    assert _configs(bootstrap, topic)["segment.ms"] == "604800000"

    page.get_by_role("link", name="Produce a message").click()
    page.fill("#produce input[name=partition]", "1")
    page.fill("#produce input[name=key]", "order-1")
    page.fill("#produce textarea[name=value]", '{"order": 1}')
    page.fill("#produce textarea[name=headers]", "region=eu\namount=250")
    page.get_by_role("button", name="Produce").click()
    expect(page.get_by_role("status")).to_have_text(f"produced to {topic}[1] at offset 0")
    screenshot("produce")
    record = _read_one(bootstrap, topic, 1, 0)
    assert (record.key(), record.value()) == (b"order-1", b'{"order": 1}')   # type: ignore[attr-defined]
    assert record.headers() == [("region", b"eu"), ("amount", b"250")]   # type: ignore[attr-defined]
    page.fill("#produce textarea[name=value]", "x" * 3000)       # over max.message.bytes
    page.get_by_role("button", name="Produce").click()
    expect(page.get_by_role("alert")).to_contain_text("Message size too large")
    assert _end_offsets(bootstrap, topic, 2) == [0, 1]

    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(30):
        producer.produce(topic, partition=0, value=f"record {n}", headers=[
            ("region", b"eu" if n % 3 == 0 else b"us"), ("amount", str(n * 10).encode())])
    assert producer.flush(10) == 0
    page.goto(console.url(f"/topics/{topic}/messages"))
    page.fill("input[name=filter]", "region = 'eu' AND amount > 100")
    page.get_by_role("button", name="Show").click()
    shown = page.locator("#messages tr[data-offset]")
    expect(shown).to_have_count(6)                     # n = 12, 15, ... 27
    assert [int(o) for o in shown.evaluate_all("rows => rows.map(r => r.dataset.offset)")] \
        == [12, 15, 18, 21, 24, 27]
    screenshot("messages-filter")
    page.fill("input[name=filter]", "region = 'eu' AND (")
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_role("alert")).to_have_text(
        "filter: expected a header name, NOT, TRUE, FALSE or '(' at position 20, found the end")
    expect(page.locator("#messages")).to_have_count(0)

    page.goto(console.url("/cluster"))        # this console was given no metrics port
    expect(page.locator("#metrics-off")).to_contain_text("--metrics http://HOST:PORT")
    page.goto(console.url(f"/topics/{topic}/query?where=order%3D1"))
    expect(page.get_by_role("alert")).to_contain_text("start it with --metrics")


@pytest.fixture(scope="module")
def metrics_broker(module_broker_factory: BrokerFactory) -> BrokerProcess:
    port = free_port()
    broker = module_broker_factory(extra_args=["--metrics-port", str(port)])
    broker.metrics_port = port  # type: ignore[attr-defined]
    return broker


@pytest.fixture(scope="module")
def metrics_console(metrics_broker: BrokerProcess,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleProcess]:
    url = f"http://127.0.0.1:{metrics_broker.metrics_port}"  # type: ignore[attr-defined]
    process = ConsoleProcess(tmp_path_factory.mktemp("console-metrics"),
                             metrics_broker.bootstrap, "--metrics", url)
    yield process
    process.stop()


def test_cluster_charts_sizes_and_index_query(metrics_broker: BrokerProcess,
                                              metrics_console: ConsoleProcess, page: Page,
                                              topic: str, screenshot: Screenshot) -> None:
    """While confluent-kafka produces, the Cluster page charts messages in and request latency
    from the broker's /metrics, shows the storage URL and its bytes (DescribeLogDirs), the
    Topics page a size and rates per topic, and Index Query finds a record by an indexed
    field (a field not indexed is the broker's message)."""
    bootstrap = metrics_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, config={"bmq.index.fields": "order_id"})]
                        )[topic].result(10)
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        n = 0
        while not stop.is_set():
            producer.produce(topic, key=f"k{n}", value=json.dumps({"order_id": n}))
            n += 1
            if n % 50 == 0:
                producer.flush(10)
                stop.wait(0.05)
        producer.flush(10)

    producing = threading.Thread(target=produce)
    producing.start()
    try:
        page.goto(metrics_console.url("/cluster"))
        now = page.locator("#metrics-now")
        expect(now).to_contain_text("msg/s in")
        assert float(now.get_attribute("data-messages-in") or 0) > 0
        assert float(now.get_attribute("data-latency-p99") or 0) > 0
        expect(page.locator("#chart-latency .uplot")).to_have_count(1)
        storage = Path(metrics_broker.data_dir).resolve() / "topics"
        expect(page.locator("#storage-url")).to_have_text(f"file://{storage}")
        assert int(page.locator("#storage-bytes").get_attribute("data-bytes") or 0) > 0
        if os.environ.get("BMQ_CONSOLE_SCREENSHOTS"):    # lines, not points, for the docs
            expect(page.locator("#metrics")).to_have_attribute("data-samples", "4",
                                                               timeout=30_000)
        screenshot("cluster-metrics")

        page.goto(metrics_console.url(f"/topics?q={topic}"))
        row = page.locator(f'#topics tr[data-topic="{topic}"]')
        expect(row.locator("td.size")).to_have_text(re.compile(r"^\d+(\.\d)? (B|KiB|MiB)$"))
        expect(row.locator("td.rate")).to_contain_text("msg/s in")
        screenshot("topics-sizes-rates")
    finally:
        stop.set()
        producing.join(15)

    page.goto(metrics_console.url(f"/topics/{topic}/query"))
    expect(page.locator("#indexed-fields")).to_contain_text("order_id")
    page.fill("#index-query textarea[name=where]", "order_id=42")
    page.get_by_role("button", name="Query").click()
    found = page.locator("#found tr[data-offset]")
    expect(found).to_have_count(1)
    assert json.loads(found.locator("pre.value").inner_text()) == {"order_id": 42}
    expect(found.locator("pre.key")).to_have_text("k42")
    screenshot("index-query")
    page.fill("#index-query textarea[name=where]", "customer=7")
    page.get_by_role("button", name="Query").click()
    expect(page.get_by_role("alert")).to_contain_text("'customer' is not an indexed field")
    expect(page.locator("#found")).to_have_count(0)


@pytest.mark.slow
def test_log_dirs_need_describe_on_the_cluster(module_broker_factory: BrokerFactory,
                                               certificates: Certificates,
                                               topic: str) -> None:
    """With ACLs on, DescribeLogDirs answers a principal without DESCRIBE on the cluster
    CLUSTER_AUTHORIZATION_FAILED and no sizes, as Kafka does (the console then shows none);
    once an ACL allows it, the sizes of the topic's partitions."""
    secured = secure_broker(module_broker_factory, certificates, **{
        "authorizer.class.name": "bmq", "super.users": "User:ANONYMOUS"})
    plain = AdminClient({"bootstrap.servers": secured.bootstrap("PLAINTEXT")})
    plain.create_topics([NewTopic(topic, 2)])[topic].result(10)
    partitions = [(topic, 0), (topic, 1)]
    alice = ClusterAdmin(secured.bootstrap("SASL_PLAINTEXT"), {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": USER, "sasl.password": PASSWORD})
    try:
        refused = log_dirs.describe(alice, partitions)
        assert (refused.sizes, refused.failed) == ({}, ["broker 0: CLUSTER_AUTHORIZATION_FAILED"])
        acl = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                         f"User:{USER}", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        plain.create_acls([acl])[acl].result(10)
        allowed = log_dirs.describe(alice, partitions)
        assert sorted(allowed.sizes) == partitions and not allowed.failed
    finally:
        alice.close()
