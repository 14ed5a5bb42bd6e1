"""The Java client's workloads: Kafka 4.4's own kafka-producer-perf-test and
kafka-consumer-perf-test (scripts/kafka.sh), run against a broker and their reports read.

    produced = java_produce(bootstrap, topic, records=300_000, record_size=1024)
    consumed = java_consume(bootstrap, topic, records=300_000)
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.topic import BenchError

KAFKA_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "kafka.sh"
MB = 1e6


@dataclass(frozen=True)
class ProducerReport:
    records: int
    records_per_s: float
    mib_per_s: float            # as the tool prints it: 2^20 bytes
    avg_ms: float
    percentiles_ms: tuple[float, float, float, float]  # 50th, 95th, 99th, 99.9th


def producer_report(text: str) -> ProducerReport:
    """kafka-producer-perf-test's last line: the totals."""
    match = re.search(
        r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg "
        r"latency, [\d.]+ ms max latency, ([\d.]+) ms 50th, ([\d.]+) ms 95th, ([\d.]+) ms "
        r"99th, ([\d.]+) ms 99.9th\.$", text, re.MULTILINE)
    if match is None:
        raise BenchError(f"no totals in kafka-producer-perf-test's output:\n{text[-2000:]}")
    numbers = [float(g) for g in match.groups()]
    return ProducerReport(int(numbers[0]), numbers[1], numbers[2], numbers[3],
                          (numbers[4], numbers[5], numbers[6], numbers[7]))


def consumer_report(text: str) -> dict[str, str]:
    """kafka-consumer-perf-test's CSV: its header and its one line of figures, by column."""
    lines = [line for line in text.splitlines() if ", " in line]
    if len(lines) != 2 or not lines[0].startswith("start.time"):
        raise BenchError(f"no figures in kafka-consumer-perf-test's output:\n{text[-2000:]}")
    return dict(zip(lines[0].split(", "), lines[1].split(", "), strict=True))


def _tool(*args: str, timeout: float) -> str:
    ran = subprocess.run([str(KAFKA_SCRIPT), *args], capture_output=True, text=True,
                         timeout=timeout, check=False)
    if ran.returncode != 0:
        raise BenchError(f"{args[0]} failed (exit {ran.returncode}):\n{ran.stderr[-2000:]}")
    return ran.stdout


def java_produce(bootstrap: str, topic: str, records: int, record_size: int,
                 timeout: float = 600.0) -> ProducerReport:
    """As fast as one Java producer goes, acks=all, the client's defaults otherwise."""
    return producer_report(_tool(
        "kafka-producer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic,
        "--num-records", str(records), "--record-size", str(record_size), "--throughput", "-1",
        "--command-property", "acks=all", timeout=timeout))


def java_consume(bootstrap: str, topic: str, records: int,
                 timeout: float = 600.0) -> dict[str, str]:
    """One Java consumer (a group of its own) reads ``records`` records of the topic."""
    return consumer_report(_tool(
        "kafka-consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic,
        "--num-records", str(records), "--timeout", "60000", timeout=timeout))
