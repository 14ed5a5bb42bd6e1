"""The console's Topics pages and message browser in Chromium, against a `bmq serve`: what a
user sees of records produced by confluent-kafka, topics created from the page, bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from playwright.sync_api import Page, expect

from tests.conftest import BrokerProcess
from tests.console.conftest import ConsoleProcess

Screenshot = Callable[[str], Path]


def _produce(bootstrap: str, topic: str, partitions: int, count: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(10)
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(count):
        producer.produce(topic, key=f"order-{n}", partition=n % partitions,
                         value=json.dumps({"order": n, "item": "widget"}),
                         headers=[("source", b"test")])
    assert producer.flush(10) == 0


def test_browse_a_topics_messages(module_broker: BrokerProcess, console: ConsoleProcess,
                                  page: Page, topic: str, screenshot: Screenshot) -> None:
    """The CI test of the console: Topics lists a topic produced by confluent-kafka, its page
    shows each partition's offsets, the browser shows the records from an offset as JSON and
    hex, and a malformed offset or an unknown topic is a clear message."""
    _produce(module_broker.bootstrap, topic, partitions=2, count=40)

    page.goto(console.url("/topics"))
    row = page.locator(f'#topics tr[data-topic="{topic}"]')
    expect(row.locator("td").nth(1)).to_have_text("2")     # partitions
    expect(row.locator("td").nth(2)).to_have_text("40")    # records
    screenshot("topics")

    row.get_by_role("link", name=topic).click()
    expect(page.locator('#partitions tr[data-partition="1"] td').nth(3)).to_have_text("20")
    screenshot("topic")

    page.get_by_role("link", name="Browse messages").click()
    page.select_option("select[name=partition]", "1")
    page.fill("input[name=offset]", "15")
    page.select_option("select[name=format]", "json")
    page.get_by_role("button", name="Show").click()
    rows = page.locator("#messages tr[data-offset]")
    expect(rows).to_have_count(5)                          # offsets 15-19 of partition 1
    first = page.locator('#messages tr[data-offset="15"]')
    expect(first.locator("pre.key")).to_have_text("order-31")   # the 16th record sent to it
    assert json.loads(first.locator("pre.value").inner_text()) == {"order": 31, "item": "widget"}
    assert "\n" in first.locator("pre.value").inner_text()      # pretty, one field a line
    expect(first).to_contain_text("source")
    screenshot("messages")

    page.select_option("select[name=format]", "hex")
    page.get_by_role("button", name="Show").click()
    expect(page.locator('#messages tr[data-offset="15"] pre.key')).to_have_text(
        b"order-31".hex(" "))

    page.fill("input[name=offset]", "fifteen")
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_role("alert")).to_have_text("offset must be a whole number, got 'fifteen'")
    expect(page.locator("#messages")).to_have_count(0)

    page.goto(console.url("/topics/no-such-topic/messages"))
    expect(page.get_by_role("alert")).to_have_text("no topic named 'no-such-topic'")
    topics = AdminClient({"bootstrap.servers": module_broker.bootstrap}).list_topics(timeout=10)
    assert "no-such-topic" not in topics.topics    # asking for it did not create it


@pytest.mark.slow
def test_create_and_delete_a_topic(module_broker: BrokerProcess, console: ConsoleProcess,
                                   page: Page, topic: str, screenshot: Screenshot) -> None:
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    page.goto(console.url("/topics"))
    form = page.locator("#create-topic")
    form.locator("input[name=name]").fill(topic)
    form.locator("input[name=partitions]").fill("3")
    form.get_by_role("button", name="Create topic").click()
    expect(page.get_by_role("status")).to_have_text(f"created topic {topic}")
    expect(page.locator("#partitions tr[data-partition]")).to_have_count(3)
    assert len(admin.list_topics(timeout=10).topics[topic].partitions) == 3

    # The same name again: the broker's refusal on the page.
    page.goto(console.url("/topics"))
    form.locator("input[name=name]").fill(topic)
    form.get_by_role("button", name="Create topic").click()
    expect(page.get_by_role("alert")).to_contain_text(f"cannot create topic '{topic}'")
    expect(form.locator("input[name=name]")).to_have_value(topic)   # kept for a retry
    screenshot("topics-error")

    # A form posted without the page's token (another site's form) changes nothing.
    forged = f"{topic}-forged"
    answer = page.request.post(console.url("/topics"), form={"name": forged, "partitions": "1"})
    assert answer.status == 403
    assert forged not in admin.list_topics(timeout=10).topics

    page.goto(console.url(f"/topics/{topic}"))
    page.fill("#delete-topic input[name=confirm]", "not-the-name")
    page.get_by_role("button", name="Delete topic").click()
    expect(page.get_by_role("alert")).to_contain_text("type the topic's name")
    assert topic in admin.list_topics(timeout=10).topics
    page.fill("#delete-topic input[name=confirm]", topic)
    page.get_by_role("button", name="Delete topic").click()
    expect(page.get_by_role("status")).to_have_text(f"deleted topic {topic}")
    expect(page.locator(f'#topics tr[data-topic="{topic}"]')).to_have_count(0)
    assert topic not in admin.list_topics(timeout=10).topics


@pytest.mark.slow
def test_a_page_of_a_thousand_messages(module_broker: BrokerProcess, console: ConsoleProcess,
                                       page: Page, topic: str) -> None:
    _produce(module_broker.bootstrap, topic, partitions=1, count=2500)
    page.goto(console.url(f"/topics/{topic}/messages?partition=0&offset=0&count=1000"))
    expect(page.locator("#messages tr[data-offset]")).to_have_count(1000)
    page.locator("#next-page").click()
    expect(page.locator("#messages tr[data-offset]").first).to_have_attribute(
        "data-offset", "1000")
    page.goto(console.url(f"/topics/{topic}/messages?count=1001"))
    expect(page.get_by_role("alert")).to_have_text("count must be between 1 and 1000, got 1001")

    # A large value: its beginning and its length, not the whole of it.
    producer = Producer({"bootstrap.servers": module_broker.bootstrap})
    producer.produce(topic, value=b"v" * 100_000)
    assert producer.flush(10) == 0
    page.goto(console.url(f"/topics/{topic}/messages?offset=2500"))
    value = page.locator('#messages tr[data-offset="2500"] pre.value')
    expect(value).to_contain_text("100,000 bytes in all")
    assert len(value.inner_text()) < 5000


@pytest.mark.slow
def test_topics_are_filtered_and_paged(module_broker: BrokerProcess, console: ConsoleProcess,
                                       page: Page, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    names = [f"{topic}-{n:03d}" for n in range(105)]
    for future in admin.create_topics([NewTopic(name, 1) for name in names]).values():
        future.result(30)
    page.goto(console.url("/topics"))
    page.fill("#filter-topics input[name=q]", topic)
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#filter-topics")).to_contain_text("105 topics, 105 partitions")
    expect(page.locator("#topics tr[data-topic]")).to_have_count(100)
    expect(page.locator("#pages")).to_contain_text("Page 1 of 2")
    page.locator("#next-topics").click()
    expect(page.locator("#topics tr[data-topic]")).to_have_count(5)
    expect(page.locator("#topics tr[data-topic]").first).to_have_attribute(
        "data-topic", names[100])


@pytest.mark.slow
def test_browse_from_a_time(module_broker: BrokerProcess, console: ConsoleProcess,
                            page: Page, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": module_broker.bootstrap})
    first_ms = 1_790_000_000_000      # 2026-09-21T14:13:20Z, one record a second from there
    for n in range(10):
        producer.produce(topic, value=f"at-{n}", timestamp=first_ms + n * 1000)
    assert producer.flush(10) == 0

    page.goto(console.url(f"/topics/{topic}/messages"))
    page.fill("input[name=time]", "2026-09-21T14:13:24.500Z")
    page.get_by_role("button", name="Show").click()
    first = page.locator("#messages tr[data-offset]").first
    expect(first).to_have_attribute("data-offset", "5")
    expect(first.locator("pre.value")).to_have_text("at-5")
    expect(first).to_contain_text("2026-09-21T14:13:25.000Z")

    page.fill("input[name=time]", "yesterday")
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_role("alert")).to_contain_text("time must be ISO 8601")
