"""kill -9 of `bmq serve` while it seals the aborted-transaction index into chunk files
(bmq/storage/log/aborted_index.py: every CHUNK_ENTRIES aborted transactions of a partition go
to a chunk at a checkpoint): after the restart read_committed consumers see no record of an
aborted transaction and every record of a committed one.

Transactional producers (confluent-kafka) abort nine transactions in ten on one partition, so
a chunk is sealed every second or so; the test watches the partition's directory and kills the
broker as soon as the temporary file of a chunk appears (between its write and its rename) or,
if it never sees one, after a short while anyway."""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from bmq.storage.log.aborted_index import CHUNK_ENTRIES, SUFFIX
from tests.conftest import BrokerFactory, BrokerProcess
from tests.integration.helpers import create_topic, wait_until
from tests.transactions.conftest import TXN_CONFIG
from tests.transactions.helpers import read_values, txn_producer

TOPIC = "aborts"
PRODUCERS = 8
# Checkpoints (and so chunk seals) often; a producer lost with the broker has its open
# transaction aborted by the coordinator within a few seconds of the restart.
CONFIG = {**TXN_CONFIG, "log_checkpoint_interval_ms": 100}
TXN_TIMEOUT_MS = 3000


class _Transactions:
    """Producers that each run one-record transactions, aborting nine in ten, until told to
    stop or their broker fails them; which of them were acknowledged."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        self.aborted: set[str] = set()      # acknowledged, then abort_transaction returned
        self.committed: set[str] = set()    # commit_transaction returned
        self.stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True,
                                          args=(bootstrap, f"{prefix}-{w}"))
                         for w in range(PRODUCERS)]
        for thread in self._threads:
            thread.start()

    def _run(self, bootstrap: str, txn_id: str) -> None:
        producer = txn_producer(bootstrap, txn_id, transaction_timeout_ms=TXN_TIMEOUT_MS)
        try:
            producer.init_transactions(30)
            i = 0
            while not self.stop.is_set():
                commit = i % 10 == 9
                value = f"{'c' if commit else 'a'}-{txn_id}-{i}"
                acked: list[bool] = []
                producer.begin_transaction()
                producer.produce(TOPIC, value.encode(), partition=0,
                                 on_delivery=lambda err, _m, acked=acked: acked.append(err is None))
                producer.flush(30)
                if commit:
                    producer.commit_transaction(30)
                    self.committed.add(value)
                else:
                    # A record the killed broker never acknowledged is purged by the abort: it
                    # was never in the log, so only acknowledged ones are expected there.
                    producer.abort_transaction(30)
                    if acked == [True]:
                        self.aborted.add(value)
                i += 1
        except KafkaException:      # the broker was killed under it: this producer is done
            return

    def join(self) -> None:
        for thread in self._threads:
            thread.join(120)
            assert not thread.is_alive(), "a producer did not give up"


def _chunks(directory: Path) -> list[str]:
    """The partition's chunk files, and the temporary file of one being written."""
    return [n for n in os.listdir(directory) if n.startswith("aborted-")]


def _sealed(directory: Path) -> int:
    return len([n for n in _chunks(directory) if n.endswith(SUFFIX)])


def _kill_while_sealing(broker: BrokerProcess, directory: Path, seed: int) -> bool:
    """Kill -9 the broker once a chunk's temporary file shows (True), or after a random
    while if none is seen in time (False)."""
    deadline = time.monotonic() + 5 + random.Random(seed).uniform(0, 3)
    while time.monotonic() < deadline:
        if any(SUFFIX + ".tmp." in name for name in _chunks(directory)):
            broker.kill()
            return True
    broker.kill()
    return False


def _crash_rounds(broker: BrokerProcess, rounds: int) -> int:
    """Rounds of transactions killed while sealing; how many kills hit a chunk's write."""
    create_topic(broker.bootstrap, TOPIC)
    directory = Path(broker.data_dir) / "topics" / TOPIC / "0"
    aborted: set[str] = set()
    committed: set[str] = set()
    hits = 0
    for round_ in range(rounds):
        sealed = _sealed(directory)
        producers = _Transactions(broker.bootstrap, f"r{round_}")
        # At least one new chunk sealed in this round before the kill is aimed at the next.
        wait_until(lambda before=sealed: _sealed(directory) > before, 60,
                   message=f"a chunk of {CHUNK_ENTRIES} aborted transactions")
        hits += _kill_while_sealing(broker, directory, round_)
        producers.stop.set()
        broker.start()
        producers.join()
        aborted |= producers.aborted
        committed |= producers.committed
        # Every acknowledged commit is read, once the coordinator has aborted what the killed
        # broker left open (the last stable offset stays behind an open transaction).
        seen = read_values(broker.bootstrap, TOPIC, 1, "read_committed", timeout=60,
                           until=len(committed))
        assert len(seen) == len(set(seen))
        assert not [v for v in seen if v.startswith("a-")], "an aborted record was read"
        assert committed <= set(seen), f"{len(committed - set(seen))} commits not read"
        # The aborted records are in the log: read_committed left them out, they were there.
        everything = set(read_values(broker.bootstrap, TOPIC, 1, "read_uncommitted"))
        assert aborted <= everything
    assert len(aborted) >= rounds * CHUNK_ENTRIES
    assert "Traceback" not in broker.log_text()
    return hits


def test_kill_9_while_sealing_an_aborted_index_chunk(broker_factory: BrokerFactory) -> None:
    _crash_rounds(broker_factory(config=CONFIG), rounds=1)


@pytest.mark.slow
def test_kill_9_while_sealing_aborted_index_chunks_again_and_again(
        broker_factory: BrokerFactory) -> None:
    hits = _crash_rounds(broker_factory(config=CONFIG), rounds=4)
    assert hits >= 1, "no kill landed while a chunk was written"
