"""Kafka Connect's exactly-once source (KIP-618, exactly.once.source.support=enabled) on BMQ,
the slow set: the source task writes its records and its offsets in one transaction; killed
(kill -9) with a transaction open, the task's next instance on the other worker fences it
(InitProducerId of the same transactional id), its transaction is aborted, and the topic, read
committed, has every line once."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import BrokerProcess
from tests.kafka_connect.connectors import (
    FileCopy,
    append_lines,
    numbered_lines,
    topic_lines,
    wait_for_line,
    wait_running,
)
from tests.kafka_connect.worker import (
    STOPPED_BY_SIGTERM,
    TAKEOVER_SETTINGS,
    TAKEOVER_TIMEOUT_S,
    ConnectWorkers,
    WorkerSettings,
)

LINES = 200
# Lines keep coming while the worker is killed: its task has a transaction open then.
LINE_INTERVAL_S = 0.02
KILL_AFTER_S = 1.0


class LineWriter(threading.Thread):
    """Appends lines first..LINES to a file, one every LINE_INTERVAL_S."""

    def __init__(self, path: Path, first: int) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.first = first

    def run(self) -> None:
        for line in numbered_lines(self.first, LINES):
            append_lines(self.path, [line])
            time.sleep(LINE_INTERVAL_S)


@pytest.mark.slow
def test_exactly_once_source_across_a_kill_of_its_worker(
        connect_broker: BrokerProcess, connect_workers: ConnectWorkers, tmp_path: Path) -> None:
    bootstrap = connect_broker.bootstrap
    settings = WorkerSettings.fresh("connect", TAKEOVER_SETTINGS,
                                    exactly_once_source_support="enabled")
    workers = [connect_workers.start(bootstrap, settings) for _ in range(2)]
    copy = FileCopy.in_directory(bootstrap, tmp_path)
    before = numbered_lines(1, 30)
    copy.start(workers[0].rest, before)

    source_worker = wait_running(workers[0].rest, "file-source")["tasks"][0]["worker_id"]
    (victim,) = [worker for worker in workers if worker.worker_id == source_worker]
    (survivor,) = [worker for worker in workers if worker is not victim]
    writer = LineWriter(copy.source_file, len(before) + 1)
    writer.start()
    time.sleep(KILL_AFTER_S)
    victim.kill()
    writer.join()

    every = numbered_lines(1, LINES)
    copied = wait_for_line(copy.sink_file, every[-1], timeout=TAKEOVER_TIMEOUT_S)
    wait_running(survivor.rest, "file-source", on=survivor.worker_id)
    # The topic read committed: the killed task's open transaction aborted, its offsets with
    # it: the new task wrote again what that transaction had, once.
    assert topic_lines(bootstrap, copy.topic) == every
    # The sink (at-least-once) reads committed records too; what it wrote again is the killed
    # worker's uncommitted part if it ran the sink, at most.
    counts = Counter(copied)
    assert set(counts) == set(every) and copied[-1] == every[-1], counts
    assert survivor.stop() == STOPPED_BY_SIGTERM, survivor.log_tail()
