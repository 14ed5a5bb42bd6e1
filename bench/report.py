"""The human-readable summary and the JSON document."""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
import time
from dataclasses import asdict
from typing import Any, TextIO

import confluent_kafka

from bench import __version__
from bench.config import BenchConfig
from bench.stats import PhaseResult

COLUMNS = ("phase", "procs", "messages", "MB/s", "msgs/s",
           "p50 ms", "p95 ms", "p99 ms", "max ms", "elapsed s")


def _row(r: PhaseResult) -> list[str]:
    lat = r.latency_ms
    lats = ["-"] * 4 if lat is None else [
        f"{v:.2f}" if v < 100 else f"{v:.0f}" for v in (lat.p50, lat.p95, lat.p99, lat.max)]
    return [r.phase, str(r.processes), str(r.messages), f"{r.mb_per_s:.2f}",
            f"{r.msgs_per_s:.0f}", *lats, f"{r.elapsed_s:.2f}"]


def client_versions() -> tuple[str, str]:
    """(confluent-kafka, librdkafka) versions; version() is a str or a tuple by release."""
    ck: object = confluent_kafka.version()
    ck_text = ck[0] if isinstance(ck, tuple) else str(ck)
    return str(ck_text), str(confluent_kafka.libversion()[0])


def summary(cfg: BenchConfig, partitions: int, results: list[PhaseResult],
            server: str | None = None) -> str:
    rows = [list(COLUMNS), *(_row(r) for r in results)]
    ck, rdk = client_versions()
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = [
        f"bmq-bench {__version__}: {cfg.bootstrap}{f' ({server})' if server else ''}, "
        f"topic {cfg.topic} ({partitions} partitions), {cfg.message_size}-byte messages, "
        f"acks={cfg.acks}, compression={cfg.compression}, linger.ms={cfg.linger_ms:g}",
        f"client: confluent-kafka {ck} / librdkafka {rdk}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}",
        "",
    ]
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:],
                                                                          strict=True)]
        lines.append("  ".join(cells))
    lines.append("")
    lines.append("MB = 10^6 bytes of message value.")
    for r in results:
        if r.latency_ms is not None:
            lines.append(f"{r.phase} latency: {r.latency_kind}, "
                         f"{r.latency_ms.samples} samples")
    for r in results:
        cpu = [f"{who} {r.extra[key]:.1f} s ({r.extra[key] / r.elapsed_s:.2f} cores)"
               for who, key in (("client", "client_cpu_s"), ("server", "server_cpu_s"))
               if key in r.extra and r.elapsed_s > 0]
        if cpu:
            lines.append(f"{r.phase} CPU: {', '.join(cpu)}")
    for r in results:
        if r.errors:
            lines.append(f"{r.phase}: {r.errors} errors")
        if not r.complete:
            lines.append(f"{r.phase}: INCOMPLETE")
        lines.extend(f"{r.phase}: {note}" for note in r.notes)
    return "\n".join(lines)


def document(cfg: BenchConfig, partitions: int, results: list[PhaseResult],
             server: str | None = None) -> dict[str, Any]:
    return {
        "tool": "bmq-bench",
        "version": __version__,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "config": {**asdict(cfg), "partitions_used": partitions,
                   # a password given with --client-config is not written out
                   "client_overrides": {key: "(hidden)" if "password" in key else value
                                        for key, value in cfg.client_overrides.items()}},
        "server": server,
        "environment": {
            "host": socket.gethostname(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "confluent_kafka": client_versions()[0],
            "librdkafka": client_versions()[1],
        },
        "results": [r.to_json() for r in results],
    }


def write_json(path: str, doc: dict[str, Any]) -> None:
    if path == "-":
        _dump(doc, sys.stdout)
        return
    with open(path, "w", encoding="utf-8") as out:
        _dump(doc, out)


def _dump(doc: dict[str, Any], out: TextIO) -> None:
    json.dump(doc, out, indent=2, sort_keys=False)
    out.write("\n")
