"""Start ``worker.py`` consumer processes and follow what they report."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

WORKER = str(Path(__file__).with_name("worker.py"))


class Worker:
    """One consumer process; its JSON events are collected by a reader thread."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str,
                 *options: str) -> None:
        self.client = client
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the worker
        self.proc = subprocess.Popen(
            [sys.executable, WORKER, client, bootstrap, group, topic, *options],
            stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.events: list[tuple[float, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                with self._lock:
                    self.events.append((time.monotonic(), event))

    def snapshot(self) -> list[tuple[float, dict[str, Any]]]:
        with self._lock:
            return list(self.events)

    def processed(self) -> list[tuple[int, int]]:
        return [(e["p"], e["o"]) for _, e in self.snapshot() if e["event"] == "processed"]

    def in_flight(self) -> tuple[int, int] | None:
        """The message whose commit was under way when the worker stopped reporting (after a
        kill: committed or not, the kill decided), or None."""
        events = [e for _, e in self.snapshot()
                  if e["event"] in ("committing", "processed", "commit_failed")]
        if events and events[-1]["event"] == "committing":
            return events[-1]["p"], events[-1]["o"]
        return None

    def assignment(self) -> set[int]:
        """Current partitions: assigned minus revoked, in order (works for eager and
        incremental callbacks alike)."""
        current: set[int] = set()
        for _, e in self.snapshot():
            if e["event"] == "assigned":
                current |= set(e["partitions"])
            elif e["event"] == "revoked":
                current -= set(e["partitions"])
        return current

    def callbacks(self) -> list[tuple[str, list[int]]]:
        """Assign/revoke callbacks that moved partitions (librdkafka also reports empty ones)."""
        return [(e["event"], e["partitions"]) for _, e in self.snapshot()
                if e["event"] in ("assigned", "revoked") and e["partitions"]]

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM: the worker closes its consumer (leaving the group) and exits."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout)
        self._reader.join(5)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._reader.join(5)

    def log(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-4000:]

    def __repr__(self) -> str:
        return f"<Worker {self.client} pid={self.proc.pid}>"


@contextlib.contextmanager
def workers() -> Iterator[Callable[..., Worker]]:
    """A factory of workers that are all killed at the end; their logs shown on failure."""
    started: list[Worker] = []

    def start(*args: str) -> Worker:
        worker = Worker(*args)
        started.append(worker)
        return worker

    try:
        yield start
    except BaseException:
        for worker in started:
            sys.stderr.write(f"--- {worker} stderr ---\n{worker.log()}\n")
            events = worker.snapshot()
            # Every event but "processed" (assignments, revocations, failed commits), and the
            # processed offsets as ranges per partition: enough to see what went missing.
            others = [(round(t, 3), e) for t, e in events
                      if e["event"] not in ("processed", "committing")]
            done: dict[int, list[int]] = {}
            for _, e in events:
                if e["event"] == "processed":
                    done.setdefault(e["p"], []).append(e["o"])
            ranges = {p: f"{len(o)} of {min(o)}-{max(o)}" for p, o in sorted(done.items())}
            sys.stderr.write(f"--- {worker} events ---\n{others}\nprocessed: {ranges}\n")
        raise
    finally:
        for worker in started:
            worker.kill()
