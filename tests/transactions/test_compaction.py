"""Transactions on a compacted topic: the log cleaner removes the records of aborted
transactions (read_uncommitted consumers then see only committed ones, as after Kafka's
cleaner), keeps each key's last committed value, and the transactional producer carries on
after the cleaning (its producer id, epoch and sequences are intact). After
delete.retention.ms the markers of transactions without data left go too, ABORT markers with
their aborted-transaction index entries: a read_committed consumer from the start still reads
every committed record of the producer that aborted (it would skip them if it were told of an
aborted transaction whose marker it never meets)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bmq.protocol.records import CONTROL_ABORT, HEADER_SIZE, control_type, iter_batches
from bmq.storage import LocalStorage, PartitionLog, Storage
from tests.conftest import BrokerFactory
from tests.integration.compaction import COMPACTED
from tests.integration.helpers import create_topic, wait_until
from tests.transactions.conftest import TXN_CONFIG
from tests.transactions.helpers import read_values, txn_producer

KEYS = 100
ROUNDS = 8          # committed and aborted in turn: the last committed is round 6
FILLER = "f" * 100


def _round(producer: Any, topic: str, name: str, commit: bool, keys: int = KEYS) -> None:
    producer.begin_transaction()
    for i in range(keys):
        producer.produce(topic, key=b"key-%03d" % i, value=f"{name}-{i}".encode())
    if commit:
        producer.commit_transaction(30)
    else:
        producer.flush(30)
        producer.abort_transaction(30)


def _rounds(bootstrap: str, topic: str) -> tuple[Any, list[str]]:
    """One producer's transactions, committed and aborted in turn, then a committed one of
    fillers that fills the active segment (every round is cleanable); the producer, and what
    a consumer reads of the rounds once the topic is compacted."""
    producer = txn_producer(bootstrap, "compact-" + topic, batch_size=8192)
    producer.init_transactions(30)
    for r in range(ROUNDS):
        _round(producer, topic, f"{'commit' if r % 2 == 0 else 'abort'}-{r}", r % 2 == 0)
    producer.begin_transaction()
    for _ in range(300):
        producer.produce(topic, key=b"filler", value=FILLER.encode())
    producer.commit_transaction(30)
    return producer, sorted(f"commit-{ROUNDS - 2}-{i}" for i in range(KEYS))


def _abort_markers(storage: Storage, topic: str) -> int:
    """ABORT markers in the partition's log as its owner last published it."""
    reader = PartitionLog.open_reader(storage, topic, 0)
    try:
        count = 0
        offset = reader.log_start_offset
        while offset < reader.high_watermark:
            data = bytes(reader.read(offset, 1 << 20))
            for pos, header in iter_batches(data):
                count += header.is_control and \
                    control_type(data[pos + HEADER_SIZE:pos + header.size]) == CONTROL_ABORT
                offset = header.next_offset
        return count
    finally:
        reader.close()


def _read(bootstrap: str, topic: str, isolation: str) -> tuple[list[str], int]:
    """The values a consumer of ``isolation`` reads from the start, but the fillers, and how
    many fillers it reads (the active segment's are never cleaned)."""
    values = read_values(bootstrap, topic, 1, isolation)
    return sorted(v for v in values if v != FILLER), values.count(FILLER)


def _committed(bootstrap: str, topic: str) -> list[str]:
    """What a read_committed consumer reads, checked against a read_uncommitted one: every
    filler, the same producer's committed records after its aborted transactions, too."""
    values, fillers = _read(bootstrap, topic, "read_committed")
    assert fillers == _read(bootstrap, topic, "read_uncommitted")[1] > 0
    return values


def test_cleaner_drops_aborted_records_then_their_markers(broker_factory: BrokerFactory,
                                                          unique_topic: Any) -> None:
    broker = broker_factory(config={**TXN_CONFIG, "log_cleaner_backoff_ms": 200})
    topic = unique_topic("txn")
    create_topic(broker.bootstrap, topic, config={**COMPACTED, "delete.retention.ms": "300"})
    producer, last = _rounds(broker.bootstrap, topic)
    storage = LocalStorage(str(Path(broker.data_dir) / "topics"))

    def cleaned() -> bool:
        return _read(broker.bootstrap, topic, "read_uncommitted")[0] == last
    wait_until(cleaned, 60, interval=0.5, message="aborted or overwritten records remain")
    wait_until(lambda: _abort_markers(storage, topic) == 0, 60, interval=0.5,
               message="ABORT markers outlived delete.retention.ms")
    assert _committed(broker.bootstrap, topic) == last

    # The same producer goes on: its state survived the cleaning.
    _round(producer, topic, "after", True, keys=10)
    values = read_values(broker.bootstrap, topic, 1, "read_committed")
    assert [v for v in values if v.startswith("after")] == [f"after-{i}" for i in range(10)]
    broker.restart()
    assert [v for v in _committed(broker.bootstrap, topic) if not v.startswith("after")] == last


@pytest.mark.parametrize("step", ["written", pytest.param("swapped", marks=pytest.mark.slow)])
def test_kill_9_while_removing_abort_markers_loses_nothing(broker_factory: BrokerFactory,
                                                           unique_topic: Any, step: str) -> None:
    """The pass that removes the ABORT markers (and their index entries) killed at ``step``:
    read_committed consumers read the same committed records after the restart, and the next
    pass finishes the job."""
    broker = broker_factory(config={**TXN_CONFIG, "log_cleaner_backoff_ms": 200})
    topic = unique_topic(step)
    create_topic(broker.bootstrap, topic, config={**COMPACTED, "delete.retention.ms": "3000"})
    _producer, last = _rounds(broker.bootstrap, topic)
    storage = LocalStorage(str(Path(broker.data_dir) / "topics"))
    wait_until(lambda: _read(broker.bootstrap, topic, "read_uncommitted")[0] == last, 60,
               interval=0.5, message="the first pass did not clean")
    assert _abort_markers(storage, topic) == ROUNDS // 2   # they wait delete.retention.ms
    broker.kill()
    broker.env = {"BMQ_CLEANER_CRASH_AT": step}
    broker.start()
    wait_until(lambda: not broker.is_running(), 60, message="the cleaner never reached " + step)
    broker.kill()
    broker.env = {}
    broker.start()
    assert _committed(broker.bootstrap, topic) == last
    wait_until(lambda: _abort_markers(storage, topic) == 0, 60, interval=0.5,
               message="the ABORT markers were not removed after the restart")
    assert _committed(broker.bootstrap, topic) == last
    assert "Traceback" not in broker.log_text()
