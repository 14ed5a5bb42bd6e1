"""The file connectors (connect-file's FileStreamSource and FileStreamSink) through a worker's
REST API, and what the tests read back: the sink's file, the connectors' status, the topic."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.integration.helpers import consume
from tests.kafka_connect.worker import RestApi, RestError

# A connector's tasks start a few seconds after it is created (the leader writes its task
# configs, the group rebalances); lines reach the sink within the source's poll and the sink
# consumer's fetch.
RUNNING_TIMEOUT_S = 90.0
LINES_TIMEOUT_S = 90.0


def create_file_source(rest: RestApi, name: str, path: Path, topic: str) -> None:
    """file -> topic, one task. The topic is created by Connect (topic.creation.*: one
    partition, so that the lines stay in order; the broker's replication factor)."""
    rest.post("/connectors", {"name": name, "config": {
        "connector.class": "FileStreamSource",
        "tasks.max": "1",
        "file": str(path),
        "topic": topic,
        "topic.creation.default.partitions": "1",
        "topic.creation.default.replication.factor": "-1",
    }})


def create_file_sink(rest: RestApi, name: str, path: Path, topic: str) -> None:
    """topic -> file, one task (its consumer group is connect-NAME)."""
    rest.post("/connectors", {"name": name, "config": {
        "connector.class": "FileStreamSink",
        "tasks.max": "1",
        "file": str(path),
        "topics": topic,
    }})


def status(rest: RestApi, name: str) -> dict[str, Any]:
    found: dict[str, Any] = rest.get(f"/connectors/{name}/status")
    return found


def is_running(found: dict[str, Any], tasks: int = 1) -> bool:
    """The connector and its ``tasks`` tasks all RUNNING."""
    return (found["connector"]["state"] == "RUNNING" and len(found["tasks"]) == tasks
            and all(task["state"] == "RUNNING" for task in found["tasks"]))


def wait_running(rest: RestApi, name: str, tasks: int = 1,
                 timeout: float = RUNNING_TIMEOUT_S) -> dict[str, Any]:
    """The connector's status once it and its tasks run; fails at once on a FAILED one (with
    its trace), and after ``timeout`` otherwise."""
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
        if is_running(found, tasks):
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
