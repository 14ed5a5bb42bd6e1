"""Kafka Connect (Kafka 4.4's distributed worker) on `bmq serve`: its config, offset and status
topics on BMQ, compacted; the file connectors (connect-file) copy a file through a topic to
another file; a worker restart resumes from the offsets it stored on BMQ."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import BrokerProcess
from tests.kafka_connect.scenarios import copy_a_file_across_a_worker_restart
from tests.kafka_connect.worker import ConnectWorkers


def test_file_source_and_sink_run_and_resume_after_a_worker_restart(
        connect_broker: BrokerProcess, connect_workers: ConnectWorkers, tmp_path: Path) -> None:
    copy_a_file_across_a_worker_restart(connect_broker.bootstrap, connect_workers, tmp_path)
