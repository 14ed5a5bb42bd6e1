"""The file connectors (connect-file's FileStreamSource and FileStreamSink) through a worker's
REST API, and what the tests read back: the sink's file, the connectors' status, the topic."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from tests.conftest import make_topic_name
from tests.integration.helpers import consume, watermarks
from tests.kafka_connect.worker import RestApi, RestError

# A connector's tasks start a few seconds after it is created (the leader writes its task
# configs, the group rebalances); lines reach the sink within the source's poll and the sink
# consumer's fetch.
RUNNING_TIMEOUT_S = 90.0
LINES_TIMEOUT_S = 90.0
# A topic config the source's topic.creation.* asks for: the topic has it when Connect created
# it (CreateTopics with configs), not when something else did.
CREATED_TOPIC_RETENTION_MS = "86400000"


def create_file_source(rest: RestApi, name: str, path: Path, topic: str) -> None:
    """file -> topic, one task. The task creates the topic before it sends it its first
    records (topic.creation.*: one partition, so that the lines stay in order; the broker's
    replication factor; a retention)."""
    rest.post("/connectors", {"name": name, "config": {
        "connector.class": "FileStreamSource",
        "tasks.max": "1",
        "file": str(path),
        "topic": topic,
        "topic.creation.default.partitions": "1",
        "topic.creation.default.replication.factor": "-1",
        "topic.creation.default.retention.ms": CREATED_TOPIC_RETENTION_MS,
    }})


def create_file_sink(rest: RestApi, name: str, path: Path, topic: str) -> None:
    """topic -> file, one task (its consumer group is connect-NAME)."""
    rest.post("/connectors", {"name": name, "config": {
        "connector.class": "FileStreamSink",
        "tasks.max": "1",
        "file": str(path),
        "topics": topic,
    }})


@dataclass(frozen=True)
class FileCopy:
    """A file copied through a topic to another file: the FileStreamSource "file-source" and
    the FileStreamSink "file-sink"."""

    bootstrap: str
    topic: str
    source_file: Path
    sink_file: Path

    @classmethod
    def in_directory(cls, bootstrap: str, directory: Path) -> FileCopy:
        copy = cls(bootstrap, make_topic_name("lines"), directory / "source.txt",
                   directory / "sink.txt")
        copy.source_file.touch()
        return copy

    def start(self, rest: RestApi, first_lines: list[str],
              sink_rest: RestApi | None = None) -> None:
        """The source first, and the sink (through ``sink_rest`` if given: another worker's
        API) once the source has created the topic and written ``first_lines`` to it; returns
        when the sink has written them. (A sink created at once could have its consumer's
        subscription create the topic, with the broker's defaults, before the source does:
        auto.create.topics.enable, as on Kafka.)"""
        create_file_source(rest, "file-source", self.source_file, self.topic)
        append_lines(self.source_file, first_lines)
        wait_for_records(self.bootstrap, self.topic, len(first_lines))
        create_file_sink(sink_rest or rest, "file-sink", self.sink_file, self.topic)
        copied = wait_for_line(self.sink_file, first_lines[-1])
        assert copied == first_lines, copied


def wait_for_records(bootstrap: str, topic: str, count: int,
                     timeout: float = LINES_TIMEOUT_S) -> None:
    """Until the (one-partition) topic exists and has ``count`` records or more."""
    deadline = time.monotonic() + timeout
    high = None
    while time.monotonic() < deadline:
        try:
            high = watermarks(bootstrap, topic)[1]
        except KafkaException:      # no such topic yet
            high = None
        if high is not None and high >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic} has not {count} records within {timeout}s: {high}")


def status(rest: RestApi, name: str) -> dict[str, Any]:
    found: dict[str, Any] = rest.get(f"/connectors/{name}/status")
    return found


def is_running(found: dict[str, Any], tasks: int = 1) -> bool:
    """The connector and its ``tasks`` tasks all RUNNING."""
    return (found["connector"]["state"] == "RUNNING" and len(found["tasks"]) == tasks
            and all(task["state"] == "RUNNING" for task in found["tasks"]))


def wait_running(rest: RestApi, name: str, tasks: int = 1,
                 timeout: float = RUNNING_TIMEOUT_S, on: str | None = None) -> dict[str, Any]:
    """The connector's status once it and its tasks run (all of them on the worker ``on``, a
    worker id, if given); fails at once on a FAILED one (with its trace), and after
    ``timeout`` otherwise."""
    deadline = time.monotonic() + timeout
    found: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        try:
            found = status(rest, name)
        except RestError as error:
            if error.status != 404:     # no status written yet
                raise
            time.sleep(0.5)
            continue
        states = [found["connector"], *found["tasks"]]
        failed = [state for state in states if state["state"] == "FAILED"]
        assert not failed, f"{name} failed: {failed}"
        owners = {state["worker_id"] for state in states}
        if is_running(found, tasks) and (on is None or owners == {on}):
            return found
        time.sleep(0.5)
    raise AssertionError(f"{name} is not running within {timeout}s: {found}")


def numbered_lines(first: int, last: int) -> list[str]:
    """Lines first..last (inclusive), each unique and telling its number."""
    return [f"line {number:04d} of the source file" for number in range(first, last + 1)]


def append_lines(path: Path, lines: list[str]) -> None:
    with open(path, "a") as file:
        file.write("".join(line + "\n" for line in lines))


def read_lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def wait_for_line(path: Path, line: str, timeout: float = LINES_TIMEOUT_S) -> list[str]:
    """The sink file's lines once ``line`` is among them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = read_lines(path)
        if line in lines:
            return lines
        time.sleep(0.2)
    lines = read_lines(path)
    raise AssertionError(f"{line!r} not in {path} within {timeout}s; it has {len(lines)} "
                         f"lines, the last {lines[-3:]}")


def topic_lines(bootstrap: str, topic: str) -> list[str]:
    """The values of every record of the (one-partition) topic, in offset order, read to its
    high watermark."""
    records = consume(bootstrap, topic)[0]
    return [record.value.decode() if record.value is not None else "" for record in records]
