"""Result records of the workers and how they add up."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.config import MB

PERCENTILES = (50.0, 95.0, 99.0, 99.9)


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of an already sorted, non-empty sequence."""
    rank = max(1, math.ceil(pct / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


@dataclass
class LatencySummary:
    samples: int
    p50: float
    p95: float
    p99: float
    max: float
    p999: float

    @classmethod
    def of(cls, values_ms: list[float]) -> LatencySummary | None:
        if not values_ms:
            return None
        ordered = sorted(values_ms)
        p50, p95, p99, p999 = (percentile(ordered, p) for p in PERCENTILES)
        return cls(len(ordered), p50, p95, p99, ordered[-1], p999)


#: (time.monotonic(), messages so far, value bytes so far) of one worker
Point = tuple[float, int, int]


class Timeline:
    """Cumulative progress of one worker, noted at most every ``every`` seconds.

    ``progress`` (a shared array, one slot per worker) lets the parent process draw a progress
    bar; ``points`` go back with the result and become the throughput-over-time plot.
    """

    __slots__ = ("_next", "every", "points", "progress", "slot")

    def __init__(self, progress: object = None, slot: int = 0, every: float = 0.1) -> None:
        self.points: list[Point] = []
        self.progress = progress
        self.slot = slot
        self.every = every
        self._next = 0.0

    def mark(self, messages: int, nbytes: int, now: float | None = None,
             force: bool = False) -> None:
        now = time.monotonic() if now is None else now
        if now < self._next and not force:
            return
        self._next = now + self.every
        self.points.append((now, messages, nbytes))
        if self.progress is not None:
            self.progress[self.slot] = messages  # type: ignore[index]


@dataclass
class WorkerResult:
    """What one producer or consumer process reports back.

    start and end are time.monotonic() readings, which on Linux share one clock
    across processes, so the phase's elapsed time is max(end) - min(start).
    """

    role: str
    worker: int
    messages: int = 0
    bytes: int = 0
    errors: int = 0
    first_error: str | None = None
    start: float = 0.0
    end: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    complete: bool = True
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    timeline: list[Point] = field(default_factory=list)


@dataclass
class PhaseResult:
    """The aggregate of one phase (produce, consume or e2e) over its processes."""

    phase: str
    processes: int
    messages: int
    bytes: int
    elapsed_s: float
    errors: int
    complete: bool
    latency_ms: LatencySummary | None = None
    latency_kind: str = ""
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    # For the report's plots; not part of the JSON document.
    timelines: list[list[Point]] = field(default_factory=list, repr=False)
    latencies: list[float] = field(default_factory=list, repr=False)

    @property
    def mb_per_s(self) -> float:
        return self.bytes / MB / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        lat = self.latency_ms
        return {
            "phase": self.phase,
            "processes": self.processes,
            "messages": self.messages,
            "bytes": self.bytes,
            "elapsed_s": round(self.elapsed_s, 6),
            "mb_per_s": round(self.mb_per_s, 3),
            "msgs_per_s": round(self.msgs_per_s, 1),
            "errors": self.errors,
            "complete": self.complete,
            "latency_ms": None if lat is None else {
                "kind": self.latency_kind,
                "samples": lat.samples,
                "p50": round(lat.p50, 3),
                "p95": round(lat.p95, 3),
                "p99": round(lat.p99, 3),
                "p99.9": round(lat.p999, 3),
                "max": round(lat.max, 3),
            },
            "notes": list(self.notes),
            **self.extra,
        }


def aggregate(phase: str, results: list[WorkerResult], latency_kind: str = "") -> PhaseResult:
    """Add up the workers of one phase."""
    started = [r.start for r in results if r.end > 0]
    ended = [r.end for r in results if r.end > 0]
    elapsed = max(ended) - min(started) if started else 0.0
    latencies: list[float] = []
    notes: list[str] = []
    for r in results:
        latencies.extend(r.latencies_ms)
        notes.extend(f"{r.role} {r.worker}: {n}" for n in r.notes)
        if r.first_error:
            notes.append(f"{r.role} {r.worker}: first error: {r.first_error}")
    cpu = [float(r.extra["cpu_s"]) for r in results if "cpu_s" in r.extra]
    return PhaseResult(
        extra={"client_cpu_s": round(sum(cpu), 3)} if cpu else {},
        phase=phase,
        processes=len(results),
        messages=sum(r.messages for r in results),
        bytes=sum(r.bytes for r in results),
        elapsed_s=elapsed,
        errors=sum(r.errors for r in results),
        complete=all(r.complete for r in results),
        latency_ms=LatencySummary.of(latencies),
        latency_kind=latency_kind,
        notes=notes,
        timelines=[r.timeline for r in results if r.timeline],
        latencies=latencies,
    )
