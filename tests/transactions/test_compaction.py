"""Transactions on a compacted topic: the log cleaner removes the records of aborted
transactions (read_uncommitted consumers then see only committed ones, as after Kafka's
cleaner), keeps each key's last committed value, and the transactional producer carries on
after the cleaning (its producer id, epoch and sequences are intact) also once the COMMIT
markers of transactions without data left are removed."""

from __future__ import annotations

from typing import Any

from tests.integration.compaction import COMPACTED
from tests.integration.helpers import create_topic, wait_until
from tests.transactions.conftest import TXN_CONFIG
from tests.transactions.helpers import read_values, txn_producer

KEYS = 100


def _round(producer: Any, topic: str, name: str, commit: bool, keys: int = KEYS) -> None:
    producer.begin_transaction()
    for i in range(keys):
        producer.produce(topic, key=b"key-%03d" % i, value=f"{name}-{i}".encode())
    if commit:
        producer.commit_transaction(30)
    else:
        producer.flush(30)
        producer.abort_transaction(30)


def test_cleaner_drops_aborted_records_and_keeps_committed_ones(broker_factory,
                                                                unique_topic) -> None:
    broker = broker_factory(config={**TXN_CONFIG, "log_cleaner_backoff_ms": 200})
    topic = unique_topic("txn")
    # (delete.retention.ms short: the markers of transactions left without data go too.)
    create_topic(broker.bootstrap, topic, config={**COMPACTED, "delete.retention.ms": "300"})
    producer = txn_producer(broker.bootstrap, "compact-" + topic, batch_size=8192)
    producer.init_transactions(30)
    for r in range(8):
        _round(producer, topic, f"{'commit' if r % 2 == 0 else 'abort'}-{r}", r % 2 == 0)
    producer.begin_transaction()
    for _ in range(300):   # fills the active segment: every round above is cleanable
        producer.produce(topic, key=b"filler", value=b"f" * 100)
    producer.commit_transaction(30)
    last = {f"commit-6-{i}" for i in range(KEYS)}

    def cleaned() -> bool:
        values = [v for v in read_values(broker.bootstrap, topic, 1, "read_uncommitted")
                  if not v.startswith("f")]
        return sorted(values) == sorted(last)
    wait_until(cleaned, 60, interval=0.5, message="aborted or overwritten records remain")
    committed = [v for v in read_values(broker.bootstrap, topic, 1, "read_committed")
                 if not v.startswith("f")]
    assert sorted(committed) == sorted(last)

    # The same producer goes on: its state survived the cleaning.
    _round(producer, topic, "after", True, keys=10)
    values = read_values(broker.bootstrap, topic, 1, "read_committed")
    assert [v for v in values if v.startswith("after")] == [f"after-{i}" for i in range(10)]
