"""What the tests of several set-ups run the same way: a file copied by the file connectors
through a topic, across a restart of the worker."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tests.integration.helpers import admin, topic_configs
from tests.kafka_connect.connectors import (
    CREATED_TOPIC_RETENTION_MS,
    FileCopy,
    append_lines,
    numbered_lines,
    topic_lines,
    wait_for_line,
    wait_running,
)
from tests.kafka_connect.worker import STOPPED_BY_SIGTERM, ConnectWorkers, WorkerSettings

# The partitions Connect asks for its topics by default (offset.storage.partitions,
# status.storage.partitions; the config topic must have one).
STORAGE_PARTITIONS = (1, 25, 5)


def copy_a_file_across_a_worker_restart(
        bootstrap: str, workers: ConnectWorkers, tmp_path: Path,
        worker_bootstrap: str | None = None,
        worker_properties: Mapping[str, str] | None = None) -> None:
    """One worker: its topics, a file copied through a topic by the file connectors, a restart
    of the worker that goes on where the first one stopped. The worker on ``worker_bootstrap``
    (another listener) with ``worker_properties`` if given; the checks on ``bootstrap``."""
    settings = WorkerSettings.fresh("connect", worker_properties)
    worker = workers.start(worker_bootstrap or bootstrap, settings)

    # The worker created its three topics on BMQ, compacted, with Connect's partition counts.
    described = admin(bootstrap).list_topics(timeout=10).topics
    for topic, partitions in zip(settings.topics, STORAGE_PARTITIONS, strict=True):
        assert topic in described, sorted(described)
        assert len(described[topic].partitions) == partitions, topic
        assert topic_configs(bootstrap, topic)["cleanup.policy"] == "compact", topic

    copy = FileCopy.in_directory(bootstrap, tmp_path)
    before = numbered_lines(1, 30)
    copy.start(worker.rest, before)

    assert sorted(worker.rest.get("/connectors")) == ["file-sink", "file-source"]
    for name, kind in (("file-source", "source"), ("file-sink", "sink")):
        assert wait_running(worker.rest, name, on=worker.worker_id)["type"] == kind
    # The source's task created its topic as its config asked (CreateTopics with configs).
    assert len(admin(bootstrap).list_topics(copy.topic, timeout=10)
               .topics[copy.topic].partitions) == 1
    assert topic_configs(bootstrap, copy.topic)["retention.ms"] == CREATED_TOPIC_RETENTION_MS

    # A stopped worker stored where its source read to (offset topic) and its sink's consumer
    # where it wrote to (the group connect-file-sink): a new worker of the same group, on the
    # same topics, goes on from there: the lines of the old one once, the new ones once.
    assert worker.stop() == STOPPED_BY_SIGTERM, worker.log_tail()
    after = numbered_lines(31, 50)
    append_lines(copy.source_file, after)
    restarted = workers.start(worker_bootstrap or bootstrap, settings)
    assert sorted(restarted.rest.get("/connectors")) == ["file-sink", "file-source"]
    copied = wait_for_line(copy.sink_file, after[-1])
    assert copied == before + after, (
        f"{len(copied)} lines for {len(before + after)}: "
        f"{len(copied) - len(set(copied))} again, the first {copied[len(before):][:2]}")
    for name in ("file-source", "file-sink"):
        wait_running(restarted.rest, name, on=restarted.worker_id)
    assert topic_lines(bootstrap, copy.topic) == before + after
    assert restarted.stop() == STOPPED_BY_SIGTERM, restarted.log_tail()
