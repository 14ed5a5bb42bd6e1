"""The console's Transactions and Scheduled pages in Chromium: a real transactional
confluent-kafka producer left with its transaction open is shown hanging with its producer per
partition, aborted from the page (its producer fenced), and a read_committed consumer then
gets past it; an abort of a transaction that is not open changes nothing. Scheduled records
pending per topic and partition, by due time."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from playwright.sync_api import Page, expect

from bmq.console.admin import ClusterAdmin, ConsoleError
from bmq.console.transactions import abort_on_partition, producers
from tests.conftest import BrokerProcess
from tests.console.conftest import ConsoleProcess

Screenshot = Callable[[str], Path]


def _read_committed(bootstrap: str, topic: str, seconds: float) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{uuid.uuid4().hex}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            for record in consumer.consume(10, timeout=0.3):
                if record.error() is None:
                    values.append(record.value() or b"")
    finally:
        consumer.close()
    return values


def _transactional(bootstrap: str, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": 600_000})
    producer.init_transactions(10)
    return producer


@pytest.mark.slow
def test_a_hanging_transaction_aborted(module_broker: BrokerProcess, console: ConsoleProcess,
                                       page: Page, topic: str, screenshot: Screenshot) -> None:
    bootstrap = module_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(10)
    stuck_id, done_id = f"stuck-{uuid.uuid4().hex[:8]}", f"done-{uuid.uuid4().hex[:8]}"
    stuck = _transactional(bootstrap, stuck_id)
    stuck.begin_transaction()
    stuck.produce(topic, value=b"never committed")
    assert stuck.flush(10) == 0
    done = _transactional(bootstrap, done_id)
    done.begin_transaction()
    done.produce(topic, value=b"committed")
    done.commit_transaction(10)
    # The open transaction holds read_committed consumers before it.
    assert _read_committed(bootstrap, topic, 2) == []

    page.goto(console.url("/transactions?older_than=1"))
    row = page.locator(f'#transactions tr[data-txn="{stuck_id}"]')
    expect(row.locator("td.state")).to_have_text("Ongoing hanging")
    expect(row).to_contain_text(f"{topic}[0]")
    expect(page.locator(f'#transactions tr[data-txn="{done_id}"] td.state')
           ).to_have_text("CompleteCommit")
    expect(page.locator(f'#producers tr[data-topic="{topic}"]')).to_have_count(2)
    screenshot("transactions")

    # Bad input: the abort of a transaction that is not open (a form of an old page).
    row.locator("input[name=transactional_id]").evaluate(
        f"input => input.value = {done_id!r}")
    row.get_by_role("button", name="Abort").click()
    expect(page.get_by_role("alert")).to_have_text(
        f"transaction '{done_id}' is not open (state CompleteCommit): nothing was aborted")
    expect(page.locator(f'#transactions tr[data-txn="{stuck_id}"] td.state')
           ).to_contain_text("Ongoing")

    page.locator(f'#transactions tr[data-txn="{stuck_id}"]').get_by_role(
        "button", name="Abort").click()
    expect(page.get_by_role("status")).to_contain_text(
        f"aborted the transaction of {stuck_id}")
    # Aborted and fenced: the id is left with no transaction, at the next epoch.
    expect(page.locator(f'#transactions tr[data-txn="{stuck_id}"] td.state')
           ).to_have_text("Empty")
    screenshot("transactions-aborted")
    assert _read_committed(bootstrap, topic, 3) == [b"committed"]
    with pytest.raises(KafkaException, match=r"(?i)fenced"):
        stuck.commit_transaction(10)


@pytest.mark.slow
def test_scheduled_records_pending(module_broker: BrokerProcess, console: ConsoleProcess,
                                   page: Page, topic: str, screenshot: Screenshot) -> None:
    bootstrap = module_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, config={"bmq.delay.enable": "true"})]
                        )[topic].result(10)
    producer = Producer({"bootstrap.servers": bootstrap})
    for n, delay in enumerate((300_000, 300_000, 300_000, 7_200_000, 7_200_000)):
        producer.produce(topic, value=f"later {n}", partition=1,
                         headers=[("bmq.delay.ms", str(delay).encode())])
    assert producer.flush(10) == 0

    page.goto(console.url("/scheduled"))
    row = page.locator(f'#scheduled tr[data-topic="{topic}"]')
    expect(row.locator("td.pending")).to_have_text("5")
    # Due within 1 min, 1-10 min, 10 min-1 h, 1 h-1 day, later.
    expect(row.locator("td.due")).to_have_text(["0", "3", "0", "2", "0"])
    expect(row.locator("td.partitions div")).to_have_text(
        ["0: 0 (0 / 0 / 0 / 0 / 0)", "1: 5 (0 / 3 / 0 / 2 / 0)"])
    screenshot("scheduled")


@pytest.mark.slow
def test_an_open_transaction_aborted_on_its_partition(module_broker: BrokerProcess,
                                                      topic: str) -> None:
    """The path of a hanging transaction no coordinator lists (`kafka-transactions.sh abort`:
    WriteTxnMarkers to the partition's owner), taken here on a transaction its coordinator
    does list, the only kind a client can leave open: the marker lets read_committed
    consumers past it. A producer with nothing open is refused, nothing written."""
    bootstrap = module_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(10)
    stuck = _transactional(bootstrap, f"stuck-{uuid.uuid4().hex[:8]}")
    stuck.begin_transaction()
    stuck.produce(topic, value=b"left open")
    assert stuck.flush(10) == 0
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    plain.produce(topic, value=b"after it")
    assert plain.flush(10) == 0
    assert _read_committed(bootstrap, topic, 2) == []

    console_admin = ClusterAdmin(bootstrap)
    try:
        [open_row] = [row for row in producers(console_admin, {(topic, 0)}, set())
                      if row.txn_start_offset >= 0]
        [idle_row] = [row for row in producers(console_admin, {(topic, 0)}, set())
                      if row.txn_start_offset < 0]
        with pytest.raises(ConsoleError, match="has no open transaction"):
            abort_on_partition(console_admin, topic, 0, idle_row.producer_id)
        assert _read_committed(bootstrap, topic, 1) == []
        aborted = abort_on_partition(console_admin, topic, 0, open_row.producer_id)
        assert aborted.txn_start_offset == 0
        assert _read_committed(bootstrap, topic, 2) == [b"after it"]
    finally:
        console_admin.close()
