"""Transactions on a compacted topic: the log cleaner removes the records of aborted
transactions (read_uncommitted consumers then see only committed ones, as after Kafka's
cleaner), keeps each key's last committed value, and the transactional producer carries on
after the cleaning (its producer id, epoch and sequences are intact). After
delete.retention.ms the markers of transactions without data left go too, ABORT markers with
their aborted-transaction index entries: a read_committed consumer from the start still reads
every committed record of the producer that aborted (it would skip them if it were told of an
aborted transaction whose marker it never meets), with confluent-kafka's and kafka-python's
consumers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from bmq.storage import LocalStorage
from tests.conftest import BrokerFactory
from tests.integration.compaction import COMPACTED
from tests.integration.helpers import create_topic, wait_until
from tests.transactions.conftest import TXN_CONFIG
from tests.transactions.helpers import (
    FILLER,
    ROUNDS,
    abort_markers,
    committed_rounds,
    read_rounds,
    read_values,
    txn_round,
    txn_rounds,
)


def _kafka_python_committed(bootstrap: str, topic: str) -> tuple[list[str], int]:
    """``read_rounds`` at read_committed, with kafka-python's consumer (which skips aborted
    transactions itself, as librdkafka does)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False)
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        end = consumer.end_offsets([partition])[partition]   # the last stable offset
        values: list[str] = []
        deadline = time.monotonic() + 30
        while consumer.position(partition) < end:
            assert time.monotonic() < deadline, f"kafka-python read {len(values)} of {topic}"
            for records in consumer.poll(500).values():
                values += [r.value.decode() for r in records]
        return sorted(v for v in values if v != FILLER), values.count(FILLER)
    finally:
        consumer.close()


def test_cleaner_drops_aborted_records_then_their_markers(broker_factory: BrokerFactory,
                                                          unique_topic: Any) -> None:
    broker = broker_factory(config={**TXN_CONFIG, "log_cleaner_backoff_ms": 200})
    topic = unique_topic("txn")
    create_topic(broker.bootstrap, topic, config={**COMPACTED, "delete.retention.ms": "300"})
    producer, last = txn_rounds(broker.bootstrap, topic)
    storage = LocalStorage(str(Path(broker.data_dir) / "topics"))

    def cleaned() -> bool:
        return read_rounds(broker.bootstrap, topic, "read_uncommitted")[0] == last
    wait_until(cleaned, 60, interval=0.5, message="aborted or overwritten records remain")
    wait_until(lambda: abort_markers(storage, topic) == 0, 60, interval=0.5,
               message="ABORT markers outlived delete.retention.ms")
    assert committed_rounds(broker.bootstrap, topic) == last
    assert _kafka_python_committed(broker.bootstrap, topic) == \
        read_rounds(broker.bootstrap, topic, "read_committed")

    # The same producer goes on: its state survived the cleaning.
    txn_round(producer, topic, "after", True, keys=10)
    values = read_values(broker.bootstrap, topic, 1, "read_committed")
    assert [v for v in values if v.startswith("after")] == [f"after-{i}" for i in range(10)]
    broker.restart()
    assert [v for v in committed_rounds(broker.bootstrap, topic)
            if not v.startswith("after")] == last


@pytest.mark.parametrize("step", ["written", pytest.param("swapped", marks=pytest.mark.slow)])
def test_kill_9_while_removing_abort_markers_loses_nothing(broker_factory: BrokerFactory,
                                                           unique_topic: Any, step: str) -> None:
    """The pass that removes the ABORT markers (and their index entries) killed at ``step``:
    read_committed consumers read the same committed records after the restart, and the next
    pass finishes the job."""
    broker = broker_factory(config={**TXN_CONFIG, "log_cleaner_backoff_ms": 200})
    topic = unique_topic(step)
    create_topic(broker.bootstrap, topic, config={**COMPACTED, "delete.retention.ms": "5000"})
    _producer, last = txn_rounds(broker.bootstrap, topic)
    storage = LocalStorage(str(Path(broker.data_dir) / "topics"))
    wait_until(lambda: read_rounds(broker.bootstrap, topic, "read_uncommitted")[0] == last,
               60, interval=0.5, message="the first pass did not clean")
    assert abort_markers(storage, topic) == ROUNDS // 2   # they wait delete.retention.ms
    broker.kill()
    broker.env = {"BMQ_CLEANER_CRASH_AT": step}
    broker.start()
    wait_until(lambda: not broker.is_running(), 60, message="the cleaner never reached " + step)
    broker.kill()
    broker.env = {}
    broker.start()
    assert committed_rounds(broker.bootstrap, topic) == last
    wait_until(lambda: abort_markers(storage, topic) == 0, 60, interval=0.5,
               message="the ABORT markers were not removed after the restart")
    assert committed_rounds(broker.bootstrap, topic) == last
    assert "Traceback" not in broker.log_text()
