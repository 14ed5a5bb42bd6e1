"""kill -9 of `bmq serve` between the commit decision and the markers: after the restart the
coordinator finishes the transaction as decided and read_committed consumers are not stuck.

The broker kills itself at a named step (``BMQ_TXN_CRASH_AT=after_prepare_commit``: PrepareCommit is
durable in ``__transaction_state``, no marker written yet), so the test hits that window every
time instead of hoping a kill lands in it."""

from __future__ import annotations

import threading
import time

from confluent_kafka import KafkaException

from tests.integration.helpers import create_topic, produce_all, wait_until
from tests.transactions.conftest import TXN_CONFIG
from tests.transactions.helpers import read_values, txn_producer


def test_kill_9_between_end_txn_and_markers_completes_the_commit(broker_factory):
    broker = broker_factory(config=TXN_CONFIG, env={"BMQ_TXN_CRASH_AT": "after_prepare_commit"})
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "txn-crash", partitions=2)
    producer = txn_producer(bootstrap, "crashing", transaction_timeout_ms=60000)
    producer.init_transactions(30)
    # An aborted transaction first: after the kill -9 its index entry must come back (from the
    # checkpoint or recovery's scan of the ABORT marker), or read_committed would show it.
    producer.begin_transaction()
    for i in range(4):
        producer.produce("txn-crash", f"aborted-{i}".encode(), partition=i % 2)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    for i in range(20):
        producer.produce("txn-crash", f"decided-{i}".encode(), partition=i % 2)
    producer.flush(30)
    outcome: list[object] = []

    def commit() -> None:
        # librdkafka retries EndTxn across the restart; a retriable error is retried here too.
        for _ in range(10):
            try:
                producer.commit_transaction(30)
                outcome.append("committed")
                return
            except KafkaException as error:
                if not error.args[0].retriable():
                    outcome.append(error)
                    return
        outcome.append("gave up")

    committer = threading.Thread(target=commit, daemon=True)
    committer.start()
    wait_until(lambda: not broker.is_running(), 30, message="broker did not kill itself")
    broker.env.pop("BMQ_TXN_CRASH_AT")
    broker.start()
    # Not stuck: the restarted coordinator wrote the markers of the decided commit.
    started = time.monotonic()
    committed = read_values(bootstrap, "txn-crash", 2, "read_committed", timeout=30, until=20)
    assert sorted(committed) == sorted(f"decided-{i}" for i in range(20))
    assert time.monotonic() - started < 20
    assert "was left in PrepareCommit: completing it" in broker.log_text()
    committer.join(60)
    assert outcome == ["committed"], outcome
    everything = read_values(bootstrap, "txn-crash", 2, "read_uncommitted")
    assert sorted(everything) == sorted(committed + [f"aborted-{i}" for i in range(4)])
    # And the partitions move on: records after the transaction are readable at once.
    produce_all(bootstrap, "txn-crash", [{"value": b"later", "partition": 0}])
    assert "later" in read_values(bootstrap, "txn-crash", 2, "read_committed")
