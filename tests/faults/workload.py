"""What every workload is: clients that run against a cluster for a while, recording a history,
and a checker that reads the history (and, after the faults are healed, the cluster itself) and
gives a verdict."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from tests.faults.history import History


@dataclass(frozen=True)
class Endpoints:
    """Where clients connect: the brokers (``bootstrap``) and, if the cluster has one, a
    proxy (``proxy``, else None). ``admin`` is an address to create topics and read back with."""

    bootstrap: str
    proxy: str | None
    admin: str


@dataclass
class Verdict:
    """``valid`` unless some anomaly was found; ``anomalies`` maps each kind (Jepsen's names:
    ``lost-write``, ``duplicate``, ``G0``, ``G1c``, ...) to examples; ``stats`` counts what was
    checked (an empty history is not valid: nothing was tested)."""

    workload: str
    valid: bool
    anomalies: dict[str, list[Any]] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)


class Workload(Protocol):
    name: str

    def setup(self, endpoints: Endpoints) -> None:
        """Create what the workload needs (topics, groups' settings), before any fault."""

    def run(self, endpoints: Endpoints, history: History, stop: threading.Event,
            seed: int) -> None:
        """Run the clients, recording into ``history``, until ``stop`` is set; return once
        every client has stopped (operations still open are completed as ``info``)."""

    def check(self, endpoints: Endpoints, history: History) -> Verdict:
        """Called after the faults are healed: read what the cluster holds and judge."""
