"""The console's Groups pages in Chromium: a group's lag as a consumer left it, the page
following the group live (htmx) as its consumer leaves, its offsets reset from the page, and a
confluent-kafka consumer of the group resuming where the page put it (classic and KIP-848
groups); bad input changes nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from playwright.sync_api import Page, expect

from tests.conftest import BrokerProcess
from tests.console.conftest import ConsoleProcess

Screenshot = Callable[[str], Path]
RECORDS = 20
# Record n's timestamp is BASE_MS + n s: BASE_MS is 2023-11-14T22:13:20Z.
BASE_MS = 1_700_000_000_000


def _consumer(bootstrap: str, group: str, protocol: str) -> Consumer:
    config = {"bootstrap.servers": bootstrap, "group.id": group,
              "auto.offset.reset": "earliest", "enable.auto.commit": False,
              "group.protocol": protocol}
    if protocol == "classic":
        config["session.timeout.ms"] = 6000
    return Consumer(config)


def _read(consumer: Consumer, topic: str, want: int) -> list[int]:
    consumer.subscribe([topic])
    offsets: list[int] = []
    for _ in range(60):
        for record in consumer.consume(want - len(offsets), timeout=0.5):
            assert record.error() is None, record.error()
            offsets.append(record.offset())
        if len(offsets) >= want:
            break
    return offsets


def _committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        [committed] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return int(committed.offset)
    finally:
        consumer.close()


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_reset_a_groups_offsets(module_broker: BrokerProcess, console: ConsoleProcess,
                                page: Page, topic: str, protocol: str,
                                screenshot: Screenshot) -> None:
    bootstrap = module_broker.bootstrap
    group = f"console-{protocol}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(RECORDS):
        producer.produce(topic, value=f"record-{n}", timestamp=BASE_MS + n * 1000)
    assert producer.flush(10) == 0

    consumer = _consumer(bootstrap, group, protocol)
    assert _read(consumer, topic, 12) == list(range(12))
    consumer.commit(asynchronous=False)

    # While the consumer is a member the page shows it and offers no reset.
    page.goto(console.url("/groups"))
    page.get_by_role("link", name=group).click()
    expect(page.locator("#members")).to_contain_text(f"{topic}[0]")
    expect(page.locator(f'#lag tr[data-topic="{topic}"] td.committed')).to_have_text("12")
    expect(page.locator(f'#lag tr[data-topic="{topic}"] td.lag')).to_have_text(str(RECORDS - 12))
    expect(page.locator("#reset-offsets")).to_have_count(0)
    screenshot(f"group-{protocol}")
    consumer.close()

    # No reload: the page's live part shows the group empty and offers the reset.
    expect(page.locator("#group-state")).to_have_text("Empty", timeout=20_000)
    expect(page.locator("#members")).to_contain_text("no members")
    form = page.locator("#reset-offsets")
    form.locator("input[name=offset]").fill("5x")
    form.get_by_role("button", name="Reset offsets").click()
    expect(page.get_by_role("alert")).to_have_text("offset must be a whole number, got '5x'")
    form.locator("input[name=offset]").fill(str(RECORDS + 1))
    form.get_by_role("button", name="Reset offsets").click()
    expect(page.get_by_role("alert")).to_contain_text(f"is past the end of {topic}[0]")
    assert _committed(bootstrap, group, topic) == 12          # nothing changed

    form.locator("input[name=offset]").fill("5")
    form.get_by_role("button", name="Reset offsets").click()
    expect(page.get_by_role("status")).to_have_text(f"reset 1 partition(s) of {group}")
    expect(page.locator(f'#lag tr[data-topic="{topic}"] td.committed')).to_have_text("5")
    screenshot(f"group-reset-{protocol}")

    resumed = _consumer(bootstrap, group, protocol)
    try:
        assert _read(resumed, topic, RECORDS - 5) == list(range(5, RECORDS))
    finally:
        resumed.close()

    expect(page.locator("#group-state")).to_have_text("Empty", timeout=20_000)
    form.get_by_label("earliest").check()
    form.get_by_role("button", name="Reset offsets").click()
    expect(page.locator(f'#lag tr[data-topic="{topic}"] td.committed')).to_have_text("0")
    assert _committed(bootstrap, group, topic) == 0

    # To a time: the first record at or after it (record 7), as kafka-consumer-groups
    # --to-datetime; a time that is no time changes nothing.
    form.locator("input[name=to][value=time]").check()
    form.locator("input[name=time]").fill("yesterday")
    form.get_by_role("button", name="Reset offsets").click()
    expect(page.get_by_role("alert")).to_contain_text("time must be ISO 8601")
    assert _committed(bootstrap, group, topic) == 0
    form.locator("input[name=to][value=time]").check()
    form.locator("input[name=time]").fill("2023-11-14T22:13:26.500Z")
    form.get_by_role("button", name="Reset offsets").click()
    expect(page.locator(f'#lag tr[data-topic="{topic}"] td.committed')).to_have_text("7")
    assert _committed(bootstrap, group, topic) == 7


@pytest.mark.slow
def test_an_unknown_group(console: ConsoleProcess, page: Page) -> None:
    page.goto(console.url("/groups/no-such-group"))
    expect(page.get_by_role("alert")).to_have_text("no group named 'no-such-group'")
