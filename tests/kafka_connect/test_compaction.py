"""Kafka Connect's topics once BMQ's log cleaner has compacted them (the slow set): a worker
that starts on them finds its connectors' latest configs and its source's and sink's
offsets."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import BrokerFactory
from tests.integration.helpers import consume, watermarks
from tests.kafka_connect.conftest import CONNECT_BROKER_ENV
from tests.kafka_connect.connectors import (
    FileCopy,
    append_lines,
    numbered_lines,
    topic_lines,
    wait_for_line,
    wait_running,
)
from tests.kafka_connect.worker import STOPPED_BY_SIGTERM, ConnectWorkers, WorkerSettings

# Small segments, cleaned as soon as there is anything to clean: each of the three topics
# (Connect passes config.storage.*, offset.storage.*, status.storage.* on to CreateTopics).
COMPACTING = {"segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01",
              "delete.retention.ms": "1000"}
CLEANER_BACKOFF_MS = 200
CONFIG_UPDATES = 25
COMPACTION_TIMEOUT_S = 60.0


def compacting_settings() -> WorkerSettings:
    storage = {f"{prefix}.{key}": value
               for prefix in ("config.storage", "offset.storage", "status.storage")
               for key, value in COMPACTING.items()}
    # Source offsets flushed often: many records of the same key in the offset topic.
    return WorkerSettings.fresh("connect", storage, offset_flush_interval_ms="200")


@pytest.mark.slow
def test_a_worker_restarts_on_its_compacted_topics(
        kafka_jars: None, broker_factory: BrokerFactory, connect_workers: ConnectWorkers,
        tmp_path: Path) -> None:
    broker = broker_factory(env=CONNECT_BROKER_ENV,
                            config={"log_cleaner_backoff_ms": CLEANER_BACKOFF_MS})
    bootstrap = broker.bootstrap
    settings = compacting_settings()
    worker = connect_workers.start(bootstrap, settings)
    copy = FileCopy.in_directory(bootstrap, tmp_path)
    lines = numbered_lines(1, (CONFIG_UPDATES + 1) * 3)
    copy.start(worker.rest, lines[:3])
    # The sink's config again and again (each time a connector record, its task's, a commit
    # record), and lines a few at a time (each time a source offset).
    for update in range(1, CONFIG_UPDATES + 1):
        worker.rest.put("/connectors/file-sink/config", {
            "connector.class": "FileStreamSink", "tasks.max": "1", "file": str(copy.sink_file),
            "topics": copy.topic, "errors.retry.timeout": str(update)})
        append_lines(copy.source_file, lines[update * 3:update * 3 + 3])
        wait_for_line(copy.sink_file, lines[update * 3 + 2])
    config_topic = settings.config_topic
    written = watermarks(bootstrap, config_topic)[1]

    def kept() -> int:
        return sum(len(records) for records in consume(bootstrap, config_topic).values())
    # The cleaner keeps each connector's and task's latest config (and the active segment).
    deadline = time.monotonic() + COMPACTION_TIMEOUT_S
    while kept() > written // 2 and time.monotonic() < deadline:
        time.sleep(1)
    assert kept() <= written // 2, f"{config_topic}: {kept()} of {written} records kept"

    assert worker.stop() == STOPPED_BY_SIGTERM, worker.log_tail()
    more = numbered_lines(len(lines) + 1, len(lines) + 20)
    append_lines(copy.source_file, more)
    restarted = connect_workers.start(bootstrap, settings)
    assert sorted(restarted.rest.get("/connectors")) == ["file-sink", "file-source"]
    config = restarted.rest.get("/connectors/file-sink/config")
    assert config["errors.retry.timeout"] == str(CONFIG_UPDATES)
    assert wait_for_line(copy.sink_file, more[-1]) == lines + more
    assert topic_lines(bootstrap, copy.topic) == lines + more
    for name in ("file-source", "file-sink"):
        wait_running(restarted.rest, name)
