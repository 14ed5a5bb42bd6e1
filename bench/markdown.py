"""``--report DIR``: a Markdown report (report.md) with PNG plots beside it."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

from bench import __version__, report
from bench.config import BenchConfig
from bench.plots import plot_latency_cdf, plot_throughput
from bench.stats import PhaseResult

THROUGHPUT_PNG = "throughput.png"
LATENCY_PNG = "latency-cdf.png"


def _cell(value: object) -> str:
    return str(value).replace("|", "/")


def write_report(directory: str, cfg: BenchConfig, partitions: int,
                 results: list[PhaseResult], server: str | None = None) -> Path:
    """Write DIR/report.md, DIR/throughput.png, DIR/latency-cdf.png and DIR/results.json."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    doc = report.document(cfg, partitions, results, server)
    (out / "results.json").write_text(json.dumps(doc, indent=2) + "\n")
    has_throughput = plot_throughput(results, out / THROUGHPUT_PNG)
    has_latency = plot_latency_cdf(results, out / LATENCY_PNG)
    ck, rdk = report.client_versions()
    lines = [
        f"# Benchmark: {cfg.mode} against {cfg.bootstrap}",
        "",
        f"bmq-bench {__version__}, finished {doc['finished_at']}"
        + (f"; server: {server}" if server else ""),
        "",
        "## Settings",
        "",
        "| setting | value |",
        "| --- | --- |",
        f"| topic | `{cfg.topic}` ({partitions} partitions) |",
        f"| message size | {cfg.message_size} bytes |",
        f"| messages | {cfg.message_limit() if cfg.message_limit() is not None else '-'} |",
        f"| duration | {cfg.duration_limit() if cfg.duration_limit() is not None else '-'} s |",
        f"| producers / consumers | {cfg.producers} / {cfg.consumers} |",
        f"| acks | {cfg.acks} |",
        f"| compression | {cfg.compression} |",
        f"| linger.ms / batch.size | {cfg.linger_ms:g} / {cfg.batch_size} |",
    ]
    if cfg.mode == "e2e":
        lines.append(f"| e2e rate / warm-up | {cfg.rate_mb:g} MB/s / {cfg.warmup_s:g} s |")
    lines += [
        f"| client | confluent-kafka {ck}, librdkafka {rdk} |",
        f"| machine | {os.cpu_count()} CPUs, {platform.platform()}, Python "
        f"{platform.python_version()} |",
        "",
        "## Results",
        "",
        "| " + " | ".join(report.COLUMNS) + " |",
        "| " + " | ".join("---" for _ in report.COLUMNS) + " |",
    ]
    for result in results:
        lines.append("| " + " | ".join(_cell(c) for c in report._row(result)) + " |")
    lines += ["", "MB = 10^6 bytes of message value."]
    for result in results:
        if result.latency_ms is not None:
            lines.append(f"{result.phase} latency: {result.latency_kind}, "
                         f"{result.latency_ms.samples} samples.")
    for result in results:
        cpu = [f"{who} {result.extra[key]:.1f} s ({result.extra[key] / result.elapsed_s:.2f} "
               "cores)" for who, key in (("client", "client_cpu_s"), ("server", "server_cpu_s"))
               if key in result.extra and result.elapsed_s > 0]
        if cpu:
            lines.append(f"{result.phase} CPU: {', '.join(cpu)}.")
    problems = []
    for result in results:
        if result.errors:
            problems.append(f"- {result.phase}: {result.errors} errors")
        if not result.complete:
            problems.append(f"- {result.phase}: INCOMPLETE")
        problems += [f"- {result.phase}: {note}" for note in result.notes]
    if problems:
        lines += ["", "## Notes", "", *problems]
    if has_throughput:
        lines += ["", "## Throughput over time", "",
                  "MB/s of message value in equal time slices, all processes of a phase added "
                  "up; the dashed line is the phase average.", "",
                  f"![throughput over time]({THROUGHPUT_PNG})"]
    if has_latency:
        lines += ["", "## Latency", "",
                  "Share of timed messages with a latency at or below x (log scale); dots mark "
                  "p50 and p99.", "",
                  f"![latency CDF]({LATENCY_PNG})"]
    lines += ["", "Raw figures: [results.json](results.json).", ""]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path
